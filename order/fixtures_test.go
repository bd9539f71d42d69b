package order_test

import (
	"time"

	"github.com/paygate/gateway/order"
)

// Hand-built orders, one per status of contract section 4, shared by the
// table, property and view tests. They are written out field by field rather
// than produced by Apply, so a bug in Apply cannot hide in its own fixtures.

// fxEpoch is the fixed clock the fixtures and the script runner start from.
var fxEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

const (
	fxAmount  = 1000
	fxSettled = 600
	fxSecond  = int64(time.Second)
)

// fxBase is an order before any payment: every pointer field is set, so a
// shallow copy inside Apply would show up as shared memory.
func fxBase(status order.Status) *order.Order {
	return &order.Order{
		Merchant: "m1", ID: "o1", Amount: fxAmount, Currency: "USD", Status: status,
		Descriptor: "PAYGATE*SHOP", Website: "https://shop.example", ProcessingMID: "mid1",
		CallbackURL: "https://shop.example/cb", SettleDelayHours: 24,
		ThreeDS: &order.ThreeDS{Version: "2.2.0", ECI: "05", CAVV: "cavv1"},
		Source: order.PaymentSource{
			Type: "card", CardID: "card-1", Brand: "visa", Masked: "411111******1111",
			ExpMonth: "12", ExpYear: "2030", HolderName: "A HOLDER",
			Billing: &order.Address{Line1: "1 Main St", City: "Springfield", Country: "US"},
		},
		RequestHash: "h1", CreatedAt: fxEpoch, UpdatedAt: fxEpoch, Version: 1,
	}
}

func fxTxn(id string, op order.Operation, st order.TxnStatus, amount, at int64) order.Transaction {
	return order.Transaction{ID: id, CreatedAt: at, UpdatedAt: at, Operation: op, Status: st,
		Currency: "USD", Amount: amount}
}

// fxCase names a fixture; several statuses have two shapes (auth or sale).
type fxCase struct {
	name  string
	order func() *order.Order
}

// fxOrders returns one builder per order status (and per shape where the
// sale path differs). Each call builds a fresh order.
func fxOrders() []fxCase {
	t1 := fxEpoch + fxSecond
	t2 := fxEpoch + 2*fxSecond
	t3 := fxEpoch + 3*fxSecond
	authorized := func() *order.Order {
		o := fxBase(order.StatusAuthorized)
		a := fxTxn("t1", order.OpAuth, order.TxnSuccess, fxAmount, fxEpoch)
		a.UpdatedAt, a.AuthCode, a.ARN = t1, "A1", "arn-t1"
		o.Txns = []order.Transaction{a}
		o.AVSCheck, o.CVVCheck, o.RiskDecision = "Y", "M", "accept"
		o.Source.PaymentToken, o.Source.TokenExpiresAt = "tok1", t1+int64(365*24*time.Hour)
		o.AutoSettleAt = t1 + int64(24*time.Hour)
		o.UpdatedAt, o.Version = t1, 2
		return o
	}
	settled := func() *order.Order {
		o := authorized()
		o.Status, o.SettledAmount, o.AutoSettleAt = order.StatusSettled, fxSettled, 0
		o.Txns = append(o.Txns, fxTxn("t2", order.OpSettle, order.TxnSuccess, fxSettled, t2))
		o.UpdatedAt, o.Version = t2, 3
		return o
	}
	return []fxCase{
		{"created", func() *order.Order {
			o := fxBase(order.StatusCreated)
			o.FormTokenHash, o.FormExpiresAt, o.Language = "sha256-of-token", fxEpoch+int64(30*time.Minute), "de"
			return o
		}},
		{"expired", func() *order.Order {
			o := fxBase(order.StatusExpired)
			o.UpdatedAt, o.Version = t1, 2
			return o
		}},
		{"processing", func() *order.Order {
			o := fxBase(order.StatusProcessing)
			o.Txns = []order.Transaction{fxTxn("t1", order.OpAuth, order.TxnCreated, fxAmount, fxEpoch)}
			o.Pending = &order.PendingAuth{TxnID: "t1", ThreeDS: &order.ThreeDS{Version: "2.2.0", ECI: "05", CAVV: "cavv1"}}
			return o
		}},
		{"processing-sale", func() *order.Order {
			o := fxBase(order.StatusProcessing)
			o.SettleDelayHours = 0
			o.Txns = []order.Transaction{fxTxn("t1", order.OpSale, order.TxnCreated, fxAmount, fxEpoch)}
			o.Pending = &order.PendingAuth{TxnID: "t1"}
			return o
		}},
		{"authorized", authorized},
		{"declined", func() *order.Order {
			o := fxBase(order.StatusDeclined)
			a := fxTxn("t1", order.OpAuth, order.TxnFail, fxAmount, fxEpoch)
			a.UpdatedAt = t1
			o.Txns = []order.Transaction{a}
			o.Decline = &order.Decline{Code: "3.02", Message: "insufficient funds"}
			o.UpdatedAt, o.Version = t1, 2
			return o
		}},
		{"settled", settled},
		{"settled-sale", func() *order.Order {
			o := fxBase(order.StatusSettled)
			o.SettleDelayHours, o.SettledAmount = 0, fxAmount
			s := fxTxn("t1", order.OpSale, order.TxnSuccess, fxAmount, fxEpoch)
			s.UpdatedAt, s.AuthCode = t1, "A1"
			o.Txns = []order.Transaction{s}
			o.UpdatedAt, o.Version = t1, 2
			return o
		}},
		{"voided", func() *order.Order {
			o := authorized()
			o.Status, o.AutoSettleAt = order.StatusVoided, 0
			o.Txns = append(o.Txns, fxTxn("t2", order.OpVoid, order.TxnSuccess, fxAmount, t2))
			o.UpdatedAt, o.Version = t2, 3
			return o
		}},
		{"refunded", func() *order.Order {
			o := settled()
			o.Status, o.RefundedAmount = order.StatusRefunded, fxSettled
			r := fxTxn("t3", order.OpRefund, order.TxnSuccess, fxSettled, t3)
			r.RefundReasonCode = "1234"
			o.Txns = append(o.Txns, r)
			o.UpdatedAt, o.Version = t3, 4
			return o
		}},
		// processing with a 3-D Secure challenge open: the customer's turn.
		{"processing-verify", func() *order.Order {
			o := fxBase(order.StatusProcessing)
			o.ThreeDS = nil
			o.Txns = []order.Transaction{fxTxn("t1", order.OpAuth, order.TxnVerify, fxAmount, t1)}
			o.RedirectURL = "https://pay.example/api/v3/3ds/c1"
			o.Pending = &order.PendingAuth{TxnID: "t1", Challenge: "c1", ChallengeExpiresAt: t1 + int64(30*time.Minute)}
			o.UpdatedAt, o.Version = t1, 2
			return o
		}},
	}
}
