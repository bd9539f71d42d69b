// Package actors holds the gateway's actors (protoactor-go): one order actor
// per (merchant, order_id) that serialises every operation on that order
// (order_actor.go, forms.go), and the schedules that drive orders and
// retention (scheduler.go). Its job is deciding what to propose and when; it
// speaks to the domain (order), to storage through the Reader and Proposer
// interfaces, and to the acquirer through the Acquirer interface it
// declares. It knows no inbound edge (what it refuses is an
// order.Rejection), and webhook delivery is transport/webhook's. See
// DESIGN.md.
package actors

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Key identifies an order actor.
type Key struct {
	Merchant string
	OrderID  string
}

// ErrStopped is returned once the registry is shut down.
var ErrStopped = errors.New("actors: registry stopped")

const shardCount = 64

// Registry finds or spawns the actor of a key and retires quiet ones.
//
// Concurrency contract: every message to an order actor is counted while
// holding the key's shard lock, before it is enqueued. An actor retires only
// through TryRetire, which compares that count with what the actor processed
// under the same lock: when they match the mailbox is empty and no sender can
// reach the old PID any more, so there is never more than one live actor per
// order and no message is lost to a retiring actor.
type Registry struct {
	system  *actor.ActorSystem
	produce func(Key) actor.Actor
	seed    maphash.Seed
	shards  [shardCount]shard
	stopped atomic.Bool

	// term ends when StopAll stops the actors spawned before it: the work
	// they started off their mailboxes (a movement repeated until
	// answered) ends with them, so a deposed leader stops sending.
	termMu  sync.Mutex
	term    context.Context
	endTerm context.CancelFunc
}

type shard struct {
	mu sync.Mutex
	m  map[Key]*entry
}

type entry struct {
	pid  *actor.PID
	sent uint64
	// disp is the actor's dispatcher, held in the entry: one allocation
	// per spawned actor fewer than a dispatcher of its own.
	disp inlineDispatcher
}

// NewRegistry makes a registry; produce builds the actor for a key.
func NewRegistry(system *actor.ActorSystem, produce func(Key) actor.Actor) *Registry {
	r := &Registry{system: system, produce: produce, seed: maphash.MakeSeed()}
	r.term, r.endTerm = context.WithCancel(context.Background())
	for i := range r.shards {
		r.shards[i].m = make(map[Key]*entry)
	}
	return r
}

func (r *Registry) shard(k Key) *shard {
	var h maphash.Hash
	h.SetSeed(r.seed)
	h.WriteString(k.Merchant)
	h.WriteByte(0)
	h.WriteString(k.OrderID)
	return &r.shards[h.Sum64()%shardCount]
}

// envelope carries a message and lets the actor count what it processed.
// A request's envelope also carries its answer, and the channel that says
// it is there: buffered, so the actor never blocks on a caller that already
// gave up. (protoactor's futures cost a registered process and a timer per
// request: ~3 % of a charge's CPU. A chan struct{} is one allocation where
// a chan any is two, and a pointer is posted without boxing a copy.)
type envelope struct {
	msg    any
	done   chan struct{} // nil for a plain send
	answer any
}

// isRequest reports whether someone waits for the answer.
func (e *envelope) isRequest() bool { return e.done != nil }

// respond answers a request; a plain send has nobody to answer.
func (e *envelope) respond(v any) {
	if e.done != nil {
		e.answer = v
		e.done <- struct{}{}
	}
}

// ErrTimeout is returned by Request when the actor did not answer in time.
var ErrTimeout = errors.New("actors: no answer within the request timeout")

// inlineDispatcher is an order actor's dispatcher: whoever posts a message
// to the idle mailbox runs it on its own goroutine until the mailbox is
// empty, like protoactor's synchronized dispatcher. A request's caller would
// only wait for the reply anyway; running the actor itself saves handing the
// message to a fresh goroutine and the reply back (DESIGN.md, "Who runs an
// order actor"). Send keeps callers that must not wait off it, and
// HandOffQueued frees a caller from the queue behind its own message.
type inlineDispatcher struct {
	system *actor.ActorSystem
	pid    *actor.PID // set once spawned, before any message but Started
	// resume is set by HandOffQueued: once the run that suspended the
	// mailbox has ended, a fresh goroutine resumes it.
	resume atomic.Bool
}

// inlineThroughput is how many messages a run takes before it yields the
// processor (runtime.Gosched) and goes on.
const inlineThroughput = 300

func (d *inlineDispatcher) Schedule(run func()) {
	run()
	if d.resume.CompareAndSwap(true, false) {
		if p, ok := d.system.ProcessRegistry.Get(d.pid); ok {
			go p.SendSystemMessage(d.pid, &actor.ResumeMailbox{})
		}
	}
}

func (d *inlineDispatcher) Throughput() int { return inlineThroughput }

