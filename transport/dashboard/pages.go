package dashboard

import (
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/cluster"
	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/order/currency"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/transport/operator"
	"github.com/paygate/gateway/transport/webhook"
)

// searchFields are the orders page's filters: the admin search's
// parameters (contract 13), in the form's order.
var searchFields = []string{"email", "card_last4", "bin", "order_id_prefix", "merchant_id", "status",
	"created_from", "created_to", "amount_min", "amount_max"}

// orderStatuses are the status filter's choices.
var orderStatuses = []order.Status{order.StatusCreated, order.StatusProcessing, order.StatusAuthorized,
	order.StatusDeclined, order.StatusSettled, order.StatusVoided, order.StatusRefunded, order.StatusExpired}

// doneTexts are the notes a page shows after a redirect (?done=…): fixed
// texts, so the address carries no message of its own.
var doneTexts = map[string]string{
	"resent": "The notification is queued to be sent again now.",
	"settle": "Settle accepted.", "void": "Void accepted.", "refund": "Refund accepted.",
}

type ordersData struct {
	Filters  map[string]string
	Statuses []order.Status
	Orders   []*order.Order
	Next     string // the next page's address, "" on the last
	First    string // the first page's address, "" on it
	Error    string
	Searched bool
}

func (d *Dashboard) ordersPage(r *request) {
	if !d.allowed(r, operator.SearchOrders, "") {
		return
	}
	args := r.ctx.QueryArgs()
	data := ordersData{Filters: map[string]string{}, Statuses: orderStatuses}
	q := url.Values{}
	for _, f := range searchFields {
		if v := strings.TrimSpace(string(args.Peek(f))); v != "" {
			data.Filters[f] = v
			q.Set(f, v)
		}
	}
	// The form's dates are local date-times without a zone (datetime-local,
	// read as UTC, as the page says); the search takes RFC 3339.
	get := func(name string) (string, bool) {
		v, ok := data.Filters[name]
		if ok && (name == "created_from" || name == "created_to") {
			v = rfc3339Input(v)
		}
		if name == "cursor" || name == "limit" {
			v = string(args.Peek(name))
			ok = v != ""
		}
		return v, ok
	}
	page, err := d.cfg.Backend.SearchOrders(get)
	status := fasthttp.StatusOK
	if err != nil {
		data.Error, status = d.errorText("search", err), fasthttp.StatusUnprocessableEntity
	}
	data.Orders, data.Searched = page.Orders, len(data.Filters) > 0
	if page.NextCursor != "" {
		next := url.Values{}
		for k, v := range q {
			next[k] = v
		}
		next.Set("cursor", page.NextCursor)
		data.Next = "/dashboard/orders?" + next.Encode()
	}
	if args.Has("cursor") {
		data.First = "/dashboard/orders?" + q.Encode()
	}
	d.render(r, status, "orders", "Orders", data)
}

// rfc3339Input reads the form's datetime-local value (2026-11-28T04:30) as
// UTC; any other text goes to the search as typed, to be refused there.
func rfc3339Input(v string) string {
	if len(v) == len("2006-01-02T15:04") {
		return v + ":00Z"
	}
	if len(v) == len("2006-01-02T15:04:05") {
		return v + "Z"
	}
	return v
}

type orderData struct {
	Order         *order.Order
	Notifications []webhook.AdminView
	CanResend     bool
	CanMove       bool
	CanSettle     bool
	CanVoid       bool
	CanRefund     bool
	// Refundable is what a refund may still return, in minor units.
	Refundable int64
	// Key is the money forms' idempotency key (one per drawn page).
	Key   string
	Step  string // the amount field's step, by the currency's exponent
	Done  string
	Error string
	Back  string // this page's address, for the resend forms
}

func (d *Dashboard) orderPage(r *request, merchant, id, errMsg string, status int) {
	if !d.allowed(r, operator.SearchOrders, "") {
		return
	}
	o, err := d.cfg.Backend.Order(merchant, id)
	if err != nil {
		d.render(r, fasthttp.StatusServiceUnavailable, "error", "Order", map[string]any{"Message": d.errorText("order", err)})
		return
	}
	if o == nil {
		d.render(r, fasthttp.StatusNotFound, "error", "Order", map[string]any{"Message": "There is no order " + id + " of merchant " + merchant + "."})
		return
	}
	notes, err := d.cfg.Backend.Notifications(merchant, id)
	if err != nil {
		errMsg = d.errorText("notifications", err)
	}
	data := orderData{
		Order: o, Notifications: notes, CanResend: r.sess.Role.Can(operator.ResendWebhook),
		CanMove: r.sess.Role.Can(operator.MoveMoney), Key: newKey(), Step: amountStep(o.Currency),
		Done: doneTexts[string(r.ctx.QueryArgs().Peek("done"))], Error: errMsg,
		Back: orderPath(merchant, id),
	}
	data.CanSettle = data.CanMove && o.Status == order.StatusAuthorized
	data.CanVoid = data.CanMove && o.Status == order.StatusAuthorized
	data.Refundable = o.SettledAmount - o.RefundedAmount
	data.CanRefund = data.CanMove && (o.Status == order.StatusSettled || o.Status == order.StatusRefunded) && data.Refundable > 0
	if status == 0 {
		status = fasthttp.StatusOK
	}
	d.render(r, status, "order", "Order "+o.ID, data)
}

