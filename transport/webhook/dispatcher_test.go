package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/signature"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

var testWebhookKey = signature.NewKey("whpk", "whsk")

type attemptLog struct {
	mu    sync.Mutex
	count map[string]int // body → attempts
	fail  int            // fail the first N attempts of each body
}

func (l *attemptLog) attempt(_ context.Context, d Delivery) Attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count[string(d.Body)]++
	if l.count[string(d.Body)] <= l.fail {
		return Attempt{HTTPCode: 500, Error: "http status 500"}
	}
	return Attempt{Delivered: true, HTTPCode: 200}
}

func startWebhooks(t *testing.T, f *fixture, attempt func(context.Context, Delivery) Attempt, delays []time.Duration) *Dispatcher {
	return startWebhooksPolling(t, f, attempt, delays, time.Millisecond)
}

func startWebhooksPolling(t *testing.T, f *fixture, attempt func(context.Context, Delivery) Attempt, delays []time.Duration, poll time.Duration) *Dispatcher {
	t.Helper()
	w := NewDispatcher(f.system, DispatcherConfig{
		Store: f.store, Proposer: f.proposer, Logger: f.logger, Now: time.Now, Attempt: attempt,
		Keys:        func(string) (string, *signature.Key, bool) { return "whpk", testWebhookKey, true },
		RetryDelays: delays, PerEndpoint: 4, Poll: poll,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	// Stop the dispatcher before the fixture closes the store under it.
	t.Cleanup(func() { cancel(); <-done })
	go func() { defer close(done); w.Run(ctx) }()
	return w
}

func createWithCallback(t *testing.T, f *fixture, id string) {
	t.Helper()
	createWithCallbackURL(t, f, id, "http://receiver.test/hook")
}

// Each notification is attempted exactly once when the receiver accepts it,
// however the dispatcher's scans interleave with committed results.
func TestWebhooksDeliverEachOnce(t *testing.T) {
	f := newFixture(t)
	log := &attemptLog{count: map[string]int{}}
	w := startWebhooks(t, f, log.attempt, []time.Duration{time.Second})
	const orders = 300
	for i := range orders {
		createWithCallback(t, f, fmt.Sprintf("o%d", i))
	}
	expectEachAttemptedOnce(t, f, w, log, orders)
}

// expectEachAttemptedOnce waits for the outbox to empty with n
// notifications attempted and every hand-out ended, then for two whole
// scans of the outbox, which must hand nothing out again (a copy would be
// counted as held before it is sent), and checks that each was attempted
// exactly once.
func expectEachAttemptedOnce(t *testing.T, f *fixture, w *Dispatcher, log *attemptLog, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if pending, _ := f.store.PendingNotificationCount(); pending == 0 && len(log.snapshot()) == n {
			break
		}
	}
	waitUntil(t, func() bool { return heldCount(w) == 0 },
		func() string { return fmt.Sprintf("%d notifications still handed out", heldCount(w)) })
	waitScans(t, w, 2)
	if h := heldCount(w); h != 0 {
		t.Fatalf("scans handed out %d notifications again after all were attempted", h)
	}
	counts := log.snapshot()
	if len(counts) != n {
		t.Fatalf("%d notifications attempted, want %d", len(counts), n)
	}
	for body, attempts := range counts {
		if attempts != 1 {
			t.Fatalf("a notification was attempted %d times: %.80s", attempts, body)
		}
	}
}

// Failed attempts follow the offsets from the first attempt, then the
// delivery is marked failed.
func TestWebhooksRetryThenFail(t *testing.T) {
	f := newFixture(t)
	log := &attemptLog{count: map[string]int{}, fail: 100}
	startWebhooks(t, f, log.attempt, []time.Duration{20 * time.Millisecond, 40 * time.Millisecond})
	createWithCallback(t, f, "fails")
	expectFailedOnOffsets(t, f, "fails", []time.Duration{20 * time.Millisecond, 40 * time.Millisecond})
}

// expectFailedOnOffsets waits for the order's one notification to fail for
// good and checks its attempts kept the retry offsets from the first one.
func expectFailedOnOffsets(t *testing.T, f *fixture, orderID string, delays []time.Duration) {
	t.Helper()
	var list []*outbox.Notification
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		list, _ = f.store.Notifications("m1", orderID, 10)
		if len(list) == 1 && list[0].State == outbox.Failed {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if len(list) != 1 || list[0].State != outbox.Failed || len(list[0].Attempts) != len(delays)+1 {
		t.Fatalf("want failed after %d attempts: %+v", len(delays)+1, list)
	}
	a := list[0].Attempts
	for i, want := range delays {
		if got := time.Duration(a[i+1].At - a[0].At); got < want {
			t.Fatalf("attempt %d at +%s, before its offset %s", i+2, got, want)
		}
	}
}

// waitRunning waits until the dispatcher takes offers.
func waitRunning(t *testing.T, w *Dispatcher) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		w.mu.Lock()
		running := w.running
		w.mu.Unlock()
		if running {
			return
		}
	}
	t.Fatal("dispatcher did not start")
}

