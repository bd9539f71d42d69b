package walleta_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/internal/ber"
	"github.com/paygate/gateway/transport/wallet/internal/wallettest"
	"github.com/paygate/gateway/transport/wallet/tokenmaker"
	"github.com/paygate/gateway/transport/wallet/tokenmaker/tokenmakertest"
	"github.com/paygate/gateway/transport/wallet/walleta"
)

// decoder is this wallet's side of the tests the wallets share.
var decoder = tokenmakertest.Decoder[walleta.Config, walleta.Token]{
	Config: (*tokenmaker.DevSet).WalletAConfig, Token: (*tokenmaker.DevSet).WalletA, Decrypt: walleta.Decrypt}

// withA returns a copy of the set whose walleta-pay half edit changed.
func withA(ds *tokenmaker.DevSet, edit func(a *tokenmaker.WalletADev)) *tokenmaker.DevSet {
	a := *ds.A
	edit(&a)
	c := *ds
	c.A = &a
	return &c
}

func input() tokenmaker.PaymentInput {
	in := tokenmakertest.Input()
	in.Amount, in.Currency = 4250, "GBP"
	return in
}

func TestKnownAnswer(t *testing.T) {
	_, cfg := decoder.Fixture(t)
	cfg.Now = wallettest.KATClock(time.Minute)
	decoder.KnownAnswers(t, cfg, []tokenmakertest.KnownAnswer{
		{File: "ec_v1.token.json", Want: wallet.Payment{Wallet: wallet.WalletA, Version: walleta.VersionEC,
			PAN: "4111111111111111", ExpMonth: "07", ExpYear: "2030", Cryptogram: "AOrZk5yuKk9mAAHVjSzxAAADFA==", ECI: "05",
			AuthMethod: wallet.AuthCryptogram3DS, TransactionID: "a3c1f0e2d4b6a8c0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a2b4c6d8",
			ApplicationData: "6b6174206170706c69636174696f6e2064617461", Amount: 1999, Currency: "EUR", CurrencyNumeric: "978", DeviceManufacturerID: "040010030273", SigningTime: wallettest.KATNow}},
		{File: "rsa_v1.token.json", Want: wallet.Payment{Wallet: wallet.WalletA, Version: walleta.VersionRSA,
			PAN: "5555555555554444", ExpMonth: "11", ExpYear: "2029", Cryptogram: "AgAAAAAABk4DWZ4C28yUQAAAAAA=", ECI: "02",
			AuthMethod: wallet.AuthCryptogram3DS, TransactionID: "0011223344556677889900aabbccddeeff0011223344556677889900aabbccdd",
			Amount: 250, Currency: "USD", CurrencyNumeric: "840", DeviceManufacturerID: "040010030273", SigningTime: wallettest.KATNow}},
	}, func(t *testing.T, tok walleta.Token) {
		// The fixture's signature really is BER with indefinite lengths.
		if sig := wallettest.MustB64(t, tok.Signature); !bytes.HasPrefix(sig, []byte{0x30, 0x80}) {
			t.Errorf("fixture signature is not indefinite-length BER: % x", sig[:4])
		}
	})
}

func TestRoundTrip(t *testing.T) {
	ds, cfg := decoder.Fixture(t)
	for _, v := range []string{walleta.VersionEC, walleta.VersionRSA} {
		for _, appData := range []string{"", "deadbeef00"} {
			in := input()
			in.ApplicationData = appData
			tok, err := ds.WalletA(v, in)
			if err != nil {
				t.Fatal(err)
			}
			p, err := walleta.Decrypt(cfg, tok)
			if err != nil {
				t.Fatalf("%s appData=%q: %v", v, appData, err)
			}
			if p.PAN != in.PAN || p.ExpMonth != in.ExpMonth || p.ExpYear != in.ExpYear || p.Cryptogram != in.Cryptogram ||
				p.ECI != in.ECI || p.Amount != in.Amount || p.Currency != in.Currency || p.Version != v ||
				p.TransactionID != tok.Header.TransactionID || p.AuthMethod != wallet.AuthCryptogram3DS {
				t.Errorf("%s: got %+v", v, p)
			}
		}
	}
}

