package persistence

import (
	"fmt"
	"math"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

func notifyKey(id string) []byte { return append([]byte(prefixNotify), id...) }

// setDue puts n in the delivery queue at its due time. The index entry's
// value is n's endpoint, so a scan can pass over the notifications of an
// endpoint that has no room without loading them (DueNotifications).
// Entries written before it carried one have an empty value.
func (b *Batch) setDue(n *outbox.Notification) {
	b.set(timedKey(prefixDue, n.NextDueAt, []byte(n.ID)), []byte(outbox.Endpoint(n.URL)))
}

func (b *Batch) addNotification(o *order.Order, now int64) {
	n := outbox.New(o, now)
	b.putNotification(n)
	b.setDue(n)
	b.Created = append(b.Created, n)
}

// applyNotify applies an attempt's result or a redelivery (outbox.Apply)
// and keeps the indexes with the record: the delivery queue (q/) holds it
// while pending, the retention index (x/) once delivered. (Only delivered
// ones age out: a failed delivery stays visible to the admin API, contract
// section 6, until it is redelivered.)
func (b *Batch) applyNotify(u *command.NotifyUpdate) Result {
	n, err := readNotification(b, u.ID)
	if err != nil {
		panic(fmt.Sprintf("persistence: read notification: %v", err))
	}
	if n == nil {
		return Result{Err: fmt.Errorf("notification %s not found", u.ID)}
	}
	was := *n
	if !outbox.Apply(n, u) {
		// A late result for a delivery already settled: the record stays.
		return Result{Notification: n}
	}
	if was.State == outbox.Pending {
		b.del(timedKey(prefixDue, was.NextDueAt, []byte(n.ID)))
	}
	if was.FinishedAt != 0 && n.FinishedAt == 0 {
		b.del(timedKey(prefixFinished, was.FinishedAt, []byte(n.ID)))
	}
	if n.State == outbox.Delivered {
		b.set(timedKey(prefixFinished, n.FinishedAt, []byte(n.ID)), nil)
	}
	b.putNotification(n)
	if n.State == outbox.Pending {
		b.setDue(n)
	}
	return Result{Notification: n}
}

// Notification returns a notification by id with its body, or nil.
func (s *Store) Notification(id string) (*outbox.Notification, error) {
	// One snapshot for the record and its body: a prune committed between
	// the two reads would leave a record without a body.
	snap := s.db.NewSnapshot()
	defer snap.Close()
	return notificationIn(snap, id)
}

// notificationIn reads a notification and its body from r, a snapshot.
func notificationIn(r reader, id string) (*outbox.Notification, error) {
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
func (s *Store) DueNotifications(now int64, limit int, skip func(id, endpoint string) bool) ([]*outbox.Notification, error) {
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
			endpoint = outbox.Endpoint(n.URL)
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
	out := make([]*outbox.Notification, 0, len(ids))
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
func (s *Store) Notifications(merchant, orderID string, limit int) ([]*outbox.Notification, error) {
	return s.notificationsWhere(func(n *outbox.Notification) bool {
		return (merchant == "" || n.Merchant == merchant) && (orderID == "" || n.OrderID == orderID)
	}, limit)
}

// FailedNotifications lists up to limit notifications that used up their
// retries (the back office's list to act on). It scans the outbox, as
// Notifications does: failed ones are kept until redelivered, delivered
// ones only for the retention period.
func (s *Store) FailedNotifications(limit int) ([]*outbox.Notification, error) {
	return s.notificationsWhere(func(n *outbox.Notification) bool { return n.State == outbox.Failed }, limit)
}

// notificationsWhere lists up to limit notifications match accepts, with
// their bodies.
func (s *Store) notificationsWhere(match func(*outbox.Notification) bool, limit int) ([]*outbox.Notification, error) {
	var out []*outbox.Notification
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
