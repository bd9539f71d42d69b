package actors

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/transport/signature"
	"github.com/paygate/gateway/transport/webhook"
)

// NotifyStore is what webhook delivery reads from the store.
type NotifyStore interface {
	DueNotifications(now int64, limit int, skip func(id string) bool) ([]*persistence.Notification, error)
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
	// AttemptTimeout bounds one attempt (connect + response).
	AttemptTimeout time.Duration
	// LeaseSlack is added to AttemptTimeout to form a handed-out
	// notification's lease (default 10 s).
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
// tree when due and leased until its attempt's result is committed; an
// attempt that never reports back (a crash past the restart budget, a lost
// message) is handed out again when its lease ends, so nothing is dropped,
// and at-least-once delivery tolerates the rare duplicate.
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
	// due, and the next scan follows once the in-flight set has halved.
	backlog bool
	// offered wakes the dispatcher: notifications were offered, or a retry
	// was scheduled (it recomputes when to scan).
	offered  chan struct{}
	inflight map[string]time.Time // notification id → lease end
	// done remembers when each attempt's result was committed. A scan that
	// started before that read the outbox too early: its view of the
	// notification is stale and must not hand it out again.
	done map[string]time.Time
	// endpoints counts the live endpoint actors.
	endpoints atomic.Int64

	m webhookMetrics
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
	w := &Webhooks{
		cfg: cfg, system: system, wake: make(chan struct{}, 1), offered: make(chan struct{}, 1),
		inflight: map[string]time.Time{},
		done:     map[string]time.Time{},
		m:        newWebhookMetrics(),
	}
	return w
}

// Endpoints is how many callback endpoints have an actor.
func (w *Webhooks) Endpoints() int64 { return w.endpoints.Load() }

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
	props := actor.PropsFromProducer(func() actor.Actor { return &webhookSupervisor{w: w, endpoints: map[string]*endpointRef{}} },
		actor.WithSupervisor(actor.NewOneForOneStrategy(10, 10*time.Second, actor.DefaultDecider)))
	w.supervisor = w.system.Root.Spawn(props)
	defer w.system.Root.Stop(w.supervisor)
	w.setRunning(true)
	defer w.setRunning(false)
	timer := time.NewTimer(0)
	defer timer.Stop()
	sweep := time.NewTicker(w.cfg.EndpointIdle / 2)
	defer sweep.Stop()
	for {
		w.dispatchDue()
		lastScan := time.Now()
		for scan := false; !scan; {
			// The next scan: when the earliest scheduled retry is due, and
			// at the latest one poll interval after the last (leases that
			// ended, anything missed).
			next := lastScan.Add(w.cfg.Poll)
			if r := w.nextRetry(); !r.IsZero() && r.Before(next) {
				next = r
			}
			timer.Reset(time.Until(next))
			select {
			case <-ctx.Done():
				return
			case <-w.offered:
				w.dispatchFresh()
			case <-w.wake:
				scan = true
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

func (w *Webhooks) setRunning(on bool) {
	w.mu.Lock()
	w.running = on
	w.fresh = nil
	w.mu.Unlock()
}

// dispatchFresh hands out the offered notifications.
func (w *Webhooks) dispatchFresh() {
	now := w.cfg.Now()
	lease := now.Add(w.cfg.AttemptTimeout + w.cfg.LeaseSlack)
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
		w.inflight[n.ID] = lease
		w.system.Root.Send(w.supervisor, n)
	}
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
	// Leased notifications are skipped during the scan, so they are not
	// even loaded; the check is repeated under the lock below, where it
	// decides.
	due, err := w.cfg.Store.DueNotifications(now.UnixNano(), w.cfg.ScanPage, func(id string) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.busy(id, now, scanStart)
	})
	if err != nil {
		w.cfg.Logger.Error("scan outbox", "error", err)
		return
	}
	lease := now.Add(w.cfg.AttemptTimeout + w.cfg.LeaseSlack)
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, at := range w.done {
		if at.Before(scanStart) {
			delete(w.done, id) // this scan saw the committed result
		}
	}
	for _, n := range due {
		if w.busy(n.ID, now, scanStart) {
			continue
		}
		w.inflight[n.ID] = lease
		w.system.Root.Send(w.supervisor, n)
	}
	// A full page leaves more due behind it (a receiver back after an
	// outage, a new leader taking over): release scans again once this
	// page is half attempted rather than at the next poll.
	w.backlog = len(due) >= w.cfg.ScanPage
	w.wakeForBacklog()
}

// wakeForBacklog asks for the next scan of a backlog once the in-flight set
// has halved. Call with w.mu held.
func (w *Webhooks) wakeForBacklog() {
	if w.backlog && len(w.inflight) <= w.cfg.ScanPage/2 {
		w.backlog = false
		w.Wake()
	}
}

// busy reports whether a notification must not be handed out now: it is
// leased to an attempt, or its attempt's result was committed after the
// scan that started at scanStart began (the scan's view of it is stale).
// Call with w.mu held.
func (w *Webhooks) busy(id string, now, scanStart time.Time) bool {
	if end, ok := w.inflight[id]; ok && now.Before(end) {
		return true
	}
	at, done := w.done[id]
	return done && !at.Before(scanStart)
}

// renewLease starts a notification's lease again as its attempt starts.
// It may have waited behind a slow endpoint for longer than the lease it
// was handed out with; an attempt with its result's commit fits in a lease
// (AttemptTimeout plus LeaseSlack), so while it is under way no scan hands
// the notification out again, and no copy can reach the endpoint actor
// after the attempt has ended and it has let go of the notification.
func (w *Webhooks) renewLease(id string, now time.Time) {
	w.mu.Lock()
	w.inflight[id] = now.Add(w.cfg.AttemptTimeout + w.cfg.LeaseSlack)
	w.mu.Unlock()
}

func (w *Webhooks) release(id string) {
	w.mu.Lock()
	delete(w.inflight, id)
	w.done[id] = time.Now()
	w.wakeForBacklog()
	w.mu.Unlock()
	// Otherwise no scan now: the endpoint actor queues its own deliveries,
	// and a retry is due no sooner than the first retry delay, which the
	// poll interval divides.
}

// endpointKey groups deliveries by where they go.
func endpointKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

// webhookSupervisor routes each due notification to its endpoint's actor,
// restarts endpoint actors that crash, and retires the idle ones.
type webhookSupervisor struct {
	w         *Webhooks
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
	case *persistence.Notification:
		key := endpointKey(m.URL)
		ref, ok := s.endpoints[key]
		if !ok {
			props := actor.PropsFromProducer(func() actor.Actor { return &endpointActor{w: s.w} },
				actor.WithSupervisor(actor.NewOneForOneStrategy(3, 10*time.Second, actor.DefaultDecider)))
			ref = &endpointRef{pid: ctx.Spawn(props)}
			s.endpoints[key] = ref
			s.w.endpoints.Add(1)
		}
		ref.routed++
		ref.last = s.w.cfg.Now()
		ctx.Send(ref.pid, m)
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
				delete(s.endpoints, k)
			}
		}
		s.w.endpoints.Add(-1)
	}
}

