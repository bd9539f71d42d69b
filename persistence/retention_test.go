package persistence

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

// notifyingCharge applies a charge with a callback URL at index idx and
// returns the notification its approval wrote.
func notifyingCharge(t *testing.T, ts *testStore, idx uint64, orderID string) *outbox.Notification {
	t.Helper()
	create, outcome := chargeCmds(orderID, 1e9)
	create.Order.Create.CallbackURL = "https://merchant.example/hook"
	b := ts.NewBatch()
	defer b.Close()
	b.Apply(create)
	if r := b.Apply(outcome); r.Err != nil || len(b.Created) != 1 {
		t.Fatalf("charge %s: %+v, %d notifications", orderID, r, len(b.Created))
	}
	n := b.Created[0]
	if err := b.Commit(idx); err != nil {
		t.Fatal(err)
	}
	return n
}

// listed is what a retention index lists before before, up to 10.
func listed[T any](t *testing.T, list func(before int64, limit int) ([]T, error), before int64) []T {
	t.Helper()
	out, err := list(before, 10)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func attemptAt(at int64, code int) *command.AttemptRecord {
	return &command.AttemptRecord{At: at, HTTPCode: code, DurationNs: 1}
}

// Delivered notifications enter the retention index when they finish and
// leave it when redelivered; failed ones stay out of it (visible to the
// admin API until redelivered); a prune removes only those still delivered
// before its cut, whatever the leader listed, and leaves nothing of them
// behind.
func TestNotificationRetention(t *testing.T) {
	ts := newTestStore(t)
	delivered := notifyingCharge(t, ts, 1, "o-1")
	failed := notifyingCharge(t, ts, 2, "o-2")
	pending := notifyingCharge(t, ts, 3, "o-3")
	ts.apply(4,
		&command.Cmd{Notify: &command.NotifyUpdate{ID: delivered.ID, Time: 100, Attempt: attemptAt(90, 200), Delivered: true}},
		&command.Cmd{Notify: &command.NotifyUpdate{ID: failed.ID, Time: 200, Attempt: attemptAt(190, 500)}}, // schedule exhausted
		&command.Cmd{Notify: &command.NotifyUpdate{ID: pending.ID, Time: 300, Attempt: attemptAt(290, 500), NextDueAt: 5000}},
	)
	listFinished := func(before int64) []command.NotifyExpiry { return listed(t, ts.FinishedNotifications, before) }
	finished := func(before int64) []string {
		t.Helper()
		var ids []string
		for _, e := range listFinished(before) {
			ids = append(ids, e.ID)
		}
		return ids
	}
	for _, c := range []struct {
		before int64
		want   []string
	}{
		{100, nil}, // finished at 100: not before it
		{101, []string{delivered.ID}},
		{1 << 62, []string{delivered.ID}}, // the failed one stays for the admin API; the pending one is not done
	} {
		if got := finished(c.before); !reflect.DeepEqual(got, c.want) {
			t.Fatalf("finished before %d: %v, want %v", c.before, got, c.want)
		}
	}
	if n, _ := ts.Notification(failed.ID); n.State != outbox.Failed || n.FinishedAt != 200 {
		t.Fatalf("failed notification: %+v", n)
	}
	if got := listFinished(1 << 62); len(got) != 1 || got[0].FinishedAt != 100 {
		t.Fatalf("finish times listed: %+v", got)
	}

	// A failed one that an earlier version indexed, named by a prune:
	// it leaves the index and stays.
	legacy := timedKey(prefixFinished, 200, []byte(failed.ID))
	b := ts.NewBatch()
	b.set(legacy, nil)
	if err := b.Commit(5); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if got := finished(1 << 62); !reflect.DeepEqual(got, []string{delivered.ID, failed.ID}) {
		t.Fatalf("with the legacy entry: %v", got)
	}
	if r := ts.apply(6, &command.Cmd{NotifyPrune: &command.NotifyPrune{Before: 1 << 62, Entries: []command.NotifyExpiry{{ID: failed.ID, FinishedAt: 200}}}})[0]; r.Pruned != 0 {
		t.Fatalf("prune of a failed notification: %+v", r)
	}
	if n, _ := ts.Notification(failed.ID); n == nil || n.State != outbox.Failed {
		t.Fatalf("failed notification after a prune named it: %+v", n)
	}
	if got := finished(1 << 62); !reflect.DeepEqual(got, []string{delivered.ID}) {
		t.Fatalf("the legacy entry should have left the index: %v", got)
	}

	// A redelivery of the failed one after the leader has listed: the
	// prune leaves it, as it leaves the pending one and an id it does not
	// know.
	listed := listFinished(1 << 62)
	ts.apply(7, &command.Cmd{Notify: &command.NotifyUpdate{ID: failed.ID, Time: 400, Redeliver: true}})
	if got := finished(1 << 62); !reflect.DeepEqual(got, []string{delivered.ID}) {
		t.Fatalf("after the redelivery: %v", got)
	}
	listed = append(listed, command.NotifyExpiry{ID: failed.ID, FinishedAt: 200}, command.NotifyExpiry{ID: pending.ID, FinishedAt: 300}, command.NotifyExpiry{ID: "ntf_unknown", FinishedAt: 1})
	r := ts.apply(8, &command.Cmd{NotifyPrune: &command.NotifyPrune{Before: 1 << 62, Entries: listed}})[0]
	if r.Err != nil || r.Pruned != 1 {
		t.Fatalf("prune: %+v, want 1 pruned", r)
	}
	for _, key := range [][]byte{notifyKey(delivered.ID), notifyBodyKey(delivered.ID), timedKey(prefixFinished, 100, []byte(delivered.ID))} {
		if v, err := get(ts.db, key); err != nil || v != nil {
			t.Fatalf("%q left after the prune: %q %v", key, v, err)
		}
	}
	for _, id := range []string{failed.ID, pending.ID} {
		if n, err := ts.Notification(id); err != nil || n == nil || n.State != outbox.Pending {
			t.Fatalf("%s after the prune: %+v %v", id, n, err)
		}
	}

	// Delivered at 500 after the redelivery: a cut at 500 keeps it, one
	// past it prunes it, across a reopen (the index is in the store).
	ts.apply(9, &command.Cmd{Notify: &command.NotifyUpdate{ID: failed.ID, Time: 500, Attempt: attemptAt(450, 200), Delivered: true}})
	ts.reopen()
	refinished := command.NotifyExpiry{ID: failed.ID, FinishedAt: 500}
	if r := ts.apply(10, &command.Cmd{NotifyPrune: &command.NotifyPrune{Before: 500, Entries: []command.NotifyExpiry{refinished}}})[0]; r.Pruned != 0 {
		t.Fatalf("prune before its finish: %+v", r)
	}
	if got := listFinished(501); !reflect.DeepEqual(got, []command.NotifyExpiry{refinished}) {
		t.Fatalf("after reopening: %v", got)
	}
	// Named by its first finish (the leader's listing before the
	// redelivery), it stays.
	if r := ts.apply(11, &command.Cmd{NotifyPrune: &command.NotifyPrune{Before: 501, Entries: []command.NotifyExpiry{{ID: failed.ID, FinishedAt: 200}}}})[0]; r.Pruned != 0 {
		t.Fatalf("prune of an earlier finish: %+v", r)
	}
	if r := ts.apply(12, &command.Cmd{NotifyPrune: &command.NotifyPrune{Before: 501, Entries: []command.NotifyExpiry{refinished}}})[0]; r.Pruned != 1 {
		t.Fatalf("prune past its finish: %+v", r)
	}
	if n, err := ts.Notification(failed.ID); err != nil || n != nil {
		t.Fatalf("pruned notification still reads: %+v (%v)", n, err)
	}
	if got := finished(1 << 62); len(got) != 0 {
		t.Fatalf("index after pruning all finished: %v", got)
	}
	if list, err := ts.Notifications("", "", 10); err != nil || len(list) != 1 || list[0].ID != pending.ID {
		t.Fatalf("listing after the prunes: %v %+v", err, list)
	}
}

// keyedCreate is createCmd with an Idempotency-Key, at time at.
func keyedCreate(orderID, key, hash string, at int64) *command.Cmd {
	c := createCmd(orderID, hash)
	c.Order.IdempotencyKey, c.Order.Time = key, at
	return c
}

// Idempotency records enter the age index when written and move in it when
// an expired key is used again; a prune removes only records still written
// before its cut, whatever the leader listed.
func TestIdempotencyRetention(t *testing.T) {
	ts := newTestStore(t)
	window := int64(order.IdempotencyWindow)
	ts.apply(1, keyedCreate("o-1", "ik1", "h1", 1000), keyedCreate("o-2", "ik2", "h2", 2000))
	expired := func(before int64) []command.IdemExpiry { return listed(t, ts.ExpiredIdempotency, before) }
	ik1, ik2 := command.IdemExpiry{Merchant: "m1", Key: "ik1", CreatedAt: 1000}, command.IdemExpiry{Merchant: "m1", Key: "ik2", CreatedAt: 2000}
	if got := expired(1000); len(got) != 0 {
		t.Fatalf("written before 1000: %v", got)
	}
	if got := expired(1 << 62); !reflect.DeepEqual(got, []command.IdemExpiry{ik1, ik2}) {
		t.Fatalf("all, oldest first: %v", got)
	}

	// Within its window a key replays; past it, using it again writes a new
	// record, which moves in the index.
	if r := ts.apply(2, keyedCreate("o-9", "ik1", "h1", 1000+window-1))[0]; r.Replayed == nil {
		t.Fatalf("a repeat within the window: %+v", r)
	}
	listed := expired(1 << 62)
	if r := ts.apply(3, keyedCreate("o-3", "ik1", "h3", 1000+window))[0]; r.Replayed != nil || r.Order == nil || r.Order.ID != "o-3" {
		t.Fatalf("the key used again past its window: %+v", r)
	}
	ik1Again := command.IdemExpiry{Merchant: "m1", Key: "ik1", CreatedAt: 1000 + window}
	if got := expired(1 << 62); !reflect.DeepEqual(got, []command.IdemExpiry{ik2, ik1Again}) {
		t.Fatalf("after ik1 was used again: %v", got)
	}

	// The prune of what was listed before: ik1's record is not the one
	// listed any more, and the one it has is not before the cut.
	prune := &command.IdemPrune{Before: 1 << 62, Entries: append(listed, command.IdemExpiry{Merchant: "m1", Key: "unknown", CreatedAt: 1})}
	r := ts.apply(4, &command.Cmd{IdemPrune: prune})[0]
	if r.Err != nil || r.Pruned != 1 {
		t.Fatalf("prune: %+v, want 1 pruned", r)
	}
	if rec, err := ts.Idempotency("m1", "ik2"); err != nil || rec != nil {
		t.Fatalf("pruned record still reads: %+v %v", rec, err)
	}
	if rec, err := ts.Idempotency("m1", "ik1"); err != nil || rec == nil || rec.CreatedAt != 1000+window {
		t.Fatalf("record written after the cut: %+v %v", rec, err)
	}
	if v, err := get(ts.db, timedKey(prefixIdemAge, 2000, refKey("", "m1", "ik2"))); err != nil || v != nil {
		t.Fatalf("age entry left after the prune: %q %v", v, err)
	}
	if got := expired(1 << 62); !reflect.DeepEqual(got, []command.IdemExpiry{ik1Again}) {
		t.Fatalf("after the prune: %v", got)
	}
	if r := ts.apply(5, &command.Cmd{IdemPrune: &command.IdemPrune{Before: 1000 + window, Entries: []command.IdemExpiry{ik1Again}}})[0]; r.Pruned != 0 {
		t.Fatalf("prune of a record written at the cut: %+v", r)
	}
	// A key whose record is gone is a new key.
	if r := ts.apply(6, keyedCreate("o-4", "ik2", "h4", 3000+window))[0]; r.Replayed != nil || r.Order == nil || r.Order.ID != "o-4" {
		t.Fatalf("a pruned key used again: %+v", r)
	}
}

// A keyed operation the state machine refuses records the refusal as the
// key's first answer: the same command later replays it, whatever the order
// would take by then, and the record ages out like any other.
func TestIdempotencyRecordsARefusal(t *testing.T) {
	ts := newTestStore(t)
	create, outcome := chargeCmds("o-1", 1000)
	refund := &command.Cmd{Order: &order.Command{Kind: order.KindRefund, Time: 5000, Merchant: "m_bench", OrderID: "o-1",
		TxnID: "r-1", Amount: 100, IdempotencyKey: "rk", RequestHash: "rh"}}
	r := ts.apply(1, create, outcome, refund)[2]
	if r.Outcome.Reject == nil || r.Outcome.Reject.Kind != order.RejectIllegalStatus {
		t.Fatalf("refund of an authorised order: %+v", r)
	}
	rec, err := ts.Idempotency("m_bench", "rk")
	if err != nil || rec == nil || rec.Reject == nil || rec.Reject.Kind != order.RejectIllegalStatus || rec.RequestHash != "rh" {
		t.Fatalf("record: %+v %v", rec, err)
	}
	settle := &command.Cmd{Order: &order.Command{Kind: order.KindSettle, Time: 6000, Merchant: "m_bench", OrderID: "o-1", TxnID: "s-1", Amount: 1020}}
	again := *refund.Order
	again.Time, again.TxnID = 7000, "r-2"
	res := ts.apply(2, settle, &command.Cmd{Order: &again})
	if res[1].Replayed == nil || res[1].Replayed.Reject == nil || res[1].Order != nil {
		t.Fatalf("the repeat after the settle: %+v", res[1])
	}
	if o, _ := ts.GetOrder("m_bench", "o-1"); o == nil || o.Status != order.StatusSettled || o.RefundedAmount != 0 {
		t.Fatalf("order after the repeat: %+v", o)
	}
	if got := listed(t, ts.ExpiredIdempotency, 1<<62); !reflect.DeepEqual(got, []command.IdemExpiry{{Merchant: "m_bench", Key: "rk", CreatedAt: 5000}}) {
		t.Fatalf("age index: %+v", got)
	}
}

// A key that is not UTF-8 (the API refuses them now; a store may hold one
// from before) cannot travel in a prune, a JSON command: the listing passes
// over it, so the keys after it are still pruned.
func TestIdempotencyListingSkipsKeysAPruneCannotCarry(t *testing.T) {
	ts := newTestStore(t)
	ts.apply(1, keyedCreate("o-1", "bad-\xff", "h1", 1000), keyedCreate("o-2", "ik2", "h2", 2000))
	if got := listed(t, ts.ExpiredIdempotency, 1<<62); !reflect.DeepEqual(got, []command.IdemExpiry{{Merchant: "m1", Key: "ik2", CreatedAt: 2000}}) {
		t.Fatalf("listed: %+v", got)
	}
}

// present answers for the state as of its point in the batch: committed
// keys, minus those the batch deleted, plus those it set; in any order of
// its input, with unlisted keys between the listed ones.
func TestBatchPresent(t *testing.T) {
	ts := newTestStore(t)
	key := func(i int) []byte { return timedKey(prefixFinished, int64(i), []byte("n")) }
	b := ts.NewBatch()
	for _, i := range []int{1, 2, 3, 5, 8, 9} {
		b.set(key(i), nil)
	}
	if err := b.Commit(1); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b = ts.NewBatch()
	defer b.Close()
	b.del(key(3))      // committed, deleted since
	b.set(key(4), nil) // set in this batch
	for _, c := range []struct {
		keys []int
		want []bool
	}{
		{nil, []bool{}},
		{[]int{1}, []bool{true}},
		{[]int{0}, []bool{false}},
		{[]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, []bool{true, true, false, true, true, false, false, true, true, false}},
		{[]int{9, 1, 4, 3, 7}, []bool{true, true, true, false, false}}, // out of order
		{[]int{2, 8}, []bool{true, true}},  // 5 between, not listed
		{[]int{5, 5}, []bool{true, false}}, // listed twice: once
	} {
		keys := make([][]byte, len(c.keys))
		for i, k := range c.keys {
			keys[i] = key(k)
		}
		if got := b.present(keys); !reflect.DeepEqual(got, c.want) {
			t.Errorf("present(%v) = %v, want %v", c.keys, got, c.want)
		}
	}
}

// The operator's listing and a single notification read their records and
// bodies from one snapshot: a prune committed between the two reads must
// not leave a record without its body (which was a 500 for the listing).
func TestNotificationReadsDuringPrunes(t *testing.T) {
	ts := newTestStore(t)
	const count = 200
	var all []command.NotifyExpiry
	idx := uint64(1)
	for i := range count {
		n := notifyingCharge(t, ts, idx, fmt.Sprintf("o-%d", i))
		idx++
		ts.apply(idx, &command.Cmd{Notify: &command.NotifyUpdate{ID: n.ID, Time: 100, Attempt: attemptAt(90, 200), Delivered: true}})
		idx++
		all = append(all, command.NotifyExpiry{ID: n.ID, FinishedAt: 100})
	}
	done := make(chan error, 1)
	go func() {
		// One notification per commit, the newest first: the listing
		// scans oldest first, so its late reads meet the fresh prunes.
		for i := len(all) - 1; i >= 0; i-- {
			b := ts.NewBatch()
			r := b.Apply(&command.Cmd{NotifyPrune: &command.NotifyPrune{Before: 1 << 62, Entries: all[i : i+1]}})
			err := b.Commit(idx + uint64(len(all)-i))
			b.Close()
			if err == nil && r.Pruned != 1 {
				err = fmt.Errorf("prune of %s: %+v", all[i].ID, r)
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for reads := 0; ; reads++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d listings while %d notifications were pruned", reads, count)
			return
		default:
		}
		list, err := ts.Notifications("", "", count)
		if err != nil {
			t.Fatalf("listing during the prunes: %v", err)
		}
		for _, n := range list {
			if n.Body == nil {
				t.Fatalf("%s listed without its body", n.ID)
			}
		}
		if n, err := ts.Notification(all[0].ID); err != nil {
			t.Fatalf("reading %s during the prunes: %v (%+v)", all[0].ID, err, n)
		}
	}
}
