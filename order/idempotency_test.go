package order_test

import (
	"testing"

	"github.com/paygate/gateway/order"
)

// The one idempotency rule that the order actor and the FSM both ask.
func TestUseOfKey(t *testing.T) {
	window := int64(order.IdempotencyWindow)
	for _, c := range []struct {
		name      string
		now       int64
		hash      string
		want      order.KeyUse
		firstAt   int64
		firstHash string
	}{
		{"same request", 10, "h", order.KeyRepeat, 5, "h"},
		{"other request", 10, "other", order.KeyConflict, 5, "h"},
		{"last instant of the window", 5 + window - 1, "other", order.KeyConflict, 5, "h"},
		{"window over", 5 + window, "other", order.KeyFresh, 5, "h"},
		{"window over, same request", 5 + window, "h", order.KeyFresh, 5, "h"},
	} {
		if got := order.UseOfKey(c.firstAt, c.firstHash, c.now, c.hash); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if r := order.KeyConflictRejection(); r.Kind != order.RejectConflict || r.Attribute != "idempotency-key" {
		t.Fatalf("conflict rejection %+v", r)
	}
}