func orderPath(merchant, id string) string {
	return "/dashboard/orders/" + url.PathEscape(merchant) + "/" + url.PathEscape(id)
}

// moveKinds are the money forms' actions.
var moveKinds = map[string]order.Kind{"settle": order.KindSettle, "void": order.KindVoid, "refund": order.KindRefund}

// moveMoney is POST /dashboard/orders/{merchant}/{order}/{settle|void|refund}.
func (d *Dashboard) moveMoney(r *request, merchant, id, op string) {
	kind, ok := moveKinds[op]
	target := "order:" + merchant + "/" + id
	if !ok {
		d.render(r, fasthttp.StatusNotFound, "error", "Not found", map[string]any{"Message": "There is no such action."})
		return
	}
	if !d.allowed(r, operator.MoveMoney, target) {
		return
	}
	o, err := d.cfg.Backend.Order(merchant, id)
	if err != nil || o == nil {
		d.audit(r, target, "404")
		d.orderPage(r, merchant, id, "", fasthttp.StatusNotFound)
		return
	}
	args := r.ctx.PostArgs()
	amount, err := parseAmount(string(args.Peek("amount")), o.Currency)
	if err == nil && kind == order.KindRefund && amount == 0 {
		err = errAmount("a refund needs an amount")
	}
	key := string(args.Peek("key"))
	if err == nil && (key == "" || len(key) > 64) {
		err = errAmount("the form has no key: reload the page and try again")
	}
	if err != nil {
		d.audit(r, target, "422")
		d.orderPage(r, merchant, id, err.Error(), fasthttp.StatusUnprocessableEntity)
		return
	}
	_, err = d.cfg.Backend.MoveMoney(Movement{Kind: kind, Merchant: merchant, OrderID: id, Amount: amount,
		IdempotencyKey: "dashboard-" + key})
	d.audit(r, target, resultOf(err))
	if err != nil {
		d.orderPage(r, merchant, id, d.errorText(op, err), fasthttp.StatusUnprocessableEntity)
		return
	}
	seeOther(r.ctx, orderPath(merchant, id)+"?done="+op)
}

// resend is POST /dashboard/notifications/{id}/resend.
func (d *Dashboard) resend(r *request, id string) {
	target := "notification:" + id
	if !d.allowed(r, operator.ResendWebhook, target) {
		return
	}
	ctx, cancel := opContext()
	defer cancel()
	_, err := d.cfg.Backend.Redeliver(ctx, id)
	d.audit(r, target, resultOf(err))
	if err != nil {
		d.render(r, fasthttp.StatusUnprocessableEntity, "error", "Resend", map[string]any{"Message": d.errorText("resend", err)})
		return
	}
	back := safeNext(string(r.ctx.PostArgs().Peek("back")))
	if back == "" {
		back = "/dashboard/notifications"
	}
	sep := "?"
	if strings.Contains(back, "?") {
		sep = "&"
	}
	seeOther(r.ctx, back+sep+"done=resent")
}

// failedListMax bounds the failed notifications page.
const failedListMax = 200

func (d *Dashboard) failedPage(r *request) {
	if !d.allowed(r, operator.SearchOrders, "") {
		return
	}
	list, err := d.cfg.Backend.FailedNotifications(failedListMax)
	// Newest failure first (RFC 3339 UTC texts of one layout sort as times).
	sort.SliceStable(list, func(i, j int) bool { return list[i].FinishedAt > list[j].FinishedAt })
	data := map[string]any{"Notifications": list, "CanResend": r.sess.Role.Can(operator.ResendWebhook),
		"Done": doneTexts[string(r.ctx.QueryArgs().Peek("done"))], "Max": failedListMax}
	if err != nil {
		data["Error"] = d.errorText("failed notifications", err)
	}
	d.render(r, fasthttp.StatusOK, "notifications", "Failed notifications", data)
}

func (d *Dashboard) merchantsPage(r *request, created *Merchant, errMsg string, status int) {
	if !d.allowed(r, operator.ManageMerchants, "") {
		return
	}
	list, err := d.cfg.Backend.Merchants()
	if err != nil && errMsg == "" {
		errMsg = d.errorText("merchants", err)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].CreatedAt.After(list[j].CreatedAt) })
	if status == 0 {
		status = fasthttp.StatusOK
	}
	d.render(r, status, "merchants", "Merchants", map[string]any{"Merchants": list, "Created": created, "Error": errMsg})
}

