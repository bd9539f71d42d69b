// Package tokenmakertest holds what the tests of the wallet packages share
// about the committed development set: loading it once per test binary,
// the config a node makes of it, and the payment the round-trip tests
// encrypt. It is imported by tests only.
package tokenmakertest

import (
	"sync"
	"testing"

	"github.com/paygate/gateway/transport/wallet/tokenmaker"
)

var (
	setOnce sync.Once
	set     *tokenmaker.DevSet
	setErr  error
)

// DevSet is the development set committed in the calling package's
// testdata (certificates and root keys valid for 50 years from
// wallettest.KATNow), loaded once, so tests make fresh tokens without
// generating keys. Callers edit copies of it, never the set itself.
func DevSet(t testing.TB) *tokenmaker.DevSet {
	t.Helper()
	setOnce.Do(func() { set, setErr = tokenmaker.LoadDevSet("testdata") })
	if setErr != nil {
		t.Fatal(setErr)
	}
	if set.A == nil && set.B == nil {
		t.Fatal("testdata holds no development set")
	}
	return set
}

// Config is the config a node makes of a set (ds.WalletAConfig or
// ds.WalletBConfig), failing the test when it cannot.
func Config[C any](t testing.TB, config func() (C, error)) C {
	t.Helper()
	cfg, err := config()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// PAN is the card number of Input.
const PAN = "4012888888881881"

// Input is the payment the round-trip tests encrypt; each wallet adds what
// only its tokens carry.
func Input() tokenmaker.PaymentInput {
	return tokenmaker.PaymentInput{PAN: PAN, ExpMonth: "09", ExpYear: "2032",
		Cryptogram: "AJ2mQXoAAAAAAAAAAAAAAAAAAAA=", ECI: "07"}
}
