package persistence

import (
	"math"
	"slices"
	"testing"
)

// queueNotification commits order id's charge with a callback URL, at
// Raft indexes idx and idx+1, and returns the notification its
// authorisation queued, due at the outcome's time.
func queueNotification(t *testing.T, ts *testStore, idx uint64, id string, at int64) *Notification {
	t.Helper()
	create, outcome := chargeCmds(id, at)
	create.Order.Create.CallbackURL = "https://merchant.example/hook"
	outcome.Order.Time = at
	ts.apply(idx, create)
	b := ts.NewBatch()
	defer b.Close()
	if r := b.Apply(outcome); r.Err != nil || len(b.Created) != 1 {
		t.Fatalf("outcome of %s: %+v, %d notifications", id, r, len(b.Created))
	}
	n := b.Created[0]
	if err := b.Commit(idx + 1); err != nil {
		t.Fatal(err)
	}
	return n
}

// dueIDs scans the queue as the dispatcher does and returns the order ids.
func dueIDs(t *testing.T, ts *testStore, now int64) []string {
	t.Helper()
	due, err := ts.DueNotifications(now, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range due {
		ids = append(ids, n.OrderID)
	}
	return ids
}

// A scan starts where the last one found the queue's first entry, and
// still finds every notification queued before that point afterwards:
// a redelivery due earlier, and whatever a snapshot brings.
func TestQueueScansStartAtTheFloor(t *testing.T) {
	ts := newTestStore(t)
	a := queueNotification(t, ts, 1, "o-a", 1000)
	b := queueNotification(t, ts, 3, "o-b", 2000)
	queueNotification(t, ts, 5, "o-c", 3000)
	if got := dueIDs(t, ts, 10_000); !slices.Equal(got, []string{"o-a", "o-b", "o-c"}) {
		t.Fatalf("due at first: %v", got)
	}
	ts.apply(7, &Cmd{Notify: &NotifyUpdate{ID: a.ID, Time: 4000, Delivered: true}},
		&Cmd{Notify: &NotifyUpdate{ID: b.ID, Time: 4000, Delivered: true}})
	if got := dueIDs(t, ts, 10_000); !slices.Equal(got, []string{"o-c"}) {
		t.Fatalf("due after two deliveries: %v", got)
	}
	if f := ts.queue.current(); f != 3000 {
		t.Fatalf("floor after the scan: %d, want c's due time 3000", f)
	}
	if n, _ := ts.PendingNotificationCount(); n != 1 {
		t.Fatalf("queue depth: %d", n)
	}

	// An operator redelivers a, due at 1500: before the floor.
	ts.apply(8, &Cmd{Notify: &NotifyUpdate{ID: a.ID, Time: 1500, Redeliver: true}})
	if got := dueIDs(t, ts, 10_000); !slices.Equal(got, []string{"o-a", "o-c"}) {
		t.Fatalf("due after a redelivery before the floor: %v", got)
	}
	if next, _ := ts.NextNotificationDueAfter(1000); next != 1500 {
		t.Fatalf("next due after 1000: %d, want 1500", next)
	}
	if n, _ := ts.PendingNotificationCount(); n != 2 {
		t.Fatalf("queue depth: %d", n)
	}
	// A scan that finds nothing up to its time leaves the floor no higher
	// than that time.
	if got := dueIDs(t, ts, 1000); len(got) != 0 {
		t.Fatalf("due at 1000: %v", got)
	}
	if got := dueIDs(t, ts, 10_000); !slices.Equal(got, []string{"o-a", "o-c"}) {
		t.Fatalf("due after an empty scan: %v", got)
	}

	// A follower whose queue has moved past where the snapshot's starts.
	other := newTestStore(t)
	d := queueNotification(t, other, 1, "o-d", 9000)
	other.apply(3, &Cmd{Notify: &NotifyUpdate{ID: d.ID, Time: 9500, Delivered: true}})
	queueNotification(t, other, 4, "o-e", 9800)
	if got := dueIDs(t, other, 10_000); !slices.Equal(got, []string{"o-e"}) || other.queue.current() != 9800 {
		t.Fatalf("other store: due %v, floor %d", got, other.queue.current())
	}
	restoreFrom(t, other.Store, ts.Store)
	if got := dueIDs(t, other, 10_000); !slices.Equal(got, []string{"o-a", "o-c"}) {
		t.Fatalf("due after a restore: %v", got)
	}

	// Counting an empty queue (the metrics gauge) puts the floor past any
	// time; the next notification brings it back.
	empty := newTestStore(t)
	f := queueNotification(t, empty, 1, "o-f", 500)
	empty.apply(3, &Cmd{Notify: &NotifyUpdate{ID: f.ID, Time: 600, Delivered: true}})
	if n, _ := empty.PendingNotificationCount(); n != 0 || empty.queue.current() != math.MaxInt64 {
		t.Fatalf("empty queue: depth %d, floor %d", n, empty.queue.current())
	}
	queueNotification(t, empty, 4, "o-g", 700)
	if got := dueIDs(t, empty, 10_000); !slices.Equal(got, []string{"o-g"}) {
		t.Fatalf("due after the queue was empty: %v", got)
	}
}

// The FSM queueing an earlier entry while a scan runs keeps the floor at
// that entry: the scan's snapshot may not have seen it.
func TestQueueFloorDuringAScan(t *testing.T) {
	var q queueFloor
	floor, sc := q.begin()
	if floor != 0 {
		t.Fatalf("a new floor: %d", floor)
	}
	q.end(sc, 500, true)
	if q.current() != 500 {
		t.Fatalf("floor after a scan that found 500: %d", q.current())
	}

	_, sc = q.begin()
	_, other := q.begin()
	q.lowered(700) // above the floor: no change to it, but the scans note it
	q.lowered(600)
	q.end(sc, 900, true)
	if q.current() != 600 {
		t.Fatalf("floor after a scan during which 600 was queued: %d", q.current())
	}
	q.end(other, 1000, false)
	if q.current() != 600 {
		t.Fatalf("a failed scan moved the floor: %d", q.current())
	}
	if len(q.scans) != 0 {
		t.Fatalf("scans left registered: %d", len(q.scans))
	}

	q.lowered(100)
	if q.current() != 100 {
		t.Fatalf("floor after queueing 100: %d", q.current())
	}
	_, sc = q.begin()
	if sc.lowest != math.MaxInt64 {
		t.Fatalf("a new scan has seen %d", sc.lowest)
	}
	q.end(sc, 2000, true)
	if q.current() != 2000 {
		t.Fatalf("floor after an undisturbed scan: %d", q.current())
	}
}
