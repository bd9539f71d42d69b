package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paygate/gateway/transport/signature"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

// hangingEndpoint answers every endpoint at once except hang.test, which
// holds each request until released, past the attempt's deadline: the
// attempts, and the notifications queued behind them, outlast their leases.
// It records the order ids of the requests in the order they began.
type hangingEndpoint struct {
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	started map[string][]string // endpoint host → order ids
}

func newHangingEndpoint(t *testing.T) *hangingEndpoint {
	r := &hangingEndpoint{release: make(chan struct{}), started: map[string][]string{}}
	t.Cleanup(r.answer)
	return r
}

// answer ends the hang: hang.test answers from now on.
func (r *hangingEndpoint) answer() { r.once.Do(func() { close(r.release) }) }

func (r *hangingEndpoint) attempt(_ context.Context, d Delivery) Attempt {
	host := strings.Split(strings.TrimPrefix(d.URL, "http://"), "/")[0]
	var body struct {
		OrderID string `json:"order_id"`
	}
	if err := json.Unmarshal(d.Body, &body); err != nil {
		return Attempt{Error: err.Error()}
	}
	r.mu.Lock()
	r.started[host] = append(r.started[host], body.OrderID)
	r.mu.Unlock()
	if host == "hang.test" {
		<-r.release
	}
	return Attempt{Delivered: true, HTTPCode: 200}
}

func (r *hangingEndpoint) startedAt(host string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.started[host]...)
}

// waitUntil polls cond until it holds, failing with what() after 5 s.
func waitUntil(t *testing.T, cond func() bool, what func() string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
	}
}

// waitFullAndSending waits until endpoint hang.test holds room
// notifications and its first request has reached the receiver.
func waitFullAndSending(t *testing.T, w *Dispatcher, rx *hangingEndpoint, room int) {
	t.Helper()
	waitUntil(t, func() bool { return queuedAt(w, "http://hang.test") == room && len(rx.startedAt("hang.test")) == 1 },
		func() string {
			return fmt.Sprintf("the endpoint holds %d with %d requests begun, want %d and 1", queuedAt(w, "http://hang.test"), len(rx.startedAt("hang.test")), room)
		})
}

// waitNoneCounted waits until the dispatcher counts nothing at hang.test:
// the last hand-out ends when its delivery actor has ended, after its
// result was committed.
func waitNoneCounted(t *testing.T, w *Dispatcher) {
	t.Helper()
	waitUntil(t, func() bool { return queuedAt(w, "http://hang.test") == 0 },
		func() string {
			return fmt.Sprintf("%d still counted with nothing left to send", queuedAt(w, "http://hang.test"))
		})
}

// createOrders creates n orders named prefix000, prefix001, … with
// callbackURL, and waits for their notifications to be committed.
func createOrders(t *testing.T, f *fixture, prefix string, n int, callbackURL string) {
	t.Helper()
	for i := range n {
		createWithCallbackURL(t, f, fmt.Sprintf("%s%03d", prefix, i), callbackURL)
	}
	for i := range n {
		waitNotifications(t, f, fmt.Sprintf("%s%03d", prefix, i))
	}
}

// queuedAt is what the dispatcher counts as held by endpoint ep.
func queuedAt(w *Dispatcher, ep string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queued[ep]
}

// watchPeak samples f until the test ends and returns the highest value.
func watchPeak(t *testing.T, f func() int) func() int {
	var mu sync.Mutex
	peak := 0
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			v := f()
			mu.Lock()
			peak = max(peak, v)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// waitPeakSampled waits until watchPeak's sampler, which runs on its own
// goroutine, has seen the value the test saw: while the endpoint hangs the
// count holds still, but a sampler starved on a busy machine may not have
// looked yet, and the peak checked later must not depend on its timing.
func waitPeakSampled(t *testing.T, peak func() int, v int) {
	t.Helper()
	waitUntil(t, func() bool { return peak() >= v },
		func() string { return fmt.Sprintf("the sampler saw %d at most, the test %d", peak(), v) })
}

// expectDueOrder checks that the requests began, each once, for the orders
// named prefix000, prefix001, … (n of them) in the due order of their
// notifications: when each was created, as the authorisations' outcomes
// were committed.
func expectDueOrder(t *testing.T, f *fixture, got []string, prefix string, n int) {
	t.Helper()
	type due struct {
		at      int64
		id, ord string
	}
	var want []due
	for i := range n {
		ord := fmt.Sprintf("%s%03d", prefix, i)
		list := waitNotifications(t, f, ord)
		want = append(want, due{list[0].CreatedAt, list[0].ID, ord})
	}
	slices.SortFunc(want, func(a, b due) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.id, b.id))
	})
	if len(got) != n {
		t.Fatalf("%d requests to the endpoint, want %d: %v", len(got), n, got)
	}
	for i, id := range got {
		if id != want[i].ord {
			t.Fatalf("request %d was for %s, want %s (due order): %v", i, id, want[i].ord, got)
		}
	}
}

