package persistence

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// /metrics says where order reads were served from and what Pebble's block
// cache did for those that went to Pebble; a closed store's series go away.
func TestStoreMetrics(t *testing.T) {
	s := newTestStore(t)
	s.apply(1, createCmd("o1", "h1"))
	read := func() { // three reads: a status rendered, the same again, the order
		t.Helper()
		for range 2 {
			if v, err := s.OrderStatusJSON("m1", "o1"); v == nil || err != nil {
				t.Fatalf("status: %s %v", v, err)
			}
		}
		if o, err := s.GetOrder("m1", "o1"); o == nil || err != nil {
			t.Fatalf("order: %+v %v", o, err)
		}
	}

	read() // all from the cache the FSM filled
	if got := storeMetric(t, s.Store, `gateway_order_reads_total{from="cache"}`); got != 3 {
		t.Fatalf("reads from the cache: %d, want 3", got)
	}
	if got := storeMetric(t, s.Store, `gateway_order_reads_total{from="pebble"}`); got != 0 {
		t.Fatalf("reads from Pebble: %d, want 0", got)
	}

	if err := s.db.Flush(); err != nil { // into an sstable, read through the block cache
		t.Fatal(err)
	}
	s.reopen() // an empty order cache, and a fresh set of metrics
	// The start's warm-up fills the history cache in the background: let it
	// end, then empty the cache, so that every read goes to Pebble.
	s.loading.Wait()
	s.history.clear()
	read()
	if got := storeMetric(t, s.Store, `gateway_order_reads_total{from="pebble"}`); got != 3 {
		t.Fatalf("reads from Pebble after a reopen: %d, want 3", got)
	}
	if got := storeMetric(t, s.Store, `gateway_order_reads_total{from="cache"}`); got != 0 {
		t.Fatalf("reads from the cache after a reopen: %d, want 0", got)
	}
	misses, hits := storeMetric(t, s.Store, "gateway_pebble_block_cache_misses_total"), storeMetric(t, s.Store, "gateway_pebble_block_cache_hits_total")
	if misses == 0 || hits == 0 { // the first read loads the order's block, the next find it
		t.Fatalf("block cache: %d misses, %d hits", misses, hits)
	}
	if got := storeMetric(t, s.Store, "gateway_pebble_sstable_bytes"); got == 0 {
		t.Fatal("no sstable bytes after a flush")
	}

	set := s.metrics.set
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	set.WritePrometheus(&out)
	s.writePebbleMetrics(&out) // a scrape that began before Close
	if out.Len() != 0 {
		t.Fatalf("a closed store still shows metrics:\n%s", out.String())
	}
	s.open() // for the test's cleanup
}

// storeMetric reads one series of s's metrics as /metrics shows it.
func storeMetric(t *testing.T, s *Store, series string) uint64 {
	t.Helper()
	var out bytes.Buffer
	s.metrics.set.WritePrometheus(&out)
	for _, line := range strings.Split(out.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("%s %s: %v", series, v, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in:\n%s", series, out.String())
	return 0
}