// TestProcessingKeyAsECDH: the EC key may also be configured as an
// *ecdh.PrivateKey.
func TestProcessingKeyAsECDH(t *testing.T) {
	ds, cfg := decoder.Fixture(t)
	k, err := ds.A.ProcessingKeyEC.ECDH()
	if err != nil {
		t.Fatal(err)
	}
	cfg.ProcessingKey, cfg.ExtraProcessingKeys = k, nil
	decoder.DecryptsWith(t, ds, cfg, walleta.VersionEC, input())
}

// TestReplayIsTheCallersJob: the package is stateless; the same token
// decrypts twice and names the same transaction id both times.
func TestReplayIsTheCallersJob(t *testing.T) {
	if p := decoder.DecryptsTwice(t, tokenmakertest.DevSet(t), walleta.VersionEC, input(), "walleta-pay:"); p.TransactionID == "" {
		t.Fatalf("no transaction id: %+v", p)
	}
}

// A token reshaped by moving the transaction id's last bytes into
// applicationData still verifies (the signature covers the two joined, with
// no boundary) and decrypts, under another transaction id; it must still
// name the same token for replay, or one token would pay once per byte of
// its id. Both ways round, with and without applicationData, both versions.
func TestReshapedTokenKeepsItsReplayKey(t *testing.T) {
	ds, cfg := decoder.Fixture(t)
	for _, version := range []string{walleta.VersionEC, walleta.VersionRSA} {
		for _, appData := range []string{"", "deadbeef00"} {
			in := input()
			in.ApplicationData = appData
			tok := decoder.Make(t, ds, version, in)
			orig, err := walleta.Decrypt(cfg, tok)
			if err != nil {
				t.Fatal(err)
			}
			joined := tok.Header.TransactionID + tok.Header.ApplicationData
			for cut := 2; cut < len(joined); cut += 2 {
				reshaped := tok
				reshaped.Header.TransactionID, reshaped.Header.ApplicationData = joined[:cut], joined[cut:]
				p, err := walleta.Decrypt(cfg, reshaped)
				if err != nil {
					continue // refused outright: fine too
				}
				if p.ReplayKey() != orig.ReplayKey() {
					t.Fatalf("%s, applicationData %q, cut at %d: replay key %q, the token's is %q",
						version, appData, cut, p.ReplayKey(), orig.ReplayKey())
				}
			}
		}
	}
}

