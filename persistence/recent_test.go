package persistence

import (
	"testing"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
)

// The FSM reads orders of the last batches from memory (fsmScratch). A
// stale version there would let money operations through against an old
// balance; this walks one order through settle and refunds with unrelated
// batches in between, so each read comes from a different place (the
// batch itself, the last batch, the one before, the cache, Pebble).
func TestFSMReadsTheNewestOrderVersion(t *testing.T) {
	s := newTestStore(t)
	op := func(kind order.Kind, txn string, amount int64) *command.Cmd {
		return &command.Cmd{Order: &order.Command{Kind: kind, Time: 10, Merchant: "m1", OrderID: "o1",
			TxnID: txn, Amount: amount}}
	}
	outcome := &command.Cmd{Order: &order.Command{Kind: order.KindAuthOutcome, Time: 2, Merchant: "m1", OrderID: "o1",
		TxnID: "t-o1", Outcome: &order.OutcomeData{Approved: true, AuthCode: "A1"}}}
	idx := uint64(0)
	apply := func(c *command.Cmd) Result { idx++; return s.apply(idx, c)[0] }
	unrelated := func(id string) { apply(createCmd(id, "body")) }

	apply(createCmd("o1", "body"))
	if r := apply(outcome); r.Order == nil || r.Order.Status != order.StatusAuthorized {
		t.Fatalf("outcome: %+v", r)
	}
	unrelated("x1")
	if r := apply(op(order.KindSettle, "s1", 60)); r.Outcome.Reject != nil || r.Order.SettledAmount != 60 {
		t.Fatalf("settle (order from two batches back): %+v", r.Outcome)
	}
	if r := apply(op(order.KindRefund, "r1", 50)); r.Outcome.Reject != nil || r.Order.RefundedAmount != 50 {
		t.Fatalf("refund (order from the last batch): %+v", r.Outcome)
	}
	// 10 left: a refund of 20 must see the first refund.
	if r := apply(op(order.KindRefund, "r2", 20)); r.Outcome.Reject == nil || r.Outcome.Reject.Kind != order.RejectAmount {
		t.Fatalf("over-refund after a refund: %+v", r.Outcome)
	}
	unrelated("x2")
	unrelated("x3")
	if r := apply(op(order.KindRefund, "r3", 10)); r.Outcome.Reject != nil || r.Order.Status != order.StatusRefunded {
		t.Fatalf("refund of the rest (order from the cache): %+v", r.Outcome)
	}
	s.reopen()
	if r := apply(op(order.KindRefund, "r4", 1)); r.Outcome.Reject == nil {
		t.Fatalf("refund of a refunded order (from Pebble): %+v", r.Outcome)
	}

	// A restore replaces the state: nothing of the old orders is kept, not
	// even one the last batch wrote.
	unrelated("o9")
	restoreFrom(t, s.Store, newTestStore(t).Store)
	if r := apply(createCmd("o9", "other-body")); !r.Outcome.Created {
		t.Fatalf("create after a restore to an empty state: %+v", r.Outcome)
	}
}
