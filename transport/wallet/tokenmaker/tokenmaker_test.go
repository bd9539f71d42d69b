package tokenmaker_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/tokenmaker"
	"github.com/paygate/gateway/transport/wallet/walleta"
	"github.com/paygate/gateway/transport/wallet/walletb"
)

var (
	setOnce sync.Once
	setDir  string
	setErr  error
)

// devSetDir generates one set per test binary (RSA key generation is the
// slow part).
func devSetDir(t *testing.T) string {
	t.Helper()
	setOnce.Do(func() {
		setDir, setErr = os.MkdirTemp("", "walletdev")
		if setErr == nil {
			_, setErr = tokenmaker.GenerateDevSet(setDir)
		}
	})
	if setErr != nil {
		t.Fatal(setErr)
	}
	return setDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if setDir != "" {
		os.RemoveAll(setDir)
	}
	os.Exit(code)
}

func TestGenerateWritesDocumentedFiles(t *testing.T) {
	dir := devSetDir(t)
	for _, name := range []string{
		tokenmaker.FileWalletARootCert, tokenmaker.FileWalletARootKey,
		tokenmaker.FileWalletAIntermediateCert, tokenmaker.FileWalletAIntermediateKey,
		tokenmaker.FileWalletALeafCert, tokenmaker.FileWalletALeafKey,
		tokenmaker.FileWalletAProcessingKeyEC, tokenmaker.FileWalletAProcessingKeyRSA,
		tokenmaker.FileWalletAProcessingKeys, tokenmaker.FileWalletAMerchantID,
		tokenmaker.FileWalletBRootKeys, tokenmaker.FileWalletBRootKeyECv1, tokenmaker.FileWalletBRootKeyECv2,
		tokenmaker.FileWalletBIntermediateKey, tokenmaker.FileWalletBRecipientKey, tokenmaker.FileWalletBRecipientID,
	} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if strings.HasSuffix(name, "key.pem") || strings.HasSuffix(name, "keys.pem") ||
			strings.Contains(name, "-key-") {
			if st.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s: private key readable by others (%v)", name, st.Mode())
			}
		}
	}
	ec, _ := os.ReadFile(filepath.Join(dir, tokenmaker.FileWalletAProcessingKeyEC))
	if !strings.Contains(string(ec), "-----BEGIN PRIVATE KEY-----") {
		t.Error("EC processing key is not PKCS#8")
	}
	rk, _ := os.ReadFile(filepath.Join(dir, tokenmaker.FileWalletBRecipientKey))
	if !strings.Contains(string(rk), "-----BEGIN EC PRIVATE KEY-----") {
		t.Error("recipient key is not SEC1")
	}
}

// TestNodeFlagsFromFiles loads configs the way the node's wallet flags do
// and decrypts tokens made from the loaded set.
func TestNodeFlagsFromFiles(t *testing.T) {
	dir := devSetDir(t)
	ds, err := tokenmaker.LoadOrGenerateDevSet(dir) // loads: the set exists
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	acfg, err := walleta.LoadConfig(read(tokenmaker.FileWalletAMerchantID),
		filepath.Join(dir, tokenmaker.FileWalletAProcessingKeys), filepath.Join(dir, tokenmaker.FileWalletARootCert))
	if err != nil {
		t.Fatal(err)
	}
	bcfg, err := walletb.LoadConfig(read(tokenmaker.FileWalletBRecipientID),
		filepath.Join(dir, tokenmaker.FileWalletBRecipientKey), filepath.Join(dir, tokenmaker.FileWalletBRootKeys))
	if err != nil {
		t.Fatal(err)
	}
	in := tokenmaker.PaymentInput{PAN: "5555555555554444", ExpMonth: "03", ExpYear: "2031", Cryptogram: "AgAAAAAABk4DWZ4C28yUQAAAAAA=", ECI: "02", GatewayMerchantID: "m-42"}
	for _, v := range []string{walleta.VersionEC, walleta.VersionRSA} {
		tok, err := ds.WalletA(v, in)
		if err != nil {
			t.Fatal(err)
		}
		p, err := walleta.Decrypt(acfg, tok)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		check(t, p, in)
	}
	for _, v := range []string{walletb.VersionECv1, walletb.VersionECv2} {
		tok, err := ds.WalletB(v, in)
		if err != nil {
			t.Fatal(err)
		}
		p, err := walletb.Decrypt(bcfg, tok)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		check(t, p, in)
		if v == walletb.VersionECv2 && p.GatewayMerchantID != "m-42" {
			t.Errorf("gatewayMerchantId %q", p.GatewayMerchantID)
		}
	}
}

func check(t *testing.T, p *wallet.Payment, in tokenmaker.PaymentInput) {
	t.Helper()
	if p.PAN != in.PAN || p.ExpMonth != in.ExpMonth || p.ExpYear != in.ExpYear ||
		p.Cryptogram != in.Cryptogram || p.ECI != in.ECI || p.AuthMethod != wallet.AuthCryptogram3DS {
		t.Errorf("%s %s: got %+v", p.Wallet, p.Version, p)
	}
}

func TestLoadDevSetMissing(t *testing.T) {
	if _, err := tokenmaker.LoadDevSet(t.TempDir()); err == nil {
		t.Fatal("empty dir loaded")
	}
}

func TestGenerateWithoutDir(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ds, err := tokenmaker.GenerateDevSetWith("", tokenmaker.Options{Now: now, RSABits: 1024, MerchantID: "merchant.x"})
	if err != nil {
		t.Fatal(err)
	}
	if ds.A.MerchantID != "merchant.x" || ds.A.RootCert.NotAfter.Before(now.AddDate(49, 0, 0)) {
		t.Errorf("options not applied: %s %s", ds.A.MerchantID, ds.A.RootCert.NotAfter)
	}
	ds.Now = func() time.Time { return now }
	cfg, err := ds.WalletAConfig()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ds.WalletA(walleta.VersionRSA, tokenmaker.PaymentInput{AuthMethod: wallet.AuthEMV})
	if err != nil {
		t.Fatal(err)
	}
	p, err := walleta.Decrypt(cfg, tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.AuthMethod != wallet.AuthEMV || p.EMVData == "" || p.Cryptogram != "" || p.Amount != 1000 || p.Currency != "USD" {
		t.Errorf("EMV payment: %+v", p)
	}
}
