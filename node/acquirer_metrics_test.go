package node

import (
	"context"
	"errors"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/paygate/gateway/actors"
	"github.com/paygate/gateway/transport/acquirer"
)

// answering is an acquirer that answers each authorisation with the next
// of its answers.
type answering struct {
	actors.Acquirer
	answers []func() (acquirer.AuthResult, error)
}

func (a *answering) Authorize(context.Context, acquirer.AuthRequest) (acquirer.AuthResult, error) {
	next := a.answers[0]
	a.answers = a.answers[1:]
	return next()
}

// The wrapper counts each answer under its result (a decline under its
// code, an unknown code as "other"), times every round trip, and hands the
// answer back unchanged.
func TestMeteredAcquirer(t *testing.T) {
	count := func(name string) uint64 { return metrics.GetOrCreateCounter(name).Get() }
	approved, failed := `gateway_authorizations_total{result="approved"}`, `gateway_authorizations_total{result="error"}`
	declined, other := `gateway_authorizations_total{result="declined",code="3.08"}`, `gateway_authorizations_total{result="declined",code="other"}`
	before := map[string]uint64{approved: count(approved), failed: count(failed), declined: count(declined), other: count(other)}
	roundsBefore := roundTrips(t)

	down := errors.New("connection refused")
	a := meterAcquirer(&answering{answers: []func() (acquirer.AuthResult, error){
		func() (acquirer.AuthResult, error) {
			return acquirer.AuthResult{Approved: true, AuthCode: "A1B2C3"}, nil
		},
		func() (acquirer.AuthResult, error) { return acquirer.AuthResult{DeclineCode: "3.08"}, nil },
		func() (acquirer.AuthResult, error) { return acquirer.AuthResult{DeclineCode: "99.99"}, nil },
		func() (acquirer.AuthResult, error) { return acquirer.AuthResult{}, down },
	}})
	res, err := a.Authorize(context.Background(), acquirer.AuthRequest{})
	if err != nil || !res.Approved || res.AuthCode != "A1B2C3" {
		t.Fatalf("approval passed on as %+v, %v", res, err)
	}
	a.Authorize(context.Background(), acquirer.AuthRequest{})
	a.Authorize(context.Background(), acquirer.AuthRequest{})
	if _, err := a.Authorize(context.Background(), acquirer.AuthRequest{}); err != down {
		t.Fatalf("error passed on as %v", err)
	}
	for name, want := range map[string]uint64{approved: 1, declined: 1, other: 1, failed: 1} {
		if got := count(name) - before[name]; got != want {
			t.Errorf("%s rose by %d, want %d", name, got, want)
		}
	}
	if n := roundTrips(t); n-roundsBefore != 4 {
		t.Errorf("gateway_authorization_seconds counted %d round trips, want 4", n-roundsBefore)
	}
}

// roundTrips reads gateway_authorization_seconds_count off /metrics' text.
func roundTrips(t *testing.T) int {
	t.Helper()
	return int(metricCount(t, "gateway_authorization_seconds_count"))
}
