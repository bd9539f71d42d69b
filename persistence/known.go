package persistence

import (
	"fmt"
	"hash/maphash"
	"math"
	"sync"
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
// Restore refills it.
//
// When a filter reaches its capacity a new one twice as large is added
// (a scalable Bloom filter), so a growing store keeps its error rate
// without a rebuild; a lookup probes each.
type knownOrders struct {
	mu      sync.Mutex
	seed    maphash.Seed
	filters []*bloomFilter
}

// knownOrdersMinCapacity sizes the first filter: 1.2 MB of bits.
const knownOrdersMinCapacity = 1 << 20

func newKnownOrders() *knownOrders {
	return &knownOrders{seed: maphash.MakeSeed(), filters: []*bloomFilter{newBloomFilter(knownOrdersMinCapacity)}}
}

// loadKnownOrders builds the filter from the order keys in the store.
func (s *Store) loadKnownOrders() error {
	k := newKnownOrders()
	err := s.scan([]byte(prefixOrder), prefixEnd(prefixOrder), func(key, _ []byte) bool {
		k.add(key)
		return true
	})
	if err != nil {
		return fmt.Errorf("load order keys: %w", err)
	}
	s.known.Store(k)
	return nil
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
// in progress, or one that failed) knows nothing and always says maybe.
func (k *knownOrders) mayContain(key []byte) bool {
	if k == nil {
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
