package webhook

// The webhook dispatcher: the leader's view of the outbox (which
// notifications are due, which are handed out and until when), the scans and
// offers that feed the endpoint actors (webhook_endpoint.go), and the
// metrics of delivery. DESIGN.md, "Delivery", says why it is built
// this way.

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/signature"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

// Outbox is what webhook delivery reads from the store (persistence.Store).
type Outbox interface {
	DueNotifications(now int64, limit int, skip func(id, endpoint string) bool) ([]*outbox.Notification, error)
	NextNotificationDueAfter(t int64) (int64, error)
	PendingNotificationCount() (int, error)
}

// Proposer replicates an attempt's result (a command.Cmd carrying a
// NotifyUpdate) and returns once it is applied: the Raft node in production,
// an in-memory log in tests.
type Proposer interface {
	Propose(ctx context.Context, cmd *command.Cmd) (persistence.Result, error)
}

// DispatcherConfig configures notification delivery.
type DispatcherConfig struct {
	Store    Outbox
	Proposer Proposer
	Logger   *slog.Logger
	Now      func() time.Time
	// Attempt sends one notification (Client.Deliver in production).
	Attempt func(ctx context.Context, d Delivery) Attempt
	// Keys returns a merchant's webhook public key and its key pair
	// prepared for signing.
	Keys func(merchantID string) (publicKey string, key *signature.Key, ok bool)
	// RetryDelays are the retry offsets from the first attempt.
	RetryDelays []time.Duration
	// PerEndpoint bounds concurrent deliveries to one merchant endpoint.
	PerEndpoint int
	// EndpointQueue bounds the notifications handed to one endpoint at a
	// time, queued or under way (default 1,024). Past it the rest wait in
	// the outbox, where scans pass over them without loading them: a
	// receiver that hangs holds that many in memory, not its whole backlog,
	// and it does not keep the scans from everyone else's notifications.
	EndpointQueue int
	// AttemptTimeout bounds one attempt (connect + response).
	AttemptTimeout time.Duration
	// LeaseSlack is added to AttemptTimeout to form an attempt's lease
	// (default 10 s).
	LeaseSlack time.Duration
	// Poll bounds the time between two scans of the outbox: the safety net
	// for ended leases and anything missed. New notifications are offered
	// (Offer) and retries are timed for their due time, neither waits for it.
	Poll time.Duration
	// ScanPage bounds how many due notifications one scan hands out
	// (default 2,000). After a full page the next scan follows as soon as
	// half of what is handed out has been attempted, so a backlog drains at
	// the pace of delivery with at most about two pages held in memory.
	ScanPage int
	// EndpointIdle is how long an endpoint's actor lives without a
	// notification to send before it retires (default one minute): callback
	// hosts come and go with merchants and their shops, and an actor kept
	// for each one would grow with them for as long as this node leads.
	EndpointIdle time.Duration

	// trace, when set (tests only), hears the actor tree's steps as they
	// happen: "queued" (an endpoint actor took notification id, and has
	// started what it could), "started" (a delivery of id began),
	// "restarting" (an endpoint actor is restarting), "swept" (the
	// supervisor asked the idle endpoints whether to retire). Tests wait on
	// these events instead of sleeping.
	trace func(event, id string)
}

