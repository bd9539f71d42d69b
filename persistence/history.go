package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/paygate/gateway/order"
)

// historyCache keeps the stored encoding of as many orders as its bytes
// allow, for the reads outside the FSM that go deep into the history: a
// search's page of a customer's orders spread over a year, a status read of
// an old order. It is the second tier behind orderCache (the recent orders,
// by count) and in front of Pebble. What it saves is the seek through the
// LSM's levels: at a million orders a Pebble read of one order is ~35-45 µs
// of CPU in a 1.5 GB block cache that lives in main memory, against a map
// lookup and a decode here (docs/performance.md, "Order search", sixth and
// seventh series). RocksDB's row cache answers the same problem; Pebble has
// none.
//
// Layout: per shard, a FIFO ring of entries ([key length u32][value length
// u32][key][value]) in chunks of one region outside the Go heap
// (history_mem_linux.go; elsewhere, heap slices allocated as the ring first
// fills), and a map from the key's hash to the entry's absolute position in
// the ring. Neither holds a pointer, so the collector does not scan a
// million entries: a map of integers is not scanned. An entry is valid
// while the ring has not come round to it again (pos >= head - size); a
// lookup checks that and that the stored key is the key (two keys may share
// a hash: the later one wins the slot, the other misses).
//
// Consistency, as for orderCache: every present entry is the order's latest
// committed value.
//   - The FSM goroutine is the only writer of orders; Batch.Commit puts what
//     each batch wrote, after Pebble committed it, overwriting any older
//     entry.
//   - Open's and Restore's scan of the orders (loadKnownOrders) warms the
//     cache from a Pebble snapshot taken after beginWarm. A key the FSM put
//     since beginWarm is marked dirty and the warm-up never inserts it (its
//     snapshot value may be older, and the FSM's entry may be gone: too
//     large to keep, or its slot taken by a key of the same hash); nor does
//     it replace a present entry. So the warm-up inserts only keys the FSM
//     has not written since the snapshot, whose snapshot value is their
//     latest. It also stops at the end of the ring's first lap, so it never
//     pushes out an entry.
//   - Readers never fill it: a reader that read an older value from Pebble
//     could overwrite a newer one.
//   - Restore clears it and bumps the generation first, so that a warm-up
//     of the state before the restore, still running, inserts nothing more.
type historyCache struct {
	seed   maphash.Seed
	gen    atomic.Uint64 // bumped by clear; a warm-up of another generation inserts nothing
	shards [historyShards]historyShard
}

const (
	historyShards = 16
	// historyChunkBytes is the unit a shard's ring is allocated in as it
	// first fills, so a small store takes little of the room it is given.
	historyChunkBytes = 1 << 20
	historyHeader     = 8
)

type historyShard struct {
	mu     sync.RWMutex
	index  map[uint64]uint64 // key hash → absolute position of its entry
	chunks [][]byte          // the ring: size/historyChunkBytes chunks of region, or allocated on first use
	region []byte            // the ring's memory outside the heap (mapRing), or nil
	size   uint64            // the ring's bytes, a multiple of historyChunkBytes; 0 once closed
	head   uint64            // absolute position of the next entry
	// dirty, while a warm-up runs, holds the hashes of keys the FSM put
	// since it began (nil otherwise).
	dirty map[uint64]struct{}
}

// newHistoryCache returns a cache of about capacity bytes, or nil (no
// cache) when that is less than a chunk a shard.
func newHistoryCache(capacity int64) *historyCache {
	perShard := uint64(capacity) / historyShards / historyChunkBytes * historyChunkBytes
	if capacity <= 0 || perShard == 0 {
		return nil
	}
	c := &historyCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		s := &c.shards[i]
		s.index = map[uint64]uint64{}
		s.size = perShard
		s.chunks = make([][]byte, perShard/historyChunkBytes)
		if region, err := mapRing(perShard); err == nil {
			s.region = region
			for i := range s.chunks {
				s.chunks[i] = region[i*historyChunkBytes : (i+1)*historyChunkBytes : (i+1)*historyChunkBytes]
			}
		}
	}
	return c
}

