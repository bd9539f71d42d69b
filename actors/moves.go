package actors

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/transport/acquirer"
)

// Exactly-once movements (docs/acquirer.md). A settle, void, refund or
// automatic settle is first committed with its movement pending (its STAN
// and RRN decided here, on the leader, and written into the command); only
// then does its first message go out. The merchant's request waits for one
// attempt; without an answer a goroutine repeats the message (0221, 0401)
// with the same STAN and RRN until the acquirer answers, and the answer is
// committed as a move_outcome. A new leader, or this one after a restart,
// finds the movement in the applied state (the pending set) and drives it
// again; the acquirer answers a repeat with its first answer, so the money
// moves once however many nodes send it.

// moveAnswer is the acquirer's answer to a movement, back to its order's
// actor.
type moveAnswer struct {
	txnID string
	res   acquirer.MoveResult
}

// newMove decides a movement's STAN and RRN for the command that records
// it. A capture or reversal carries its authorisation's RRN (the acquirer
// knows the original by it); a refund has its own.
func newMove(o *order.Order, kind order.Kind, txnID string) *order.Move {
	ref := txnID
	if kind != order.KindRefund && o != nil && len(o.Txns) > 0 {
		ref = o.Txns[0].ID
	}
	return &order.Move{STAN: acquirer.STAN(txnID), RRN: acquirer.RRN(ref)}
}

// moveRequest is the acquirer request of o's pending movement m.
func (a *orderActor) moveRequest(o *order.Order, m order.Movement, repeat bool) (acquirer.MoveRequest, error) {
	req := acquirer.MoveRequest{
		Kind: string(m.Kind), Repeat: repeat, STAN: m.STAN, RRN: m.RRN, At: time.Unix(0, m.At),
		Amount: m.Amount, Currency: o.Currency, MID: o.ProcessingMID, MerchantID: o.Merchant,
		AcquirerAddr: AcquirerAddr(a.deps.Store, o),
		OrigMTI:      "0100", OrigTrace: o.AuthTrace,
	}
	if len(o.Txns) > 0 && o.Txns[0].Operation == order.OpSale {
		req.OrigMTI = "0200"
	}
	if m.Kind == order.MoveRefund {
		c, err := a.openCard(o.Merchant, o.Source.CardID)
		if err != nil {
			return req, err
		}
		req.PAN, req.ExpMonth, req.ExpYear = c.PAN, c.ExpMonth, c.ExpYear
	}
	return req, nil
}

// sendMove sends o's pending movement of txnID once and commits the answer.
// It returns the order after the answer, or nil when none came (the
// movement is then repeated in the background) or the answer's commit
// failed (the scheduler's resume pass drives it again).
func (a *orderActor) sendMove(o *order.Order, txnID string) *order.Order {
	m := o.Movement(txnID)
	if m == nil || a.moving[txnID] {
		return nil
	}
	req, err := a.moveRequest(o, *m, false)
	if err != nil {
		a.deps.Logger.Error("movement: build request", "order_id", o.ID, "txn_id", txnID, "error", err)
		return nil
	}
	ctx, cancel := context.WithTimeout(a.term, 30*time.Second)
	res, err := a.deps.Acquirer.Move(ctx, req)
	cancel()
	if err != nil {
		a.repeatMove(req, txnID)
		return nil
	}
	return a.applyMoveAnswer(moveAnswer{txnID: txnID, res: res})
}

// repeatMove repeats req on a goroutine until the acquirer answers; the
// answer comes back to this actor (or a successor). The repeats end with
// the actor's term: a node that no longer leads stops sending, and the new
// leader drives the movement from the log.
func (a *orderActor) repeatMove(req acquirer.MoveRequest, txnID string) {
	if a.term.Err() != nil {
		// Spawned while the registry stopped its actors: this node does
		// not lead. The movement waits in the log for a leader; this
		// actor, awaiting nothing, retires and leaves it to a successor.
		return
	}
	if a.moving == nil {
		a.moving = map[string]bool{}
	}
	a.moving[txnID] = true
	a.awaiting++
	req.Repeat = true
	movesPending.Add(1)
	go func() {
		defer movesPending.Add(-1)
		term := a.term
		backoff := 50 * time.Millisecond
		for term.Err() == nil {
			ctx, cancel := context.WithTimeout(term, 30*time.Second)
			res, err := a.deps.Acquirer.Move(ctx, req)
			cancel()
			if err == nil {
				a.reg.Deliver(a.key, &moveAnswer{txnID: txnID, res: res})
				return
			}
			select {
			case <-time.After(backoff):
			case <-term.Done():
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}()
}

// applyMoveAnswer commits the acquirer's answer to a movement. The FSM
// refuses an answer for a movement no longer pending, so a second one (two
// nodes drove it) changes nothing.
func (a *orderActor) applyMoveAnswer(m moveAnswer) *order.Order {
	delete(a.moving, m.txnID)
	cmd := &order.Command{
		Kind: order.KindMoveOutcome, Time: a.deps.Now().UnixNano(), Merchant: a.key.Merchant,
		OrderID: a.key.OrderID, TxnID: m.txnID, ARN: m.res.ARN,
		Outcome: &order.OutcomeData{Approved: m.res.Approved, DeclineCode: m.res.DeclineCode,
			DeclineMessage: m.res.DeclineMessage},
	}
	res, err := a.propose(cmd)
	if err != nil {
		a.deps.Logger.Warn("movement answer not committed; left pending", "order_id", a.key.OrderID, "error", err)
		return nil
	}
	if res.Outcome.Reject != nil {
		return nil
	}
	return res.Order
}

// driveMoves sends every pending movement of o that is not already on its
// way, each repeated until answered: after a restart or a leadership
// change, or an answer whose commit failed.
func (a *orderActor) driveMoves(o *order.Order) {
	for _, m := range o.Moves {
		if a.moving[m.TxnID] {
			continue
		}
		req, err := a.moveRequest(o, m, true)
		if err != nil {
			a.deps.Logger.Error("movement: build request", "order_id", o.ID, "txn_id", m.TxnID, "error", err)
			continue
		}
		a.repeatMove(req, m.TxnID)
	}
}

// afterRecorded answers an operation whose command recorded a movement:
// the order after the acquirer's answer if it came within one attempt,
// else the order as recorded (its transaction created).
func (a *orderActor) afterRecorded(res persistence.Result) *order.Order {
	if res.Order == nil || res.Order.Movement(res.Outcome.TxnID) == nil {
		return res.Order
	}
	if done := a.sendMove(res.Order, res.Outcome.TxnID); done != nil {
		return done
	}
	return res.Order
}

// movesPending counts the movements this node is repeating until answered.
var movesPending atomic.Int64

func init() {
	metrics.NewGauge(`gateway_acquirer_movements_pending`, func() float64 { return float64(movesPending.Load()) })
}
