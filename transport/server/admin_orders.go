package server

import (
	"bufio"
	"encoding/csv"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/transport/api"
	"github.com/paygate/gateway/transport/apierr"
)

// Order search (contract 13), one function per way in:
//
//	GET  /admin/v1/orders?…            a page of orders, newest first
//	GET  /admin/v1/orders.csv?…        every matching order, one row per transaction
//	GET  /admin/v1/orders/{merchant}/{order_id}   one order, as status shows it
//	POST {base_url}/list-orders        a merchant's search of its own orders
//
// The admin reads answer from this node's applied state (a follower's may
// lag the leader by what it has not applied yet); list-orders is a merchant
// operation and, like status, is answered by the leader after its read
// barrier.

// serveOrders routes the admin API's order reads.
func (s *Server) serveOrders(ctx *fasthttp.RequestCtx, route string) {
	if !ctx.IsGet() {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use GET to read orders"))
		return
	}
	switch {
	case route == "orders":
		s.adminSearch(ctx)
	case route == "orders.csv":
		s.adminExportCSV(ctx)
	default:
		s.adminGetOrder(ctx, strings.TrimPrefix(route, "orders/"))
	}
}

// adminQuery reads and validates the admin search's query parameters.
func adminQuery(ctx *fasthttp.RequestCtx) (persistence.SearchFilter, *apierr.Error) {
	args := ctx.QueryArgs()
	return searchQuery(func(name string) (string, bool) {
		v := args.Peek(name)
		return string(v), v != nil
	})
}

// searchQuery validates the admin search's parameters as get finds them
// (the admin API's query, the dashboard's search form).
func searchQuery(get func(name string) (string, bool)) (persistence.SearchFilter, *apierr.Error) {
	req, verr := api.ListOrdersQuery(get)
	search, serr := api.Search(req, true)
	if verr != nil { // a number that did not parse, with the rest's violations
		if serr != nil {
			for attr, msgs := range serr.Messages {
				for _, m := range msgs {
					verr.Add(attr, m)
				}
			}
		}
		return persistence.SearchFilter{}, verr
	}
	if serr != nil {
		return persistence.SearchFilter{}, serr
	}
	return searchFilter(search.MerchantID, &search), nil
}

// searchFilter is the store's form of a validated search, in merchant's scope.
func searchFilter(merchant string, q *api.OrderSearch) persistence.SearchFilter {
	f := persistence.SearchFilter{
		Merchant: merchant, Status: q.Status, Email: q.Email, Last4: q.CardLast4, BIN: q.BIN,
		OrderIDPrefix: q.OrderIDPrefix, AmountMin: q.AmountMin, AmountMax: q.AmountMax,
		Limit: q.Limit, Cursor: q.Cursor,
	}
	if !q.CreatedFrom.IsZero() {
		f.CreatedFrom = q.CreatedFrom.UnixNano()
	}
	if !q.CreatedTo.IsZero() {
		f.CreatedTo = q.CreatedTo.UnixNano()
	}
	return f
}

// search runs f, turning a foreign or malformed cursor into 422 2.01.
func (s *Server) search(f persistence.SearchFilter) (persistence.SearchPage, *apierr.Error) {
	page, err := s.cfg.Store.SearchOrders(f)
	if errors.Is(err, persistence.ErrBadCursor) {
		return page, apierr.New(apierr.Invalid, "cursor", "cursor is not one this search returned")
	}
	if err != nil {
		return page, s.errorFor("search orders", err)
	}
	return page, nil
}

// searchPageJSON is {"orders":[status views],"next_cursor":…|null}.
func searchPageJSON(page persistence.SearchPage) []byte {
	b := append(make([]byte, 0, 64+len(page.Orders)*1024), `{"orders":[`...)
	for i, o := range page.Orders {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, order.NewView(o, order.WithAllTxns, "").Marshal()...)
	}
	b = append(b, `],"next_cursor":`...)
	if page.NextCursor == "" {
		b = append(b, "null"...)
	} else {
		cursor, _ := json.Marshal(page.NextCursor)
		b = append(b, cursor...)
	}
	return append(b, '}')
}

