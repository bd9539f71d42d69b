package order_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/paygate/gateway/order"
)

// TestApplyInitPaymentOnExisting: init-payment on an order that exists, in
// any status, replays the same request and refuses a different one, like a
// charge (contract section 5).
func TestApplyInitPaymentOnExisting(t *testing.T) {
	for _, fx := range fxOrders() {
		t.Run(fx.name, func(t *testing.T) {
			initCmd := func(hash string) *order.Command {
				return &order.Command{Kind: order.KindInitPayment, Time: fxEpoch + 50*fxSecond, Merchant: "m1",
					OrderID: "o1", RequestHash: hash,
					Create: &order.CreateData{Amount: 5, Currency: "EUR", ProcessingMID: "mid1"},
					Form:   &order.FormData{TokenHash: "x", ExpiresAt: fxEpoch + int64(time.Hour)}}
			}
			cur := fx.order()
			before := cur.Clone()
			next, out := order.Apply(cur, initCmd("h1"))
			if out.Reject != nil || !out.Replay || next != cur || !reflect.DeepEqual(cur, before) {
				t.Fatalf("same request: got %+v, want a replay of the unchanged order", out)
			}
			next, out = order.Apply(cur, initCmd("h2"))
			wantRejected(t, cur, before, next, out, order.RejectConflict, "order_id",
				"order_id has already been used with a different request")
		})
	}
}

// TestPendingDue: only an authorisation that is not waiting for the
// customer is due at the acquirer (what a restart resumes).
func TestPendingDue(t *testing.T) {
	var none *order.PendingAuth
	for _, c := range []struct {
		p   *order.PendingAuth
		due bool
	}{
		{none, false},
		{&order.PendingAuth{TxnID: "t1"}, true},
		{&order.PendingAuth{TxnID: "t1", ThreeDS: &order.ThreeDS{CAVV: "x"}}, true},
		{&order.PendingAuth{TxnID: "t1", Challenge: "c1"}, false},
	} {
		if got := c.p.Due(); got != c.due {
			t.Errorf("%+v: Due() = %v, want %v", c.p, got, c.due)
		}
	}
}

// TestExpiresAt: the expiry schedule covers a created form and an open
// challenge, nothing else.
func TestExpiresAt(t *testing.T) {
	want := map[string]bool{"created": true, "processing-verify": true}
	for _, fx := range fxOrders() {
		o := fx.order()
		if got := o.ExpiresAt() != 0; got != want[fx.name] {
			t.Errorf("%s: ExpiresAt() = %d", fx.name, o.ExpiresAt())
		}
	}
}

// FormSubmitRefused answers as Apply would: an open form may pay until its
// lifetime ends, a used, final or missing one may not.
func TestFormSubmitRefused(t *testing.T) {
	open := &order.Order{Merchant: "m1", ID: "o1", Status: order.StatusCreated, FormExpiresAt: 2000}
	paid := &order.Order{Merchant: "m1", ID: "o1", Status: order.StatusProcessing, FormExpiresAt: 2000}
	for _, c := range []struct {
		name    string
		cur     *order.Order
		now     int64
		refused bool
		kind    order.RejectKind
	}{
		{"open", open, 1999, false, 0},
		{"expired", open, 2000, true, order.RejectIllegalStatus},
		{"already paid", paid, 1000, true, order.RejectIllegalStatus},
		{"no such order", nil, 1000, true, order.RejectNotFound},
	} {
		got := order.FormSubmitRefused(c.cur, c.now)
		if (got != nil) != c.refused || got != nil && got.Kind != c.kind {
			t.Errorf("%s: %+v, want refused %v (%v)", c.name, got, c.refused, c.kind)
		}
		_, out := order.Apply(c.cur, &order.Command{Kind: order.KindFormSubmit, Time: c.now, TxnID: "t1", Submit: &order.SubmitData{}})
		if (out.Reject == nil) != (got == nil) {
			t.Errorf("%s: FormSubmitRefused %+v, Apply's answer %+v", c.name, got, out.Reject)
		}
	}
}