func waitDelivered(t *testing.T, f *fixture, orderID string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if list, _ := f.store.Notifications("m1", orderID, 10); len(list) == 1 && list[0].State == outbox.Delivered {
			return
		}
	}
	t.Fatalf("%s not delivered within %v", orderID, within)
}

// A receiver that hangs holds up its own notifications only. Its backlog
// is longer than the scans hand out in an attempt's lease (the old
// dispatcher then handed the oldest out again and again, and never reached
// what was due behind them): another endpoint's notifications due after it
// are delivered at once, the hanging one holds no more than EndpointQueue,
// and once it answers again its backlog drains in due order, each
// notification sent once.
func TestWebhooksHangingEndpointHoldsUpOnlyItsOwn(t *testing.T) {
	f := newFixture(t)
	const backlog, room = 120, 8
	createOrders(t, f, "hang", backlog, "http://hang.test/hook")
	createOrders(t, f, "ok", 5, "http://ok.test/hook")
	rx := newHangingEndpoint(t)
	// Scans every 100 ms hand out a page of 5: 50 in an attempt's lease.
	w, _ := runWebhooks(t, f, DispatcherConfig{Attempt: rx.attempt, RetryDelays: []time.Duration{time.Hour},
		PerEndpoint: 1, EndpointQueue: room, ScanPage: 5, Poll: 100 * time.Millisecond,
		AttemptTimeout: time.Second, LeaseSlack: 10 * time.Millisecond})
	peak := watchPeak(t, func() int { return queuedAt(w, "http://hang.test") })
	for i := range 5 {
		waitDelivered(t, f, fmt.Sprintf("ok%03d", i), 5*time.Second)
	}
	waitScans(t, w, 2)          // scans go on passing over the backlog
	waitPeakSampled(t, peak, 1) // the first request hangs: at least 1 is held
	if p := peak(); p > room {
		t.Fatalf("the hanging endpoint held %d notifications at most, want 1..%d", p, room)
	}
	if got := rx.startedAt("hang.test"); len(got) != 1 {
		t.Fatalf("requests to the hanging endpoint: %v, want the first one only", got)
	}
	rx.answer()
	for i := range backlog {
		waitDelivered(t, f, fmt.Sprintf("hang%03d", i), 10*time.Second)
	}
	expectDueOrder(t, f, rx.startedAt("hang.test"), "hang", backlog)
	expectDueOrder(t, f, rx.startedAt("ok.test"), "ok", 5)
	if p := peak(); p > room {
		t.Fatalf("the endpoint held %d notifications at most, want at most %d", p, room)
	}
}

// Offered notifications for an endpoint without room wait in the outbox,
// and the endpoint's later ones wait behind them: with an hour-long poll,
// the scans that hand them out follow from the room freed, and a backlog of
// 30 offered to a receiver that hangs, then answers, is sent in order, each
// once, never more than EndpointQueue held at a time.
func TestWebhooksOfferedWaitBehindAFullEndpoint(t *testing.T) {
	f := newFixture(t)
	rx := newHangingEndpoint(t)
	const orders, room = 30, 4
	w, _ := runWebhooks(t, f, DispatcherConfig{Attempt: rx.attempt, RetryDelays: []time.Duration{time.Hour},
		PerEndpoint: 1, EndpointQueue: room, Poll: time.Hour, AttemptTimeout: 10 * time.Second})
	peak := watchPeak(t, func() int { return queuedAt(w, "http://hang.test") })
	waitScans(t, w, 1) // past the start-up scan
	for i := range orders {
		id := fmt.Sprintf("fresh%03d", i)
		createWithCallbackURL(t, f, id, "http://hang.test/hook")
		w.Offer(waitNotifications(t, f, id))
		time.Sleep(time.Millisecond)
	}
	// Every offer taken (handed out or left in the outbox), the endpoint full.
	waitUntil(t, func() bool { return offersTaken(w) && queuedAt(w, "http://hang.test") == room },
		func() string {
			return fmt.Sprintf("the endpoint holds %d, want %d", queuedAt(w, "http://hang.test"), room)
		})
	waitPeakSampled(t, peak, room)
	if p := peak(); p != room {
		t.Fatalf("the hanging endpoint held %d notifications at most, want %d", p, room)
	}
	rx.answer()
	for i := range orders {
		waitDelivered(t, f, fmt.Sprintf("fresh%03d", i), 10*time.Second)
	}
	expectDueOrder(t, f, rx.startedAt("hang.test"), "fresh", orders)
}

