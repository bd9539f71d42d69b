package actors

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/signature"
	"github.com/paygate/gateway/transport/webhook"
)

// NotifyStore is what webhook delivery reads from the store.
type NotifyStore interface {
	DueNotifications(now int64, limit int, skip func(id, endpoint string) bool) ([]*persistence.Notification, error)
	NextNotificationDueAfter(t int64) (int64, error)
	PendingNotificationCount() (int, error)
}

// WebhookConfig configures notification delivery.
type WebhookConfig struct {
	Store    NotifyStore
	Proposer Proposer
	Logger   *slog.Logger
	Now      func() time.Time
	// Attempt sends one notification (webhook.Client.Deliver in production).
	Attempt func(ctx context.Context, d webhook.Delivery) webhook.Attempt
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
}

// Webhooks is the leader's notification delivery: a dispatcher over the
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
type Webhooks struct {
	cfg        WebhookConfig
	system     *actor.ActorSystem
	supervisor *actor.PID
	wake       chan struct{}

	mu sync.Mutex
	// running is set while Run runs (this node leads): only then does
	// Offer take notifications.
	running bool
	// fresh are notifications just committed, offered by the FSM: due now,
	// handed out without scanning the outbox.
	fresh []*persistence.Notification
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

// NewWebhooks makes the delivery machinery; Run starts it.
func NewWebhooks(system *actor.ActorSystem, cfg WebhookConfig) *Webhooks {
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
	w := &Webhooks{
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
func (w *Webhooks) Endpoints() int64 { return w.endpoints.Load() }

// FullEndpoints is how many endpoints have due notifications waiting in the
// outbox for room (EndpointQueue).
func (w *Webhooks) FullEndpoints() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.spilled)
}

// Wake asks for an immediate scan of the outbox (a redelivery was
// committed).
func (w *Webhooks) Wake() {
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
func (w *Webhooks) Offer(created []*persistence.Notification) {
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
func (w *Webhooks) Run(ctx context.Context) {
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
func (w *Webhooks) nextRetry() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.retryAt == 0 {
		return time.Time{}
	}
	return time.Unix(0, w.retryAt)
}

// noteRetry records a retry scheduled at due (Unix ns), so the dispatcher
// scans when it is due rather than polling for it.
func (w *Webhooks) noteRetry(due int64) {
	w.mu.Lock()
	if w.retryAt == 0 || due < w.retryAt {
		w.retryAt = due
	}
	w.mu.Unlock()
	w.poke()
}

// poke interrupts the dispatcher's wait so it recomputes its next scan.
func (w *Webhooks) poke() {
	select {
	case w.offered <- struct{}{}:
	default:
	}
}

// setRunning starts or ends a leadership and returns its generation. At
// the end the tree is stopping: what it held is no longer counted, and may
// be handed out again an attempt's lease from now, by when any attempt
// still under way has ended.
func (w *Webhooks) setRunning(on bool) uint64 {
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
func (w *Webhooks) attemptLease() time.Duration { return w.cfg.AttemptTimeout + w.cfg.LeaseSlack }

// dispatchFresh hands out the offered notifications.
func (w *Webhooks) dispatchFresh() {
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
		ep := persistence.Endpoint(n.URL)
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
func (r *scanRoom) take(w *Webhooks, id, ep string) bool {
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

func (w *Webhooks) dispatchDue() {
	// The scan sees everything committed before it starts, so it covers
	// what was offered so far; the retries it finds due need no timer, and
	// the next one after it is read back below.
	w.mu.Lock()
	w.fresh = nil
	w.retryAt = 0
	w.mu.Unlock()
	scanStart := time.Now()
	now := w.cfg.Now()
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
		ep := persistence.Endpoint(n.URL)
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
func (w *Webhooks) hasRoom(id, ep string) bool {
	if h := w.inflight[id]; h != nil && h.held {
		return true
	}
	return w.queued[ep] < w.cfg.EndpointQueue
}

// toEndpoint is a notification handed to the supervisor for endpoint.
type toEndpoint struct {
	n        *persistence.Notification
	endpoint string
}

// handOut gives n to the tree for endpoint ep, handed out by the scan page
// (0: offered). Call with w.mu held.
func (w *Webhooks) handOut(n *persistence.Notification, ep string, now time.Time, page uint64) {
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
func (w *Webhooks) letGo(h *handout) {
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
func (w *Webhooks) wakeForBacklog() {
	if w.backlog && w.pageLeft <= w.cfg.ScanPage/2 {
		w.backlog = false
		w.Wake()
	}
}

// busy reports whether a notification must not be handed out now: it is
// handed out, or its attempt's result was committed after the scan that
// started at scanStart began (the scan's view of it is stale). Call with
// w.mu held.
func (w *Webhooks) busy(id string, now, scanStart time.Time) bool {
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
func (w *Webhooks) renewLease(id string, now time.Time) {
	w.mu.Lock()
	if h := w.inflight[id]; h != nil {
		h.expires = now.Add(w.attemptLease())
	}
	w.mu.Unlock()
}

// release ends a notification's hand-out: its attempt ended.
func (w *Webhooks) release(id string) {
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
func (w *Webhooks) endpointLost(gen uint64, ep string) {
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
func (w *Webhooks) abandon(gen uint64, ids []string) {
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

// webhookSupervisor routes each due notification to its endpoint's actor,
// restarts endpoint actors that crash, and retires the idle ones.
type webhookSupervisor struct {
	w         *Webhooks
	gen       uint64 // the leadership it serves
	endpoints map[string]*endpointRef
}

// endpointRef is the supervisor's record of a live endpoint actor.
type endpointRef struct {
	pid *actor.PID
	// routed counts the notifications sent to it, and last is when the
	// latest was: an actor that has said it is idle is stopped only if
	// nothing was routed to it since it was asked.
	routed uint64
	last   time.Time
}

// retireIdleEndpoints asks every endpoint actor that has had no
// notification for EndpointIdle whether it is idle.
type retireIdleEndpoints struct{}

// retireIfIdle asks an endpoint actor to answer endpointIdle when it has
// nothing queued or under way; routed is the supervisor's count then.
type retireIfIdle struct {
	key    string
	routed uint64
}

// endpointIdle is an endpoint actor's answer to retireIfIdle.
type endpointIdle retireIfIdle

func (s *webhookSupervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case toEndpoint:
		key := m.endpoint
		ref, ok := s.endpoints[key]
		if !ok {
			props := actor.PropsFromProducer(func() actor.Actor { return &endpointActor{w: s.w, gen: s.gen, key: key} },
				actor.WithSupervisor(actor.NewOneForOneStrategy(3, 10*time.Second, actor.DefaultDecider)))
			ref = &endpointRef{pid: ctx.Spawn(props)}
			s.endpoints[key] = ref
			s.w.endpoints.Add(1)
		}
		ref.routed++
		ref.last = s.w.cfg.Now()
		ctx.Send(ref.pid, m.n)
	case retireIdleEndpoints:
		now := s.w.cfg.Now()
		for key, ref := range s.endpoints {
			if now.Sub(ref.last) >= s.w.cfg.EndpointIdle {
				ctx.Send(ref.pid, retireIfIdle{key: key, routed: ref.routed})
			}
		}
	case endpointIdle:
		// Notifications reach an endpoint actor only from here, in order:
		// if none was routed since the question, none is waiting in its
		// mailbox behind it, and stopping it drops nothing.
		if ref, ok := s.endpoints[m.key]; ok && ref.routed == m.routed {
			delete(s.endpoints, m.key)
			ctx.Stop(ref.pid)
		}
	case *actor.Terminated:
		for k, ref := range s.endpoints {
			if ref.pid.Equal(m.Who) {
				// Stopped, not retired (a retired one has left the map):
				// notifications routed to it after it stopped went to dead
				// letters, unreported.
				delete(s.endpoints, k)
				s.w.endpointLost(s.gen, k)
			}
		}
		s.w.endpoints.Add(-1)
	}
}

// endpointActor bounds how many deliveries to one endpoint run at once, so
// a slow or dead endpoint holds its own slots and no one else's.
type endpointActor struct {
	w     *Webhooks
	gen   uint64 // the leadership it serves
	key   string // the endpoint
	queue []*persistence.Notification
	// sending holds the slots: delivery actors whose request to the
	// endpoint is under way. A slot is freed as soon as the request ends,
	// before its result is committed: the bound is on the merchant's
	// server, and a commit does not load it.
	sending map[string]bool // delivery actor id
	// leased maps every live delivery actor to its notification; the lease
	// is released when the actor ends (its result committed, or given up).
	leased map[string]string // delivery actor id → notification id
	// An order's notifications go out one at a time, in the order they
	// were queued: the next waits until the request of the one before has
	// ended, so a merchant sees "processing" before "authorized" unless an
	// attempt failed and is retried later (docs/webhooks.md). inFlight is
	// the order each sending delivery actor is for.
	inFlight   map[string]string // delivery actor id → order
	busyOrders map[string]bool
	// held are the notifications queued here or with a live delivery
	// actor. The dispatcher hands a notification out again when its lease
	// ends, and behind a slow endpoint one can wait here longer than that:
	// the copy is dropped, not queued and sent again.
	held map[string]bool // notification id
	// ending is set once the actor is stopping or restarting: it starts no
	// more deliveries (its delivery actors ending would otherwise start the
	// next ones while the node's next leadership, or this actor's next
	// incarnation, takes them over).
	ending bool
}

// attemptSent tells the endpoint actor that a delivery actor's request has
// ended and its slot is free.
type attemptSent struct{ id string }

func (e *endpointActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		e.sending, e.leased = map[string]bool{}, map[string]string{}
		e.inFlight, e.busyOrders = map[string]string{}, map[string]bool{}
		e.held = map[string]bool{}
	case *persistence.Notification:
		if e.held[m.ID] {
			return
		}
		e.held[m.ID] = true
		e.queue = append(e.queue, m)
		e.fill(ctx)
	case attemptSent:
		e.requestEnded(m.id)
		e.fill(ctx)
	case *actor.Terminated:
		// A delivery actor finished, or gave up after its restarts: free
		// its slot if it still held one. Its lease makes the dispatcher
		// retry a lost one.
		e.requestEnded(m.Who.Id)
		if id, ok := e.leased[m.Who.Id]; ok {
			delete(e.leased, m.Who.Id)
			delete(e.held, id)
			e.w.release(id)
		}
		e.fill(ctx)
	case retireIfIdle:
		if len(e.held) == 0 { // nothing queued, no delivery actor alive
			ctx.Send(ctx.Parent(), endpointIdle(m))
		}
	case *actor.Stopped:
		// Its delivery actors have ended (and released theirs): what it
		// still holds was never attempted. The dispatcher hands it out
		// again.
		ids := make([]string, 0, len(e.held))
		for id := range e.held {
			ids = append(ids, id)
		}
		e.w.abandon(e.gen, ids)
	case *actor.Stopping:
		e.ending = true
	case *actor.Restarting:
		// The queue is in memory: hand it back, through the supervisor, so
		// the fresh instance (same mailbox) takes it over. Through the
		// supervisor, so that they count as routed to it: an idle answer to
		// a retirement question asked before would otherwise stop it with
		// them in its mailbox. Running children are stopped by the restart
		// and release theirs.
		e.ending = true
		for _, n := range e.queue {
			ctx.Send(ctx.Parent(), toEndpoint{n: n, endpoint: e.key})
		}
	}
}

// requestEnded frees the slot and the order of a delivery actor whose
// request has ended (or that ended without one).
func (e *endpointActor) requestEnded(id string) {
	delete(e.sending, id)
	if o, ok := e.inFlight[id]; ok {
		delete(e.inFlight, id)
		delete(e.busyOrders, o)
	}
}

// fill starts deliveries while slots are free, skipping (and keeping, in
// their place) notifications whose order already has one under way.
func (e *endpointActor) fill(ctx actor.Context) {
	if e.ending {
		return
	}
	kept := e.queue[:0] // filtered in place: kept never passes the reader
	for i, n := range e.queue {
		if len(e.sending) >= e.w.cfg.PerEndpoint {
			kept = append(kept, e.queue[i:]...)
			break
		}
		o := n.Merchant + "\x00" + n.OrderID
		if e.busyOrders[o] {
			kept = append(kept, n)
			continue
		}
		props := actor.PropsFromProducer(func() actor.Actor { return &deliveryActor{w: e.w, n: n} })
		pid := ctx.Spawn(props)
		e.sending[pid.Id] = true
		e.leased[pid.Id] = n.ID
		e.inFlight[pid.Id] = o
		e.busyOrders[o] = true
	}
	clear(e.queue[len(kept):]) // drop the started ones' pointers
	e.queue = kept
}

// deliveryActor makes one attempt at one notification and commits its
// result. The producer captures the notification, so a supervised restart
// after a crash attempts the same delivery again.
type deliveryActor struct {
	w *Webhooks
	n *persistence.Notification
}

func (d *deliveryActor) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); !ok {
		return
	}
	upd := d.w.send(d.n)
	ctx.Send(ctx.Parent(), attemptSent{id: ctx.Self().Id})
	d.w.commit(d.n, upd)
	ctx.Stop(ctx.Self())
}

// send makes one attempt at n and returns its result with the next due
// time, to be replicated.
func (w *Webhooks) send(n *persistence.Notification) *command.NotifyUpdate {
	upd := &command.NotifyUpdate{ID: n.ID}
	pk, key, ok := w.cfg.Keys(n.Merchant)
	start := w.cfg.Now()
	w.renewLease(n.ID, start)
	var res webhook.Attempt
	if ok {
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.AttemptTimeout)
		res = w.cfg.Attempt(ctx, webhook.Delivery{URL: n.URL, Body: n.Body, PublicKey: pk, Key: key, CreatedAt: n.CreatedAt})
		cancel()
	} else {
		res = webhook.Attempt{Error: "merchant webhook keys unknown"}
	}
	upd.Time = w.cfg.Now().UnixNano()
	upd.Attempt = &command.AttemptRecord{At: start.UnixNano(), HTTPCode: res.HTTPCode, Error: res.Error, DurationNs: int64(res.Duration)}
	upd.Delivered = res.Delivered
	if !res.Delivered {
		upd.NextDueAt = NextAttemptAt(n, start, w.cfg.RetryDelays)
	}
	w.m.attempts[attemptResult(res)].Inc()
	return upd
}

// commit replicates an attempt's result.
func (w *Webhooks) commit(n *persistence.Notification, upd *command.NotifyUpdate) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.cfg.Proposer.Propose(ctx, &command.Cmd{Notify: upd}); err != nil {
		// Not committed: the notification stays due and is tried again.
		w.cfg.Logger.Warn("webhook attempt result not committed", "notification_id", n.ID, "error", err)
		return
	}
	switch {
	case upd.NextDueAt != 0:
		w.noteRetry(upd.NextDueAt)
	case upd.Delivered:
		w.m.delivered.Inc()
		w.m.latency.Update(w.cfg.Now().Sub(time.Unix(0, n.CreatedAt)).Seconds())
	case upd.NextDueAt == 0:
		w.m.failed.Inc()
		w.cfg.Logger.Warn("webhook delivery failed for good", "notification_id", n.ID, "merchant_id", n.Merchant, "order_id", n.OrderID)
	}
}

// NextAttemptAt is when the attempt after a failed one is due: the retry
// offsets count from the first attempt (contract section 6). It returns 0
// when the schedule is exhausted.
//
// An attempt made late (the cluster had no leader, or was down, past
// several offsets) leaves the next one a gap after it: the offsets it
// missed are then not all due at once, which would spend them in a burst of
// attempts seconds apart at an endpoint that may just be coming back. The
// gap is the first offset, or the schedule's own gap between this attempt's
// offset and the next where that is shorter, so that an attempt made on
// time always leaves the next at its offset (a schedule such as 10m,12m,14m
// is kept as written). Every attempt is still made; the last may come after
// the schedule's end by what the outage took.
func NextAttemptAt(n *persistence.Notification, attemptAt time.Time, delays []time.Duration) int64 {
	first := n.FirstAttemptAt
	if first == 0 {
		first = attemptAt.UnixNano()
	}
	failures := 1 // this attempt
	for _, a := range n.Attempts {
		if a.At >= first {
			failures++
		}
	}
	if failures > len(delays) {
		return 0
	}
	next := delays[failures-1]
	var this time.Duration // this attempt's own offset: 0 for the first
	if failures >= 2 {
		this = delays[failures-2]
	}
	gap := min(delays[0], next-this)
	return max(first+int64(next), attemptAt.UnixNano()+int64(gap))
}

// attemptKind classifies an attempt for the attempts metric.
type attemptKind int

const (
	attemptDelivered attemptKind = iota
	attemptHTTPStatus
	attemptRefused
	attemptTimeout
	attemptConnect
	attemptBadAnswer
	attemptOther
	attemptKinds // the number of kinds
)

// attemptKindNames are the metric's result label values.
var attemptKindNames = [attemptKinds]string{
	attemptDelivered: "delivered", attemptHTTPStatus: "http_status", attemptRefused: "refused",
	attemptTimeout: "timeout", attemptConnect: "connect", attemptBadAnswer: "bad_answer", attemptOther: "other",
}

func attemptResult(a webhook.Attempt) attemptKind {
	switch {
	case a.Delivered:
		return attemptDelivered
	case strings.HasPrefix(a.Error, "http status"):
		return attemptHTTPStatus
	case strings.Contains(a.Error, "SSRF"):
		return attemptRefused
	case strings.Contains(a.Error, "timeout"):
		return attemptTimeout
	case strings.HasPrefix(a.Error, "connect"):
		return attemptConnect
	case strings.HasPrefix(a.Error, "response is not"):
		return attemptBadAnswer
	}
	return attemptOther
}
