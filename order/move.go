package order

import "fmt"

// MoveKind names a money movement the acquirer must receive once: a capture
// (settle), a reversal (void, or an authorisation whose answer did not come
// in time) or a refund.
type MoveKind string

// Movement kinds.
const (
	MoveCapture  MoveKind = "capture"
	MoveReversal MoveKind = "reversal"
	MoveRefund   MoveKind = "refund"
)

// KindMoveOutcome is the acquirer's answer to a pending movement.
const KindMoveOutcome Kind = "move_outcome"

// Movement is a money movement recorded in the log before its first message
// goes out (docs/acquirer.md, "Exactly-once movements"). Everything its
// messages carry that is not in the order is decided by the leader and
// written here, so every attempt, on any node, after any restart, sends the
// same STAN, RRN and transmission time.
type Movement struct {
	// TxnID is the transaction it answers: the settle, void or refund, or
	// for the reversal of an unanswered authorisation the authorisation.
	TxnID  string   `json:"txn_id"`
	Kind   MoveKind `json:"kind"`
	Amount int64    `json:"amount"`
	STAN   string   `json:"stan"`
	RRN    string   `json:"rrn"`
	// At is when it was recorded (Unix ns, leader's clock): field 7 of
	// every attempt.
	At int64 `json:"at"`
	// IdempotencyKey is the operation's key, if it had one: the answer
	// rewrites the key's stored answer, so a repeat shows the outcome.
	IdempotencyKey string `json:"ik,omitempty"`
}

// Move is what the leader decided for a movement a command records: its
// STAN and RRN (Command.Move).
type Move struct {
	STAN string `json:"stan"`
	RRN  string `json:"rrn"`
}

// AcquirerDue reports whether the order has work at the acquirer: an
// authorisation to send or a movement not yet answered. These are the
// orders a new leader, or a restarted one, drives again.
func (o *Order) AcquirerDue() bool {
	return o != nil && (o.Pending.Due() || len(o.Moves) > 0)
}

// Movement returns the pending movement of a transaction, or nil.
func (o *Order) Movement(txnID string) *Movement {
	for i := range o.Moves {
		if o.Moves[i].TxnID == txnID {
			return &o.Moves[i]
		}
	}
	return nil
}

// movePending reports whether a movement of one of kinds waits.
func (o *Order) movePending(kinds ...MoveKind) bool {
	for _, m := range o.Moves {
		for _, k := range kinds {
			if m.Kind == k {
				return true
			}
		}
	}
	return false
}

// pendingRefunds sums the refunds not yet answered: they count against what
// is left to refund until the acquirer declines one.
func (o *Order) pendingRefunds() int64 {
	var n int64
	for _, m := range o.Moves {
		if m.Kind == MoveRefund {
			n += m.Amount
		}
	}
	return n
}

// record adds a movement for txn to next (a copy being built by Apply).
func record(next *Order, cmd *Command, kind MoveKind, txnID string, amount int64) {
	next.Moves = append(next.Moves, Movement{
		TxnID: txnID, Kind: kind, Amount: amount, STAN: cmd.Move.STAN, RRN: cmd.Move.RRN, At: cmd.Time,
		IdempotencyKey: cmd.IdempotencyKey,
	})
}

func awaitingAnswer(cur *Order, op string) (*Order, Outcome) {
	return cur, reject(RejectIllegalStatus, "status",
		fmt.Sprintf("order has a movement waiting for the acquirer's answer: the %s operation is illegal until it comes", op))
}

// applyMoveOutcome applies the acquirer's answer to a pending movement.
// Approved: the order moves as the operation says (settled, voided,
// refunded). Declined: the transaction fails with its decline and the order
// stays as it was. A second answer, after the movement's, changes nothing.
func applyMoveOutcome(cur *Order, cmd *Command) (*Order, Outcome) {
	mv := cur.Movement(cmd.TxnID)
	if mv == nil || cmd.Outcome == nil {
		return illegal(cur, "movement outcome")
	}
	m := *mv
	next := touch(cur, cmd)
	next.Moves = nil
	for _, other := range cur.Moves {
		if other.TxnID != m.TxnID {
			next.Moves = append(next.Moves, other)
		}
	}
	out := Outcome{TxnID: cmd.TxnID, MoveAnswered: true}
	t := next.Txn(m.TxnID)
	if t == nil || t.Operation == OpAuth || t.Operation == OpSale {
		// The reversal of an authorisation that had no answer in time:
		// the order was declined when it was recorded.
		out.MoveAnswered = false
		return next, out
	}
	t.UpdatedAt = cmd.Time
	r := cmd.Outcome
	if !r.Approved {
		t.Status = TxnFail
		t.Decline = &Decline{Code: r.DeclineCode, Message: r.DeclineMessage}
		return next, out
	}
	t.Status = TxnSuccess
	t.ARN = cmd.ARN
	switch m.Kind {
	case MoveCapture:
		next.Status = StatusSettled
		next.SettledAmount = m.Amount
	case MoveReversal:
		next.Status = StatusVoided
	case MoveRefund:
		next.RefundedAmount += m.Amount
		if next.RefundedAmount == next.SettledAmount {
			next.Status = StatusRefunded
		}
	}
	out.StatusChanged = next.Status != cur.Status
	return next, out
}
