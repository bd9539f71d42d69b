package order

import "fmt"

// Apply computes the effect of cmd on cur (nil when no such order exists).
// It never mutates cur: the returned order is a new value when the outcome
// changed anything, and cur itself otherwise. Apply is deterministic.
//
// The transition table is contract section 4; every other operation on an
// existing order is refused as illegal in its status.
func Apply(cur *Order, cmd *Command) (*Order, Outcome) {
	if cmd.Kind == KindCreate {
		return applyCreate(cur, cmd)
	}
	if cmd.Kind == KindInitPayment {
		return applyInitPayment(cur, cmd)
	}
	if cur == nil {
		return nil, reject(RejectNotFound, "order_id", "order not found")
	}
	switch cmd.Kind {
	case KindAuthOutcome:
		return applyOutcome(cur, cmd)
	case KindSettle:
		return applySettle(cur, cmd)
	case KindVoid:
		return applyVoid(cur, cmd)
	case KindRefund:
		return applyRefund(cur, cmd)
	case KindFormSubmit:
		return applyFormSubmit(cur, cmd)
	case KindThreeDSChallenge:
		return applyChallenge(cur, cmd)
	case KindThreeDSResult:
		return applyThreeDSResult(cur, cmd)
	case KindNonSecure:
		return applyNonSecure(cur, cmd)
	case KindExpire:
		return applyExpire(cur, cmd)
	}
	// An unknown kind is a programming error on the leader; refuse it the
	// same way on every replica rather than diverge.
	return cur, reject(RejectIllegalStatus, "status", fmt.Sprintf("unknown operation %q", cmd.Kind))
}

func reject(kind RejectKind, attribute, message string) Outcome {
	return Outcome{Reject: &Rejection{Kind: kind, Attribute: attribute, Message: message}}
}

func illegal(cur *Order, op string) (*Order, Outcome) {
	return cur, reject(RejectIllegalStatus, "status",
		fmt.Sprintf("order status is illegal for the %s operation", op))
}

// touch starts a change: a copy with the version and update time advanced.
func touch(cur *Order, cmd *Command) *Order {
	next := cur.Clone()
	next.Version++
	next.UpdatedAt = cmd.Time
	return next
}

// touchWithoutPending is touch for a change that ends the pending
// authorisation (the acquirer's answer): the copy leaves it out rather than
// cloning it to drop it, an allocation per charge.
func touchWithoutPending(cur *Order, cmd *Command) *Order {
	c := *cur
	c.Pending = nil
	return touch(&c, cmd)
}

// newOrder is a created order with its first transaction and its pending
// authorisation: one allocation instead of three, on every charge.
type newOrder struct {
	order   Order
	txns    [1]Transaction
	pending PendingAuth
}

func applyCreate(cur *Order, cmd *Command) (*Order, Outcome) {
	if cur != nil {
		if cur.RequestHash == cmd.RequestHash {
			return cur, Outcome{Replay: true, TxnID: firstTxnID(cur)}
		}
		return cur, reject(RejectConflict, "order_id",
			"order_id has already been used with a different request")
	}
	c := cmd.Create
	op := OpAuth
	if c.SettleDelayHours == 0 {
		op = OpSale
	}
	blk := &newOrder{
		txns: [1]Transaction{{
			ID: cmd.TxnID, CreatedAt: cmd.Time, UpdatedAt: cmd.Time,
			Operation: op, Status: TxnCreated, Currency: c.Currency, Amount: c.Amount,
		}},
		pending: PendingAuth{TxnID: cmd.TxnID, WalletCryptogram: c.WalletCryptogram},
	}
	o := &blk.order
	*o = Order{
		Merchant:         cmd.Merchant,
		ID:               cmd.OrderID,
		Amount:           c.Amount,
		Currency:         c.Currency,
		Status:           StatusProcessing,
		Description:      c.Description,
		Descriptor:       c.Descriptor,
		Website:          c.Website,
		ProcessingMID:    c.ProcessingMID,
		SubscriptionID:   c.SubscriptionID,
		CallbackURL:      c.CallbackURL,
		SuccessURL:       c.SuccessURL,
		FailURL:          c.FailURL,
		SettleDelayHours: c.SettleDelayHours,
		CustomerEmail:    c.CustomerEmail,
		Source:           c.Source,
		RequestHash:      cmd.RequestHash,
		CreatedAt:        cmd.Time,
		UpdatedAt:        cmd.Time,
		Version:          1,
		Txns:             blk.txns[:],
		Pending:          &blk.pending,
		// Wallet payments (empty otherwise).
		WalletAuthMethod: c.WalletAuthMethod,
		WalletECI:        c.WalletECI,
	}
	if c.ThreeDS != nil {
		shown, sent := *c.ThreeDS, *c.ThreeDS
		o.ThreeDS = &shown
		o.Pending.ThreeDS = &sent
	}
	o.ThreeDSForce, o.AttemptNonSecure = c.ThreeDSForce, c.AttemptNonSecure
	if o.Source.Billing != nil {
		b := *o.Source.Billing
		o.Source.Billing = &b
	}
	return o, Outcome{TxnID: cmd.TxnID, Created: true}
}

func firstTxnID(o *Order) string {
	if len(o.Txns) == 0 {
		return ""
	}
	return o.Txns[0].ID
}

