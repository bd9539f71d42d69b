package order

import (
	"flag"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
)

var viewSeed = flag.Uint64("view-seed", 0, "seed for TestAppendJSONMatchesMarshal (0: time-based)")

// AppendJSON must produce exactly json.Marshal's bytes for every view.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	seed := *viewSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./order -run TestAppendJSONMatchesMarshal -view-seed %d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	strs := []string{"", "a", "order-1", "Ünïcödé ✓", "quote\"back\\slash", "ctl\x00\x01\x1f\x7f", "tab\tnl\ncr\rff\fbs\b",
		"<html>&amp;", "\u2028\u2029", "emoji 😀", "4111 11** ****"}
	s := func() string { return strs[rng.IntN(len(strs))] }
	sp := func() *string {
		if rng.IntN(3) == 0 {
			return nil
		}
		v := s()
		return &v
	}
	txn := func() *TxnView {
		return &TxnView{ID: s(), CreatedAt: s(), UpdatedAt: s(), Operation: Operation(s()), Status: TxnStatus(s()),
			Currency: s(), Amount: rng.Int64() - rng.Int64(), AuthCode: s(), ARN: s(), RefundReasonCode: s()}
	}
	for i := 0; i < 3000; i++ {
		v := &View{OrderID: s(), Amount: rng.Int64N(1 << 50), Currency: s(), RefundedAmount: rng.Int64N(100),
			SettledAmount: rng.Int64N(100), Status: Status(s()), Descriptor: s(), AVSCheck: sp(), CVVCheck: sp(),
			Website: s(), ProcessingMID: s(), SubscriptionID: s(), RedirectURL: s()}
		if rng.IntN(2) == 0 {
			v.Decline = &Decline{Code: s(), Message: s()}
		}
		if rng.IntN(2) == 0 {
			v.Risk = &RiskView{Decision: s()}
		}
		if rng.IntN(2) == 0 {
			v.ThreeDS = &ThreeDS{Enrolled: s(), AuthenticationResult: s(), Version: s(), ECI: s(), XID: s(), CAVV: s()}
		}
		if rng.IntN(2) == 0 {
			v.Transaction = txn()
		}
		if n := rng.IntN(4); n > 0 {
			v.Transactions = map[string]*TxnView{}
			for j := 0; j < n; j++ {
				v.Transactions[s()+string(rune('a'+j))] = txn()
			}
		}
		if rng.IntN(3) > 0 {
			v.PaymentSource = &SourceView{Type: s(), CardID: s(), TokenExpirationDate: s(), PaymentToken: s(),
				Issuer: s(), BIN: s(), CardBrand: s(), CardType: s(), CardExpMonth: s(), CardExpYear: s(),
				CardHolderName: s(), MaskedCardNumber: s(), IssuerCountry: s()}
			if rng.IntN(2) == 0 {
				v.PaymentSource.BillingAddress = &Address{Line1: s(), Line2: s(), City: s(), State: s(), Zip: s(), Country: s()}
			}
		}
		want, err := json.Marshal(v, json.Deterministic(true))
		if err != nil {
			t.Fatal(err)
		}
		if got := v.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("view %d differs:\n got  %s\n want %s", i, got, want)
		}
	}
}

func BenchmarkViewMarshal(b *testing.B) {
	v := benchView()
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 2048)
		for b.Loop() {
			buf = v.AppendJSON(buf[:0])
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(v, json.Deterministic(true)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkNewView renders an order as an operation's answer shows it (one
// transaction) and as a status read or a notification does (all of them).
func BenchmarkNewView(b *testing.B) {
	o := benchViewOrder()
	b.Run("WithTxn", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			NewView(o, WithTxn, o.Txns[1].ID)
		}
	})
	b.Run("WithAllTxns", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			NewView(o, WithAllTxns, "")
		}
	})
}

func benchView() *View { return NewView(benchViewOrder(), WithAllTxns, "") }

func benchViewOrder() *Order {
	avs, cvv := "Y", "M"
	o := &Order{ID: "order-123456", Amount: 1020, Currency: "USD", Status: StatusSettled, SettledAmount: 1020,
		Descriptor: "SHOP*ORDER", ProcessingMID: "mid-1", AVSCheck: avs, CVVCheck: cvv, RiskDecision: "accept",
		Source: PaymentSource{Type: "card", CardID: "01a2-card", PaymentToken: "tok_abc", TokenExpiresAt: 1e18,
			Issuer: "Sandbox Bank", BIN: "411111", Brand: "visa", CardType: "Credit", ExpMonth: "12", ExpYear: "2035",
			HolderName: "Jane Doe", Masked: "411111******1111", IssuerCountry: "US"}}
	for i, op := range []Operation{OpAuth, OpSettle, OpRefund} {
		o.Txns = append(o.Txns, Transaction{ID: "txn-" + string(rune('a'+i)), CreatedAt: 1e18, UpdatedAt: 1e18,
			Operation: op, Status: TxnSuccess, Currency: "USD", Amount: 1020, AuthCode: "A1B2C3", ARN: "123456"})
	}
	return o
}
