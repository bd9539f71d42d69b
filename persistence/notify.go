package persistence

import (
	"fmt"
	"math"
	"net/url"
	"strings"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
)

// NotifyState is where a notification's delivery stands.
type NotifyState string

// Notification delivery states.
const (
	NotifyPending   NotifyState = "pending"
	NotifyDelivered NotifyState = "delivered"
	NotifyFailed    NotifyState = "failed"
)

// attemptsMax bounds the attempt history kept per notification: the
// schedule has nine attempts; the rest is room for operator redeliveries.
const attemptsMax = 32

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
	State       NotifyState  `json:"state"`
	// FirstAttemptAt anchors the retry offsets (contract section 6).
	FirstAttemptAt int64 `json:"first_attempt_at,omitempty"`
	NextDueAt      int64 `json:"next_due_at,omitempty"`
	// FinishedAt is when the notification was delivered or failed (0 while
	// pending): its place in the retention index (x/), pruned after
	// --webhook-retention.
	FinishedAt int64                   `json:"finished_at,omitempty"`
	Attempts   []command.AttemptRecord `json:"attempts,omitempty"`
}

func notifyKey(id string) []byte { return append([]byte(prefixNotify), id...) }

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

// setDue puts n in the delivery queue at its due time. The index entry's
// value is n's endpoint, so a scan can pass over the notifications of an
// endpoint that has no room without loading them (DueNotifications).
// Entries written before it carried one have an empty value.
func (b *Batch) setDue(n *Notification) {
	b.set(timedKey(prefixDue, n.NextDueAt, []byte(n.ID)), []byte(Endpoint(n.URL)))
}

func (b *Batch) addNotification(o *order.Order, now int64) {
	n := &Notification{
		ID:          NotificationID(o.Merchant, o.ID, o.Version),
		Merchant:    o.Merchant,
		OrderID:     o.ID,
		OrderStatus: o.Status,
		URL:         o.CallbackURL,
		Body:        order.NewView(o, order.WithAllTxns, "").Marshal(),
		CreatedAt:   now,
		State:       NotifyPending,
		NextDueAt:   now,
	}
	b.putNotification(n)
	b.setDue(n)
	b.Created = append(b.Created, n)
}

func (b *Batch) applyNotify(u *command.NotifyUpdate) Result {
	n, err := readNotification(b, u.ID)
	if err != nil {
		panic(fmt.Sprintf("persistence: read notification: %v", err))
	}
	if n == nil {
		return Result{Err: fmt.Errorf("notification %s not found", u.ID)}
	}
	if n.State == NotifyPending {
		b.del(timedKey(prefixDue, n.NextDueAt, []byte(n.ID)))
	}
	switch {
	case u.Redeliver:
		if n.FinishedAt != 0 {
			b.del(timedKey(prefixFinished, n.FinishedAt, []byte(n.ID)))
			n.FinishedAt = 0
		}
		n.State = NotifyPending
		n.FirstAttemptAt = 0
		n.NextDueAt = u.Time
	case n.State != NotifyPending:
		// A late result for a delivery already settled: keep the record as
		// it is (at-least-once means a duplicate send is possible, never a
		// lost one).
		return Result{Notification: n}
	default:
		if u.Attempt != nil {
			if n.FirstAttemptAt == 0 {
				n.FirstAttemptAt = u.Attempt.At
			}
			n.Attempts = append(n.Attempts, *u.Attempt)
			if len(n.Attempts) > attemptsMax {
				n.Attempts = n.Attempts[len(n.Attempts)-attemptsMax:]
			}
		}
		switch {
		case u.Delivered:
			n.State = NotifyDelivered
			n.NextDueAt = 0
		case u.NextDueAt == 0:
			n.State = NotifyFailed
		default:
			n.NextDueAt = u.NextDueAt
		}
		if n.State != NotifyPending {
			n.FinishedAt = u.Time
		}
		if n.State == NotifyDelivered {
			// Only delivered ones age out: a failed delivery stays visible
			// to the admin API (contract section 6) until it is redelivered.
			b.set(timedKey(prefixFinished, n.FinishedAt, []byte(n.ID)), nil)
		}
	}
	b.putNotification(n)
	if n.State == NotifyPending {
		b.setDue(n)
	}
	return Result{Notification: n}
}

