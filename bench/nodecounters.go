package bench

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// NodeCounters is what the target nodes' /metrics counted over the measured
// window, summed over the targets. It says what a run measured: status
// reads served from the order cache (a node that just wrote the orders)
// cost about two thirds of reads from Pebble (a node after a restart, or a store
// larger than the cache), and a flush, compaction or write stall in a short
// window shows in its tail.
type NodeCounters struct {
	OrderReadsFromCache  uint64 `json:"order_reads_from_cache"`
	OrderReadsFromPebble uint64 `json:"order_reads_from_pebble"`
	BlockCacheHits       uint64 `json:"block_cache_hits"`
	BlockCacheMisses     uint64 `json:"block_cache_misses"`
	Flushes              uint64 `json:"flushes"`
	Compactions          uint64 `json:"compactions"`
	WriteStalls          uint64 `json:"write_stalls"`
}

// nodeCounterSeries maps each /metrics series the report uses to its field.
var nodeCounterSeries = map[string]func(*NodeCounters) *uint64{
	`gateway_order_reads_total{from="cache"}`:  func(c *NodeCounters) *uint64 { return &c.OrderReadsFromCache },
	`gateway_order_reads_total{from="pebble"}`: func(c *NodeCounters) *uint64 { return &c.OrderReadsFromPebble },
	`gateway_pebble_block_cache_hits_total`:    func(c *NodeCounters) *uint64 { return &c.BlockCacheHits },
	`gateway_pebble_block_cache_misses_total`:  func(c *NodeCounters) *uint64 { return &c.BlockCacheMisses },
	`gateway_pebble_flushes_total`:             func(c *NodeCounters) *uint64 { return &c.Flushes },
	`gateway_pebble_compactions_total`:         func(c *NodeCounters) *uint64 { return &c.Compactions },
	`gateway_pebble_write_stalls_total`:        func(c *NodeCounters) *uint64 { return &c.WriteStalls },
}

// parseNodeCounters reads the series of nodeCounterSeries from a Prometheus
// text exposition; ok is false when it has none of them (not a gateway, or
// one from before these metrics).
func parseNodeCounters(r io.Reader) (c NodeCounters, ok bool, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "gateway_") {
			continue
		}
		series, value, found := strings.Cut(line, " ")
		field := nodeCounterSeries[series]
		if !found || field == nil {
			continue
		}
		v, err := strconv.ParseFloat(value, 64) // Prometheus text: integers may come as floats
		if err != nil || v < 0 {
			return NodeCounters{}, false, fmt.Errorf("%s: bad value %q", series, value)
		}
		*field(&c) = uint64(v)
		ok = true
	}
	return c, ok, sc.Err()
}

// scrapeNodeCounters sums the counters of every target; ok is false when
// any target could not be read, so a report never shows a partial sum.
func scrapeNodeCounters(targets []string) (NodeCounters, bool) {
	hc := &http.Client{Timeout: 2 * time.Second}
	var sum NodeCounters
	for _, t := range targets {
		resp, err := hc.Get(strings.TrimSuffix(t, "/") + "/metrics")
		if err != nil {
			return NodeCounters{}, false
		}
		c, ok, err := parseNodeCounters(resp.Body)
		resp.Body.Close()
		if err != nil || !ok || resp.StatusCode != http.StatusOK {
			return NodeCounters{}, false
		}
		sum = sum.plus(c)
	}
	return sum, len(targets) > 0
}

func (c NodeCounters) plus(o NodeCounters) NodeCounters {
	for _, field := range nodeCounterSeries {
		*field(&c) += *field(&o)
	}
	return c
}

// nodeCountersBetween is end minus start; nil when a counter went back (a
// node restarted during the window), as no difference would be right.
func nodeCountersBetween(start, end NodeCounters) *NodeCounters {
	var d NodeCounters
	for _, field := range nodeCounterSeries {
		if *field(&end) < *field(&start) {
			return nil
		}
		*field(&d) = *field(&end) - *field(&start)
	}
	return &d
}

// summary is the report's line, e.g. "nodes in the window: order reads
// 131380 from Pebble (100%), 0 from the cache; block cache 0.77 misses per
// read from Pebble; 0 flushes, 0 compactions, 0 write stalls".
func (c *NodeCounters) summary() string {
	var b strings.Builder
	b.WriteString("nodes in the window: ")
	if reads := c.OrderReadsFromCache + c.OrderReadsFromPebble; reads > 0 {
		fmt.Fprintf(&b, "order reads %d from the cache, %d from Pebble (%.0f%%); ",
			c.OrderReadsFromCache, c.OrderReadsFromPebble, 100*float64(c.OrderReadsFromPebble)/float64(reads))
		if c.OrderReadsFromPebble > 0 {
			fmt.Fprintf(&b, "block cache %.2f misses per read from Pebble; ",
				float64(c.BlockCacheMisses)/float64(c.OrderReadsFromPebble))
		}
	}
	fmt.Fprintf(&b, "Pebble %d flushes, %d compactions, %d write stalls", c.Flushes, c.Compactions, c.WriteStalls)
	return b.String()
}

// readsNote says when the two sides of a comparison read their orders from
// different places (the share served from Pebble differs by a tenth or
// more): a status run against a node that just wrote its orders, set
// against one after a restart, compares the caches as much as the builds.
func readsNote(a, b []Report) string {
	share := func(rs []Report) (pct float64, known bool) {
		var cache, pebble uint64
		for _, r := range rs {
			if r.Nodes != nil {
				cache += r.Nodes.OrderReadsFromCache
				pebble += r.Nodes.OrderReadsFromPebble
			}
		}
		if cache+pebble == 0 {
			return 0, false
		}
		return 100 * float64(pebble) / float64(cache+pebble), true
	}
	pa, ka := share(a)
	pb, kb := share(b)
	if !ka || !kb || max(pa-pb, pb-pa) < 10 {
		return ""
	}
	return fmt.Sprintf("order reads served from Pebble: %.0f%% in A, %.0f%% in B (the rest from the order cache); ratios also compare the caches", pa, pb)
}
