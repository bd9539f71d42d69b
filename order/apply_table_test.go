package order_test

import (
	"time"

	"fmt"
	"reflect"
	"testing"

	"github.com/paygate/gateway/order"
)

// tableOp is one operation tried on every status.
type tableOp struct {
	name  string // operation name in the rejection message
	cmd   func() *order.Command
	legal order.Status // the only status it is allowed in (contract section 4)
	// amountOK says whether the amount is valid for the hand-built order
	// in the legal status; when not, the legal status refuses it with 2.02.
	amountOK bool
	// needs, when set, narrows the legal status to the orders where the
	// step applies (which wait the pending authorisation is in).
	needs func(o *order.Order) bool
}

func tableOps() []tableOp {
	at := fxEpoch + 100*fxSecond
	cmd := func(k order.Kind, amount int64, auto bool) func() *order.Command {
		return func() *order.Command {
			c := &order.Command{Kind: k, Time: at, Merchant: "m1", OrderID: "o1", TxnID: "t9",
				ARN: "arn-t9", Amount: amount, Auto: auto}
			if auto {
				// After every fixture's auto-settle time.
				c.Time = fxEpoch + int64(48*time.Hour)
			}
			return c
		}
	}
	outcome := func(approved bool) func() *order.Command {
		return func() *order.Command {
			c := cmd(order.KindAuthOutcome, 0, false)()
			c.TxnID = "t1"
			c.Outcome = &order.OutcomeData{Approved: approved, AuthCode: "A9", DeclineCode: "3.08",
				DeclineMessage: "do not honour", AutoSettleAt: at + 3600*fxSecond}
			return c
		}
	}
	// Amounts are chosen against the fixtures: amount 1000; settled 600 (auth
	// path) or 1000 (sale path), nothing refunded yet.
	return []tableOp{
		{"settle", cmd(order.KindSettle, 400, false), order.StatusAuthorized, true, nil},
		{"settle", cmd(order.KindSettle, fxAmount, false), order.StatusAuthorized, true, nil},
		{"settle", cmd(order.KindSettle, 0, false), order.StatusAuthorized, true, nil}, // no amount: the full amount
		{"settle", cmd(order.KindSettle, fxAmount+1, false), order.StatusAuthorized, false, nil},
		{"settle", cmd(order.KindSettle, 0, true), order.StatusAuthorized, true, nil}, // auto-settle
		{"void", cmd(order.KindVoid, 0, false), order.StatusAuthorized, true, nil},    // no amount: the full amount
		{"void", cmd(order.KindVoid, fxAmount, false), order.StatusAuthorized, true, nil},
		{"void", cmd(order.KindVoid, fxAmount-1, false), order.StatusAuthorized, false, nil},
		{"refund", cmd(order.KindRefund, 100, false), order.StatusSettled, true, nil},
		{"refund", cmd(order.KindRefund, fxSettled, false), order.StatusSettled, true, nil},
		{"refund", cmd(order.KindRefund, 0, false), order.StatusSettled, false, nil},
		{"refund", cmd(order.KindRefund, fxAmount+1, false), order.StatusSettled, false, nil},
		{"authorisation outcome", outcome(true), order.StatusProcessing, true, due},
		{"authorisation outcome", outcome(false), order.StatusProcessing, true, due},
		{"form submit", func() *order.Command {
			c := cmd(order.KindFormSubmit, 0, false)()
			c.Submit = &order.SubmitData{Source: order.PaymentSource{Type: "card", CardID: "card-9"}}
			return c
		}, order.StatusCreated, true, nil},
		{"expire", func() *order.Command {
			c := cmd(order.KindExpire, 0, false)()
			c.TxnID, c.Time = "", fxEpoch+int64(48*time.Hour) // after the form's lifetime
			return c
		}, order.StatusCreated, true, nil},
		{"3-D Secure challenge", func() *order.Command {
			c := cmd(order.KindThreeDSChallenge, 0, false)()
			c.TxnID = "t1"
			c.Challenge = &order.ChallengeData{ID: "c9", RedirectURL: "https://pay.example/api/v3/3ds/c9", ExpiresAt: at + 600*fxSecond}
			return c
		}, order.StatusProcessing, true, undecided},
		{"3-D Secure downgrade", func() *order.Command {
			c := cmd(order.KindNonSecure, 0, false)()
			c.TxnID = "t1"
			return c
		}, order.StatusProcessing, true, undecided},
		{"3-D Secure result", threeDSResult(true), order.StatusProcessing, true, challenged},
		{"3-D Secure result", threeDSResult(false), order.StatusProcessing, true, challenged},
	}
}

// Which wait a processing order's authorisation is in.
var (
	due        = func(o *order.Order) bool { return o.Pending.Due() }
	undecided  = func(o *order.Order) bool { return o.Pending.Due() && o.Pending.ThreeDS == nil }
	challenged = func(o *order.Order) bool { return o.Pending != nil && o.Pending.Challenge == "c1" }
)

