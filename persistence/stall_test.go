package persistence

import (
	"io"
	"log/slog"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/cockroachdb/pebble/v2"
)

// A write stall is counted and its length observed, so operators can tie
// latency spikes to Pebble holding commits.
func TestWriteStallsAreCounted(t *testing.T) {
	counter := metrics.GetOrCreateCounter(`gateway_pebble_write_stalls_total`)
	hist := metrics.GetOrCreateHistogram(`gateway_pebble_write_stall_seconds`)
	before, observed := counter.Get(), histCount(hist)
	l := writeStallListener(slog.New(slog.NewTextHandler(io.Discard, nil)))
	l.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "memtable count limit reached"})
	l.WriteStallEnd()
	l.WriteStallEnd() // an end without a begin is not observed
	if counter.Get() != before+1 || histCount(hist) != observed+1 {
		t.Fatalf("stalls %d → %d, observed %d → %d", before, counter.Get(), observed, histCount(hist))
	}
}

func histCount(h *metrics.Histogram) uint64 {
	var n uint64
	h.VisitNonZeroBuckets(func(_ string, count uint64) { n += count })
	return n
}
