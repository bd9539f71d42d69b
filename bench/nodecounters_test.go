package bench

import (
	"strings"
	"testing"
)

func TestParseNodeCounters(t *testing.T) {
	const exposition = `# HELP gateway_pebble_flushes_total
# TYPE gateway_pebble_flushes_total counter
gateway_order_reads_total{from="cache"} 120
gateway_order_reads_total{from="pebble"} 30
gateway_order_reads_total_extra 99
gateway_pebble_block_cache_hits_total 4.5e+06
gateway_pebble_block_cache_misses_total 23
gateway_pebble_flushes_total 2
gateway_pebble_compactions_total 3
gateway_pebble_write_stalls_total 1
gateway_http_request_duration_seconds_bucket{op="status",code="200",le="0.005"} 7
go_goroutines 40
`
	c, ok, err := parseNodeCounters(strings.NewReader(exposition))
	want := NodeCounters{OrderReadsFromCache: 120, OrderReadsFromPebble: 30, BlockCacheHits: 4_500_000,
		BlockCacheMisses: 23, Flushes: 2, Compactions: 3, WriteStalls: 1}
	if err != nil || !ok || c != want {
		t.Fatalf("got %+v %v %v, want %+v", c, ok, err, want)
	}

	for name, text := range map[string]string{
		"no gateway series (another server)": "go_goroutines 40\n",
		"empty":                              "",
	} {
		if _, ok, err := parseNodeCounters(strings.NewReader(text)); ok || err != nil {
			t.Errorf("%s: ok %v, err %v", name, ok, err)
		}
	}
	for _, bad := range []string{"gateway_pebble_flushes_total x\n", "gateway_pebble_flushes_total -1\n"} {
		if _, _, err := parseNodeCounters(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestNodeCountersBetween(t *testing.T) {
	start := NodeCounters{OrderReadsFromCache: 10, OrderReadsFromPebble: 5, BlockCacheMisses: 7, Flushes: 1}
	end := NodeCounters{OrderReadsFromCache: 110, OrderReadsFromPebble: 45, BlockCacheMisses: 37, Flushes: 3, Compactions: 1}
	d := nodeCountersBetween(start, end)
	want := NodeCounters{OrderReadsFromCache: 100, OrderReadsFromPebble: 40, BlockCacheMisses: 30, Flushes: 2, Compactions: 1}
	if d == nil || *d != want {
		t.Fatalf("got %+v, want %+v", d, want)
	}
	if got := d.summary(); got != "nodes in the window: order reads 100 from the cache, 40 from Pebble (29%); "+
		"block cache 0.75 misses per read from Pebble; Pebble 2 flushes, 1 compactions, 0 write stalls" {
		t.Fatalf("summary: %s", got)
	}
	// Several targets are summed, every counter.
	sum := NodeCounters{OrderReadsFromCache: 120, OrderReadsFromPebble: 50, BlockCacheMisses: 44, Flushes: 4, Compactions: 1}
	if got := start.plus(end); got != sum {
		t.Fatalf("sum %+v, want %+v", got, sum)
	}
	// A node that restarted in the window counts from zero again.
	restarted := end
	restarted.Flushes = 0
	if d := nodeCountersBetween(start, restarted); d != nil {
		t.Fatalf("a counter that went back gave %+v", *d)
	}
	if got := (&NodeCounters{Flushes: 1}).summary(); got != "nodes in the window: Pebble 1 flushes, 0 compactions, 0 write stalls" {
		t.Fatalf("summary without reads: %s", got)
	}
}

func TestReadsNote(t *testing.T) {
	with := func(cache, pebble uint64) Report {
		r := report("status", map[string]OpReport{"status": {Count: 1, Throughput: 1}})
		r.Nodes = &NodeCounters{OrderReadsFromCache: cache, OrderReadsFromPebble: pebble}
		return r
	}
	unknown := report("status", map[string]OpReport{"status": {Count: 1, Throughput: 1}})
	for _, tc := range []struct {
		name string
		a, b []Report
		want string
	}{
		{"both from the cache", []Report{with(100, 0)}, []Report{with(95, 5)}, ""},
		{"cache against Pebble", []Report{with(100, 0)}, []Report{with(0, 50), with(0, 50)}, "0% in A, 100% in B"},
		{"no reads on a side (charge runs)", []Report{with(0, 0)}, []Report{with(0, 100)}, ""},
		{"A without counters", []Report{unknown}, []Report{with(0, 100)}, ""},
	} {
		if got := readsNote(tc.a, tc.b); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