func threeDSResult(authenticated bool) func() *order.Command {
	return func() *order.Command {
		c := &order.Command{Kind: order.KindThreeDSResult, Time: fxEpoch + 100*fxSecond, Merchant: "m1",
			OrderID: "o1", TxnID: "t1", ThreeDSResult: &order.ThreeDSResultData{ChallengeID: "c1",
				Authenticated: authenticated, Result: &order.ThreeDS{AuthenticationResult: "N", Version: "2.2.0"}}}
		if authenticated {
			c.ThreeDSResult.Result = &order.ThreeDS{AuthenticationResult: "Y", Version: "2.2.0", ECI: "05", CAVV: "Y2F2dg=="}
		} else {
			c.ThreeDSResult.DeclineCode, c.ThreeDSResult.DeclineMessage = "5.01", "3-D Secure authentication failed"
		}
		return c
	}
}

func describe(c *order.Command) string {
	if c.Outcome != nil {
		return fmt.Sprintf("%s(txn=%s approved=%v)", c.Kind, c.TxnID, c.Outcome.Approved)
	}
	if c.ThreeDSResult != nil {
		return fmt.Sprintf("%s(txn=%s authenticated=%v)", c.Kind, c.TxnID, c.ThreeDSResult.Authenticated)
	}
	return fmt.Sprintf("%s(amount=%d auto=%v)", c.Kind, c.Amount, c.Auto)
}

// TestApplyIllegalStatus tries every operation in every status. Where
// contract section 4 does not allow it, Apply must refuse it with 0.03 on
// "status" and hand back the very order it was given, untouched.
func TestApplyIllegalStatus(t *testing.T) {
	refused := 0
	for _, fx := range fxOrders() {
		for _, op := range tableOps() {
			cur := fx.order()
			cmd := op.cmd()
			t.Run(fx.name+"/"+describe(cmd), func(t *testing.T) {
				before := cur.Clone()
				next, out := order.Apply(cur, cmd)
				if !reflect.DeepEqual(before, cur) {
					t.Fatalf("Apply mutated its input:\nbefore %+v\nafter  %+v", before, cur)
				}
				switch {
				case cur.Status != op.legal || (op.needs != nil && !op.needs(cur)):
					refused++
					wantRejected(t, cur, before, next, out, order.RejectIllegalStatus, "status",
						"order status is illegal for the "+op.name+" operation")
				case !op.amountOK:
					wantRejected(t, cur, before, next, out, order.RejectAmount, "amount", "")
				default:
					if out.Reject != nil {
						t.Fatalf("legal operation refused: %+v", *out.Reject)
					}
					if next == cur || next.Version != cur.Version+1 || next.UpdatedAt != cmd.Time {
						t.Fatalf("change not applied to a new order with the next version")
					}
				}
			})
		}
	}
	// 11 fixtures x 20 operations, of which 8 (authorized), 2x4 (settled,
	// settled-sale), 2x2 authorisation outcomes (processing,
	// processing-sale: due at the acquirer), 2 in created (form submit,
	// expire), 2 in processing-sale (challenge, downgrade: no 3-D Secure
	// step taken yet) and 2 in processing-verify (the 3-D Secure results)
	// are legal.
	if want := 11*20 - 8 - 8 - 4 - 2 - 2 - 2; refused != want {
		t.Errorf("%d illegal combinations tried, want %d", refused, want)
	}
}

func wantRejected(t *testing.T, cur, before, next *order.Order, out order.Outcome,
	kind order.RejectKind, attr, msg string) {
	t.Helper()
	if out.Reject == nil {
		t.Fatalf("accepted (status %s -> %s), want rejection kind %d", cur.Status, next.Status, kind)
	}
	r := out.Reject
	if r.Kind != kind || r.Attribute != attr || (msg != "" && r.Message != msg) {
		t.Fatalf("rejection %+v, want kind %d on %q: %q", *r, kind, attr, msg)
	}
	if next != cur {
		t.Fatalf("a rejection returned a different order (%p, want %p)", next, cur)
	}
	if !reflect.DeepEqual(next, before) {
		t.Fatalf("a rejection changed the order")
	}
	if out.Changed() || out.StatusChanged || out.Created || out.Replay {
		t.Fatalf("a rejection reports a change: %+v", out)
	}
}

// TestApplyOutcomeNotPending: in processing, an answer is only taken for the
// pending authorisation, and only once.
func TestApplyOutcomeNotPending(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(o *order.Order)
		txnID   string
		wantMsg string
	}{
		{"other transaction", func(*order.Order) {}, "t2", ""},
		{"no pending authorisation", func(o *order.Order) { o.Pending = nil }, "t1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := fxOrders()[2].order() // processing
			tc.mutate(cur)
			before := cur.Clone()
			next, out := order.Apply(cur, &order.Command{Kind: order.KindAuthOutcome, Time: fxEpoch + fxSecond,
				Merchant: "m1", OrderID: "o1", TxnID: tc.txnID, Outcome: &order.OutcomeData{Approved: true}})
			wantRejected(t, cur, before, next, out, order.RejectIllegalStatus, "status",
				"order status is illegal for the authorisation outcome operation")
		})
	}
}

