package node

import (
	"context"
	"fmt"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/paygate/gateway/actors"
	"github.com/paygate/gateway/transport/acquirer"
)

// meteredAcquirer counts the acquirer's answers to authorisations and times
// each round trip, whatever acquirer the node talks to: what an operator
// reads as "charges by outcome" and "is the acquirer slow or away". The
// order actors call Authorize on the leader only, so these are the leader's
// figures. Every other method passes through to the acquirer it wraps.
type meteredAcquirer struct {
	actors.Acquirer
	approved, failed *metrics.Counter
	roundTrip        *metrics.PrometheusHistogram
}

func meterAcquirer(a actors.Acquirer) *meteredAcquirer {
	return &meteredAcquirer{
		Acquirer:  a,
		approved:  metrics.GetOrCreateCounter(`gateway_authorizations_total{result="approved"}`),
		failed:    metrics.GetOrCreateCounter(`gateway_authorizations_total{result="error"}`),
		roundTrip: metrics.GetOrCreatePrometheusHistogram(`gateway_authorization_seconds`),
	}
}

func (m *meteredAcquirer) Authorize(ctx context.Context, req acquirer.AuthRequest) (acquirer.AuthResult, error) {
	start := time.Now()
	res, err := m.Acquirer.Authorize(ctx, req)
	m.roundTrip.UpdateDuration(start)
	switch {
	case err != nil:
		m.failed.Inc() // a transport failure or a deadline: retried by the order
	case res.Approved:
		m.approved.Inc()
	default:
		code := res.DeclineCode
		if !declineCodes[code] {
			code = "other" // an acquirer's stray code must not grow the series without bound
		}
		metrics.GetOrCreateCounter(fmt.Sprintf(`gateway_authorizations_total{result="declined",code=%q}`, code)).Inc()
	}
	return res, err
}

// declineCodes are the contract's decline codes (section 3).
var declineCodes = map[string]bool{"2.06": true, "2.09": true, "3.02": true, "3.08": true, "4.01": true, "5.01": true, "6.02": true}