// Dispatcher is the leader's notification delivery: a dispatcher over the
// durable outbox and a supervised actor tree that makes the attempts.
//
//	supervisor ─┬─ endpoint actor (one per scheme://host:port) ─┬─ delivery actor (one per attempt)
//	            └─ …                                            └─ … (at most PerEndpoint at once)
//
// The outbox (persistence) is the truth. A notification is handed to the
// tree when due and stays handed out while its endpoint actor holds it,
// until its attempt's result is committed. One that the tree lets go of
// without a result (an endpoint actor stopped past its restart budget, the
// node no longer leading) is handed out again once an attempt's lease has
// passed since; one that never reports back (a message lost) once its
// hand-out has lasted longer than any queue could hold it. So nothing is
// dropped, and at-least-once delivery tolerates the rare duplicate.
//
// Each endpoint gets at most EndpointQueue notifications at a time. What
// does not fit waits in the outbox, and then so do that endpoint's newer
// notifications, until a scan has handed out everything older: scans hand
// out in due order, and an endpoint's notifications reach it in that order.
type Dispatcher struct {
	cfg        DispatcherConfig
	system     *actor.ActorSystem
	supervisor *actor.PID
	wake       chan struct{}

	mu sync.Mutex
	// running is set while Run runs (this node leads): only then does
	// Offer take notifications.
	running bool
	// fresh are notifications just committed, offered by the FSM: due now,
	// handed out without scanning the outbox.
	fresh []*outbox.Notification
	// retryAt is the earliest retry known to be due later (Unix ns; 0:
	// none): the next scan is timed for it.
	retryAt int64
	// backlog is set when the last scan handed out a full page: more may be
	// due, and the next scan follows once half of that page is attempted
	// (pageLeft counts what is still held of it, page names it).
	backlog  bool
	page     uint64
	pageLeft int
	// behind is set while the outbox may hold due notifications that no
	// scan has reached (the last scan stopped at a full page): new
	// notifications wait behind them, for the scans, to keep due order.
	behind bool
	// offered wakes the dispatcher: notifications were offered, or a retry
	// was scheduled (it recomputes when to scan).
	offered  chan struct{}
	inflight map[string]*handout // notification id
	// queued counts the notifications each endpoint actor holds (queued or
	// under way): at most EndpointQueue.
	queued map[string]int // endpoint
	// spilled names the endpoints with due notifications left in the
	// outbox for want of room, and when that last happened: their new
	// notifications wait there too, behind the older ones, until a scan
	// that began after that has found them all room.
	spilled map[string]time.Time // endpoint
	// gen counts Run's leaderships: an endpoint actor of an earlier one
	// reports nothing.
	gen uint64
	// heldLease is the longest a notification can wait in a full endpoint
	// queue and be attempted; a hand-out that outlasts it was lost.
	heldLease time.Duration
	// scanPause is how long after the last scan the next may start: ten
	// times the last scan's length when it mostly passed over notifications
	// waiting for room and handed out little, so that such scans take a
	// tenth of a core at most.
	scanPause time.Duration
	// done remembers when each attempt's result was committed. A scan that
	// started before that read the outbox too early: its view of the
	// notification is stale and must not hand it out again.
	done map[string]time.Time
	// endpoints counts the live endpoint actors.
	endpoints atomic.Int64
	// scans counts the scans of the outbox that have ended: a test proves
	// that nothing more is handed out by waiting for further scans.
	scans atomic.Uint64

	m webhookMetrics
}

// handout is the dispatcher's record of a notification given to the tree.
type handout struct {
	endpoint string
	// held is set while the endpoint actor holds it (counted in queued);
	// cleared when the actor let go of it without a result.
	held bool
	// expires ends the hand-out: after it a scan may hand the notification
	// out again (an endpoint actor still holding it drops the copy). While
	// held it is heldLease from the hand-out, then an attempt's lease from
	// the attempt's start or from when the tree let go of it.
	expires time.Time
	page    uint64 // the scan that handed it out (0: offered)
}

// deliveryBuckets bound gateway_webhook_delivery_seconds, from a
// notification's creation to its delivery. Prometheus's default buckets
// (5 ms .. 10 s) for a first attempt, then the default retry offsets
// (15 min .. 24 h, counted from the first attempt) and 48 h for a late
// queue: a delivery on the k-th retry lands between the k-th and the next
// offset, where with the default buckets every retried one fell in +Inf.
var deliveryBuckets = []float64{
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
	15 * 60, 30 * 60, 3600, 2 * 3600, 4 * 3600, 8 * 3600, 16 * 3600, 24 * 3600, 48 * 3600,
}

type webhookMetrics struct {
	delivered, failed *metrics.Counter
	latency           *metrics.PrometheusHistogram
	// attempts counts attempts by kind; the counters are made once, so an
	// attempt does not format a metric name and look it up.
	attempts [attemptKinds]*metrics.Counter
}

