package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paygate/gateway/transport/api"
	"github.com/paygate/gateway/transport/server"
	"github.com/paygate/gateway/transport/wallet/tokenmaker"
)

// wallet-dev-set writes a set; wallet-token makes, from it, request bodies
// that validate and decrypt to the card given, for every version, without
// printing the card number.
func TestWalletTokenCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "set")
	var out, errOut bytes.Buffer
	if code := walletDevSet([]string{"--dir", dir}, &out, &errOut); code != 0 {
		t.Fatalf("wallet-dev-set: %d %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "--walletb-root-keys-file "+filepath.Join(dir, tokenmaker.FileWalletBRootKeys)) {
		t.Fatalf("wallet-dev-set output: %s", out.String())
	}
	if code := walletDevSet([]string{"--dir", dir}, &out, &errOut); code != 1 {
		t.Fatalf("wallet-dev-set over an existing set: %d", code)
	}
	ds, err := tokenmaker.LoadDevSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	ac, err := ds.WalletAConfig()
	if err != nil {
		t.Fatal(err)
	}
	bc, err := ds.WalletBConfig()
	if err != nil {
		t.Fatal(err)
	}
	keys := server.WalletKeys{A: &ac, B: &bc}

	const pan = "5555555555554444"
	for _, tc := range []struct{ wallet, version string }{
		{"walleta-pay", "EC_v1"}, {"walleta-pay", "RSA_v1"}, {"walletb-pay", "ECv1"}, {"walletb-pay", "ECv2"}, {"walletb-pay", ""},
	} {
		out.Reset()
		errOut.Reset()
		args := []string{"--dev-dir", dir, "--wallet", tc.wallet, "--pan", pan, "--amount", "1234", "--currency", "eur",
			"--merchant-id", "mer_7", "--order-id", "o-1"}
		if tc.version != "" {
			args = append(args, "--version", tc.version)
		}
		if code := walletToken(args, &out, &errOut); code != 0 {
			t.Fatalf("%s %s: %d %s", tc.wallet, tc.version, code, errOut.String())
		}
		if strings.Contains(out.String()+errOut.String(), pan) {
			t.Fatalf("%s %s: the card number is printed", tc.wallet, tc.version)
		}
		var req api.WalletRequest
		if aerr := api.Decode(out.Bytes(), &req); aerr != nil {
			t.Fatalf("%s: %v\n%s", tc.wallet, aerr, out.String())
		}
		if aerr := api.ValidateWallet(&req, tc.wallet); aerr != nil {
			t.Fatalf("%s %s: %v", tc.wallet, tc.version, aerr.Messages)
		}
		decrypt := keys.DecryptWalletA
		if tc.wallet == "walletb-pay" {
			decrypt = keys.DecryptWalletB
		}
		p, err := decrypt(req.PaymentSource)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.wallet, tc.version, err)
		}
		want := tc.version
		if want == "" {
			want = "ECv2"
		}
		if p.PAN != pan || p.Version != want || (tc.wallet == "walleta-pay" && (p.Amount != 1234 || p.Currency != "EUR")) ||
			(want == "ECv2" && p.GatewayMerchantID != "mer_7") || *req.Amount != 1234 || *req.Currency != "EUR" {
			t.Fatalf("%s %s: decrypted %v", tc.wallet, tc.version, p)
		}
	}

	for _, bad := range [][]string{
		{"--dev-dir", dir, "--wallet", "walletc-pay"},
		{"--dev-dir", dir, "--wallet", "walleta-pay", "--version", "ECv2"},
		{"--dev-dir", dir, "--wallet", "walletb-pay", "--version", "ECv0"},
		{"--dev-dir", dir, "extra"},
	} {
		if code := walletToken(bad, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
	if code := walletToken([]string{"--dev-dir", filepath.Join(dir, "missing")}, &out, &errOut); code != 1 {
		t.Errorf("missing set: exit %d, want 1", code)
	}
}

// wallet-dev-set refuses a word left after its flags (--dir x y wrote to x
// and ignored y) and writes nothing.
func TestWalletDevSetRefusesLeftoverArguments(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "set")
	var out, errOut bytes.Buffer
	if code := walletDevSet([]string{"--dir", dir, "extra"}, &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), `unexpected argument "extra"`) {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if _, err := tokenmaker.LoadDevSet(dir); err == nil {
		t.Fatal("a set was written anyway")
	}
}
