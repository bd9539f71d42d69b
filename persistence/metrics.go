package persistence

import (
	"io"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

// storeMetrics puts on /metrics what decides the cost of a read and the
// work behind the writes: where order reads were served from, Pebble's
// block cache, and the shape of its LSM. A status read served from the
// order cache costs about two thirds of one that reads Pebble
// (docs/performance.md, "How cost grows with stored orders"); these say
// which kind a node is serving, and whether compactions keep up.
//
// Each store registers its own set and removes it when closed, so nothing
// reads a closed store (another node started later in the same process
// registers its own). Pebble's figures, and the notifications waiting in
// the outbox, are read when /metrics is scraped (DB.Metrics takes Pebble's
// lock and walks the LSM: cheap once per scrape, not per request).
type storeMetrics struct {
	set *metrics.Set
	// fromCache and fromPebble count reads of an order outside the FSM
	// (status reads, order actors loading their state) by where they were
	// served from.
	fromCache, fromPebble *metrics.Counter

	mu     sync.Mutex // orders the scrape's read of Pebble before Close
	closed bool
}

func (s *Store) registerMetrics() {
	m := &s.metrics
	m.set = metrics.NewSet()
	m.fromCache = m.set.NewCounter(`gateway_order_reads_total{from="cache"}`)
	m.fromPebble = m.set.NewCounter(`gateway_order_reads_total{from="pebble"}`)
	m.set.RegisterMetricsWriter(s.writePebbleMetrics)
	metrics.RegisterSet(m.set)
}

// unregisterMetrics removes the store's metrics; a scrape already under
// way sees the store closed and writes none of Pebble's.
func (s *Store) unregisterMetrics() {
	m := &s.metrics
	metrics.UnregisterSet(m.set, true)
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
}

func (s *Store) writePebbleMetrics(w io.Writer) {
	s.metrics.mu.Lock()
	defer s.metrics.mu.Unlock()
	if s.metrics.closed {
		return
	}
	pm := s.db.Metrics()
	metrics.WriteCounterUint64(w, "gateway_pebble_block_cache_hits_total", uint64(pm.BlockCache.Hits))
	metrics.WriteCounterUint64(w, "gateway_pebble_block_cache_misses_total", uint64(pm.BlockCache.Misses))
	metrics.WriteGaugeUint64(w, "gateway_pebble_block_cache_bytes", uint64(pm.BlockCache.Size))
	metrics.WriteGaugeUint64(w, "gateway_pebble_memtable_bytes", pm.MemTable.Size)
	metrics.WriteGaugeUint64(w, "gateway_pebble_sstable_bytes", uint64(pm.Total().TablesSize))
	metrics.WriteGaugeUint64(w, "gateway_pebble_read_amplification", uint64(pm.ReadAmp()))
	metrics.WriteGaugeUint64(w, "gateway_pebble_compaction_debt_bytes", pm.Compact.EstimatedDebt)
	metrics.WriteCounterUint64(w, "gateway_pebble_flushes_total", uint64(pm.Flush.Count))
	metrics.WriteCounterUint64(w, "gateway_pebble_compactions_total", uint64(pm.Compact.Count))
	if n, err := s.PendingNotificationCount(); err == nil {
		metrics.WriteGaugeUint64(w, "gateway_webhook_pending", uint64(n))
	}
}