// TestBERSignatureAccepted re-encodes the whole signature with indefinite
// lengths everywhere (certificates and signed attributes included) and
// every OCTET STRING split into pieces; the DER form is accepted too.
func TestBERSignatureAccepted(t *testing.T) {
	ds, cfg := decoder.Fixture(t)
	tok, err := ds.WalletA(walleta.VersionEC, input())
	if err != nil {
		t.Fatal(err)
	}
	sig := wallettest.MustB64(t, tok.Signature)
	root, err := ber.Parse(sig)
	if err != nil {
		t.Fatal(err)
	}
	der := root.DER()
	fullBER := chunkOctetStrings(root).Indefinite()
	if bytes.Count(fullBER, []byte{0x24, 0x80}) < 3 {
		t.Fatal("expected constructed OCTET STRINGs")
	}
	for name, enc := range map[string][]byte{"DER": der, "indefinite everywhere": fullBER} {
		tk := tok
		tk.Signature = base64.StdEncoding.EncodeToString(enc)
		if _, err := walleta.Decrypt(cfg, tk); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// chunkOctetStrings replaces every primitive OCTET STRING longer than 4
// bytes with a constructed one of two pieces.
func chunkOctetStrings(n *ber.Node) *ber.Node {
	c := *n
	c.Raw = nil
	if !n.Constructed && n.Class == ber.ClassUniversal && n.Tag == ber.TagOctetString && len(n.Content) > 4 {
		h := len(n.Content) / 2
		c.Constructed, c.Content = true, nil
		c.Children = []*ber.Node{
			{Class: ber.ClassUniversal, Tag: ber.TagOctetString, Content: n.Content[:h]},
			{Class: ber.ClassUniversal, Tag: ber.TagOctetString, Content: n.Content[h:]},
		}
		return &c
	}
	c.Children = nil
	for _, ch := range n.Children {
		c.Children = append(c.Children, chunkOctetStrings(ch))
	}
	return &c
}

// TestExtraSignedAttributesAccepted: the tokens carry
// CMSAlgorithmProtection (1.2.840.113549.1.9.52) besides contentType,
// signingTime and messageDigest, as the provider's tokens do; and a signer
// that sent its attributes out of DER order is accepted as well.
func TestExtraSignedAttributesAccepted(t *testing.T) {
	ds, cfg := decoder.Fixture(t)
	tok, err := ds.WalletA(walleta.VersionEC, input())
	if err != nil {
		t.Fatal(err)
	}
	sig := wallettest.MustB64(t, tok.Signature)
	algProtection := []byte{0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x34}
	if !bytes.Contains(sig, algProtection) {
		t.Fatal("token lacks the extra attribute")
	}
	if _, err := walleta.Decrypt(cfg, tok); err != nil {
		t.Fatal(err)
	}

	root, err := ber.Parse(sig)
	if err != nil {
		t.Fatal(err)
	}
	attrs := findSignedAttrs(root)
	if attrs == nil || len(attrs.Children) != 4 {
		t.Fatal("signed attributes not found")
	}
	for i, j := 0, len(attrs.Children)-1; i < j; i, j = i+1, j-1 {
		attrs.Children[i], attrs.Children[j] = attrs.Children[j], attrs.Children[i]
	}
	tok.Signature = base64.StdEncoding.EncodeToString(root.Indefinite())
	if _, err := walleta.Decrypt(cfg, tok); err != nil {
		t.Fatalf("unsorted attributes: %v", err)
	}
}

func findSignedAttrs(n *ber.Node) *ber.Node {
	if n.Class == ber.ClassContextSpecific && n.Tag == 0 && n.Constructed && len(n.Children) > 0 &&
		n.Children[0].Class == ber.ClassUniversal && n.Children[0].Tag == ber.TagSequence &&
		len(n.Children[0].Children) == 2 && n.Children[0].Children[1].Tag == ber.TagSet {
		return n
	}
	for _, c := range n.Children {
		if f := findSignedAttrs(c); f != nil {
			return f
		}
	}
	return nil
}

func TestRSALeafAccepted(t *testing.T) {
	ds, cfg := decoder.Fixture(t)
	now := time.Now()
	leaf, key, err := tokenmaker.IssueCert(tokenmaker.CertSpec{
		CommonName: "rsa leaf", Marker: walleta.OIDLeafMarker, Key: ds.A.ProcessingKeyRSA,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
	}, ds.A.IntermediateCert, ds.A.IntermediateKey)
	if err != nil {
		t.Fatal(err)
	}
	rsaSet := withA(ds, func(a *tokenmaker.WalletADev) { a.LeafCert, a.LeafKey = leaf, key })
	tok, err := rsaSet.WalletA(walleta.VersionEC, input())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := walleta.Decrypt(cfg, tok); err != nil {
		t.Fatal(err)
	}
}

func TestSigningTimeWindow(t *testing.T) {
	ds := tokenmakertest.DevSet(t)
	now := time.Now().Truncate(time.Second)
	cfg := decoder.ConfigOf(t, ds)
	cfg.Now = func() time.Time { return now }
	for _, c := range []struct {
		offset time.Duration
		ok     bool
	}{
		{-4*time.Minute - 59*time.Second, true},
		{4*time.Minute + 59*time.Second, true},
		{-5*time.Minute - 2*time.Second, false},
		{5*time.Minute + 2*time.Second, false},
		{-time.Hour, false},
	} {
		in := input()
		in.SigningTime = now.Add(c.offset)
		tok, err := ds.WalletA(walleta.VersionEC, in)
		if err != nil {
			t.Fatal(err)
		}
		_, err = walleta.Decrypt(cfg, tok)
		if c.ok && err != nil {
			t.Errorf("offset %s: %v", c.offset, err)
		}
		if !c.ok && !errors.Is(err, walleta.ErrExpired) {
			t.Errorf("offset %s: err = %v, want ErrExpired", c.offset, err)
		}
	}
	// A configured window replaces the default.
	cfg.MaxSigningAge = 2 * time.Hour
	in := input()
	in.SigningTime = now.Add(-time.Hour)
	tok, _ := ds.WalletA(walleta.VersionEC, in)
	if _, err := walleta.Decrypt(cfg, tok); err != nil {
		t.Errorf("MaxSigningAge 2h: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	ds, cfg := decoder.Fixture(t)
	now := time.Now()
	otherEC, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	validity := func(spec tokenmaker.CertSpec) tokenmaker.CertSpec {
		spec.NotBefore, spec.NotAfter = now.Add(-time.Hour), now.Add(time.Hour)
		return spec
	}
	issue := func(spec tokenmaker.CertSpec, parent *x509.Certificate, parentKey any) (*x509.Certificate, *ecdsa.PrivateKey) {
		t.Helper()
		signer, _ := parentKey.(*ecdsa.PrivateKey)
		var (
			c   *x509.Certificate
			k   any
			err error
		)
		if signer == nil {
			c, k, err = tokenmaker.IssueCert(validity(spec), nil, nil)
		} else {
			c, k, err = tokenmaker.IssueCert(validity(spec), parent, signer)
		}
		if err != nil {
			t.Fatal(err)
		}
		return c, k.(*ecdsa.PrivateKey)
	}
	interKey := ds.A.IntermediateKey.(*ecdsa.PrivateKey)
	rootKey := ds.A.RootKey.(*ecdsa.PrivateKey)

	// An attacker's own provider-like hierarchy, marker extensions and all.
	fakeRoot, fakeRootKey := issue(tokenmaker.CertSpec{CommonName: "fake root", CA: true}, nil, nil)
	fakeInter, fakeInterKey := issue(tokenmaker.CertSpec{CommonName: "fake inter", CA: true, Marker: walleta.OIDIntermediateMarker}, fakeRoot, fakeRootKey)
	fakeLeaf, fakeLeafKey := issue(tokenmaker.CertSpec{CommonName: "fake leaf", Marker: walleta.OIDLeafMarker}, fakeInter, fakeInterKey)
	// Certificates under the real hierarchy lacking a marker, or skipping
	// the intermediate, or expired.
	leafNoMarker, leafNoMarkerKey := issue(tokenmaker.CertSpec{CommonName: "leaf without marker"}, ds.A.IntermediateCert, interKey)
	interNoMarker, interNoMarkerKey := issue(tokenmaker.CertSpec{CommonName: "inter without marker", CA: true}, ds.A.RootCert, rootKey)
	leafUnderPlainInter, leafUnderPlainInterKey := issue(tokenmaker.CertSpec{CommonName: "leaf", Marker: walleta.OIDLeafMarker}, interNoMarker, interNoMarkerKey)
	leafOnRoot, leafOnRootKey := issue(tokenmaker.CertSpec{CommonName: "leaf on root", Marker: walleta.OIDLeafMarker}, ds.A.RootCert, rootKey)
	expiredLeaf, expiredLeafKey, err := tokenmaker.IssueCert(tokenmaker.CertSpec{CommonName: "expired", Marker: walleta.OIDLeafMarker,
		NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-24 * time.Hour)}, ds.A.IntermediateCert, interKey)
	if err != nil {
		t.Fatal(err)
	}

	type tc struct {
		name string
		make func(t *testing.T) (walleta.Token, walleta.Config)
		want error
	}
	tokenFrom := func(s *tokenmaker.DevSet, version string) func(t *testing.T) (walleta.Token, walleta.Config) {
		return func(t *testing.T) (walleta.Token, walleta.Config) {
			tok := decoder.Make(t, s, version, input())
			return tok, cfg
		}
	}
	edited := func(version string, edit func(*walleta.Token), resign bool) func(t *testing.T) (walleta.Token, walleta.Config) {
		return func(t *testing.T) (walleta.Token, walleta.Config) {
			tok := decoder.Make(t, ds, version, input())
			edit(&tok)
			if resign {
				if err := ds.SignWalletA(&tok, time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			return tok, cfg
		}
	}
	flipB64 := func(s string, i int) string {
		b, _ := base64.StdEncoding.DecodeString(s)
		if i < 0 {
			i += len(b)
		}
		b[i] ^= 0x01
		return base64.StdEncoding.EncodeToString(b)
	}
	leafSet := func(c *x509.Certificate, k *ecdsa.PrivateKey, inter *x509.Certificate) *tokenmaker.DevSet {
		return withA(ds, func(a *tokenmaker.WalletADev) {
			a.LeafCert, a.LeafKey = c, k
			if inter != nil {
				a.IntermediateCert = inter
			}
		})
	}

	for _, c := range []tc{
		{"tampered data", edited(walleta.VersionEC, func(t *walleta.Token) { t.Data = flipB64(t.Data, 3) }, false), walleta.ErrSignature},
		{"tampered ephemeral key", edited(walleta.VersionEC, func(t *walleta.Token) { t.Header.EphemeralPublicKey = flipB64(t.Header.EphemeralPublicKey, -2) }, false), walleta.ErrSignature},
		{"tampered wrapped key", edited(walleta.VersionRSA, func(t *walleta.Token) { t.Header.WrappedKey = flipB64(t.Header.WrappedKey, 5) }, false), walleta.ErrSignature},
		{"tampered transaction id", edited(walleta.VersionEC, func(t *walleta.Token) { t.Header.TransactionID = strings.Repeat("ab", 32) }, false), walleta.ErrSignature},
		{"application data added", edited(walleta.VersionEC, func(t *walleta.Token) { t.Header.ApplicationData = "00" }, false), walleta.ErrSignature},
		{"tampered GCM tag, re-signed", edited(walleta.VersionEC, func(t *walleta.Token) { t.Data = flipB64(t.Data, -1) }, true), walleta.ErrDecrypt},
		{"tampered ciphertext, re-signed (RSA_v1)", edited(walleta.VersionRSA, func(t *walleta.Token) { t.Data = flipB64(t.Data, 0) }, true), walleta.ErrDecrypt},
		{"tampered wrapped key, re-signed", edited(walleta.VersionRSA, func(t *walleta.Token) { t.Header.WrappedKey = flipB64(t.Header.WrappedKey, 9) }, true), walleta.ErrDecrypt},
		{"wrong signing key", tokenFrom(withA(ds, func(a *tokenmaker.WalletADev) { a.LeafKey = otherEC }), walleta.VersionEC), walleta.ErrSignature},
		{"corrupt signature value", edited(walleta.VersionEC, func(t *walleta.Token) { t.Signature = flipB64(t.Signature, -12) }, false), walleta.ErrSignature},
		{"chain to another root", tokenFrom(leafSet(fakeLeaf, fakeLeafKey, fakeInter), walleta.VersionEC), walleta.ErrChain},
		{"configured root is another", func(t *testing.T) (walleta.Token, walleta.Config) {
			tok, _ := tokenFrom(ds, walleta.VersionEC)(t)
			c := cfg
			c.Roots = x509.NewCertPool()
			c.Roots.AddCert(fakeRoot)
			return tok, c
		}, walleta.ErrChain},
		{"leaf without marker OID", tokenFrom(leafSet(leafNoMarker, leafNoMarkerKey, nil), walleta.VersionEC), walleta.ErrChain},
		{"intermediate without marker OID", tokenFrom(leafSet(leafUnderPlainInter, leafUnderPlainInterKey, interNoMarker), walleta.VersionEC), walleta.ErrChain},
		{"leaf directly under the root", tokenFrom(leafSet(leafOnRoot, leafOnRootKey, ds.A.RootCert), walleta.VersionEC), walleta.ErrChain},
		{"expired signing certificate", tokenFrom(leafSet(expiredLeaf, expiredLeafKey.(*ecdsa.PrivateKey), nil), walleta.VersionEC), walleta.ErrChain},
		{"another merchant's EC key", tokenFrom(withA(ds, func(a *tokenmaker.WalletADev) { a.ProcessingKeyEC = otherEC }), walleta.VersionEC), walleta.ErrWrongMerchant},
		{"publicKeyHash forged to ours, encrypted for another key", func(t *testing.T) (walleta.Token, walleta.Config) {
			tok, _ := tokenFrom(withA(ds, func(a *tokenmaker.WalletADev) { a.ProcessingKeyEC = otherEC }), walleta.VersionEC)(t)
			ours, _ := walleta.PublicKeyHash(&ds.A.ProcessingKeyEC.PublicKey)
			tok.Header.PublicKeyHash = base64.StdEncoding.EncodeToString(ours)
			return tok, cfg
		}, walleta.ErrDecrypt},
		{"RSA_v1 while only the EC key is configured", func(t *testing.T) (walleta.Token, walleta.Config) {
			tok, _ := tokenFrom(ds, walleta.VersionRSA)(t)
			c := cfg
			c.ExtraProcessingKeys = nil
			return tok, c
		}, walleta.ErrWrongMerchant},
		{"version relabelled RSA_v1 → EC_v1", edited(walleta.VersionRSA, func(t *walleta.Token) { t.Version = walleta.VersionEC }, false), walleta.ErrFormat},
		{"other merchant id (KDF party V)", func(t *testing.T) (walleta.Token, walleta.Config) {
			tok, _ := tokenFrom(ds, walleta.VersionEC)(t)
			c := cfg
			c.MerchantID = "merchant.someone.else"
			return tok, c
		}, walleta.ErrDecrypt},
		{"unknown version", edited(walleta.VersionEC, func(t *walleta.Token) { t.Version = "EC_v2" }, false), walleta.ErrUnsupported},
		{"signature not base64", edited(walleta.VersionEC, func(t *walleta.Token) { t.Signature = "!!" }, false), walleta.ErrFormat},
		{"signature not CMS", edited(walleta.VersionEC, func(t *walleta.Token) {
			t.Signature = base64.StdEncoding.EncodeToString([]byte{0x30, 0x03, 0x02, 0x01, 0x01})
		}, false), walleta.ErrFormat},
		{"transaction id not hex", edited(walleta.VersionEC, func(t *walleta.Token) { t.Header.TransactionID = "xyz" }, false), walleta.ErrFormat},
		{"missing data", edited(walleta.VersionEC, func(t *walleta.Token) { t.Data = "" }, false), walleta.ErrFormat},
		{"payload not JSON", func(t *testing.T) (walleta.Token, walleta.Config) {
			tok, err := ds.WalletARaw(walleta.VersionEC, []byte(`{"applicationPrimaryAccountNumber":"`+tokenmakertest.PAN+`",`), tokenmaker.PaymentInput{})
			if err != nil {
				t.Fatal(err)
			}
			return tok, cfg
		}, walleta.ErrFormat},
		{"payload with bad expiry", func(t *testing.T) (walleta.Token, walleta.Config) {
			tok, err := ds.WalletARaw(walleta.VersionEC, []byte(`{"applicationPrimaryAccountNumber":"`+tokenmakertest.PAN+`","applicationExpirationDate":"301331","currencyCode":"840","transactionAmount":1,"paymentDataType":"3DSecure","paymentData":{"onlinePaymentCryptogram":"x"}}`), tokenmaker.PaymentInput{})
			if err != nil {
				t.Fatal(err)
			}
			return tok, cfg
		}, walleta.ErrFormat},
		{"3DSecure payload without cryptogram", func(t *testing.T) (walleta.Token, walleta.Config) {
			in := input()
			in.Cryptogram = "-"
			p, _ := tokenmaker.WalletAPayload(in)
			p = bytes.Replace(p, []byte(`"onlinePaymentCryptogram":"-",`), nil, 1)
			tok, err := ds.WalletARaw(walleta.VersionEC, p, tokenmaker.PaymentInput{})
			if err != nil {
				t.Fatal(err)
			}
			return tok, cfg
		}, walleta.ErrFormat},
		{"no root configured", func(t *testing.T) (walleta.Token, walleta.Config) {
			tok, _ := tokenFrom(ds, walleta.VersionEC)(t)
			c := cfg
			c.Roots = nil
			return tok, c
		}, walleta.ErrConfig},
	} {
		t.Run(c.name, func(t *testing.T) { decoder.Refuses(t, c.make, c.want) })
	}
}

func TestLoadConfig(t *testing.T) {
	dir := "testdata"
	id, err := os.ReadFile(filepath.Join(dir, tokenmaker.FileWalletAMerchantID))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := walleta.LoadConfig(strings.TrimSpace(string(id)),
		filepath.Join(dir, tokenmaker.FileWalletAProcessingKeys), filepath.Join(dir, tokenmaker.FileWalletARootCert))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.ExtraProcessingKeys) != 1 {
		t.Fatalf("want the EC and the RSA key, got 1+%d", len(cfg.ExtraProcessingKeys))
	}
	cfg.Now = wallettest.KATClock(0)
	for _, f := range []string{"ec_v1.token.json", "rsa_v1.token.json"} {
		if _, err := walleta.Decrypt(cfg, decoder.ReadToken(t, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := walleta.LoadConfig("m", filepath.Join(dir, tokenmaker.FileWalletARootCert), filepath.Join(dir, tokenmaker.FileWalletARootCert)); err == nil {
		t.Error("a certificate accepted as processing key")
	}
	if _, err := walleta.LoadConfig("m", filepath.Join(dir, tokenmaker.FileWalletAProcessingKeyEC), filepath.Join(dir, "missing.pem")); !errors.Is(err, walleta.ErrConfig) {
		t.Errorf("missing root file: %v", err)
	}
}

func BenchmarkDecrypt(b *testing.B) {
	decoder.Benchmark(b, []string{walleta.VersionEC, walleta.VersionRSA}, input())
}
