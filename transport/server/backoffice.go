package server

import (
	"context"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/actors"
	"github.com/paygate/gateway/cluster"
	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/transport/dashboard"
	"github.com/paygate/gateway/transport/webhook"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

// BackOffice is the front end as the dashboard sees it
// (dashboard.Backend): the functions behind the admin API, called
// directly, so the dashboard and the API cannot disagree on a search, a
// resend or a new merchant.
type BackOffice struct{ s *Server }

// BackOffice answers the dashboard's backend.
func (s *Server) BackOffice() *BackOffice { return &BackOffice{s: s} }

var _ dashboard.Backend = (*BackOffice)(nil)

// dashboardPrefix is where the dashboard is served (contract 13).
const dashboardPrefix = "/dashboard/"

// SetDashboard mounts the dashboard's handler at /dashboard/ (before
// Serve). The node builds it over BackOffice, which needs the server first.
func (s *Server) SetDashboard(h fasthttp.RequestHandler) { s.dashboard = h }

// Leader runs a dashboard write where writes run (forward.go).
func (b *BackOffice) Leader(ctx *fasthttp.RequestCtx) bool {
	handled, _ := b.s.forward(ctx)
	return handled
}

// SourceIP is the client's address (admin_audit.go).
func (b *BackOffice) SourceIP(ctx *fasthttp.RequestCtx) string { return sourceIP(ctx) }

// SecureClient reports a TLS client, also behind a forwarding member.
func (b *BackOffice) SecureClient(ctx *fasthttp.RequestCtx) bool {
	if fromPeer(ctx) {
		return string(ctx.Request.Header.Peek(clientTLSHeader)) == "1"
	}
	return ctx.IsTLS()
}

// SearchOrders is GET /admin/v1/orders's search.
func (b *BackOffice) SearchOrders(get func(name string) (string, bool)) (persistence.SearchPage, error) {
	f, aerr := searchQuery(get)
	if aerr != nil {
		return persistence.SearchPage{}, aerr
	}
	page, aerr := b.s.search(f)
	if aerr != nil {
		return page, aerr
	}
	return page, nil
}

// Order reads one order from this node's applied state.
func (b *BackOffice) Order(merchant, id string) (*order.Order, error) {
	return b.s.cfg.Store.GetOrder(merchant, id)
}

// Notifications lists an order's notifications (GET /admin/v1/webhooks).
func (b *BackOffice) Notifications(merchant, orderID string) ([]webhook.AdminView, error) {
	list, err := b.s.cfg.Store.Notifications(merchant, orderID, webhooksListMax)
	return adminViews(list), err
}

// FailedNotifications lists the notifications that used up their retries.
func (b *BackOffice) FailedNotifications(limit int) ([]webhook.AdminView, error) {
	list, err := b.s.cfg.Store.FailedNotifications(limit)
	return adminViews(list), err
}

func adminViews(list []*outbox.Notification) []webhook.AdminView {
	out := make([]webhook.AdminView, 0, len(list))
	for _, n := range list {
		out = append(out, webhook.NewAdminView(n))
	}
	return out
}

// Redeliver is POST /admin/v1/webhooks/{id}/redeliver.
func (b *BackOffice) Redeliver(ctx context.Context, id string) (webhook.AdminView, error) {
	v, aerr := b.s.redeliver(ctx, id)
	if aerr != nil {
		return v, aerr
	}
	return v, nil
}

// MoveMoney settles, voids or refunds through the order's actor, as the
// merchant API does, with the form's idempotency key: the request hash
// covers what the form asked, so the same key with another amount is
// refused (409 5.06) rather than answered with the first result.
func (b *BackOffice) MoveMoney(m dashboard.Movement) (*order.Order, error) {
	msg := &actors.Operation{Kind: m.Kind, Merchant: m.Merchant, OrderID: m.OrderID, Amount: m.Amount,
		IdempotencyKey: m.IdempotencyKey}
	if m.IdempotencyKey != "" {
		msg.RequestHash = b.s.operationHash("dashboard-"+string(m.Kind),
			[]byte(m.Merchant+"\x00"+m.OrderID+"\x00"+strconv.FormatInt(m.Amount, 10)))
	}
	res, err := b.s.moveMoney(msg)
	rep, aerr := b.s.actorReply(string(m.Kind), res, err)
	if aerr != nil {
		return nil, aerr
	}
	if rep.Order == nil { // a repeat answered from its stored reply
		return b.s.cfg.Store.GetOrder(m.Merchant, m.OrderID)
	}
	return rep.Order, nil
}

// Merchants lists every merchant's public keys.
func (b *BackOffice) Merchants() ([]dashboard.Merchant, error) {
	recs, err := b.s.cfg.Store.Merchants()
	if err != nil {
		return nil, err
	}
	out := make([]dashboard.Merchant, 0, len(recs))
	for _, r := range recs {
		out = append(out, dashboard.Merchant{ID: r.ID, Name: r.Name, APIPublicKey: r.APIPublicKey,
			WebhookPublicKey: r.WebhookPublicKey, RateLimitRPS: r.RateLimitRPS, CreatedAt: time.Unix(0, r.CreatedAt).UTC()})
	}
	return out, nil
}

// CreateMerchant is POST /admin/v1/merchants; the secret halves of the new
// keys are not returned (the dashboard never shows one).
func (b *BackOffice) CreateMerchant(ctx context.Context, name string, rateLimitRPS int) (dashboard.Merchant, error) {
	creds, aerr := b.s.newMerchant(ctx, createMerchantRequest{Name: name, RateLimitRPS: rateLimitRPS})
	if aerr != nil {
		return dashboard.Merchant{}, aerr
	}
	return dashboard.Merchant{ID: creds.MerchantID, Name: name, APIPublicKey: creds.API.PublicKey,
		WebhookPublicKey: creds.Webhook.PublicKey, RateLimitRPS: rateLimitRPS}, nil
}

// Cluster is GET /admin/v1/cluster.
func (b *BackOffice) Cluster() (cluster.Status, error) { return b.s.clusterView(false) }

// AuditRecords is GET /admin/v1/audit's read.
func (b *BackOffice) AuditRecords(after uint64, limit int) ([]persistence.AuditRecord, bool, error) {
	return b.s.cfg.Store.AuditRecords(after, limit)
}

// LastAuditSeq is the chain's applied end.
func (b *BackOffice) LastAuditSeq() (uint64, error) {
	h, err := b.s.cfg.Store.AuditHead()
	return h.Seq, err
}

// Audit appends a dashboard action's record to the chain and returns once
// it is committed (on the leader, asked from a follower).
func (b *BackOffice) Audit(rec persistence.AuditRecord) error { return b.s.writeAudit(rec) }

var _ dashboard.MIDLister = (*BackOffice)(nil)

// MIDs is GET /admin/v1/mids's list, from this node's applied state.
func (b *BackOffice) MIDs() ([]dashboard.MID, error) {
	list := b.s.cfg.Store.MIDs("")
	out := make([]dashboard.MID, len(list))
	for i, m := range list {
		out[i] = dashboard.MID{ID: m.MID, MerchantID: m.MerchantID, AcquirerAddr: m.AcquirerAddr,
			Currencies: m.Currencies, RegisteredAt: time.Unix(0, m.RegisteredAt).UTC()}
	}
	return out, nil
}
