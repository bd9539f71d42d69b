package webhook

import (
	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

// AdminView is a notification as operators see it in the admin API
// (GET /admin/v1/webhooks, POST …/redeliver), the data transport/server
// answers with. The body is not shown: it is the order, which merchants get
// from the API.
type AdminView struct {
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
	FinishedAt string         `json:"finished_at,omitempty"`
	Attempts   []AdminAttempt `json:"attempts"`
}

// AdminAttempt is one attempt in an AdminView.
type AdminAttempt struct {
	At         string  `json:"at"`
	HTTPCode   int     `json:"http_code,omitempty"`
	Error      string  `json:"error,omitempty"`
	DurationMs float64 `json:"duration_ms"`
}

// NewAdminView makes n's AdminView. The body is left out.
func NewAdminView(n *outbox.Notification) AdminView {
	v := AdminView{ID: n.ID, MerchantID: n.Merchant, OrderID: n.OrderID, OrderStatus: string(n.OrderStatus),
		URL: n.URL, State: string(n.State), CreatedAt: rfc3339(n.CreatedAt), Attempts: []AdminAttempt{}}
	if n.State == outbox.Pending && n.NextDueAt != 0 {
		v.NextDueAt = rfc3339(n.NextDueAt)
	}
	if n.FinishedAt != 0 {
		v.FinishedAt = rfc3339(n.FinishedAt)
	}
	for _, a := range n.Attempts {
		v.Attempts = append(v.Attempts, AdminAttempt{At: rfc3339(a.At), HTTPCode: a.HTTPCode, Error: a.Error,
			DurationMs: float64(a.DurationNs) / 1e6})
	}
	return v
}

// rfc3339 renders Unix ns with milliseconds: operators compare attempt times.
func rfc3339(ns int64) string {
	return order.FormatTimeMillis(ns)
}
