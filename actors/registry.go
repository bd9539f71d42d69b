// Package actors holds the gateway's actors (protoactor-go): one order actor
// per (merchant, order_id) that serialises every operation on that order,
// and the supervised webhook delivery actors. See DESIGN.md.
package actors

import (
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
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
// Concurrency contract: every message to an order actor is enqueued while
// holding the key's shard lock, and each entry counts what it was sent. An
// idle actor retires only through TryRetire, which compares that count with
// what the actor processed under the same lock: when they match the mailbox
// is empty and no sender can reach the old PID any more, so there is never
// more than one live actor per order and no message is lost to a retiring
// actor.
type Registry struct {
	system  *actor.ActorSystem
	produce func(Key) actor.Actor
	seed    maphash.Seed
	shards  [shardCount]shard
	live    *metrics.Gauge
	stopped atomic.Bool
}

type shard struct {
	mu sync.Mutex
	m  map[Key]*entry
}

type entry struct {
	pid  *actor.PID
	sent uint64
}

// NewRegistry makes a registry; produce builds the actor for a key.
func NewRegistry(system *actor.ActorSystem, produce func(Key) actor.Actor) *Registry {
	r := &Registry{system: system, produce: produce, seed: maphash.MakeSeed()}
	for i := range r.shards {
		r.shards[i].m = make(map[Key]*entry)
	}
	r.live = metrics.GetOrCreateGauge(`gateway_order_actors_live`, func() float64 { return float64(r.Live()) })
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
// A request carries the channel its answer goes to: buffered, so the actor
// never blocks on a caller that already gave up. (protoactor's futures cost
// a registered process and a timer per request: ~3 % of a charge's CPU.)
type envelope struct {
	msg   any
	reply chan any
}

// respond answers a request; a plain send has nobody to answer.
func (e envelope) respond(v any) {
	if e.reply != nil {
		e.reply <- v
	}
}

// ErrTimeout is returned by Request when the actor did not answer in time.
var ErrTimeout = errors.New("actors: no answer within the request timeout")

// lockedEntry returns the key's entry, spawning the actor if needed; the
// caller holds s.mu.
func (r *Registry) lockedEntry(s *shard, k Key) *entry {
	e := s.m[k]
	if e == nil {
		props := actor.PropsFromProducer(func() actor.Actor { return r.produce(k) })
		e = &entry{pid: r.system.Root.Spawn(props)}
		s.m[k] = e
	}
	return e
}

// Request sends msg to the key's actor and waits for its reply.
func (r *Registry) Request(k Key, msg any, timeout time.Duration) (any, error) {
	s := r.shard(k)
	s.mu.Lock()
	if r.isStopped() {
		s.mu.Unlock()
		return nil, ErrStopped
	}
	e := r.lockedEntry(s, k)
	e.sent++
	reply := make(chan any, 1)
	r.system.Root.Send(e.pid, envelope{msg: msg, reply: reply})
	s.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case v := <-reply:
		return v, nil
	case <-t.C:
		return nil, ErrTimeout
	}
}

// Send delivers msg to the key's actor without waiting.
func (r *Registry) Send(k Key, msg any) {
	s := r.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.isStopped() {
		return
	}
	e := r.lockedEntry(s, k)
	e.sent++
	r.system.Root.Send(e.pid, envelope{msg: msg})
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

// StopAll stops every actor (leadership lost, or shutdown). Later sends
// spawn fresh actors unless the registry is stopped for good.
func (r *Registry) StopAll(final bool) {
	if final {
		r.stopped.Store(true)
	}
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