// waitNotifications waits for the order's notifications to be committed
// (the authorisation's outcome notifies, after the create returned).
func waitNotifications(t *testing.T, f *fixture, orderID string) []*outbox.Notification {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if list, _ := f.store.Notifications("m1", orderID, 10); len(list) > 0 {
			return list
		}
	}
	t.Fatalf("no notification for %s", orderID)
	return nil
}

func (l *attemptLog) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.count))
	for k, v := range l.count {
		out[k] = v
	}
	return out
}

// A delivery actor that crashes mid-attempt is restarted by its supervisor
// and delivers the same notification: nothing is lost.
func TestWebhookDeliveryActorCrashIsRestarted(t *testing.T) {
	f := newFixture(t)
	log := &attemptLog{count: map[string]int{}}
	var crashed sync.Once
	crashing := func(ctx context.Context, d Delivery) Attempt {
		crashed.Do(func() { panic("receiver client blew up") })
		return log.attempt(ctx, d)
	}
	startWebhooks(t, f, crashing, []time.Duration{time.Hour})
	createWithCallback(t, f, "crash")
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if list, _ := f.store.Notifications("m1", "crash", 10); len(list) == 1 && list[0].State == outbox.Delivered {
			if counts := log.snapshot(); len(counts) != 1 {
				t.Fatalf("attempts after the crash: %v", counts)
			}
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("the notification was lost with the crashed delivery actor")
}

// Offered notifications (the FSM's commit hook hands them over) are
// delivered without any outbox scan: with an hour-long poll, 40 offered
// notifications are all delivered at once, and at most PerEndpoint requests
// to the one endpoint run at the same time.
func TestWebhooksDeliverOfferedWithoutScan(t *testing.T) {
	f := newFixture(t)
	var mu sync.Mutex
	active, peak := 0, 0
	delivered := map[string]bool{}
	attempt := func(_ context.Context, d Delivery) Attempt {
		mu.Lock()
		active++
		peak = max(peak, active)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		active--
		delivered[string(d.Body)] = true
		mu.Unlock()
		return Attempt{Delivered: true, HTTPCode: 200}
	}
	w := startWebhooksPolling(t, f, attempt, []time.Duration{time.Hour}, time.Hour)
	waitRunning(t, w)
	waitScans(t, w, 1) // past the start-up scan: only the offer hands them out
	const orders = 40
	var offered []*outbox.Notification
	for i := range orders {
		id := fmt.Sprintf("offered%d", i)
		createWithCallback(t, f, id)
		offered = append(offered, waitNotifications(t, f, id)...)
	}
	w.Offer(offered)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if n, _ := f.store.PendingNotificationCount(); n == 0 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if n, _ := f.store.PendingNotificationCount(); n != 0 || len(delivered) != len(offered) {
		t.Fatalf("%d of %d offered notifications delivered, %d still pending", len(delivered), len(offered), n)
	}
	if peak > 4 {
		t.Fatalf("%d requests to one endpoint at once, the bound is 4", peak)
	}
}

// Retries are timed for their due time, not found by polling: with an
// hour-long poll a failing notification is still attempted on its offsets
// and then marked failed.
func TestWebhooksRetriesTimedWithoutPolling(t *testing.T) {
	f := newFixture(t)
	log := &attemptLog{count: map[string]int{}, fail: 100}
	delays := []time.Duration{30 * time.Millisecond, 60 * time.Millisecond}
	w := startWebhooksPolling(t, f, log.attempt, delays, time.Hour)
	createWithCallback(t, f, "timed")
	list := waitNotifications(t, f, "timed")
	waitRunning(t, w)
	w.Offer(list)
	expectFailedOnOffsets(t, f, "timed", delays)
}

// An order's notifications go out one at a time and in order: its next one
// waits for the request of the one before to end, while other orders'
// notifications go on meanwhile.
func TestWebhooksSendAnOrdersNotificationsInOrder(t *testing.T) {
	f := newFixture(t)
	release := make(chan struct{})
	var mu sync.Mutex
	var started []string // order_id/status, in the order requests began
	attempt := func(_ context.Context, d Delivery) Attempt {
		var body struct {
			OrderID string `json:"order_id"`
			Status  string `json:"status"`
		}
		if err := json.Unmarshal(d.Body, &body); err != nil {
			t.Errorf("notification body: %v", err)
		}
		mu.Lock()
		started = append(started, body.OrderID+"/"+body.Status)
		mu.Unlock()
		if body.OrderID == "o1" && body.Status == "authorized" {
			<-release // the merchant's server is slow on this one
		}
		return Attempt{Delivered: true, HTTPCode: 200}
	}
	ev := newTreeEvents()
	runWebhooks(t, f, DispatcherConfig{Attempt: attempt, RetryDelays: []time.Duration{time.Second},
		PerEndpoint: 4, Poll: time.Millisecond, trace: ev.trace})
	begun := func(want string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range started {
			if s == want {
				return true
			}
		}
		return false
	}
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !begun(want) {
			if time.Now().After(deadline) {
				t.Fatalf("%s never sent; sent: %v", want, started)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	createWithCallback(t, f, "o1")
	waitFor("o1/authorized")
	f.settle(t, "o1", 100)
	// Another order is not held up by o1's slow request.
	createWithCallback(t, f, "o2")
	waitFor("o2/authorized")
	// Once the endpoint actor has taken o1/settled in (and started what it
	// could), it has not started it.
	var settled string
	waitUntil(t, func() bool {
		list, _ := f.store.Notifications("m1", "o1", 10)
		for _, n := range list {
			if n.OrderStatus == order.StatusSettled {
				settled = n.ID
			}
		}
		return settled != ""
	}, func() string { return "o1/settled not committed" })
	ev.wait(t, "queued", settled)
	if ev.has("started", settled) || begun("o1/settled") {
		t.Fatalf("o1/settled sent while o1/authorized was still under way: %v", started)
	}
	close(release)
	waitFor("o1/settled")
}

// runWebhooks starts delivery with cfg (store, proposer, logger, clock and
// keys filled in) and returns it with a stop that ends its leadership and
// waits; stop may be called more than once, and is called at cleanup.
func runWebhooks(t *testing.T, f *fixture, cfg DispatcherConfig) (w *Dispatcher, stop func()) {
	t.Helper()
	cfg.Store, cfg.Proposer, cfg.Logger, cfg.Now = f.store, f.proposer, f.logger, time.Now
	cfg.Keys = func(string) (string, *signature.Key, bool) { return "whpk", testWebhookKey, true }
	w = NewDispatcher(f.system, cfg)
	return w, lead(t, w)
}

// Endpoint actors retire once idle, and only then: not while an attempt is
// under way, and a notification after retirement gets a new one. None is
// left when the node stops leading.
func TestWebhookEndpointActorsRetireWhenIdle(t *testing.T) {
	f := newFixture(t)
	release := make(chan struct{})
	var mu sync.Mutex
	attempts := map[string]int{}                       // url → attempts
	active, peak := map[string]int{}, map[string]int{} // url → attempts under way
	attempt := func(_ context.Context, d Delivery) Attempt {
		mu.Lock()
		active[d.URL]++
		peak[d.URL] = max(peak[d.URL], active[d.URL])
		mu.Unlock()
		if d.URL == "http://slow.test/hook" {
			<-release
		}
		mu.Lock()
		active[d.URL]--
		attempts[d.URL]++
		mu.Unlock()
		return Attempt{Delivered: true, HTTPCode: 200}
	}
	attemptsTo := func(host string) int {
		mu.Lock()
		defer mu.Unlock()
		return attempts["http://"+host+".test/hook"]
	}
	cfg := DispatcherConfig{Attempt: attempt, RetryDelays: []time.Duration{time.Hour}, PerEndpoint: 1, Poll: time.Hour}
	idle := cfg
	idle.EndpointIdle = 10 * time.Millisecond
	ev := newTreeEvents()
	idle.trace = ev.trace
	w, stop := runWebhooks(t, f, idle)
	waitFor := func(w *Dispatcher, what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if ok() {
				return
			}
		}
		t.Fatalf("timed out waiting for %s (endpoint actors: %d)", what, w.endpoints.Load())
	}
	offer := func(w *Dispatcher, id, host string) []*outbox.Notification {
		createWithCallbackURL(t, f, id, "http://"+host+".test/hook")
		list := waitNotifications(t, f, id)
		w.Offer(list)
		return list
	}

	for _, host := range []string{"a", "b", "c", "slow"} {
		offer(w, "o-"+host, host)
	}
	waitFor(w, "three deliveries", func() bool { return attemptsTo("a")+attemptsTo("b")+attemptsTo("c") == 3 })
	waitFor(w, "the idle endpoints to retire", func() bool { return w.endpoints.Load() == 1 })
	// Many sweeps later the endpoint with an attempt under way is still
	// there, and still holds its one slot: the next notification to it
	// waits (a retired endpoint's successor would send it at once).
	swept := ev.count("swept", "")
	waitUntil(t, func() bool { return ev.count("swept", "") >= swept+10 },
		func() string { return "the supervisor did not sweep for idle endpoints" })
	if n := w.endpoints.Load(); n != 1 {
		t.Fatalf("endpoint actors with an attempt under way: %d, want 1", n)
	}
	for _, n := range offer(w, "o-slow-2", "slow") {
		ev.wait(t, "queued", n.ID) // behind the slot the first one holds
	}
	close(release)
	waitFor(w, "the slow deliveries", func() bool { return attemptsTo("slow") == 2 })
	mu.Lock()
	slowPeak := peak["http://slow.test/hook"]
	mu.Unlock()
	if slowPeak != 1 {
		t.Fatalf("%d attempts at once to an endpoint bounded to 1", slowPeak)
	}
	waitFor(w, "every endpoint to retire", func() bool { return w.endpoints.Load() == 0 })

	offer(w, "again", "a")
	waitFor(w, "a delivery to a retired endpoint", func() bool { return attemptsTo("a") == 2 })
	waitFor(w, "it to retire again", func() bool { return w.endpoints.Load() == 0 })
	if n, _ := f.store.PendingNotificationCount(); n != 0 {
		t.Fatalf("%d notifications still pending", n)
	}
	for host, want := range map[string]int{"a": 2, "b": 1, "c": 1, "slow": 2} {
		if got := attemptsTo(host); got != want {
			t.Fatalf("%s attempted %d times, want %d", host, got, want)
		}
	}
	stop()

	// Leadership ends with an endpoint actor alive (the default idle time
	// is a minute): none is left counted.
	w, stop = runWebhooks(t, f, cfg)
	offer(w, "last", "d")
	waitFor(w, "a delivery", func() bool { return attemptsTo("d") == 1 })
	if n := w.endpoints.Load(); n != 1 {
		t.Fatalf("endpoint actors while leading: %d, want 1", n)
	}
	stop()
	waitFor(w, "no endpoint actor after leadership", func() bool { return w.endpoints.Load() == 0 })
}

// An endpoint slower than its notifications keeps a queue longer than a
// lease: the dispatcher hands the queued ones out again when their leases
// end, and the endpoint must not queue (and send) a second copy of what it
// already holds; nor may a copy reach it once an attempt has ended (the
// lease starts again with the attempt, which it outlasts).
func TestWebhooksSlowEndpointGetsEachNotificationOnce(t *testing.T) {
	f := newFixture(t)
	log := &attemptLog{count: map[string]int{}}
	slow := func(ctx context.Context, d Delivery) Attempt {
		time.Sleep(20 * time.Millisecond)
		return log.attempt(ctx, d)
	}
	// The fixture's FSM offers nothing: the scans every 2 ms hand the
	// notifications out, and hand them out again once their leases end.
	w, _ := runWebhooks(t, f, DispatcherConfig{Attempt: slow, RetryDelays: []time.Duration{time.Hour},
		PerEndpoint: 1, Poll: 2 * time.Millisecond, AttemptTimeout: 100 * time.Millisecond, LeaseSlack: time.Millisecond})
	const orders = 20 // ~400 ms of sending behind one slot, four leases long
	for i := range orders {
		createWithCallback(t, f, fmt.Sprintf("slow%d", i))
	}
	for i := range orders {
		waitNotifications(t, f, fmt.Sprintf("slow%d", i))
	}
	expectEachAttemptedOnce(t, f, w, log, orders)
}

// A backlog longer than a scan's page (a receiver back after an outage, a
// new leader taking over) drains at the pace of delivery, not a page per
// poll: with an hour-long poll and pages of 20, 300 notifications already
// due are all delivered, each once, and never more than two pages are
// handed out at a time.
func TestWebhooksWorkThroughABacklog(t *testing.T) {
	f := newFixture(t)
	const orders, page = 300, 20
	for i := range orders {
		createWithCallback(t, f, fmt.Sprintf("backlog%d", i))
	}
	for i := range orders {
		waitNotifications(t, f, fmt.Sprintf("backlog%d", i))
	}
	log := &attemptLog{count: map[string]int{}}
	var running atomic.Pointer[Dispatcher]
	var peak atomic.Int64
	attempt := func(ctx context.Context, d Delivery) Attempt {
		if w := running.Load(); w != nil {
			w.mu.Lock()
			held := int64(len(w.inflight))
			w.mu.Unlock()
			for p := peak.Load(); held > p && !peak.CompareAndSwap(p, held); p = peak.Load() {
			}
		}
		return log.attempt(ctx, d)
	}
	w, _ := runWebhooks(t, f, DispatcherConfig{Attempt: attempt, RetryDelays: []time.Duration{time.Hour},
		PerEndpoint: 4, Poll: time.Hour, ScanPage: page})
	running.Store(w)
	expectEachAttemptedOnce(t, f, w, log, orders)
	if p := peak.Load(); p > 2*page {
		t.Fatalf("%d notifications handed out at once, want at most two pages (%d)", p, 2*page)
	}
}

// A schedule whose gaps are shorter than its first offset (legal: the
// offsets only have to increase) is kept as written when every attempt is
// on time; after a late attempt the next keeps the schedule's own gap.
func TestNextAttemptAtKeepsShortGaps(t *testing.T) {
	delays := []time.Duration{10 * time.Minute, 12 * time.Minute, 14 * time.Minute}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := &outbox.Notification{FirstAttemptAt: t0.UnixNano()}
	var due []time.Duration
	for at := t0; ; {
		next := NextAttemptAt(n, at, delays)
		n.Attempts = append(n.Attempts, command.AttemptRecord{At: at.UnixNano()})
		if next == 0 {
			break
		}
		at = time.Unix(0, next).UTC() // every attempt exactly on time
		due = append(due, at.Sub(t0))
	}
	if fmt.Sprint(due) != fmt.Sprint(delays) {
		t.Errorf("on-time attempts due at %v, want the offsets %v", due, delays)
	}

	// The 10 min attempt made at 30 min: the 12 min offset has passed, so
	// the next is the schedule's 2 min gap after it, not at once.
	n = &outbox.Notification{FirstAttemptAt: t0.UnixNano(), Attempts: []command.AttemptRecord{{At: t0.UnixNano()}}}
	if got := time.Unix(0, NextAttemptAt(n, t0.Add(30*time.Minute), delays)).Sub(t0); got != 32*time.Minute {
		t.Errorf("after a late attempt at 30 min: next at %s, want 32m0s", got)
	}
}

// Attempts made on time follow the offsets from the first one; after an
// outage past several offsets, the next attempts are at least the first
// offset apart instead of all due at once, and none is left out.
func TestNextAttemptAtAfterAnOutage(t *testing.T) {
	delays := []time.Duration{15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour,
		8 * time.Hour, 16 * time.Hour, 24 * time.Hour}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := &outbox.Notification{FirstAttemptAt: t0.UnixNano()}
	attempt := func(at time.Time) time.Time {
		next := NextAttemptAt(n, at, delays)
		n.Attempts = append(n.Attempts, command.AttemptRecord{At: at.UnixNano()})
		if next == 0 {
			return time.Time{}
		}
		return time.Unix(0, next).UTC()
	}
	if got := attempt(t0); !got.Equal(t0.Add(15 * time.Minute)) {
		t.Fatalf("after the first attempt: %s", got)
	}
	if got := attempt(t0.Add(15 * time.Minute)); !got.Equal(t0.Add(30 * time.Minute)) {
		t.Fatalf("on time: %s, want the 30 min offset", got)
	}
	// Down from +30 min to +3 h 15 min: the 30 min, 1 h and 2 h offsets
	// passed. The late attempt leaves the next 15 min after it, not at once.
	at := t0.Add(3*time.Hour + 15*time.Minute)
	var times []time.Duration
	for next := attempt(at); !next.IsZero(); next = attempt(next) {
		times = append(times, next.Sub(t0))
	}
	want := []time.Duration{3*time.Hour + 30*time.Minute, 3*time.Hour + 45*time.Minute, 4 * time.Hour,
		8 * time.Hour, 16 * time.Hour, 24 * time.Hour}
	if fmt.Sprint(times) != fmt.Sprint(want) {
		t.Errorf("attempts due at %v, want %v", times, want)
	}
	if len(n.Attempts) != len(delays)+1 {
		t.Errorf("%d attempts, want %d", len(n.Attempts), len(delays)+1)
	}
}

// heldCount is how many notifications the dispatcher counts as handed out
// to the actor tree (queued at an endpoint actor or under way).
func heldCount(w *Dispatcher) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, q := range w.queued {
		n += q
	}
	return n
}

// waitScans waits until at least n whole scans of the outbox have run from
// now, asking for them (Wake) so that a long poll does not hold them back.
func waitScans(t *testing.T, w *Dispatcher, n int) {
	t.Helper()
	// A scan under way now began before: it does not count.
	want := w.scans.Load() + uint64(n) + 1
	waitUntil(t, func() bool {
		w.Wake()
		return w.scans.Load() >= want
	}, func() string { return fmt.Sprintf("%d scans of the outbox, want %d", w.scans.Load(), want) })
}

// treeEvents records the actor tree's steps (DispatcherConfig.trace).
type treeEvents struct {
	mu   sync.Mutex
	seen map[string]int // event + " " + id → how many times
}

func newTreeEvents() *treeEvents { return &treeEvents{seen: map[string]int{}} }

func (e *treeEvents) trace(event, id string) {
	e.mu.Lock()
	e.seen[event+" "+id]++
	e.mu.Unlock()
}

func (e *treeEvents) count(event, id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen[event+" "+id]
}

func (e *treeEvents) has(event, id string) bool { return e.count(event, id) > 0 }

// wait waits for event about id.
func (e *treeEvents) wait(t *testing.T, event, id string) {
	t.Helper()
	waitUntil(t, func() bool { return e.has(event, id) }, func() string { return fmt.Sprintf("no %q event for %s", event, id) })
}
