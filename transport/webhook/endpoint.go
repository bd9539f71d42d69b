package webhook

// The webhook actors under the dispatcher (webhook_dispatcher.go): the
// supervisor that routes each notification to its endpoint, one endpoint
// actor per receiver (scheme://host:port) that bounds the requests to it and
// keeps an order's notifications in order, one delivery actor per attempt,
// and what an attempt commits (its result and the next due time).

import (
	"context"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

// webhookSupervisor routes each due notification to its endpoint's actor,
// restarts endpoint actors that crash, and retires the idle ones.
type webhookSupervisor struct {
	w         *Dispatcher
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
		s.w.traceEvent("swept", "")
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
	w     *Dispatcher
	gen   uint64 // the leadership it serves
	key   string // the endpoint
	queue []*outbox.Notification
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
	case *outbox.Notification:
		if e.held[m.ID] {
			return
		}
		e.held[m.ID] = true
		e.queue = append(e.queue, m)
		e.fill(ctx)
		e.w.traceEvent("queued", m.ID)
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
		e.w.traceEvent("restarting", e.key)
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
		e.w.traceEvent("started", n.ID)
	}
	clear(e.queue[len(kept):]) // drop the started ones' pointers
	e.queue = kept
}

// deliveryActor makes one attempt at one notification and commits its
// result. The producer captures the notification, so a supervised restart
// after a crash attempts the same delivery again.
type deliveryActor struct {
	w *Dispatcher
	n *outbox.Notification
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
func (w *Dispatcher) send(n *outbox.Notification) *command.NotifyUpdate {
	upd := &command.NotifyUpdate{ID: n.ID}
	pk, key, ok := w.cfg.Keys(n.Merchant)
	start := w.cfg.Now()
	w.renewLease(n.ID, start)
	var res Attempt
	if ok {
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.AttemptTimeout)
		res = w.cfg.Attempt(ctx, Delivery{URL: n.URL, Body: n.Body, PublicKey: pk, Key: key, CreatedAt: n.CreatedAt})
		cancel()
	} else {
		res = Attempt{Error: "merchant webhook keys unknown"}
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
func (w *Dispatcher) commit(n *outbox.Notification, upd *command.NotifyUpdate) {
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
func NextAttemptAt(n *outbox.Notification, attemptAt time.Time, delays []time.Duration) int64 {
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

func attemptResult(a Attempt) attemptKind {
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

// traceEvent tells cfg.trace (tests only) of a step of the actor tree.
func (w *Dispatcher) traceEvent(event, id string) {
	if w.cfg.trace != nil {
		w.cfg.trace(event, id)
	}
}
