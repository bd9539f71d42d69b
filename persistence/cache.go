package persistence

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/paygate/gateway/order"
)

// orderCache holds recently applied orders, so the hot path does not read
// Pebble for an order it just touched.
//
// It keeps each order as its stored encoding (the bytes the FSM just wrote,
// ~300 B, no pointers) and decodes it on a hit (under a microsecond). Decoded
// orders, with their strings and the command copies those point into, made
// up two thirds of the live heap under load, and the garbage collector
// scanned all of it on every cycle; bytes it does not scan.
//
// Consistency: the FSM goroutine is the only writer (Batch.Commit puts what
// the batch wrote; the FSM's own reads put what they loaded, which is safe
// because nothing else writes orders). Readers never fill the cache: a
// reader that loaded an older value from Pebble could otherwise overwrite a
// newer one. A cached encoding is shared; every hit decodes its own order.
type orderCache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard
}

const cacheShards = 32

type cacheShard struct {
	mu   sync.RWMutex
	m    map[string]*cachedOrder
	ring []string // FIFO eviction order
	next int
}

// cachedOrder is one order version and, once a status read asked for it,
// its rendering: an order version never changes, so neither does its view.
type cachedOrder struct {
	encoded    []byte // never modified
	statusJSON atomic.Pointer[[]byte]
}

// order decodes the cached version; nil if it does not decode (the caller
// then reads Pebble, which reports the error).
func (e *cachedOrder) order() *order.Order {
	o, err := decodeOrderValue(e.encoded)
	if err != nil {
		return nil
	}
	return o
}

func newOrderCache(capacity int) *orderCache {
	c := &orderCache{seed: maphash.MakeSeed()}
	per := max(capacity/cacheShards, 1)
	for i := range c.shards {
		c.shards[i].m = make(map[string]*cachedOrder, per)
		c.shards[i].ring = make([]string, per)
	}
	return c
}

func (c *orderCache) shard(key []byte) *cacheShard {
	return &c.shards[maphash.Bytes(c.seed, key)%cacheShards]
}

func (c *orderCache) get(key []byte) *order.Order {
	if e := c.entry(key); e != nil {
		return e.order()
	}
	return nil
}

func (c *orderCache) entry(key []byte) *cachedOrder {
	s := c.shard(key)
	s.mu.RLock()
	e := s.m[string(key)]
	s.mu.RUnlock()
	return e
}

// put caches an order's stored encoding, which must not be modified after.
// The key is a string because the cache keeps it: the batch's copy is kept
// rather than a new one made.
func (c *orderCache) put(k string, encoded []byte) {
	e := &cachedOrder{encoded: encoded}
	s := &c.shards[maphash.String(c.seed, k)%cacheShards] // as shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[k]; ok {
		s.m[k] = e
		return
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.m, old)
	}
	s.ring[s.next] = k
	s.next = (s.next + 1) % len(s.ring)
	s.m[k] = e
}

func (c *orderCache) clear() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.m)
		clear(s.ring)
		s.next = 0
		s.mu.Unlock()
	}
}
