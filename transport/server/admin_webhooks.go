package server

import (
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/apierr"
)

// webhooksListMax bounds one listing.
const webhooksListMax = 1000

// deliveryView is a notification as operators see it. The body is not
// shown: it is the order, which merchants get from the API.
type deliveryView struct {
	ID          string `json:"id"`
	MerchantID  string `json:"merchant_id"`
	OrderID     string `json:"order_id"`
	OrderStatus string `json:"order_status"`
	URL         string `json:"url"`
	State       string `json:"state"`
	CreatedAt   string `json:"created_at"`
	NextDueAt   string `json:"next_due_at,omitempty"`
	// FinishedAt is when it was delivered or failed: retention counts
	// from it.
	FinishedAt string        `json:"finished_at,omitempty"`
	Attempts   []attemptView `json:"attempts"`
}

type attemptView struct {
	At         string  `json:"at"`
	HTTPCode   int     `json:"http_code,omitempty"`
	Error      string  `json:"error,omitempty"`
	DurationMs float64 `json:"duration_ms"`
}

func newDeliveryView(n *persistence.Notification) deliveryView {
	v := deliveryView{ID: n.ID, MerchantID: n.Merchant, OrderID: n.OrderID, OrderStatus: string(n.OrderStatus),
		URL: n.URL, State: string(n.State), CreatedAt: rfc3339(n.CreatedAt), Attempts: []attemptView{}}
	if n.State == persistence.NotifyPending && n.NextDueAt != 0 {
		v.NextDueAt = rfc3339(n.NextDueAt)
	}
	if n.FinishedAt != 0 {
		v.FinishedAt = rfc3339(n.FinishedAt)
	}
	for _, a := range n.Attempts {
		v.Attempts = append(v.Attempts, attemptView{At: rfc3339(a.At), HTTPCode: a.HTTPCode, Error: a.Error,
			DurationMs: float64(a.DurationNs) / 1e6})
	}
	return v
}

// rfc3339 renders Unix ns with milliseconds: operators compare attempt times.
func rfc3339(ns int64) string {
	return order.FormatTimeMillis(ns)
}

// serveWebhooks: GET /admin/v1/webhooks?merchant_id=&order_id= lists
// deliveries; POST /admin/v1/webhooks/{id}/redeliver sends one again.
func (s *Server) serveWebhooks(ctx *fasthttp.RequestCtx, rest string) {
	if rest == "" {
		if !ctx.IsGet() {
			writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use GET to list deliveries"))
			return
		}
		args := ctx.QueryArgs()
		merchant, orderID := string(args.Peek("merchant_id")), string(args.Peek("order_id"))
		if merchant == "" {
			writeError(ctx, apierr.New(apierr.Invalid, "merchant_id", "merchant_id is required"))
			return
		}
		list, err := s.cfg.Store.Notifications(merchant, orderID, webhooksListMax)
		if err != nil {
			writeError(ctx, s.errorFor("list webhooks", err))
			return
		}
		out := make([]deliveryView, 0, len(list))
		for _, n := range list {
			out = append(out, newDeliveryView(n))
		}
		writeJSON(ctx, 200, map[string]any{"deliveries": out})
		return
	}
	id, ok := strings.CutSuffix(rest, "/redeliver")
	if !ok || id == "" || strings.Contains(id, "/") {
		writeError(ctx, apierr.New(apierr.UnknownPath, "path", "no such admin route"))
		return
	}
	if !ctx.IsPost() {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use POST to redeliver"))
		return
	}
	n, err := s.cfg.Store.Notification(id)
	if err != nil {
		writeError(ctx, s.errorFor("redeliver", err))
		return
	}
	if n == nil {
		writeError(ctx, apierr.New(apierr.NotFound, "id", "no delivery with that id"))
		return
	}
	res, err := s.cfg.Cluster.Propose(ctx, &command.Cmd{Notify: &command.NotifyUpdate{
		ID: id, Time: s.cfg.Now().UnixNano(), Redeliver: true}})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		writeError(ctx, s.errorFor("redeliver", err))
		return
	}
	if s.cfg.OnNotify != nil {
		s.cfg.OnNotify()
	}
	writeJSON(ctx, 200, newDeliveryView(res.Notification))
}
