package order

import (
	"strings"
	"testing"
)

// A wallet payment keeps its auth method and ECI on the order, its one-time
// cryptogram only while the authorisation is pending, and shows none of them
// in the merchant's view (the answer is a charge's without three_ds).
func TestWalletCreateKeepsCryptogramOnlyWhilePending(t *testing.T) {
	const cryptogram = "AgAAAAAABk4DWZ4C28yUQAAAAAA="
	create := &Command{
		Kind: KindCreate, Time: 1, Merchant: "m1", OrderID: "o1", TxnID: "t1", RequestHash: "h1",
		Create: &CreateData{
			Amount: 1000, Currency: "USD", ProcessingMID: "mid", SettleDelayHours: 24,
			Source:    PaymentSource{Type: "walletb-pay", CardID: "c1", Masked: "411111******1111"},
			ReplayKey: "walletb-pay:msg-1", WalletAuthMethod: "CRYPTOGRAM_3DS", WalletECI: "05",
			WalletCryptogram: cryptogram,
		},
	}
	o, out := Apply(nil, create)
	if !out.Created || o.Pending == nil || o.Pending.WalletCryptogram != cryptogram ||
		o.WalletAuthMethod != "CRYPTOGRAM_3DS" || o.WalletECI != "05" || o.Source.Type != "walletb-pay" {
		t.Fatalf("create: %+v %+v", out, o)
	}
	view := string(NewView(o, WithTxn, "t1").Marshal())
	for _, secret := range []string{cryptogram, "wallet_eci", "CRYPTOGRAM_3DS", "three_ds", "replay"} {
		if strings.Contains(view, secret) {
			t.Errorf("view shows %q: %s", secret, view)
		}
	}
	next, out := Apply(o, &Command{Kind: KindAuthOutcome, Time: 2, Merchant: "m1", OrderID: "o1", TxnID: "t1",
		Outcome: &OutcomeData{Approved: true, AuthCode: "A1"}})
	if !out.StatusChanged || next.Status != StatusAuthorized || next.Pending != nil {
		t.Fatalf("outcome: %+v %+v", out, next)
	}
	if next.WalletECI != "05" || next.WalletAuthMethod != "CRYPTOGRAM_3DS" {
		t.Fatalf("wallet record lost: %+v", next)
	}
	// The replay key is the FSM's business (persistence), not the order's:
	// the same request again is a replay, a new one a conflict, as for a charge.
	if _, out := Apply(next, create); !out.Replay {
		t.Fatalf("repeat: %+v", out)
	}
}