func newWebhookMetrics() webhookMetrics {
	m := webhookMetrics{
		delivered: metrics.GetOrCreateCounter(`gateway_webhook_delivered_total`),
		failed:    metrics.GetOrCreateCounter(`gateway_webhook_failed_total`),
		latency:   metrics.GetOrCreatePrometheusHistogramExt(`gateway_webhook_delivery_seconds`, deliveryBuckets),
	}
	for k, name := range attemptKindNames {
		m.attempts[k] = metrics.GetOrCreateCounter(fmt.Sprintf(`gateway_webhook_attempts_total{result=%q}`, name))
	}
	return m
}

// dueBatchNotifications is the default ScanPage.
const dueBatchNotifications = 2000

// endpointQueueNotifications is the default EndpointQueue: with a receiver
// answering in 3 ms, 16 at a time, a fifth of a second of notifications.
const endpointQueueNotifications = 1024

// NewDispatcher makes the delivery machinery; Run starts it.
func NewDispatcher(system *actor.ActorSystem, cfg DispatcherConfig) *Dispatcher {
	if cfg.PerEndpoint <= 0 {
		cfg.PerEndpoint = 16
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = 15 * time.Second
	}
	if cfg.LeaseSlack <= 0 {
		cfg.LeaseSlack = 10 * time.Second
	}
	if cfg.EndpointIdle <= 0 {
		cfg.EndpointIdle = time.Minute
	}
	if cfg.ScanPage <= 0 {
		cfg.ScanPage = dueBatchNotifications
	}
	if cfg.EndpointQueue <= 0 {
		cfg.EndpointQueue = endpointQueueNotifications
	}
	w := &Dispatcher{
		cfg: cfg, system: system, wake: make(chan struct{}, 1), offered: make(chan struct{}, 1),
		inflight: map[string]*handout{},
		queued:   map[string]int{},
		spilled:  map[string]time.Time{},
		done:     map[string]time.Time{},
		m:        newWebhookMetrics(),
		// A full queue is attempted PerEndpoint at a time, each attempt
		// within AttemptTimeout.
		heldLease: time.Duration(cfg.EndpointQueue/cfg.PerEndpoint+1)*cfg.AttemptTimeout + cfg.LeaseSlack,
	}
	return w
}

// Endpoints is how many callback endpoints have an actor.
func (w *Dispatcher) Endpoints() int64 { return w.endpoints.Load() }

// FullEndpoints is how many endpoints have due notifications waiting in the
// outbox for room (EndpointQueue).
func (w *Dispatcher) FullEndpoints() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.spilled)
}

// Wake asks for an immediate scan of the outbox (a redelivery was
// committed).
func (w *Dispatcher) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// freshLimit bounds the notifications waiting in memory for the dispatcher;
// past it they wait in the outbox for the next scan.
const freshLimit = 10_000