func applyOutcome(cur *Order, cmd *Command) (*Order, Outcome) {
	if cur.Status != StatusProcessing || !cur.Pending.Due() || cur.Pending.TxnID != cmd.TxnID {
		// A second answer to the same authorisation (e.g. resumed after a
		// restart that raced the first answer's commit) changes nothing;
		// nor does one while the customer has a 3-D Secure challenge open.
		return illegal(cur, "authorisation outcome")
	}
	r := cmd.Outcome
	next := touchWithoutPending(cur, cmd)
	next.AVSCheck = r.AVSCheck
	next.CVVCheck = r.CVVCheck
	next.RiskDecision = r.RiskDecision
	t := next.Txn(cmd.TxnID)
	t.UpdatedAt = cmd.Time
	if !r.Approved {
		t.Status = TxnFail
		next.Status = StatusDeclined
		next.Decline = &Decline{Code: r.DeclineCode, Message: r.DeclineMessage}
		return next, Outcome{TxnID: cmd.TxnID, StatusChanged: true}
	}
	t.Status = TxnSuccess
	t.AuthCode = r.AuthCode
	t.ARN = cmd.ARN
	if r.PaymentToken != "" {
		next.Source.PaymentToken = r.PaymentToken
		next.Source.TokenExpiresAt = r.TokenExpiresAt
	}
	if t.Operation == OpSale {
		next.Status = StatusSettled
		next.SettledAmount = next.Amount
	} else {
		next.Status = StatusAuthorized
		next.AutoSettleAt = r.AutoSettleAt
	}
	return next, Outcome{TxnID: cmd.TxnID, StatusChanged: true}
}

func applySettle(cur *Order, cmd *Command) (*Order, Outcome) {
	if cur.Status != StatusAuthorized {
		return illegal(cur, "settle")
	}
	// No amount (0) settles the whole authorised amount (contract section
	// 15: client libraries send a settle without one).
	amount := cmd.Amount
	if amount == 0 {
		amount = cur.Amount
	}
	if cmd.Auto {
		// The log itself enforces "when the delay ends": an early or
		// unscheduled automatic settle changes nothing.
		if cur.AutoSettleAt == 0 || cmd.Time < cur.AutoSettleAt {
			return illegal(cur, "settle")
		}
		amount = cur.Amount
	}
	if amount <= 0 || amount > cur.Amount {
		return cur, reject(RejectAmount, "amount",
			fmt.Sprintf("amount should be between 1 and %d for the settle operation", cur.Amount))
	}
	next := touch(cur, cmd)
	next.Status = StatusSettled
	next.SettledAmount = amount
	next.AutoSettleAt = 0
	next.Txns = append(next.Txns, Transaction{
		ID: cmd.TxnID, CreatedAt: cmd.Time, UpdatedAt: cmd.Time, Operation: OpSettle,
		Status: TxnSuccess, Currency: cur.Currency, Amount: amount, ARN: cmd.ARN,
	})
	return next, Outcome{TxnID: cmd.TxnID, StatusChanged: true}
}

func applyVoid(cur *Order, cmd *Command) (*Order, Outcome) {
	if cur.Status != StatusAuthorized {
		return illegal(cur, "void")
	}
	// Only the full amount can be voided (contract section 4). The amount is
	// optional (0: none given); one that is not the order's is refused, not
	// taken for the whole, so a partial void never releases the rest.
	if cmd.Amount != 0 && cmd.Amount != cur.Amount {
		return cur, reject(RejectAmount, "amount", fmt.Sprintf(
			"amount should be %d for the void operation: only the full order amount can be voided", cur.Amount))
	}
	next := touch(cur, cmd)
	next.Status = StatusVoided
	next.AutoSettleAt = 0
	next.Txns = append(next.Txns, Transaction{
		ID: cmd.TxnID, CreatedAt: cmd.Time, UpdatedAt: cmd.Time, Operation: OpVoid,
		Status: TxnSuccess, Currency: cur.Currency, Amount: cur.Amount, ARN: cmd.ARN,
	})
	return next, Outcome{TxnID: cmd.TxnID, StatusChanged: true}
}

// MaxRefunds bounds an order's refunds. Each adds a transaction to the
// order, which every later change rewrites whole (in Pebble, and in every
// answer and notification): without a bound a merchant could grow one order
// without end, one minor unit at a time.
const MaxRefunds = 100

func applyRefund(cur *Order, cmd *Command) (*Order, Outcome) {
	if cur.Status != StatusSettled {
		return illegal(cur, "refund")
	}
	if refunds(cur) >= MaxRefunds {
		return cur, reject(RejectIllegalStatus, "status",
			fmt.Sprintf("order has %d refunds, the most allowed: the refund operation is illegal", MaxRefunds))
	}
	left := cur.SettledAmount - cur.RefundedAmount
	if cmd.Amount <= 0 || cmd.Amount > left {
		return cur, reject(RejectAmount, "amount",
			fmt.Sprintf("amount should be between 1 and %d for the refund operation", left))
	}
	next := touch(cur, cmd)
	next.RefundedAmount += cmd.Amount
	out := Outcome{TxnID: cmd.TxnID}
	if next.RefundedAmount == next.SettledAmount {
		next.Status = StatusRefunded
		out.StatusChanged = true
	}
	next.Txns = append(next.Txns, Transaction{
		ID: cmd.TxnID, CreatedAt: cmd.Time, UpdatedAt: cmd.Time, Operation: OpRefund,
		Status: TxnSuccess, Currency: cur.Currency, Amount: cmd.Amount, ARN: cmd.ARN,
		RefundReasonCode: cmd.RefundReasonCode,
	})
	return next, out
}

// refunds counts the order's refund transactions.
func refunds(o *Order) int {
	n := 0
	for i := range o.Txns {
		if o.Txns[i].Operation == OpRefund {
			n++
		}
	}
	return n
}
