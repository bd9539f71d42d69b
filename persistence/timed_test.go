package persistence

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

// queueNotification commits order id's charge with a callback URL, at
// Raft indexes idx and idx+1, and returns the notification its
// authorisation queued, due at the outcome's time.
func queueNotification(t *testing.T, ts *testStore, idx uint64, id string, at int64) *outbox.Notification {
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
	return orderIDsOf(t, due, err, func(n *outbox.Notification) string { return n.OrderID })
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
	ts.apply(7, &command.Cmd{Notify: &command.NotifyUpdate{ID: a.ID, Time: 4000, Delivered: true}},
		&command.Cmd{Notify: &command.NotifyUpdate{ID: b.ID, Time: 4000, Delivered: true}})
	if got := dueIDs(t, ts, 10_000); !slices.Equal(got, []string{"o-c"}) {
		t.Fatalf("due after two deliveries: %v", got)
	}
	if f := ts.timed[queueIndex].current(); f != 3000 {
		t.Fatalf("floor after the scan: %d, want c's due time 3000", f)
	}
	if n, _ := ts.PendingNotificationCount(); n != 1 {
		t.Fatalf("queue depth: %d", n)
	}

	// An operator redelivers a, due at 1500: before the floor.
	ts.apply(8, &command.Cmd{Notify: &command.NotifyUpdate{ID: a.ID, Time: 1500, Redeliver: true}})
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
	other.apply(3, &command.Cmd{Notify: &command.NotifyUpdate{ID: d.ID, Time: 9500, Delivered: true}})
	queueNotification(t, other, 4, "o-e", 9800)
	if got := dueIDs(t, other, 10_000); !slices.Equal(got, []string{"o-e"}) || other.timed[queueIndex].current() != 9800 {
		t.Fatalf("other store: due %v, floor %d", got, other.timed[queueIndex].current())
	}
	restoreFrom(t, other.Store, ts.Store)
	if got := dueIDs(t, other, 10_000); !slices.Equal(got, []string{"o-a", "o-c"}) {
		t.Fatalf("due after a restore: %v", got)
	}

	// Counting an empty queue (the metrics gauge) puts the floor past any
	// time; the next notification brings it back.
	empty := newTestStore(t)
	f := queueNotification(t, empty, 1, "o-f", 500)
	empty.apply(3, &command.Cmd{Notify: &command.NotifyUpdate{ID: f.ID, Time: 600, Delivered: true}})
	if n, _ := empty.PendingNotificationCount(); n != 0 || empty.timed[queueIndex].current() != math.MaxInt64 {
		t.Fatalf("empty queue: depth %d, floor %d", n, empty.timed[queueIndex].current())
	}
	queueNotification(t, empty, 4, "o-g", 700)
	if got := dueIDs(t, empty, 10_000); !slices.Equal(got, []string{"o-g"}) {
		t.Fatalf("due after the queue was empty: %v", got)
	}
}