func (s *Server) adminSearch(ctx *fasthttp.RequestCtx) {
	f, aerr := adminQuery(ctx)
	if aerr == nil {
		var page persistence.SearchPage
		if page, aerr = s.search(f); aerr == nil {
			writeRaw(ctx, 200, searchPageJSON(page))
			return
		}
	}
	writeError(ctx, aerr)
}

// listOrders is a merchant's search: always in its own scope.
func (s *Server) listOrders(c *call, r *api.ListOrdersRequest) answer {
	q, aerr := api.Search(r, false)
	if aerr != nil {
		return answer{err: aerr}
	}
	page, aerr := s.search(searchFilter(c.merchant.ID, &q))
	if aerr != nil {
		return answer{err: aerr}
	}
	return answer{body: searchPageJSON(page)}
}

func (s *Server) adminGetOrder(ctx *fasthttp.RequestCtx, ref string) {
	merchant, id, ok := strings.Cut(ref, "/")
	if !ok || merchant == "" || id == "" {
		writeError(ctx, apierr.New(apierr.UnknownPath, "path", "use /admin/v1/orders/{merchant_id}/{order_id}"))
		return
	}
	body, err := s.cfg.Store.OrderStatusJSON(merchant, id)
	switch {
	case err != nil:
		writeError(ctx, s.errorFor("get order", err))
	case body == nil:
		writeError(ctx, orderNotFound())
	default:
		writeRaw(ctx, 200, body)
	}
}

// csvHeader names the export's columns: the order's, then the transaction's.
var csvHeader = []string{"merchant_id", "order_id", "order_status", "order_created_at", "order_amount", "currency",
	"customer_email", "card_brand", "card_bin", "card_last4", "txn_id", "txn_operation", "txn_status",
	"txn_amount", "txn_created_at", "txn_updated_at", "auth_code", "arn"}

// adminExportCSV streams every matching order, page by page (the limit is
// the page size the export reads with), one row per transaction; an order
// without one (a form not yet paid) has one row with empty transaction
// columns. A failure after the first rows can only cut the stream short:
// the last line is then "# export failed", which no data row can be.
func (s *Server) adminExportCSV(ctx *fasthttp.RequestCtx) {
	f, aerr := adminQuery(ctx)
	if aerr != nil {
		writeError(ctx, aerr)
		return
	}
	if f.Limit == 0 || !ctx.QueryArgs().Has("limit") {
		f.Limit = api.SearchLimitMax
	}
	first, aerr := s.search(f) // a bad cursor is still a 422, before any row
	if aerr != nil {
		writeError(ctx, aerr)
		return
	}
	ctx.SetContentType("text/csv; charset=utf-8")
	ctx.Response.Header.Set("Content-Disposition", `attachment; filename="orders.csv"`)
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		cw := csv.NewWriter(w)
		cw.Write(csvHeader)
		page := first
		for {
			for _, o := range page.Orders {
				writeOrderRows(cw, o)
			}
			cw.Flush()
			if page.NextCursor == "" || cw.Error() != nil {
				return
			}
			f.Cursor = page.NextCursor
			var err error
			if page, err = s.cfg.Store.SearchOrders(f); err != nil {
				s.cfg.Logger.Error("csv export", "error", err)
				w.WriteString("# export failed\n")
				return
			}
		}
	})
}

func writeOrderRows(cw *csv.Writer, o *order.Order) {
	src := &o.Source
	head := []string{o.Merchant, csvSafe(o.ID), string(o.Status), csvTime(o.CreatedAt), strconv.FormatInt(o.Amount, 10),
		o.Currency, csvSafe(o.CustomerEmail), src.Brand, src.BIN, lastFour(src.Masked)}
	if len(o.Txns) == 0 {
		cw.Write(append(head, make([]string, len(csvHeader)-len(head))...))
		return
	}
	for i := range o.Txns {
		t := &o.Txns[i]
		cw.Write(append(head[:len(head):len(head)], t.ID, string(t.Operation), string(t.Status),
			strconv.FormatInt(t.Amount, 10), csvTime(t.CreatedAt), csvTime(t.UpdatedAt), t.AuthCode, t.ARN))
	}
}

func csvTime(ns int64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// csvSafe defuses a value a spreadsheet would run as a formula: order ids
// and e-mails come from merchants' requests.
func csvSafe(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}

func lastFour(masked string) string {
	if len(masked) < 4 {
		return ""
	}
	return masked[len(masked)-4:]
}
