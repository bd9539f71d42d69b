package persistence

import (
	"bytes"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/cockroachdb/pebble/v2"
)

// A write stall is counted and its length observed, so operators can tie
// latency spikes to Pebble holding commits.
func TestWriteStallsAreCounted(t *testing.T) {
	counter := metrics.GetOrCreateCounter(`gateway_pebble_write_stalls_total`)
	l := writeStallListener(slog.New(slog.NewTextHandler(io.Discard, nil)))
	before, observed := counter.Get(), stallsObserved(t)
	l.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "memtable count limit reached"})
	l.WriteStallEnd()
	l.WriteStallEnd() // an end without a begin is not observed
	if after := stallsObserved(t); counter.Get() != before+1 || after != observed+1 {
		t.Fatalf("stalls %d → %d, observed %d → %d", before, counter.Get(), observed, after)
	}
}

// stallsObserved reads the stall histogram's count as /metrics shows it.
func stallsObserved(t *testing.T) uint64 {
	t.Helper()
	var out bytes.Buffer
	metrics.WritePrometheus(&out, false)
	const name = "gateway_pebble_write_stall_seconds_count "
	for _, line := range strings.Split(out.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("%s%s: %v", name, v, err)
			}
			return n
		}
	}
	t.Fatalf("/metrics has no %s", strings.TrimSpace(name))
	return 0
}
