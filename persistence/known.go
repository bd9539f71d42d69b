package persistence

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
)

// knownOrders answers "might this order exist?" for the FSM without
// reading Pebble. Every charge creates an order whose id is new, so before
// this filter each create cost a Pebble lookup that missed: a search of the
// memtable skiplist plus a Bloom filter probe per sstable level, about 30 %
// of applying a charge (BenchmarkApplyCharges).
//
// It is a Bloom filter of every stored order's key: "no" is certain and
// skips the lookup; "maybe" reads Pebble as before. Orders are never
// deleted, and putOrder, the only writer of order keys, adds each key
// before its batch commits, so the filter always covers the store (a key
// from a batch that then failed to commit only costs a needless lookup;
// such a failure stops the node anyway). Open fills it from the store and
// Restore refills it, in the background (loadKnownOrders), which then
// warms the search indexes' blocks (warmSearchIndex).
//
// When a filter reaches its capacity a new one twice as large is added
// (a scalable Bloom filter), so a growing store keeps its error rate
// without a rebuild; a lookup probes each.
type knownOrders struct {
	mu      sync.Mutex
	seed    maphash.Seed
	filters []*bloomFilter
	// complete is set once every order stored before the filter was
	// published is in it; until then mayContain always says maybe.
	complete atomic.Bool
}

// knownOrdersMinCapacity sizes the first filter: a million keys in 2 MB
// (10 bits a key, rounded up to a power of two).
const knownOrdersMinCapacity = 1 << 20

func newKnownOrders() *knownOrders {
	return &knownOrders{seed: maphash.MakeSeed(), filters: []*bloomFilter{newBloomFilter(knownOrdersMinCapacity)}}
}

// loadKnownOrders publishes a new, empty filter, which putOrder adds new
// orders to from then on, and fills it with the orders already stored in
// the background. Until that scan ends every lookup says maybe and reads
// Pebble, as without a filter: a node is ready at once instead of after a
// scan of every order (seconds at a million orders).
//
// No order is missed: the filter is published before the scan's iterator
// is opened, and never while the FSM is applying a batch (Open runs before
// raft starts, Restore on the FSM's goroutine), so an order is either in
// the iterator's view or written by a later batch, which adds it.
func (s *Store) loadKnownOrders() {
	k := newKnownOrders()
	s.known.Store(k)
	// The same scan warms the order history cache; its warm-up begins
	// before the scan's snapshot is taken (history.go).
	gen := s.history.beginWarm()
	s.loading.Add(1)
	go func() {
		defer s.loading.Done()
		warming := true
		err := s.scan([]byte(prefixOrder), prefixEnd(prefixOrder), func(key, value []byte) bool {
			k.add(key)
			if warming {
				warming = s.history.warm(gen, key, value)
			}
			return !s.closing.Load()
		})
		s.history.endWarm(gen)
		switch {
		case s.closing.Load():
		case err != nil:
			// Left incomplete: it keeps answering maybe.
			s.logger.Error("load the filter of order keys; every create reads Pebble", "error", err)
		default:
			k.complete.Store(true)
			s.warmSearchIndex()
		}
	}()
}

// add records key. On a nil filter (a restore in progress) it does nothing.
func (k *knownOrders) add(key []byte) {
	if k == nil {
		return
	}
	h := maphash.Bytes(k.seed, key)
	k.mu.Lock()
	defer k.mu.Unlock()
	last := k.filters[len(k.filters)-1]
	if last.count >= last.capacity {
		last = newBloomFilter(2 * last.capacity)
		k.filters = append(k.filters, last)
	}
	last.add(h)
}

// mayContain is false only for a key never added. A nil filter (a restore
// in progress) or one still being filled always says maybe.
func (k *knownOrders) mayContain(key []byte) bool {
	if k == nil || !k.complete.Load() {
		return true
	}
	h := maphash.Bytes(k.seed, key)
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, f := range k.filters {
		if f.mayContain(h) {
			return true
		}
	}
	return false
}

// bloomFilter is a classic Bloom filter with 10 bits per key and 7 probes
// (about 1 % false positives at capacity), the probes derived from one
// 64-bit hash by double hashing (Kirsch and Mitzenmacher).
type bloomFilter struct {
	bits     []uint64
	mask     uint64 // len(bits)*64 - 1; the size is a power of two
	count    int
	capacity int
}

const (
	bloomBitsPerKey = 10
	bloomProbes     = 7
)

func newBloomFilter(capacity int) *bloomFilter {
	words := 1 << uint(math.Ceil(math.Log2(float64(capacity*bloomBitsPerKey)/64)))
	return &bloomFilter{bits: make([]uint64, words), mask: uint64(words)*64 - 1, capacity: capacity}
}

func (f *bloomFilter) add(h uint64) {
	h1, h2 := h, h>>32|h<<32|1 // h2 odd: the probes cover the whole table
	for i := uint64(0); i < bloomProbes; i++ {
		bit := (h1 + i*h2) & f.mask
		f.bits[bit/64] |= 1 << (bit % 64)
	}
	f.count++
}

func (f *bloomFilter) mayContain(h uint64) bool {
	h1, h2 := h, h>>32|h<<32|1
	for i := uint64(0); i < bloomProbes; i++ {
		bit := (h1 + i*h2) & f.mask
		if f.bits[bit/64]&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}