// Offer hands over notifications the FSM just committed. They are due at
// once, so the dispatcher sends them without scanning the outbox: under a
// backlog a scan walks the whole queue, and scanning on every commit cost
// more than the deliveries. It runs on the FSM goroutine and never blocks;
// on a follower (not running) it does nothing, the outbox has them.
func (w *Dispatcher) Offer(created []*outbox.Notification) {
	w.mu.Lock()
	if !w.running || len(w.fresh) >= freshLimit {
		w.mu.Unlock()
		return
	}
	w.fresh = append(w.fresh, created...)
	w.mu.Unlock()
	select {
	case w.offered <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends (leadership lost or shutdown).
func (w *Dispatcher) Run(ctx context.Context) {
	gen := w.setRunning(true)
	defer w.setRunning(false)
	props := actor.PropsFromProducer(func() actor.Actor {
		return &webhookSupervisor{w: w, gen: gen, endpoints: map[string]*endpointRef{}}
	}, actor.WithSupervisor(actor.NewOneForOneStrategy(10, 10*time.Second, actor.DefaultDecider)))
	w.supervisor = w.system.Root.Spawn(props)
	defer w.system.Root.Stop(w.supervisor)
	timer := time.NewTimer(0)
	defer timer.Stop()
	sweep := time.NewTicker(w.cfg.EndpointIdle / 2)
	defer sweep.Stop()
	for {
		w.dispatchDue()
		lastScan := time.Now()
		woken := false
		for scan := false; !scan; {
			// The next scan: at once when asked for (Wake), when the
			// earliest scheduled retry is due, and at the latest one poll
			// interval after the last (leases that ended, anything
			// missed); but not before the pause after the last.
			next := lastScan.Add(w.cfg.Poll)
			if r := w.nextRetry(); !r.IsZero() && r.Before(next) {
				next = r
			}
			if woken {
				next = lastScan
			}
			if earliest := lastScan.Add(w.scanPause); next.Before(earliest) {
				next = earliest
			}
			timer.Reset(time.Until(next))
			select {
			case <-ctx.Done():
				return
			case <-w.offered:
				w.dispatchFresh()
			case <-w.wake:
				woken = true
			case <-sweep.C:
				w.system.Root.Send(w.supervisor, retireIdleEndpoints{})
			case <-timer.C:
				scan = !time.Now().Before(next)
			}
		}
	}
}

// nextRetry is the earliest retry known to be scheduled (zero: none).
func (w *Dispatcher) nextRetry() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.retryAt == 0 {
		return time.Time{}
	}
	return time.Unix(0, w.retryAt)
}

// noteRetry records a retry scheduled at due (Unix ns), so the dispatcher
// scans when it is due rather than polling for it.
func (w *Dispatcher) noteRetry(due int64) {
	w.mu.Lock()
	if w.retryAt == 0 || due < w.retryAt {
		w.retryAt = due
	}
	w.mu.Unlock()
	w.poke()
}

// poke interrupts the dispatcher's wait so it recomputes its next scan.
func (w *Dispatcher) poke() {
	select {
	case w.offered <- struct{}{}:
	default:
	}
}

// setRunning starts or ends a leadership and returns its generation. At
// the end the tree is stopping: what it held is no longer counted, and may
// be handed out again an attempt's lease from now, by when any attempt
// still under way has ended.
func (w *Dispatcher) setRunning(on bool) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running = on
	w.fresh = nil
	if on {
		w.gen++
		return w.gen
	}
	end := time.Now().Add(w.attemptLease())
	for _, h := range w.inflight {
		h.held = false
		if h.expires.After(end) {
			h.expires = end
		}
	}
	clear(w.queued)
	clear(w.spilled)
	w.backlog, w.behind, w.pageLeft = false, false, 0
	return w.gen
}

// attemptLease is how long an attempt and the commit of its result can
// take.
func (w *Dispatcher) attemptLease() time.Duration { return w.cfg.AttemptTimeout + w.cfg.LeaseSlack }

// dispatchFresh hands out the offered notifications.
func (w *Dispatcher) dispatchFresh() {
	now := w.cfg.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	fresh := w.fresh
	w.fresh = nil
	for _, n := range fresh {
		// A scan may have handed it out already: leased, or even attempted
		// (a done entry: a fresh notification has no earlier attempt).
		if _, attempted := w.done[n.ID]; attempted || w.busy(n.ID, now, now) {
			continue
		}
		ep := outbox.Endpoint(n.URL)
		// Older notifications may wait in the outbox: this one waits there
		// too, behind them, for the scans.
		if _, spilled := w.spilled[ep]; spilled || w.behind || !w.hasRoom(n.ID, ep) {
			if !w.behind {
				w.spilled[ep] = time.Now()
			}
			continue
		}
		w.handOut(n, ep, now, 0)
	}
}

// scanRoom is one scan's view of the endpoints' room, to pass over the
// notifications that will not fit without loading them.
type scanRoom struct {
	room map[string]int // endpoint → room left
	// full are the endpoints the scan found without room: their later
	// notifications are passed over too, to keep due order.
	full map[string]bool
	// passed counts the notifications passed over for want of room.
	passed int
}

// take reports whether a due notification of ep is worth loading. Call with
// w.mu held.
func (r *scanRoom) take(w *Dispatcher, id, ep string) bool {
	if h := w.inflight[id]; h != nil && h.held {
		return true // counted already: handed out again (a copy was lost)
	}
	if r.full[ep] {
		r.passed++
		return false
	}
	left, seen := r.room[ep]
	if !seen {
		left = w.cfg.EndpointQueue - w.queued[ep]
	}
	if left <= 0 {
		r.full[ep] = true
		r.passed++
		return false
	}
	r.room[ep] = left - 1
	return true
}

