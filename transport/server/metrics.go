package server

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// requestMetrics counts requests and their latency per operation and HTTP
// status. Series are created on first use and cached: building a metric
// name per request would dominate a hot path.
type requestMetrics struct {
	mu       sync.RWMutex
	counters map[seriesKey]*metrics.Counter
	latency  map[seriesKey]*metrics.PrometheusHistogram
}

// seriesKey names a request series; a struct rather than a string built
// per request, which cost two allocations on every answer.
type seriesKey struct {
	op     string
	status int
}

func newRequestMetrics() *requestMetrics {
	return &requestMetrics{counters: map[seriesKey]*metrics.Counter{}, latency: map[seriesKey]*metrics.PrometheusHistogram{}}
}

func (m *requestMetrics) observe(op string, status int, start time.Time) {
	key := seriesKey{op, status}
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

// opUnknown labels requests to a path that names no operation: one label
// for them all, or any client could create series at will.
const opUnknown = "unknown"

// opLabel is the op a request to path is counted under: the operation it
// names under /api/v3/ or /api/v1/, else opUnknown.
func (s *Server) opLabel(path string) string {
	for _, prefix := range []string{"/api/v3/", "/api/v1/"} {
		if op, ok := strings.CutPrefix(path, prefix); ok {
			if _, known := s.endpoints[op]; known {
				return op
			}
		}
	}
	return opUnknown
}

// handlerPanics counts requests recovered from a panic (recoverPanic);
// it exists at 0 so an alert can watch it.
var handlerPanics = metrics.GetOrCreateCounter("gateway_http_handler_panics_total")