// close empties the cache and returns the rings' memory (Store.Close).
// Under each shard's lock, so no reader is in the ring it unmaps; a get or
// put after it finds nothing and stores nothing (size 0).
func (c *historyCache) close() error {
	if c == nil {
		return nil
	}
	c.clear()
	var errs []error
	c.eachShard(func(s *historyShard) {
		s.chunks, s.size = nil, 0
		if s.region != nil {
			errs = append(errs, unmapRing(s.region))
			s.region = nil
		}
	})
	return errors.Join(errs...)
}

// eachShard calls f on every shard, under that shard's lock.
func (c *historyCache) eachShard(f func(*historyShard)) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		f(s)
		s.mu.Unlock()
	}
}

func (c *historyCache) shardOf(h uint64) *historyShard {
	return &c.shards[h%historyShards]
}

// get decodes the cached order at key, or returns nil when it is not
// cached (or does not decode: the caller then reads Pebble, which reports
// the error).
func (c *historyCache) get(key []byte) *order.Order {
	if c == nil {
		return nil
	}
	h := maphash.Bytes(c.seed, key)
	s := c.shardOf(h)
	s.mu.RLock()
	defer s.mu.RUnlock()
	v := s.lookup(h, key)
	if v == nil {
		return nil
	}
	o, err := decodeOrderValue(v) // copies what it keeps: the ring is overwritten later
	if err != nil {
		return nil
	}
	return o
}

// prefetch reads a few bytes of every cache line of the entries of keys,
// so that a search page's reads of the ring, each a cache and TLB miss at
// random in hundreds of MiB, overlap instead of following one another: the
// loads here depend on nothing but the index, and the processor has many
// of them in flight at once. The gets that follow find the lines cached.
// Every shard's read lock is taken first and held throughout, since a lock
// is an atomic instruction that waits for the loads before it (on amd64)
// and one per key would order the misses again. Returns what it read, so
// that the loads are not optimised away.
//
//go:noinline
func (c *historyCache) prefetch(keys [][]byte) byte {
	if c == nil || len(keys) < 2 {
		return 0
	}
	for i := range c.shards {
		c.shards[i].mu.RLock()
	}
	var entries [searchPrefetchMax][]byte
	n := 0
	for _, key := range keys[:min(len(keys), searchPrefetchMax)] {
		h := maphash.Bytes(c.seed, key)
		s := c.shardOf(h)
		if pos, ok := s.live(h); ok {
			entries[n] = s.at(pos)
			n++
		}
	}
	var sum byte
	for _, e := range entries[:n] {
		for off := 0; off < min(len(e), prefetchEntryBytes); off += 64 {
			sum += e[off]
		}
	}
	for i := range c.shards {
		c.shards[i].mu.RUnlock()
	}
	return sum
}

const (
	// searchPrefetchMax bounds the keys one prefetch reads ahead.
	searchPrefetchMax = 128
	// prefetchEntryBytes is how much of an entry prefetch touches: an
	// order's stored encoding is ~300-900 bytes.
	prefetchEntryBytes = 1024
)

