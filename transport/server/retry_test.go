package server

import (
	"errors"
	"fmt"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/actors"
	"github.com/paygate/gateway/cluster"
	"github.com/paygate/gateway/transport/apierr"
)

// Only a refund without an Idempotency-Key makes a second change when sent
// again; and only a failure after which the request may still take effect
// leaves its outcome unknown. Their meeting is answered 500 5.03 instead of
// 503 6.02's "safe to retry".
func TestWhichFailuresAreUnsafeToRetry(t *testing.T) {
	req := func(path, key string) *fasthttp.RequestCtx {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(path)
		if key != "" {
			ctx.Request.Header.Set("Idempotency-Key", key)
		}
		return &ctx
	}
	for _, c := range []struct {
		path, key string
		want      bool
	}{
		{"/api/v3/refund", "", true},
		{"/api/v1/refund", "", true},
		{"/api/v3/refund", "k-1", false},
		{"/api/v3/settle", "", false},
		{"/api/v3/void", "", false},
		{"/api/v3/charge", "", false},
	} {
		if got := repeatIsANewRefund(req(c.path, c.key)); got != c.want {
			t.Errorf("%s key %q: %v, want %v", c.path, c.key, got, c.want)
		}
	}
	unknown := fmt.Errorf("%w (%w: a new leader may commit it)", cluster.ErrNoLeader, cluster.ErrOutcomeUnknown)
	for _, c := range []struct {
		name string
		res  any
		err  error
		want bool
	}{
		{"the actor did not answer in time", nil, actors.ErrTimeout, true},
		{"appended, then leadership lost", &actors.Reply{Err: unknown}, nil, true},
		{"not the leader: never proposed", &actors.Reply{Err: fmt.Errorf("%w: node is not the leader", cluster.ErrNoLeader)}, nil, false},
		{"registry stopped before the request", nil, actors.ErrStopped, false},
		{"a refusal", &actors.Reply{Err: errors.New("other")}, nil, false},
	} {
		if got := outcomeUnknown(c.res, c.err); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if e := refundOutcomeUnknown(); e.Code != apierr.Internal || e.Code.HTTP != 500 || e.Code.Code != "5.03" {
		t.Errorf("answer: %+v", e)
	}
}