// lockedEntry returns the key's entry, spawning the actor if needed; the
// caller holds s.mu. Spawning runs the actor's Started message here, under
// the lock: an order actor does nothing on it.
func (r *Registry) lockedEntry(s *shard, k Key) *entry {
	e := s.m[k]
	if e == nil {
		e = &entry{disp: inlineDispatcher{system: r.system}}
		d := &e.disp
		props := actor.PropsFromProducer(func() actor.Actor { return r.produce(k) }, actor.WithDispatcher(d))
		d.pid = r.system.Root.Spawn(props)
		e.pid = d.pid
		s.m[k] = e
	}
	return e
}

// enter counts one more message for the key's actor, spawning it if
// needed, and returns its PID. The caller posts the message after the lock
// is released (the poster may run the actor): once counted, the actor cannot
// retire before it has processed it, so the PID stays valid.
func (r *Registry) enter(k Key) (*actor.PID, error) {
	s := r.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.isStopped() {
		return nil, ErrStopped
	}
	e := r.lockedEntry(s, k)
	e.sent++
	return e.pid, nil
}

// Request sends msg to the key's actor and waits for its reply. When the
// actor is idle the caller runs it, so the reply is there once the message
// is posted; timeout bounds the wait for an actor another goroutine is
// running.
func (r *Registry) Request(k Key, msg any, timeout time.Duration) (any, error) {
	pid, err := r.enter(k)
	if err != nil {
		return nil, err
	}
	env := &envelope{msg: msg, done: make(chan struct{}, 1)}
	r.system.Root.Send(pid, env)
	select {
	case <-env.done:
		return env.answer, nil
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-env.done:
		return env.answer, nil
	case <-t.C:
		return nil, ErrTimeout
	}
}

// Deliver sends msg to the key's actor; when the actor is idle the caller
// runs it until its mailbox is empty (or a request it answers hands the rest
// on). For a caller with nothing else to do, like the goroutine that brings
// the acquirer's answer.
func (r *Registry) Deliver(k Key, msg any) {
	if pid, err := r.enter(k); err == nil {
		r.system.Root.Send(pid, &envelope{msg: msg})
	}
}

// Send delivers msg to the key's actor without waiting: the actor runs on a
// goroutine of its own, never the caller's (the scheduler's loop, an actor
// writing to itself).
func (r *Registry) Send(k Key, msg any) {
	if pid, err := r.enter(k); err == nil {
		go r.system.Root.Send(pid, &envelope{msg: msg})
	}
}

// TryRetire removes the key's entry if pid has processed everything sent to
// it. It returns true when the actor must stop now.
func (r *Registry) TryRetire(k Key, pid *actor.PID, processed uint64) bool {
	s := r.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[k]
	if e == nil || !e.pid.Equal(pid) || e.sent != processed {
		return false
	}
	delete(s.m, k)
	return true
}

// HandOffQueued moves what waits in pid's mailbox behind the processed
// messages to a goroutine of its own, if anything waits. The
// goroutine running the actor stops after the current message (its mailbox
// is suspended, and protoactor takes system messages first); once that run
// has ended, the dispatcher resumes the mailbox from a fresh goroutine. An
// actor calls it after answering a request: the request's caller may be the
// goroutine running it, and must not go on serving the queue (under a flood
// of requests for one order it would never answer its own client).
func (r *Registry) HandOffQueued(k Key, pid *actor.PID, processed uint64) {
	s := r.shard(k)
	s.mu.Lock()
	e := s.m[k]
	queued := e != nil && e.pid.Equal(pid) && e.sent != processed
	s.mu.Unlock()
	if !queued {
		return
	}
	if p, ok := r.system.ProcessRegistry.Get(pid); ok {
		p.SendSystemMessage(pid, &actor.SuspendMailbox{})
		// The flag only after the Suspend: a previous run still ending
		// (between its run and its check in Schedule) could take the flag
		// and post its Resume before the Suspend, leaving the mailbox
		// suspended for good. Taken after it, the Resume is only early.
		e.disp.resume.Store(true)
	}
}

// Live is the number of order actors alive.
func (r *Registry) Live() int {
	n := 0
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// Term is a context that ends at the next StopAll. An actor takes it when
// it is spawned and bounds with it what it leaves running on other
// goroutines.
func (r *Registry) Term() context.Context {
	r.termMu.Lock()
	defer r.termMu.Unlock()
	return r.term
}

// StopAll stops every actor (leadership lost, or shutdown) and ends their
// term. Later sends spawn fresh actors, in a new term, unless the registry
// is stopped for good.
func (r *Registry) StopAll(final bool) {
	if final {
		r.stopped.Store(true)
	}
	r.termMu.Lock()
	r.endTerm() // actors spawned while the others stop are in the ended term too
	r.termMu.Unlock()
	defer func() {
		if final {
			return
		}
		r.termMu.Lock()
		r.term, r.endTerm = context.WithCancel(context.Background())
		r.termMu.Unlock()
	}()
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for k, e := range s.m {
			r.system.Root.Stop(e.pid)
			delete(s.m, k)
		}
		s.mu.Unlock()
	}
}

func (r *Registry) isStopped() bool { return r.stopped.Load() }