// put stores the order's latest committed value (the FSM, after a commit).
func (c *historyCache) put(key string, value []byte) {
	if c == nil {
		return
	}
	h := maphash.String(c.seed, key)
	s := c.shardOf(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dirty != nil {
		s.dirty[h] = struct{}{}
	}
	s.insert(h, key, value)
}

// beginWarm starts a warm-up: from now on the FSM's puts are remembered, so
// that warm never inserts a value older than one the FSM wrote. It returns
// the generation warm must name.
func (c *historyCache) beginWarm() uint64 {
	if c == nil {
		return 0
	}
	c.eachShard(func(s *historyShard) { s.dirty = map[uint64]struct{}{} })
	return c.gen.Load()
}

// warm inserts a value read from the warm-up's snapshot, unless the key is
// cached already, the FSM has put it since beginWarm, or the cache was
// cleared since (gen). It reports whether the cache has room for more: a
// warm-up stops once the ring is full rather than push out what it put.
func (c *historyCache) warm(gen uint64, key, value []byte) bool {
	if c == nil {
		return false
	}
	h := maphash.Bytes(c.seed, key)
	s := c.shardOf(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.gen.Load() != gen || s.dirty == nil {
		return false
	}
	if _, written := s.dirty[h]; written || s.lookup(h, key) != nil {
		return true
	}
	if !s.fitsFirstLap(uint64(historyHeader + len(key) + len(value))) {
		return false // the rest of the store does not fit
	}
	s.insert(h, string(key), value)
	return true
}

// endWarm ends a warm-up of generation gen.
func (c *historyCache) endWarm(gen uint64) {
	if c == nil {
		return
	}
	c.eachShard(func(s *historyShard) {
		if c.gen.Load() == gen {
			s.dirty = nil
		}
	})
}

// clear empties the cache (Restore) and ends any warm-up in progress.
func (c *historyCache) clear() {
	if c == nil {
		return
	}
	c.gen.Add(1)
	c.eachShard(func(s *historyShard) {
		clear(s.index)
		s.head, s.dirty = 0, nil
	})
}

// lookup returns the value of key's entry, in the ring (valid until the
// shard's lock is released), or nil.
func (s *historyShard) lookup(h uint64, key []byte) []byte {
	pos, ok := s.live(h)
	if !ok {
		return nil
	}
	e := s.at(pos)
	kl := binary.LittleEndian.Uint32(e)
	vl := binary.LittleEndian.Uint32(e[4:])
	if !bytes.Equal(e[historyHeader:historyHeader+kl], key) {
		return nil
	}
	return e[historyHeader+kl : historyHeader+kl+vl]
}

// live returns the ring position of the entry indexed under h, unless it
// was never stored or the ring has come round to it since. The entry's key
// may still be another with the same hash (lookup checks it).
func (s *historyShard) live(h uint64) (uint64, bool) {
	pos, ok := s.index[h]
	return pos, ok && pos+s.size >= s.head
}

// at returns the ring from absolute position pos to the end of its chunk.
func (s *historyShard) at(pos uint64) []byte {
	off := pos % s.size
	return s.chunks[off/historyChunkBytes][off%historyChunkBytes:]
}

// fitsFirstLap reports whether an entry of n bytes would still be in the
// ring's first lap, so that inserting it pushes nothing out.
func (s *historyShard) fitsFirstLap(n uint64) bool {
	return s.entryStart(n)+n <= s.size
}

// entryStart is the absolute position an entry of n bytes inserted now
// starts at: the head, or the next chunk's start when the rest of the
// head's chunk is too short, since an entry never spans two chunks.
func (s *historyShard) entryStart(n uint64) uint64 {
	if rest := historyChunkBytes - s.head%historyChunkBytes; rest < n {
		return s.head + rest
	}
	return s.head
}

// insert appends an entry at entryStart. An entry larger than a chunk is
// not cached.
func (s *historyShard) insert(h uint64, key string, value []byte) {
	n := uint64(historyHeader + len(key) + len(value))
	if n > historyChunkBytes || s.size == 0 { // too large, or closed
		delete(s.index, h)
		return
	}
	lap := s.head / s.size
	s.head = s.entryStart(n)
	off := s.head % s.size
	chunk := &s.chunks[off/historyChunkBytes]
	if *chunk == nil {
		*chunk = make([]byte, historyChunkBytes)
	}
	e := (*chunk)[off%historyChunkBytes:]
	binary.LittleEndian.PutUint32(e, uint32(len(key)))
	binary.LittleEndian.PutUint32(e[4:], uint32(len(value)))
	copy(e[historyHeader:], key)
	copy(e[historyHeader+len(key):], value)
	s.index[h] = s.head
	s.head += n
	// Drop index entries the ring has come round to, so that the map does
	// not grow past what the ring holds: at most one sweep a lap.
	if s.head/s.size != lap {
		for k, p := range s.index {
			if p+s.size < s.head {
				delete(s.index, k)
			}
		}
	}
}