// The FSM queueing an earlier entry while a scan runs keeps the floor at
// that entry: the scan's snapshot may not have seen it.
func TestQueueFloorDuringAScan(t *testing.T) {
	var q timedFloor
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

// The auto-settle schedule has the same floor: after a settlement deletes
// the earliest entry, a new authorisation due earlier than the floor is
// still found, and is the next settlement.
func TestSettleScheduleStartsAtTheFloor(t *testing.T) {
	ts := newTestStore(t)
	idx := uint64(0)
	authorize := func(id string, settleAt int64) {
		create, outcome := chargeCmds(id, 1000)
		outcome.Order.Outcome.AutoSettleAt = settleAt
		idx += 2
		ts.apply(idx-1, create)
		if r := ts.apply(idx, outcome)[0]; r.Order == nil || r.Order.AutoSettleAt != settleAt {
			t.Fatalf("authorise %s: %+v", id, r)
		}
	}
	due := func() []string {
		refs, _, err := ts.DueSettlements(10_000, nil, 100)
		return orderIDsOf(t, refs, err, refOrderID)
	}
	authorize("o-a", 5000)
	authorize("o-b", 6000)
	if got := due(); !slices.Equal(got, []string{"o-a", "o-b"}) {
		t.Fatalf("due at first: %v", got)
	}
	idx++
	settle := &command.Cmd{Order: &order.Command{Kind: order.KindSettle, Time: 2000, Merchant: "m_bench", OrderID: "o-a",
		TxnID: "s-a", Amount: 1020}}
	if r := ts.apply(idx, settle)[0]; r.Outcome.Reject != nil || r.Order.AutoSettleAt != 0 {
		t.Fatalf("settle a: %+v", r)
	}
	if got := due(); !slices.Equal(got, []string{"o-b"}) || ts.timed[settleIndex].current() != 6000 {
		t.Fatalf("after settling a: due %v, floor %d", got, ts.timed[settleIndex].current())
	}
	authorize("o-c", 2000)
	if got := due(); !slices.Equal(got, []string{"o-c", "o-b"}) {
		t.Fatalf("after an authorisation due before the floor: %v", got)
	}
	if next, _ := ts.NextSettlement(); next != 2000 {
		t.Fatalf("next settlement: %d, want 2000", next)
	}
}

// Every schedule's floor comes down when a batch adds an entry before it,
// whichever code wrote the key: Batch.set notes them all.
func TestEveryScheduleKeyLowersItsFloor(t *testing.T) {
	ts := newTestStore(t)
	for ix, prefix := range timedPrefixes {
		f := &ts.timed[ix]
		if _, err := ts.firstTimed(timedIndex(ix)); err != nil {
			t.Fatal(err)
		}
		if f.current() != math.MaxInt64 {
			t.Fatalf("%s: floor of an empty schedule after a scan: %d", prefix, f.current())
		}
		b := ts.NewBatch()
		b.set(timedKey(prefix, 9000, []byte("late")), nil)
		b.set(timedKey(prefix, 7000, []byte("early")), nil)
		b.set([]byte(prefix+"short"), nil) // not an entry: no due time
		if err := b.Commit(uint64(ix + 1)); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if f.current() != 7000 {
			t.Fatalf("%s: floor after adding entries at 7000 and 9000: %d", prefix, f.current())
		}
		if first, _ := ts.firstTimed(timedIndex(ix)); first != 7000 {
			t.Fatalf("%s: first entry %d", prefix, first)
		}
	}
}

// Scans racing the FSM: one goroutine commits batches that add entries at
// random due times (often before the floor) and delete live ones, while
// another scans. An entry committed before a scan began and still there
// after it ended must be in what the scan found, whatever the floor did.
func TestTimedScansRacingCommits(t *testing.T) {
	ts := newTestStore(t)
	var mu sync.Mutex
	live := map[string]int64{} // committed entries: id -> due
	done := make(chan struct{})
	go func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range 3000 {
			b := ts.NewBatch()
			id := "n" + strconv.Itoa(i)
			due := rng.Int64N(10_000)
			b.set(timedKey(prefixDue, due, []byte(id)), nil)
			// An entry leaves live before its delete commits, and joins it
			// once its commit has returned: live never holds more than the
			// store.
			mu.Lock()
			deleted := 0
			for old, at := range live {
				if rng.IntN(3) == 0 {
					b.del(timedKey(prefixDue, at, []byte(old)))
					delete(live, old)
					deleted++
				}
				if deleted == 2 {
					break
				}
			}
			mu.Unlock()
			if err := b.Commit(uint64(i + 1)); err != nil {
				t.Error(err)
				return
			}
			b.Close()
			mu.Lock()
			live[id] = due
			mu.Unlock()
		}
	}()
	rng := rand.New(rand.NewPCG(3, 4))
	scans := 0
	for running := true; running; scans++ {
		select {
		case <-done:
			running = false // one last scan, with the writer stopped
		default:
		}
		end := rng.Int64N(12_000)
		mu.Lock()
		before := maps.Clone(live)
		mu.Unlock()
		found := map[string]bool{}
		err := ts.scanTimed(queueIndex, end, func(k, _ []byte) bool {
			found[string(k[len(prefixDue)+8:])] = true
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for id, due := range before {
			if _, still := live[id]; still && due < end && !found[id] {
				t.Errorf("scan %d up to %d missed %s due at %d (floor %d)", scans, end, id, due, ts.timed[queueIndex].current())
			}
		}
		mu.Unlock()
		if t.Failed() {
			break
		}
	}
	<-done
	if scans < 10 {
		t.Fatalf("only %d scans ran against the commits", scans)
	}
}

// A schedule is listed a page at a time: each page starts after the
// cursor the one before returned, the pages together list every due entry
// once, and a page that starts past the floor leaves the floor alone.
func TestSchedulePages(t *testing.T) {
	ts := newTestStore(t)
	b := ts.NewBatch()
	var want []string
	for i := range 30 { // three full pages, then an empty one
		id := fmt.Sprintf("o-%02d", i)
		due := int64(1000 + i/2) // two entries share each due time
		b.set(timedKey(prefixSettle, due, refKey("", "m1", id)), nil)
		want = append(want, id)
	}
	b.set(timedKey(prefixSettle, 5000, refKey("", "m1", "later")), nil)
	if err := b.Commit(1); err != nil {
		t.Fatal(err)
	}
	b.Close()
	var got []string
	var cursor ScheduleCursor
	for page := 0; ; page++ {
		refs, next, err := ts.DueSettlements(2000, cursor, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range refs {
			got = append(got, r.OrderID)
		}
		if page > 0 && ts.timed[settleIndex].current() != 1000 {
			t.Fatalf("page %d moved the floor to %d", page, ts.timed[settleIndex].current())
		}
		if len(refs) < 10 {
			if len(refs) == 0 && !bytes.Equal(next, cursor) {
				t.Fatalf("an empty page moved the cursor")
			}
			break
		}
		cursor = next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages listed %v\nwant %v", got, want)
	}
}
