// Package tokenmakertest holds what the tests of the wallet packages share
// about the committed development set: loading it once per test binary,
// the config a node makes of it, and the payment the round-trip tests
// encrypt. It is imported by tests only.
package tokenmakertest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/internal/wallettest"
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

// Decoder is one wallet's side of the tests both wallets share: how a node
// configures it, how the development set makes its tokens, and how it
// decrypts them.
type Decoder[C, T any] struct {
	Config  func(*tokenmaker.DevSet) (C, error)
	Token   func(ds *tokenmaker.DevSet, version string, in tokenmaker.PaymentInput) (T, error)
	Decrypt func(C, T) (*wallet.Payment, error)
}

// ConfigOf is the config a node makes of ds, failing the test when it
// cannot.
func (d Decoder[C, T]) ConfigOf(t testing.TB, ds *tokenmaker.DevSet) C {
	t.Helper()
	return Config(t, func() (C, error) { return d.Config(ds) })
}

// Fixture is the committed development set and the config a node makes of
// it: where most of the wallets' tests start.
func (d Decoder[C, T]) Fixture(t testing.TB) (*tokenmaker.DevSet, C) {
	t.Helper()
	ds := DevSet(t)
	return ds, d.ConfigOf(t, ds)
}

// KnownAnswers decrypts each committed token under cfg and checks that it
// gives the payment wanted (its times compared as instants); also, when
// set, checks what else a wallet knows of its fixtures.
func (d Decoder[C, T]) KnownAnswers(t *testing.T, cfg C, cases []KnownAnswer, also func(t *testing.T, tok T)) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.File, func(t *testing.T) {
			tok := d.ReadToken(t, c.File)
			p, err := d.Decrypt(cfg, tok)
			if err != nil {
				t.Fatal(err)
			}
			got := *p
			for _, tm := range []struct {
				name string
				got  *time.Time
				want time.Time
			}{{"signing time", &got.SigningTime, c.Want.SigningTime}, {"message expiration", &got.MessageExpiration, c.Want.MessageExpiration}} {
				if !tm.got.Equal(tm.want) {
					t.Errorf("%s %s, want %s", tm.name, *tm.got, tm.want)
				}
				*tm.got = tm.want
			}
			if got != c.Want {
				t.Errorf("got  %#v\nwant %#v", got, c.Want)
			}
			if also != nil {
				also(t, tok)
			}
		})
	}
}

// Refuses checks that the token make returns, decrypted under the config
// it returns with it, fails with want: no payment, and an error that names
// neither the card number nor a key.
func (d Decoder[C, T]) Refuses(t *testing.T, make func(*testing.T) (T, C), want error) {
	t.Helper()
	tok, cfg := make(t)
	p, err := d.Decrypt(cfg, tok)
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v (payment %v)", err, want, p)
	}
	if p != nil {
		t.Fatal("payment returned with an error")
	}
	t.Log(err)
	if msg := err.Error(); strings.Contains(msg, PAN) || strings.Contains(msg, "BEGIN") {
		t.Fatalf("error leaks data: %s", msg)
	}
}

// KnownAnswer is a committed token (a file of testdata) and the payment it
// decrypts to.
type KnownAnswer struct {
	File string
	Want wallet.Payment
}

// ReadToken reads a committed token (JSON) from the calling package's
// testdata.
func (d Decoder[C, T]) ReadToken(t testing.TB, name string) T {
	t.Helper()
	return wallettest.ReadJSON[T](t, name)
}

// Make makes a token of ds, failing the test when it cannot.
func (d Decoder[C, T]) Make(t testing.TB, ds *tokenmaker.DevSet, version string, in tokenmaker.PaymentInput) T {
	t.Helper()
	tok, err := d.Token(ds, version, in)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// DecryptsWith checks that a fresh token of version decrypts under cfg
// (a config with some key replaced by an equivalent one).
func (d Decoder[C, T]) DecryptsWith(t *testing.T, ds *tokenmaker.DevSet, cfg C, version string, in tokenmaker.PaymentInput) {
	t.Helper()
	if _, err := d.Decrypt(cfg, d.Make(t, ds, version, in)); err != nil {
		t.Fatal(err)
	}
}

// DecryptsTwice checks that the decoder keeps no state: the same token
// decrypts twice, to the same replay key, which starts with prefix (a
// replayed token is the caller's to refuse).
func (d Decoder[C, T]) DecryptsTwice(t *testing.T, ds *tokenmaker.DevSet, version string, in tokenmaker.PaymentInput, prefix string) *wallet.Payment {
	t.Helper()
	cfg := d.ConfigOf(t, ds)
	tok := d.Make(t, ds, version, in)
	p1, err1 := d.Decrypt(cfg, tok)
	p2, err2 := d.Decrypt(cfg, tok)
	if err1 != nil || err2 != nil || p1.ReplayKey() != p2.ReplayKey() || !strings.HasPrefix(p1.ReplayKey(), prefix) {
		t.Fatalf("%v %v %v %v", p1, p2, err1, err2)
	}
	return p1
}

// Benchmark decrypts a token of each version, from the committed set.
func (d Decoder[C, T]) Benchmark(b *testing.B, versions []string, in tokenmaker.PaymentInput) {
	ds, err := tokenmaker.LoadDevSet("testdata")
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := d.Config(ds)
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range versions {
		tok := d.Make(b, ds, v, in)
		b.Run(v, func(b *testing.B) {
			for b.Loop() {
				if _, err := d.Decrypt(cfg, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