// Notification returns a notification by id with its body, or nil.
func (s *Store) Notification(id string) (*Notification, error) {
	// One snapshot for the record and its body: a prune committed between
	// the two reads would leave a record without a body.
	snap := s.db.NewSnapshot()
	defer snap.Close()
	return notificationIn(snap, id)
}

// notificationIn reads a notification and its body from r, a snapshot.
func notificationIn(r reader, id string) (*Notification, error) {
	n, err := readNotification(r, id)
	if err != nil {
		return nil, err
	}
	if err := readNotificationBody(r, n); err != nil {
		return nil, err
	}
	return n, nil
}

// DueNotifications lists up to limit pending notifications due at or before
// now, leaving out (without loading them) those skip names. skip gets each
// one's id and endpoint: the dispatcher skips the ones it already has in
// flight, which under a backlog are most of the queue, and those of
// endpoints with no room; loading each of them on every scan cost more than
// the deliveries.
func (s *Store) DueNotifications(now int64, limit int, skip func(id, endpoint string) bool) ([]*Notification, error) {
	var ids []string
	var rerr error
	err := s.scanTimed(queueIndex, now+1, func(k, v []byte) bool {
		id := string(k[len(prefixDue)+8:])
		endpoint := string(v)
		if endpoint == "" {
			// An entry written before entries named their endpoint: the
			// record (without its body) names it.
			n, err := readNotification(s.db, id)
			if err != nil {
				rerr = err
				return false
			}
			if n == nil {
				return true // delivered and pruned since
			}
			endpoint = Endpoint(n.URL)
		}
		if skip == nil || !skip(id, endpoint) {
			ids = append(ids, id)
		}
		return len(ids) < limit
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, err
	}
	// One snapshot for all of them (see Notification); one delivered and
	// pruned since the scan reads as nil and is left out.
	snap := s.db.NewSnapshot()
	defer snap.Close()
	out := make([]*Notification, 0, len(ids))
	for _, id := range ids {
		n, err := notificationIn(snap, id)
		if err != nil {
			return nil, err
		}
		if n != nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// NextNotificationDueAfter returns the earliest due time in the queue later
// than t, or 0: the dispatcher times its next scan for it.
func (s *Store) NextNotificationDueAfter(t int64) (int64, error) {
	var due int64
	from := max(t+1, s.timed[queueIndex].current())
	err := s.scan(timedKey(prefixDue, from, nil), prefixEnd(prefixDue), func(k, _ []byte) bool {
		due = dueTime(prefixDue, k)
		return false
	})
	return due, err
}

// PendingNotificationCount is the depth of the delivery queue.
func (s *Store) PendingNotificationCount() (int, error) {
	n := 0
	err := s.scanTimed(queueIndex, math.MaxInt64, func(_, _ []byte) bool {
		n++
		return true
	})
	return n, err
}

// Notifications lists a merchant's notifications, optionally for one order.
// It scans the outbox: an operator's view, not a hot path.
func (s *Store) Notifications(merchant, orderID string, limit int) ([]*Notification, error) {
	return s.notificationsWhere(func(n *Notification) bool {
		return (merchant == "" || n.Merchant == merchant) && (orderID == "" || n.OrderID == orderID)
	}, limit)
}

// FailedNotifications lists up to limit notifications that used up their
// retries (the back office's list to act on). It scans the outbox, as
// Notifications does: failed ones are kept until redelivered, delivered
// ones only for the retention period.
func (s *Store) FailedNotifications(limit int) ([]*Notification, error) {
	return s.notificationsWhere(func(n *Notification) bool { return n.State == NotifyFailed }, limit)
}

// notificationsWhere lists up to limit notifications match accepts, with
// their bodies.
func (s *Store) notificationsWhere(match func(*Notification) bool, limit int) ([]*Notification, error) {
	var out []*Notification
	var derr error
	// The records and their bodies from one snapshot, as in Notification.
	snap := s.db.NewSnapshot()
	defer snap.Close()
	err := scanIn(snap, []byte(prefixNotify), prefixEnd(prefixNotify), func(_, v []byte) bool {
		n, err := decodeNotification(v)
		if err != nil {
			derr = err
			return false
		}
		if match(n) {
			out = append(out, n)
		}
		return len(out) < limit
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return nil, err
	}
	for _, n := range out {
		if err := readNotificationBody(snap, n); err != nil {
			return nil, err
		}
	}
	return out, nil
}