// TestApplyCreateOnExisting: creating an order that exists, in any status,
// replays the same request and refuses a different one (contract section 5).
func TestApplyCreateOnExisting(t *testing.T) {
	for _, fx := range fxOrders() {
		t.Run(fx.name, func(t *testing.T) {
			create := func(hash string) *order.Command {
				return &order.Command{Kind: order.KindCreate, Time: fxEpoch + 50*fxSecond, Merchant: "m1",
					OrderID: "o1", TxnID: "t9", RequestHash: hash,
					Create: &order.CreateData{Amount: 5, Currency: "EUR", ProcessingMID: "mid1"}}
			}
			cur := fx.order()
			before := cur.Clone()
			next, out := order.Apply(cur, create("h1"))
			if out.Reject != nil || !out.Replay || next != cur || !reflect.DeepEqual(cur, before) {
				t.Fatalf("same request: got %+v, want a replay of the unchanged order", out)
			}
			if len(cur.Txns) > 0 && out.TxnID != cur.Txns[0].ID {
				t.Fatalf("replay names txn %q, want %q", out.TxnID, cur.Txns[0].ID)
			}
			next, out = order.Apply(cur, create("h2"))
			wantRejected(t, cur, before, next, out, order.RejectConflict, "order_id",
				"order_id has already been used with a different request")
		})
	}
}

// TestApplyMissingOrder: every operation but create needs an order.
func TestApplyMissingOrder(t *testing.T) {
	for _, op := range tableOps() {
		next, out := order.Apply(nil, op.cmd())
		if next != nil || out.Reject == nil || out.Reject.Kind != order.RejectNotFound ||
			out.Reject.Attribute != "order_id" {
			t.Errorf("%s on no order: got %v %+v, want 2.05 on order_id", op.name, next, out)
		}
	}
}

// TestApplyUnknownKind: an unknown command is refused the same way on every
// replica, never applied.
func TestApplyUnknownKind(t *testing.T) {
	for _, fx := range fxOrders() {
		cur := fx.order()
		before := cur.Clone()
		next, out := order.Apply(cur, &order.Command{Kind: "capture", Time: fxEpoch, TxnID: "t9", Amount: 1})
		if out.Reject == nil || out.Reject.Kind != order.RejectIllegalStatus || next != cur ||
			!reflect.DeepEqual(cur, before) {
			t.Errorf("%s: unknown kind: got %+v", fx.name, out)
		}
	}
}

// An automatic settle before the delay ends, or on an order with none
// scheduled, changes nothing: the log enforces the schedule.
func TestAutoSettleOnlyWhenDue(t *testing.T) {
	for _, c := range fxOrders() {
		o := c.order()
		if o.Status != order.StatusAuthorized {
			continue
		}
		early := &order.Command{Kind: order.KindSettle, Auto: true, Time: o.AutoSettleAt - 1, TxnID: "t9"}
		if _, out := order.Apply(o, early); out.Reject == nil || out.Reject.Kind != order.RejectIllegalStatus {
			t.Fatalf("early auto-settle accepted: %+v", out)
		}
		o.AutoSettleAt = 0
		late := &order.Command{Kind: order.KindSettle, Auto: true, Time: fxEpoch + int64(48*time.Hour), TxnID: "t9"}
		if _, out := order.Apply(o, late); out.Reject == nil {
			t.Fatal("auto-settle of an order with no schedule accepted")
		}
	}
}

// TestRefundsAreBounded: an order takes at most MaxRefunds refunds, each
// of the smallest amount if the merchant likes; the next is refused, with
// the order unchanged, even with money left to refund.
func TestRefundsAreBounded(t *testing.T) {
	o := fxBase(order.StatusSettled)
	o.Amount, o.SettledAmount = 1_000_000, 1_000_000
	o.Txns = []order.Transaction{fxTxn("t1", order.OpAuth, order.TxnSuccess, o.Amount, fxEpoch),
		fxTxn("t2", order.OpSettle, order.TxnSuccess, o.Amount, fxEpoch)}
	refund := func(i int) *order.Command {
		return &order.Command{Kind: order.KindRefund, Time: fxEpoch + int64(i+1)*fxSecond, Merchant: "m1",
			OrderID: "o1", TxnID: fmt.Sprintf("r%d", i), Amount: 1}
	}
	for i := range order.MaxRefunds {
		next, out := order.Apply(o, refund(i))
		if out.Reject != nil {
			t.Fatalf("refund %d refused: %+v", i+1, out.Reject)
		}
		o = next
	}
	next, out := order.Apply(o, refund(order.MaxRefunds))
	if out.Reject == nil || out.Reject.Kind != order.RejectIllegalStatus || next != o {
		t.Fatalf("refund %d: %+v, order changed %v", order.MaxRefunds+1, out.Reject, next != o)
	}
	if o.RefundedAmount != order.MaxRefunds || o.Status != order.StatusSettled {
		t.Errorf("after %d refunds of 1: refunded %d, status %s", order.MaxRefunds, o.RefundedAmount, o.Status)
	}
}
