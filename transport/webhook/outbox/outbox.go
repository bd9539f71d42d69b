// Package outbox is the webhook outbox's records and their pure rules: what
// a notification is, the one a status change leaves, the receiver its
// callback URL names, and how an attempt's result or a redelivery changes
// it. No storage and no HTTP: persistence keeps these records under its
// keys and applies Apply in the FSM; the dispatcher (package webhook) reads
// them and proposes the updates. Both sides then agree on one rule, and a
// newcomer finds webhooks under one folder.
package outbox

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/url"
	"strings"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
)

// State is where a notification's delivery stands.
type State string

// Notification delivery states.
const (
	Pending   State = "pending"
	Delivered State = "delivered"
	Failed    State = "failed"
)

// AttemptsMax bounds the attempt history kept per notification: the
// schedule has nine attempts; the rest is room for operator redeliveries.
const AttemptsMax = 32

// Notification is one order-status notification in the outbox. It is written
// in the same batch as the status change it reports, and its delivery
// schedule is replicated, so any leader continues it where it stood.
type Notification struct {
	ID          string       `json:"id"`
	Merchant    string       `json:"merchant"`
	OrderID     string       `json:"order_id"`
	OrderStatus order.Status `json:"order_status"`
	URL         string       `json:"url"`
	Body        []byte       `json:"body"`
	CreatedAt   int64        `json:"created_at"`
	State       State        `json:"state"`
	// FirstAttemptAt anchors the retry offsets (contract section 6).
	FirstAttemptAt int64 `json:"first_attempt_at,omitempty"`
	NextDueAt      int64 `json:"next_due_at,omitempty"`
	// FinishedAt is when the notification was delivered or failed (0 while
	// pending): storage keeps delivered ones for --webhook-retention after it.
	FinishedAt int64                   `json:"finished_at,omitempty"`
	Attempts   []command.AttemptRecord `json:"attempts,omitempty"`
}

// NotificationID is deterministic: the order and its version name it.
func NotificationID(merchant, orderID string, version uint64) string {
	h := sha256.New()
	h.Write([]byte(merchant))
	h.Write([]byte{0})
	h.Write([]byte(orderID))
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], version)
	h.Write(v[:])
	return "ntf_" + hex.EncodeToString(h.Sum(nil)[:12])
}

// New is the notification a change of o leaves at now: its body is the
// order's view with every transaction, the exact JSON that is signed and
// sent, due at once.
func New(o *order.Order, now int64) *Notification {
	return &Notification{
		ID:          NotificationID(o.Merchant, o.ID, o.Version),
		Merchant:    o.Merchant,
		OrderID:     o.ID,
		OrderStatus: o.Status,
		URL:         o.CallbackURL,
		Body:        order.NewView(o, order.WithAllTxns, "").Marshal(),
		CreatedAt:   now,
		State:       Pending,
		NextDueAt:   now,
	}
}

// Endpoint is the receiver a callback URL points to, lowercased
// scheme://host[:port]: the webhook dispatcher bounds what it hands to each
// one, so a slow receiver holds up only its own notifications.
func Endpoint(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

// Apply changes n as u says: a redelivery makes it pending again, due at
// u.Time, with a fresh schedule; an attempt's result is added to its history
// and either settles it (delivered, or failed when no retry is due) or sets
// its next due time. It reports false, leaving n as it was, for a late
// result of a delivery already settled: at-least-once means a duplicate send
// is possible, never a lost one.
func Apply(n *Notification, u *command.NotifyUpdate) bool {
	switch {
	case u.Redeliver:
		n.FinishedAt = 0
		n.State = Pending
		n.FirstAttemptAt = 0
		n.NextDueAt = u.Time
		return true
	case n.State != Pending:
		return false
	}
	if u.Attempt != nil {
		if n.FirstAttemptAt == 0 {
			n.FirstAttemptAt = u.Attempt.At
		}
		n.Attempts = append(n.Attempts, *u.Attempt)
		if len(n.Attempts) > AttemptsMax {
			n.Attempts = n.Attempts[len(n.Attempts)-AttemptsMax:]
		}
	}
	switch {
	case u.Delivered:
		n.State = Delivered
		n.NextDueAt = 0
	case u.NextDueAt == 0:
		n.State = Failed
	default:
		n.NextDueAt = u.NextDueAt
	}
	if n.State != Pending {
		n.FinishedAt = u.Time
	}
	return true
}