// createMerchant is POST /dashboard/merchants {name, rate_limit_rps}.
func (d *Dashboard) createMerchant(r *request) {
	if !d.allowed(r, operator.ManageMerchants, "merchants") {
		return
	}
	args := r.ctx.PostArgs()
	name := strings.TrimSpace(string(args.Peek("name")))
	rps := 0
	if v := strings.TrimSpace(string(args.Peek("rate_limit_rps"))); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			d.audit(r, "merchants", "422")
			d.merchantsPage(r, nil, "The rate limit should be a whole number of requests per second.", fasthttp.StatusUnprocessableEntity)
			return
		}
		rps = n
	}
	ctx, cancel := opContext()
	defer cancel()
	m, err := d.cfg.Backend.CreateMerchant(ctx, name, rps)
	target := "merchants"
	if err == nil {
		target = "merchant:" + m.ID
	}
	d.audit(r, target, resultOf(err))
	if err != nil {
		d.merchantsPage(r, nil, d.errorText("create merchant", err), fasthttp.StatusUnprocessableEntity)
		return
	}
	d.merchantsPage(r, &m, "", fasthttp.StatusOK)
}

func (d *Dashboard) midsPage(r *request) {
	if !d.allowed(r, operator.ManageMIDs, "") {
		return
	}
	data := map[string]any{}
	if l, ok := d.cfg.Backend.(MIDLister); ok {
		mids, err := l.MIDs()
		data["Available"], data["MIDs"] = true, mids
		if err != nil {
			data["Error"] = d.errorText("mids", err)
		}
	}
	d.render(r, fasthttp.StatusOK, "mids", "MIDs", data)
}

// memberRow is one member on the cluster page.
type memberRow struct {
	cluster.MemberStatus
	// Lag is how many committed entries the member has not applied yet,
	// against the leader's commit index (-1: unknown).
	Lag int64
}

func (d *Dashboard) clusterPage(r *request) {
	if !d.allowed(r, operator.ManageCluster, "") {
		return
	}
	st, err := d.cfg.Backend.Cluster()
	data := map[string]any{"Status": st}
	if err != nil {
		data["Error"] = d.errorText("cluster", err)
	}
	var commit uint64
	for _, m := range st.Members {
		if m.ID == st.LeaderID && m.Self != nil {
			commit = m.Self.CommitIndex
		}
	}
	rows := make([]memberRow, 0, len(st.Members))
	for _, m := range st.Members {
		row := memberRow{MemberStatus: m, Lag: -1}
		if m.Self != nil && commit > 0 {
			row.Lag = int64(commit) - int64(m.Self.AppliedIndex)
			row.Lag = max(row.Lag, 0)
		}
		rows = append(rows, row)
	}
	data["Members"] = rows
	d.render(r, fasthttp.StatusOK, "cluster", "Cluster", data)
}

// auditPageSize is how many records the audit page shows.
const auditPageSize = 100

func (d *Dashboard) auditPage(r *request) {
	if !d.allowed(r, operator.SearchOrders, "") {
		return
	}
	data := map[string]any{}
	// The newest page unless ?after= asks for another: the newest records
	// are found from the last one's seq.
	var after uint64
	if v := r.ctx.QueryArgs().Peek("after"); len(v) > 0 {
		after, _ = strconv.ParseUint(string(v), 10, 64)
	} else if head, err := d.cfg.Backend.LastAuditSeq(); err == nil && head > auditPageSize {
		after = head - auditPageSize
	}
	recs, more, err := d.cfg.Backend.AuditRecords(after, auditPageSize)
	if err != nil {
		data["Error"] = d.errorText("audit", err)
	}
	rev := make([]persistence.AuditRecord, len(recs)) // newest first
	for i, rec := range recs {
		rev[len(recs)-1-i] = rec
	}
	data["Records"] = rev
	if after > 0 {
		older := uint64(0)
		if after > auditPageSize {
			older = after - auditPageSize
		}
		data["Older"] = "/dashboard/audit?after=" + strconv.FormatUint(older, 10)
	}
	if more {
		data["Newer"] = "/dashboard/audit?after=" + strconv.FormatUint(recs[len(recs)-1].Seq, 10)
	}
	d.render(r, fasthttp.StatusOK, "audit", "Audit log", data)
}

// amountStep is the amount field's step: 0.01 for a two-decimal currency.
func amountStep(cur string) string {
	exp := exponent(cur)
	if exp == 0 {
		return "1"
	}
	return "0." + strings.Repeat("0", exp-1) + "1"
}

func exponent(cur string) int {
	if c, ok := currency.Lookup(cur); ok {
		return c.Exponent
	}
	return 2
}
