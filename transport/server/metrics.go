package server

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// /metrics carries # HELP and # TYPE lines: without them Prometheus and
// other scrapers take every series as untyped, so a counter cannot be
// told from a gauge. Set here, at process start, because this package
// serves /metrics (server.go); it is a process-wide switch of the library.
func init() { metrics.ExposeMetadata(true) }

// requestMetrics counts requests and their latency per operation and HTTP
// status. Series are created on first use and cached: building a metric
// name per request would dominate a hot path.
type requestMetrics struct {
	mu       sync.RWMutex
	counters map[string]*metrics.Counter
	latency  map[string]*metrics.PrometheusHistogram
}

func newRequestMetrics() *requestMetrics {
	return &requestMetrics{counters: map[string]*metrics.Counter{}, latency: map[string]*metrics.PrometheusHistogram{}}
}

func (m *requestMetrics) observe(op string, status int, start time.Time) {
	key := op + "/" + strconv.Itoa(status)
	m.mu.RLock()
	c, h := m.counters[key], m.latency[key]
	m.mu.RUnlock()
	if c == nil {
		c = metrics.GetOrCreateCounter(fmt.Sprintf(`gateway_http_requests_total{op=%q,code="%d"}`, op, status))
		h = metrics.GetOrCreatePrometheusHistogram(fmt.Sprintf(`gateway_http_request_duration_seconds{op=%q,code="%d"}`, op, status))
		m.mu.Lock()
		m.counters[key], m.latency[key] = c, h
		m.mu.Unlock()
	}
	c.Inc()
	h.UpdateDuration(start)
}
