package order_test

import (
	"testing"

	"github.com/paygate/gateway/order"
)

// authorised is an authorised order with its approved authorisation.
func authorised() *order.Order {
	o := fxBase(order.StatusAuthorized)
	o.Txns = []order.Transaction{fxTxn("t-auth", order.OpAuth, order.TxnSuccess, fxAmount, fxEpoch)}
	o.AutoSettleAt = fxEpoch + 24*3600*fxSecond
	return o
}

func moveCmd(kind order.Kind, txn string, amount int64) *order.Command {
	return &order.Command{Kind: kind, Time: fxEpoch + fxSecond, Merchant: "m1", OrderID: "o1", TxnID: txn,
		Amount: amount, Move: &order.Move{STAN: "000042", RRN: "RRN" + txn}}
}

func answer(txn string, approved bool) *order.Command {
	out := &order.OutcomeData{Approved: approved}
	if !approved {
		out.DeclineCode, out.DeclineMessage = "3.08", "declined"
	}
	return &order.Command{Kind: order.KindMoveOutcome, Time: fxEpoch + 2*fxSecond, Merchant: "m1", OrderID: "o1",
		TxnID: txn, ARN: "arn-" + txn, Outcome: out}
}

func mustApply(t *testing.T, cur *order.Order, cmd *order.Command) (*order.Order, order.Outcome) {
	t.Helper()
	next, out := order.Apply(cur, cmd)
	if out.Reject != nil {
		t.Fatalf("%s rejected: %+v", cmd.Kind, out.Reject)
	}
	return next, out
}

func TestSettleIsPendingUntilAnswered(t *testing.T) {
	cur := authorised()
	rec, out := mustApply(t, cur, moveCmd(order.KindSettle, "t-s", 400))
	if rec.Status != order.StatusAuthorized || out.StatusChanged || rec.Txn("t-s").Status != order.TxnCreated {
		t.Fatalf("recorded settle: status %s, txn %s", rec.Status, rec.Txn("t-s").Status)
	}
	if !rec.AcquirerDue() || rec.Movement("t-s") == nil || rec.Movement("t-s").STAN != "000042" || rec.AutoSettleAt != 0 {
		t.Fatalf("movement not recorded: %+v", rec.Moves)
	}
	// While it waits, neither another settle nor a void may start.
	for _, k := range []order.Kind{order.KindSettle, order.KindVoid} {
		if _, out := order.Apply(rec, moveCmd(k, "t-x", 0)); out.Reject == nil || out.Reject.Kind != order.RejectIllegalStatus {
			t.Fatalf("%s while a settle waits: %+v", k, out.Reject)
		}
	}
	done, out := mustApply(t, rec, answer("t-s", true))
	if done.Status != order.StatusSettled || done.SettledAmount != 400 || !out.StatusChanged || !out.MoveAnswered ||
		done.Txn("t-s").Status != order.TxnSuccess || done.Txn("t-s").ARN != "arn-t-s" || done.AcquirerDue() {
		t.Fatalf("answered settle: %+v", done)
	}
	// A second answer changes nothing.
	if _, out := order.Apply(done, answer("t-s", true)); out.Reject == nil {
		t.Fatal("a second answer was applied")
	}
}

func TestDeclinedMovementLeavesOrder(t *testing.T) {
	rec, _ := mustApply(t, authorised(), moveCmd(order.KindVoid, "t-v", 0))
	done, out := mustApply(t, rec, answer("t-v", false))
	v := done.Txn("t-v")
	if done.Status != order.StatusAuthorized || out.StatusChanged || !out.MoveAnswered || v.Status != order.TxnFail ||
		v.Decline == nil || v.Decline.Code != "3.08" || done.AcquirerDue() {
		t.Fatalf("declined void: order %s txn %+v", done.Status, v)
	}
}

func TestPendingRefundsCountAgainstWhatIsLeft(t *testing.T) {
	s := authorised()
	s.Status, s.SettledAmount = order.StatusSettled, 600
	r1, _ := mustApply(t, s, moveCmd(order.KindRefund, "t-r1", 500))
	if _, out := order.Apply(r1, moveCmd(order.KindRefund, "t-r2", 200)); out.Reject == nil || out.Reject.Kind != order.RejectAmount {
		t.Fatalf("refund beyond what is left while one waits: %+v", out.Reject)
	}
	r2, _ := mustApply(t, r1, moveCmd(order.KindRefund, "t-r2", 100))
	d1, _ := mustApply(t, r2, answer("t-r1", false)) // declined: its 500 is free again
	d2, out := mustApply(t, d1, answer("t-r2", true))
	if d2.RefundedAmount != 100 || d2.Status != order.StatusSettled || !out.MoveAnswered || out.StatusChanged {
		t.Fatalf("after a declined and an approved refund: %+v", d2)
	}
	full, out := mustApply(t, d2, moveCmd(order.KindRefund, "t-r3", 500))
	full, out = mustApply(t, full, answer("t-r3", true))
	if full.Status != order.StatusRefunded || !out.StatusChanged {
		t.Fatalf("full refund: %s", full.Status)
	}
}

func TestUnansweredAuthorisationIsReversed(t *testing.T) {
	o := fxBase(order.StatusProcessing)
	o.Txns = []order.Transaction{fxTxn("t-auth", order.OpAuth, order.TxnCreated, fxAmount, fxEpoch)}
	o.Pending = &order.PendingAuth{TxnID: "t-auth"}
	cmd := moveCmd(order.KindAuthOutcome, "t-auth", 0)
	cmd.Outcome = &order.OutcomeData{DeclineCode: "6.02", DeclineMessage: "unreachable"}
	dec, _ := mustApply(t, o, cmd)
	if dec.Status != order.StatusDeclined || dec.Movement("t-auth") == nil || dec.Movement("t-auth").Kind != order.MoveReversal ||
		!dec.AcquirerDue() {
		t.Fatalf("timed-out authorisation: %s %+v", dec.Status, dec.Moves)
	}
	done, out := mustApply(t, dec, answer("t-auth", true))
	if done.Status != order.StatusDeclined || out.StatusChanged || out.MoveAnswered || done.AcquirerDue() ||
		done.Txn("t-auth").Status != order.TxnFail {
		t.Fatalf("acknowledged reversal changed the order: %+v", done)
	}
}
