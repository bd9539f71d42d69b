package actors

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

func createWithCallback(t *testing.T, f *fixture, id string) {
	t.Helper()
	createWithCallbackURL(t, f, id, "http://receiver.test/hook")
}

// createWithCallbackURL charges a card order of merchant m1 through its
// actor, with its notifications going to url.
func createWithCallbackURL(t *testing.T, f *fixture, id, url string) {
	t.Helper()
	msg := &Create{Merchant: "m1", OrderID: id, RequestHash: "h",
		Data: order.CreateData{Amount: 100, Currency: "USD", ProcessingMID: "mid", SettleDelayHours: 24,
			CallbackURL: url},
		Card: f.card(), CVV: "123"}
	if _, err := f.reg.Request(Key{"m1", id}, msg, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// The retention pass prunes every notification delivered longer than the
// retention ago, a page per command, and none still pending or finished
// more recently.
func TestSchedulerPrunesNotificationsPastRetention(t *testing.T) {
	f := newFixture(t)
	const delivered, down, page = 30, 4, 7
	for i := range delivered {
		createWithCallback(t, f, fmt.Sprintf("kept%d", i))
	}
	for i := range down {
		createWithCallbackURL(t, f, fmt.Sprintf("down%d", i), "http://down.test/hook")
	}
	states := func() map[outbox.State]int {
		list, err := f.store.Notifications("m1", "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		count := map[outbox.State]int{}
		for _, n := range list {
			count[n.State]++
		}
		return count
	}
	// Every order's status settles, then its notifications get the results
	// delivery would commit: delivered, or a failed attempt with a retry
	// an hour away for the receiver that is down.
	for i := range delivered {
		f.waitStatus(t, "m1", fmt.Sprintf("kept%d", i), order.StatusAuthorized)
	}
	for i := range down {
		f.waitStatus(t, "m1", fmt.Sprintf("down%d", i), order.StatusAuthorized)
	}
	list, err := f.store.Notifications("m1", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list {
		at := time.Now().UnixNano()
		upd := &command.NotifyUpdate{ID: n.ID, Time: at, Delivered: true,
			Attempt: &command.AttemptRecord{At: at, HTTPCode: 200}}
		if strings.Contains(n.URL, "down.test") {
			upd.Delivered, upd.NextDueAt = false, at+int64(time.Hour)
			upd.Attempt = &command.AttemptRecord{At: at, HTTPCode: 503, Error: "http status 503"}
		}
		if _, err := f.proposer.Propose(context.Background(), &command.Cmd{Notify: upd}); err != nil {
			t.Fatal(err)
		}
	}
	if got := states(); got[outbox.Delivered] != delivered || got[outbox.Pending] != down {
		t.Fatalf("notifications by state: %v", got)
	}

	var now atomic.Pointer[time.Time]
	s := &Scheduler{Store: f.store, Registry: f.reg, Logger: f.deps.Logger, Proposer: f.proposer,
		Now: func() time.Time { return *now.Load() }, NotifyRetention: time.Hour, PageSize: page}
	pass := func(at time.Time) (proposals int64) {
		now.Store(&at)
		before := f.proposer.Applied()
		s.pruneNotifications(context.Background())
		return f.proposer.Applied() - before
	}
	if n := pass(time.Now().Add(59 * time.Minute)); n != 0 || states()[outbox.Delivered] != delivered {
		t.Fatalf("within the retention: %d prunes proposed, notifications %v", n, states())
	}
	pruned := notificationsPruned.Get()
	if n := pass(time.Now().Add(61 * time.Minute)); n != (delivered+page-1)/page {
		t.Fatalf("%d prunes proposed for %d notifications, want one per page of %d", n, delivered, page)
	}
	if got := states(); got[outbox.Delivered] != 0 || got[outbox.Pending] != down || len(got) != 1 {
		t.Fatalf("after the pass: %v, want only the %d pending", got, down)
	}
	if n := notificationsPruned.Get() - pruned; n != delivered {
		t.Fatalf("gateway_webhook_pruned_total went up by %d, want %d", n, delivered)
	}
	if n := pass(time.Now().Add(100 * time.Hour)); n != 0 {
		t.Fatalf("nothing left to prune: %d prunes proposed", n)
	}
}

// The retention pass removes idempotency records once their window and the
// margin for leaders' clocks have passed, a page per command, and keeps
// the younger ones.
func TestSchedulerPrunesIdempotencyRecords(t *testing.T) {
	f := newFixture(t)
	const old, young, page = 10, 2, 3
	now := time.Now()
	keyed := func(i int, at time.Time) {
		id := fmt.Sprintf("idem%d", i)
		cmd := &order.Command{Kind: order.KindCreate, Time: at.UnixNano(), Merchant: "m1", OrderID: id, TxnID: "t-" + id,
			RequestHash: "h", IdempotencyKey: "key-" + id,
			Create: &order.CreateData{Amount: 100, Currency: "USD", ProcessingMID: "mid", SettleDelayHours: 1,
				Source: order.PaymentSource{Type: "card"}}}
		if r, err := f.proposer.Propose(context.Background(), &command.Cmd{Order: cmd}); err != nil || r.Order == nil {
			t.Fatalf("create %s: %+v %v", id, r, err)
		}
	}
	for i := range old {
		keyed(i, now.Add(-order.IdempotencyWindow-idempotencyMargin-time.Minute))
	}
	for i := old; i < old+young; i++ {
		keyed(i, now.Add(-order.IdempotencyWindow-idempotencyMargin+time.Minute))
	}
	s := &Scheduler{Store: f.store, Registry: f.reg, Logger: f.deps.Logger, Proposer: f.proposer,
		Now: func() time.Time { return now }, PageSize: page}
	pruned, proposals := idempotencyPruned.Get(), f.proposer.Applied()
	s.pruneIdempotency(context.Background())
	if n := f.proposer.Applied() - proposals; n != (old+page-1)/page {
		t.Fatalf("%d prunes proposed for %d records, want one per page of %d", n, old, page)
	}
	if n := idempotencyPruned.Get() - pruned; n != old {
		t.Fatalf("gateway_idempotency_pruned_total went up by %d, want %d", n, old)
	}
	for i := range old + young {
		rec, err := f.store.Idempotency("m1", fmt.Sprintf("key-idem%d", i))
		if err != nil || (rec == nil) != (i < old) {
			t.Fatalf("record %d after the pass: %+v %v (written before the cut: %t)", i, rec, err, i < old)
		}
	}
}
