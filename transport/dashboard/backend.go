package dashboard

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/cluster"
	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/transport/webhook"
)

// Backend is what the dashboard reads and changes. The front end implements
// it (server.BackOffice) with the same functions its admin API calls, so a
// search, a resend or a new merchant is one piece of code whichever way an
// operator asks for it. Errors that are the operator's to fix are
// *apierr.Error values (the catalogue's code and messages, shown as is);
// any other error is shown as an internal failure.
type Backend interface {
	// Leader decides where a state-changing request runs. On the leader it
	// returns false (the dashboard goes on here). On a follower it relays
	// the whole request to the leader, writes the leader's answer (status,
	// body, cookies, redirect, security headers) and returns true.
	Leader(ctx *fasthttp.RequestCtx) bool
	// SourceIP is the client's address: the one the forwarding member saw
	// for a relayed request.
	SourceIP(ctx *fasthttp.RequestCtx) string
	// SecureClient reports whether the client's connection is TLS (the
	// session cookie is then Secure), also for a relayed request.
	SecureClient(ctx *fasthttp.RequestCtx) bool

	// SearchOrders is the admin search (contract 13) on the parameters get
	// finds: the same names, checks and answers as GET /admin/v1/orders.
	SearchOrders(get func(name string) (string, bool)) (persistence.SearchPage, error)
	// Order is one order (nil when there is none).
	Order(merchant, id string) (*order.Order, error)
	// Notifications are an order's notifications, every attempt included.
	Notifications(merchant, orderID string) ([]webhook.AdminView, error)
	// FailedNotifications are the notifications that used up their retries.
	FailedNotifications(limit int) ([]webhook.AdminView, error)
	// Redeliver sends notification id again (on the leader).
	Redeliver(ctx context.Context, id string) (webhook.AdminView, error)
	// MoveMoney settles, voids or refunds an order (on the leader) and
	// answers the order as it then stands.
	MoveMoney(m Movement) (*order.Order, error)

	// Merchants lists every merchant, keys' public halves only.
	Merchants() ([]Merchant, error)
	// CreateMerchant makes a merchant with new keys (on the leader).
	CreateMerchant(ctx context.Context, name string, rateLimitRPS int) (Merchant, error)

	// Cluster is the members, the leader and each member's raft indexes.
	Cluster() (cluster.Status, error)

	// AuditRecords reads the audit log, oldest first, after seq.
	AuditRecords(after uint64, limit int) (records []persistence.AuditRecord, more bool, err error)
	// LastAuditSeq is the last record's seq (0: none yet).
	LastAuditSeq() (uint64, error)
	// Audit appends a record and returns once it is committed; seq, at
	// and the hashes are the backend's to decide.
	Audit(rec persistence.AuditRecord) error
}

// MIDLister is the part of a Backend that lists processing MIDs. It is a
// separate interface because MIDs come with their own admin API; a backend
// without it makes the MIDs page say that the node has none to show.
type MIDLister interface {
	MIDs() ([]MID, error)
}

// MID is a processing MID as the dashboard lists it (GET /admin/v1/mids).
type MID struct {
	ID           string
	MerchantID   string
	AcquirerAddr string // the acquirer host its movements go to
	Currencies   []string
	RegisteredAt time.Time
}

// Movement is an operator's settle, void or refund of one order.
type Movement struct {
	Kind     order.Kind // order.KindSettle, KindVoid or KindRefund
	Merchant string
	OrderID  string
	// Amount in minor units; 0 settles or voids the whole amount.
	Amount int64
	// IdempotencyKey makes the form's second submission (a double click,
	// a reload) answer the first one's result instead of moving money
	// again: it is the form's own key, made when the page was drawn.
	IdempotencyKey string
}

// Merchant is a merchant as the dashboard shows it: never a secret key.
type Merchant struct {
	ID               string
	Name             string
	APIPublicKey     string
	WebhookPublicKey string
	RateLimitRPS     int
	CreatedAt        time.Time
}