func (w *Dispatcher) dispatchDue() {
	// The scan sees everything committed before it starts, so it covers
	// what was offered so far; the retries it finds due need no timer, and
	// the next one after it is read back below.
	w.mu.Lock()
	w.fresh = nil
	w.retryAt = 0
	w.mu.Unlock()
	scanStart := time.Now()
	now := w.cfg.Now()
	defer w.scans.Add(1) // last: the scan and its bookkeeping are over
	defer func() {
		next, err := w.cfg.Store.NextNotificationDueAfter(now.UnixNano())
		if err != nil || next == 0 {
			return
		}
		w.mu.Lock()
		if w.retryAt == 0 || next < w.retryAt {
			w.retryAt = next
		}
		w.mu.Unlock()
	}()
	// Leased notifications, and those of endpoints without room, are
	// skipped during the scan, so they are not even loaded; the checks are
	// repeated under the lock below, where they decide.
	scan := scanRoom{room: map[string]int{}, full: map[string]bool{}}
	due, err := w.cfg.Store.DueNotifications(now.UnixNano(), w.cfg.ScanPage, func(id, ep string) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.busy(id, now, scanStart) || !scan.take(w, id, ep)
	})
	took := time.Since(scanStart)
	if err != nil {
		w.cfg.Logger.Error("scan outbox", "error", err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, at := range w.done {
		if at.Before(scanStart) {
			delete(w.done, id) // this scan saw the committed result
		}
	}
	for id, h := range w.inflight {
		if !h.held && !scanStart.Before(h.expires) {
			delete(w.inflight, id) // let go of, and free to hand out again
		}
	}
	w.page++
	w.pageLeft = 0
	// full are the endpoints left with due notifications in the outbox.
	// The scan loaded an endpoint's notifications only until it found it
	// without room, and its room can only have grown since (hand-outs are
	// made here only); the check below is for a notification counted as
	// handed out when the scan saw it, and let go of since.
	full := scan.full
	blocked := map[string]bool{}
	handed := 0
	for _, n := range due {
		if w.busy(n.ID, now, scanStart) {
			continue
		}
		ep := outbox.Endpoint(n.URL)
		if blocked[ep] || !w.hasRoom(n.ID, ep) {
			blocked[ep], full[ep] = true, true
			continue
		}
		w.handOut(n, ep, now, w.page)
		handed++
	}
	// A scan that mostly passed over notifications waiting for room, and
	// handed out little, is paid for by a pause; one that handed out much
	// is the delivery of a backlog, and is not held back.
	w.scanPause = 0
	if scan.passed > handed && handed < w.cfg.ScanPage/10 {
		w.scanPause = 10 * took
	}
	// A full page leaves more due behind it (a receiver back after an
	// outage, a new leader taking over): release scans again once this
	// page is half attempted rather than at the next poll. Until a scan
	// gets to the end, new notifications wait behind what it has not
	// reached.
	complete := len(due) < w.cfg.ScanPage
	// (A full page that handed out nothing waits for the next poll.)
	w.backlog, w.behind = !complete && handed > 0, !complete
	for ep := range full {
		w.spilled[ep] = scanStart
		if w.queued[ep] <= w.cfg.EndpointQueue/2 {
			// Room was made while the scan ran, and letGo saw no spill to
			// wake a scan for.
			w.Wake()
		}
	}
	if complete {
		for ep, at := range w.spilled {
			if !full[ep] && at.Before(scanStart) {
				delete(w.spilled, ep) // nothing of it left in the outbox
			}
		}
	}
	w.wakeForBacklog()
}

// hasRoom reports whether notification id may be handed to endpoint ep:
// it has room, or the notification is counted there already. Call with
// w.mu held.
func (w *Dispatcher) hasRoom(id, ep string) bool {
	if h := w.inflight[id]; h != nil && h.held {
		return true
	}
	return w.queued[ep] < w.cfg.EndpointQueue
}

// toEndpoint is a notification handed to the supervisor for endpoint.
type toEndpoint struct {
	n        *outbox.Notification
	endpoint string
}

// handOut gives n to the tree for endpoint ep, handed out by the scan page
// (0: offered). Call with w.mu held.
func (w *Dispatcher) handOut(n *outbox.Notification, ep string, now time.Time, page uint64) {
	h := w.inflight[n.ID]
	if h == nil || !h.held {
		h = &handout{endpoint: ep, held: true, page: page}
		w.inflight[n.ID] = h
		w.queued[ep]++
		if page != 0 {
			w.pageLeft++
		}
	}
	h.expires = now.Add(w.heldLease)
	w.system.Root.Send(w.supervisor, toEndpoint{n: n, endpoint: ep})
}

// letGo ends the count of a hand-out the tree no longer holds, and asks for
// the scans it was waiting for. Call with w.mu held.
func (w *Dispatcher) letGo(h *handout) {
	if !h.held {
		return
	}
	h.held = false
	ep := h.endpoint
	if w.queued[ep]--; w.queued[ep] <= 0 {
		delete(w.queued, ep)
	}
	if h.page == w.page && h.page != 0 {
		w.pageLeft--
	}
	if _, spilled := w.spilled[ep]; spilled && w.queued[ep] <= w.cfg.EndpointQueue/2 {
		w.Wake() // room for the notifications waiting in the outbox
	}
	w.wakeForBacklog()
}

// wakeForBacklog asks for the next scan of a backlog once half of the last
// page has been attempted. Call with w.mu held.
func (w *Dispatcher) wakeForBacklog() {
	if w.backlog && w.pageLeft <= w.cfg.ScanPage/2 {
		w.backlog = false
		w.Wake()
	}
}

// busy reports whether a notification must not be handed out now: it is
// handed out, or its attempt's result was committed after the scan that
// started at scanStart began (the scan's view of it is stale). Call with
// w.mu held.
func (w *Dispatcher) busy(id string, now, scanStart time.Time) bool {
	if h := w.inflight[id]; h != nil && now.Before(h.expires) {
		return true
	}
	at, done := w.done[id]
	return done && !at.Before(scanStart)
}

// renewLease starts a notification's lease again as its attempt starts.
// An attempt with its result's commit fits in it (AttemptTimeout plus
// LeaseSlack), so while it is under way no scan hands the notification out
// again, and no copy can reach the endpoint actor after the attempt has
// ended and it has let go of the notification.
func (w *Dispatcher) renewLease(id string, now time.Time) {
	w.mu.Lock()
	if h := w.inflight[id]; h != nil {
		h.expires = now.Add(w.attemptLease())
	}
	w.mu.Unlock()
}

// release ends a notification's hand-out: its attempt ended.
func (w *Dispatcher) release(id string) {
	w.mu.Lock()
	if h := w.inflight[id]; h != nil {
		w.letGo(h)
		delete(w.inflight, id)
	}
	w.done[id] = time.Now()
	w.mu.Unlock()
	// Otherwise no scan now: the endpoint actor queues its own deliveries,
	// and a retry is due no sooner than the first retry delay, which the
	// poll interval divides.
}

// endpointLost lets go of every notification counted at endpoint ep, whose
// actor of leadership gen stopped without retiring: some may have reached
// it only after it stopped, and were dropped unreported. They may be
// handed out again once an attempt's lease has passed; one already routed
// to its successor is then dropped there as a copy.
func (w *Dispatcher) endpointLost(gen uint64, ep string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen != w.gen || !w.running {
		return
	}
	end := time.Now().Add(w.attemptLease())
	for _, h := range w.inflight {
		if h.held && h.endpoint == ep {
			w.letGo(h)
			h.expires = end
		}
	}
}

// abandon records that an endpoint actor of leadership gen stopped holding
// these notifications without attempting them: they may be handed out
// again once an attempt's lease has passed.
func (w *Dispatcher) abandon(gen uint64, ids []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen != w.gen || !w.running {
		return // setRunning has let go of them all
	}
	end := time.Now().Add(w.attemptLease())
	for _, id := range ids {
		if h := w.inflight[id]; h != nil && h.held {
			w.letGo(h)
			h.expires = end
		}
	}
}