// endpointActor bounds how many deliveries to one endpoint run at once, so
// a slow or dead endpoint holds its own slots and no one else's.
type endpointActor struct {
	w     *Webhooks
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
	case *actor.Restarting:
		// The queue is in memory: hand it back so the fresh instance (same
		// mailbox) takes it over. Running children are stopped by the
		// restart; their leases cover them. (A retirement racing a restart
		// can drop these: their leases hand them out again.)
		for _, n := range e.queue {
			ctx.Send(ctx.Self(), n)
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
func (w *Webhooks) send(n *persistence.Notification) *persistence.NotifyUpdate {
	upd := &persistence.NotifyUpdate{ID: n.ID}
	pk, key, ok := w.cfg.Keys(n.Merchant)
	start := w.cfg.Now()
	w.renewLease(n.ID, start)
	var res webhook.Attempt
	if ok {
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.AttemptTimeout)
		res = w.cfg.Attempt(ctx, webhook.Delivery{URL: n.URL, Body: n.Body, PublicKey: pk, Key: key})
		cancel()
	} else {
		res = webhook.Attempt{Error: "merchant webhook keys unknown"}
	}
	upd.Time = w.cfg.Now().UnixNano()
	upd.Attempt = &persistence.AttemptRecord{At: start.UnixNano(), HTTPCode: res.HTTPCode, Error: res.Error, DurationNs: int64(res.Duration)}
	upd.Delivered = res.Delivered
	if !res.Delivered {
		upd.NextDueAt = NextAttemptAt(n, start, w.cfg.RetryDelays)
	}
	w.m.attempts[attemptResult(res)].Inc()
	return upd
}

// commit replicates an attempt's result.
func (w *Webhooks) commit(n *persistence.Notification, upd *persistence.NotifyUpdate) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.cfg.Proposer.Propose(ctx, &persistence.Cmd{Notify: upd}); err != nil {
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
	return first + int64(delays[failures-1])
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