// lead runs w's delivery (one leadership) until the returned stop.
func lead(t *testing.T, w *Dispatcher) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	waitRunning(t, w)
	return stop
}

// A leadership that ends with notifications queued at a full endpoint
// leaves them to the next: it hands them out once an attempt's lease has
// passed, and they are all delivered. Only the one whose request was under
// way at the change can be sent twice (at least once), and the old
// leadership's endpoint actors, stopping late, do not upset the new one's
// count.
func TestWebhooksNextLeadershipTakesOverAFullEndpoint(t *testing.T) {
	f := newFixture(t)
	const orders, room = 12, 4
	createOrders(t, f, "lead", orders, "http://hang.test/hook")
	rx := newHangingEndpoint(t)
	cfg := DispatcherConfig{Store: f.store, Proposer: f.proposer, Logger: f.logger, Now: time.Now,
		Keys:    func(string) (string, *signature.Key, bool) { return "whpk", testWebhookKey, true },
		Attempt: rx.attempt, RetryDelays: []time.Duration{time.Hour},
		PerEndpoint: 1, EndpointQueue: room, Poll: 20 * time.Millisecond,
		AttemptTimeout: 100 * time.Millisecond, LeaseSlack: 10 * time.Millisecond}
	w := NewDispatcher(f.system, cfg)
	stop := lead(t, w)
	waitFullAndSending(t, w, rx, room)
	first := rx.startedAt("hang.test")
	stop()
	if n := queuedAt(w, "http://hang.test"); n != 0 {
		t.Fatalf("%d still counted after the leadership ended", n)
	}
	lead(t, w)
	peak := watchPeak(t, func() int { return queuedAt(w, "http://hang.test") })
	// Past an attempt's lease the new leadership takes them over.
	waitUntil(t, func() bool { return queuedAt(w, "http://hang.test") == room },
		func() string {
			return fmt.Sprintf("the new leadership holds %d, want %d", queuedAt(w, "http://hang.test"), room)
		})
	waitPeakSampled(t, peak, room)
	rx.answer()
	for i := range orders {
		waitDelivered(t, f, fmt.Sprintf("lead%03d", i), 10*time.Second)
	}
	if p := peak(); p != room {
		t.Fatalf("the endpoint held %d at most under the new leadership, want %d", p, room)
	}
	counts := map[string]int{}
	for _, id := range rx.startedAt("hang.test") {
		counts[id]++
	}
	for id, n := range counts {
		if n > 1 && (len(first) != 1 || id != first[0] || n > 2) {
			t.Fatalf("%s sent %d times; the request under way at the change was %v", id, n, first)
		}
	}
	if len(counts) != orders {
		t.Fatalf("%d orders' notifications sent, want %d", len(counts), orders)
	}
	waitNoneCounted(t, w)
}

// An endpoint actor that crashes keeps its queue: the notifications it held
// are handed back to it through the supervisor, the attempt under way ends
// and releases its own, and all are delivered once each, well before a
// lost hand-out would be (heldLease, here 50 s), with the count back at 0.
func TestWebhooksEndpointActorCrashKeepsItsQueue(t *testing.T) {
	f := newFixture(t)
	const orders, room = 6, 4
	createOrders(t, f, "crash", orders, "http://hang.test/hook")
	rx := newHangingEndpoint(t)
	ev := newTreeEvents()
	w, _ := runWebhooks(t, f, DispatcherConfig{Attempt: rx.attempt, RetryDelays: []time.Duration{time.Hour},
		PerEndpoint: 1, EndpointQueue: room, Poll: 20 * time.Millisecond, AttemptTimeout: 10 * time.Second,
		trace: ev.trace})
	waitFullAndSending(t, w, rx, room)
	// A message the endpoint actor cannot handle: it panics, and its
	// supervisor restarts it once the attempt under way has ended.
	w.system.Root.Send(w.supervisor, toEndpoint{n: nil, endpoint: "http://hang.test"})
	ev.wait(t, "restarting", "http://hang.test")
	rx.answer()
	for i := range orders {
		waitDelivered(t, f, fmt.Sprintf("crash%03d", i), 5*time.Second)
	}
	counts := map[string]int{}
	for _, id := range rx.startedAt("hang.test") {
		counts[id]++
	}
	for id, n := range counts {
		if n != 1 {
			t.Fatalf("%s sent %d times: %v", id, n, rx.startedAt("hang.test"))
		}
	}
	waitNoneCounted(t, w)
}

// offersTaken reports whether the dispatcher has taken every offered
// notification (handed it out, or left it in the outbox for the scans).
func offersTaken(w *Dispatcher) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.fresh) == 0
}
