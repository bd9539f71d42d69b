package walletb_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/internal/wallettest"
	"github.com/paygate/gateway/transport/wallet/tokenmaker"
	"github.com/paygate/gateway/transport/wallet/tokenmaker/tokenmakertest"
	"github.com/paygate/gateway/transport/wallet/walletb"
)

// decoder is this wallet's side of the tests the wallets share.
var decoder = tokenmakertest.Decoder[walletb.Config, walletb.Token]{
	Config: (*tokenmaker.DevSet).WalletBConfig, Token: (*tokenmaker.DevSet).WalletB, Decrypt: walletb.Decrypt}

func withB(ds *tokenmaker.DevSet, edit func(b *tokenmaker.WalletBDev)) *tokenmaker.DevSet {
	b := *ds.B
	b.RootKeys = map[string]*ecdsa.PrivateKey{}
	for k, v := range ds.B.RootKeys {
		b.RootKeys[k] = v
	}
	edit(&b)
	c := *ds
	c.B = &b
	return &c
}

func input() tokenmaker.PaymentInput {
	in := tokenmakertest.Input()
	in.GatewayMerchantID = "merchant-7"
	return in
}

func TestKnownAnswer(t *testing.T) {
	_, cfg := decoder.Fixture(t)
	cfg.Now = wallettest.KATClock(time.Minute)
	decoder.KnownAnswers(t, cfg, []tokenmakertest.KnownAnswer{
		{File: "ecv1.token.json", Want: wallet.Payment{Wallet: wallet.WalletB, Version: walletb.VersionECv1,
			PAN: "4111111111111111", ExpMonth: "12", ExpYear: "2031", AuthMethod: wallet.AuthPANOnly,
			TransactionID: "kat-ecv1-message-id", MessageExpiration: wallettest.KATNow.Add(time.Hour)}},
		{File: "ecv2.token.json", Want: wallet.Payment{Wallet: wallet.WalletB, Version: walletb.VersionECv2,
			PAN: "4895370012003478", ExpMonth: "03", ExpYear: "2030", AuthMethod: wallet.AuthCryptogram3DS,
			Cryptogram: "AAAAAAAAAAAAAAAAAAAAAAAAAAA=", ECI: "05", TransactionID: "kat-ecv2-message-id",
			GatewayMerchantID: "kat-merchant-42", MessageExpiration: wallettest.KATNow.Add(time.Hour)}},
	}, nil)
	// At the fixtures' message expiration the message is refused.
	cfg.Now = wallettest.KATClock(time.Hour)
	if _, err := walletb.Decrypt(cfg, decoder.ReadToken(t, "ecv1.token.json")); !errors.Is(err, walletb.ErrExpired) {
		t.Errorf("at messageExpiration: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	ds, cfg := decoder.Fixture(t)
	for _, v := range []string{walletb.VersionECv1, walletb.VersionECv2} {
		for _, auth := range []string{wallet.AuthCryptogram3DS, wallet.AuthPANOnly} {
			in := input()
			in.AuthMethod = auth
			if auth == wallet.AuthPANOnly {
				in.Cryptogram, in.ECI = "", ""
			}
			tok, err := ds.WalletB(v, in)
			if err != nil {
				t.Fatal(err)
			}
			p, err := walletb.Decrypt(cfg, tok)
			if err != nil {
				t.Fatalf("%s %s: %v", v, auth, err)
			}
			if p.PAN != in.PAN || p.ExpMonth != in.ExpMonth || p.ExpYear != in.ExpYear || p.Cryptogram != in.Cryptogram ||
				p.ECI != in.ECI || p.AuthMethod != auth || p.Version != v || p.TransactionID == "" {
				t.Errorf("%s %s: got %+v", v, auth, p)
			}
			if wantGM := map[string]string{walletb.VersionECv1: "", walletb.VersionECv2: "merchant-7"}[v]; p.GatewayMerchantID != wantGM {
				t.Errorf("%s: gatewayMerchantId %q", v, p.GatewayMerchantID)
			}
		}
	}
}

func TestRecipientKeyAsECDH(t *testing.T) {
	ds, cfg := decoder.Fixture(t)
	k, err := ds.B.RecipientKey.ECDH()
	if err != nil {
		t.Fatal(err)
	}
	cfg.PrivateKey = k
	decoder.DecryptsWith(t, ds, cfg, walletb.VersionECv2, input())
}

func TestReplayIsTheCallersJob(t *testing.T) {
	decoder.DecryptsTwice(t, tokenmakertest.DevSet(t), walletb.VersionECv2, input(), "walletb-pay:")
}

func TestRefusals(t *testing.T) {
	ds, cfg := decoder.Fixture(t)
	now := time.Now()
	otherKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(s *tokenmaker.DevSet, version string, in tokenmaker.PaymentInput) func(t *testing.T) (walletb.Token, walletb.Config) {
		return func(t *testing.T) (walletb.Token, walletb.Config) {
			tok := decoder.Make(t, s, version, in)
			return tok, cfg
		}
	}
	withInput := func(edit func(*tokenmaker.PaymentInput)) tokenmaker.PaymentInput {
		in := input()
		edit(&in)
		return in
	}
	withConfig := func(version string, edit func(*walletb.Config)) func(t *testing.T) (walletb.Token, walletb.Config) {
		return func(t *testing.T) (walletb.Token, walletb.Config) {
			tok := decoder.Make(t, ds, version, input())
			c := cfg
			c.RootKeys = append([]walletb.RootKey(nil), cfg.RootKeys...)
			edit(&c)
			return tok, c
		}
	}
	// editMessage changes a field of the signedMessage JSON; resign makes a
	// valid signature over the result.
	editMessage := func(version, field string, resign bool) func(t *testing.T) (walletb.Token, walletb.Config) {
		return func(t *testing.T) (walletb.Token, walletb.Config) {
			tok := decoder.Make(t, ds, version, input())
			var sm map[string]string
			if err := json.Unmarshal([]byte(tok.SignedMessage), &sm); err != nil {
				t.Fatal(err)
			}
			b, _ := base64.StdEncoding.DecodeString(sm[field])
			b[len(b)-1] ^= 0x01
			sm[field] = base64.StdEncoding.EncodeToString(b)
			j, _ := json.Marshal(sm)
			tok.SignedMessage = string(j)
			if resign {
				if err := ds.SignWalletB(&tok, ds.B.RecipientID, time.Now().Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
			}
			return tok, cfg
		}
	}
	editToken := func(version string, edit func(*walletb.Token)) func(t *testing.T) (walletb.Token, walletb.Config) {
		return func(t *testing.T) (walletb.Token, walletb.Config) {
			tok := decoder.Make(t, ds, version, input())
			edit(&tok)
			return tok, cfg
		}
	}
	raw := func(version, plain string) func(t *testing.T) (walletb.Token, walletb.Config) {
		return func(t *testing.T) (walletb.Token, walletb.Config) {
			tok, err := ds.WalletBRaw(version, []byte(plain), tokenmaker.PaymentInput{})
			if err != nil {
				t.Fatal(err)
			}
			return tok, cfg
		}
	}
	future := strconv.FormatInt(now.Add(time.Hour).UnixMilli(), 10)
	past := strconv.FormatInt(now.Add(-time.Minute).UnixMilli(), 10)
	relabel := func(from, to string) func(*walletb.Config) {
		return func(c *walletb.Config) {
			for i := range c.RootKeys {
				if c.RootKeys[i].ProtocolVersion == from {
					c.RootKeys[i].ProtocolVersion = to
				}
			}
		}
	}
	swapVersions := func(c *walletb.Config) {
		for i := range c.RootKeys {
			switch c.RootKeys[i].ProtocolVersion {
			case walletb.VersionECv1:
				c.RootKeys[i].ProtocolVersion = walletb.VersionECv2
			case walletb.VersionECv2:
				c.RootKeys[i].ProtocolVersion = walletb.VersionECv1
			}
		}
	}

	for _, c := range []struct {
		name string
		make func(t *testing.T) (walletb.Token, walletb.Config)
		want error
	}{
		{"tampered encryptedMessage (ECv1)", editMessage(walletb.VersionECv1, "encryptedMessage", false), walletb.ErrSignature},
		{"tampered tag (ECv2)", editMessage(walletb.VersionECv2, "tag", false), walletb.ErrSignature},
		{"tampered tag, re-signed (ECv1)", editMessage(walletb.VersionECv1, "tag", true), walletb.ErrDecrypt},
		{"tampered tag, re-signed (ECv2)", editMessage(walletb.VersionECv2, "tag", true), walletb.ErrDecrypt},
		{"tampered ciphertext, re-signed (ECv2)", editMessage(walletb.VersionECv2, "encryptedMessage", true), walletb.ErrDecrypt},
		{"wrong signature (ECv1)", editToken(walletb.VersionECv1, func(t *walletb.Token) {
			d := sha256.Sum256(walletb.SignedString(walletb.SenderID, ds.B.RecipientID, t.ProtocolVersion, t.SignedMessage))
			t.Signature = base64.StdEncoding.EncodeToString(mustSign(otherKey, d[:]))
		}), walletb.ErrSignature},
		{"message signed by a key other than the intermediate (ECv2)", editToken(walletb.VersionECv2, func(t *walletb.Token) {
			d := sha256.Sum256(walletb.SignedString(walletb.SenderID, ds.B.RecipientID, t.ProtocolVersion, t.SignedMessage))
			t.Signature = base64.StdEncoding.EncodeToString(mustSign(otherKey, d[:]))
		}), walletb.ErrSignature},
		{"message signed by the ECv2 root itself", editToken(walletb.VersionECv2, func(t *walletb.Token) {
			d := sha256.Sum256(walletb.SignedString(walletb.SenderID, ds.B.RecipientID, t.ProtocolVersion, t.SignedMessage))
			t.Signature = base64.StdEncoding.EncodeToString(mustSign(ds.B.RootKeys[walletb.VersionECv2], d[:]))
		}), walletb.ErrSignature},
		{"ECv1 signed by a non-root key", mk(withB(ds, func(b *tokenmaker.WalletBDev) { b.RootKeys[walletb.VersionECv1] = otherKey }), walletb.VersionECv1, input()), walletb.ErrSignature},
		{"intermediate signed by a non-root key", mk(withB(ds, func(b *tokenmaker.WalletBDev) { b.RootKeys[walletb.VersionECv2] = otherKey }), walletb.VersionECv2, input()), walletb.ErrSignature},
		{"intermediate signed by the ECv1 root key", mk(withB(ds, func(b *tokenmaker.WalletBDev) { b.RootKeys[walletb.VersionECv2] = ds.B.RootKeys[walletb.VersionECv1] }), walletb.VersionECv2, input()), walletb.ErrSignature},
		{"wrong recipient id (ECv1)", mk(ds, walletb.VersionECv1, withInput(func(p *tokenmaker.PaymentInput) { p.RecipientID = "gateway:other" })), walletb.ErrSignature},
		{"wrong recipient id (ECv2)", mk(ds, walletb.VersionECv2, withInput(func(p *tokenmaker.PaymentInput) { p.RecipientID = "gateway:other" })), walletb.ErrSignature},
		{"expired intermediate key", mk(ds, walletb.VersionECv2, withInput(func(p *tokenmaker.PaymentInput) { p.IntermediateExpiration = now.Add(-time.Second) })), walletb.ErrExpired},
		{"expired message (ECv1)", mk(ds, walletb.VersionECv1, withInput(func(p *tokenmaker.PaymentInput) { p.MessageExpiration = now.Add(-time.Second) })), walletb.ErrExpired},
		{"expired message (ECv2)", mk(ds, walletb.VersionECv2, withInput(func(p *tokenmaker.PaymentInput) { p.MessageExpiration = now.Add(-time.Second) })), walletb.ErrExpired},
		{"ECv1 root listed as ECv2 only", withConfig(walletb.VersionECv1, relabel(walletb.VersionECv1, walletb.VersionECv2)), walletb.ErrSignature},
		{"ECv2 root listed as ECv1 only", withConfig(walletb.VersionECv2, relabel(walletb.VersionECv2, walletb.VersionECv1)), walletb.ErrSignature},
		{"root keys' versions swapped (ECv1 token)", withConfig(walletb.VersionECv1, swapVersions), walletb.ErrSignature},
		{"root keys' versions swapped (ECv2 token)", withConfig(walletb.VersionECv2, swapVersions), walletb.ErrSignature},
		{"expired ECv1 root key ignored", withConfig(walletb.VersionECv1, func(c *walletb.Config) {
			for i := range c.RootKeys {
				c.RootKeys[i].KeyExpiration = past
			}
		}), walletb.ErrSignature},
		{"expired ECv2 root key ignored", withConfig(walletb.VersionECv2, func(c *walletb.Config) {
			for i := range c.RootKeys {
				c.RootKeys[i].KeyExpiration = past
			}
		}), walletb.ErrSignature},
		{"ECv2 root key without keyExpiration ignored", withConfig(walletb.VersionECv2, func(c *walletb.Config) {
			for i := range c.RootKeys {
				c.RootKeys[i].KeyExpiration = ""
			}
		}), walletb.ErrSignature},
		{"other recipient private key", withConfig(walletb.VersionECv2, func(c *walletb.Config) { c.PrivateKey = otherKey }), walletb.ErrDecrypt},
		{"ECv0 (protocolVersion unset)", editToken(walletb.VersionECv1, func(t *walletb.Token) { t.ProtocolVersion = "" }), walletb.ErrUnsupported},
		{"ECv0 explicit", editToken(walletb.VersionECv1, func(t *walletb.Token) { t.ProtocolVersion = "ECv0" }), walletb.ErrUnsupported},
		{"unknown version", editToken(walletb.VersionECv2, func(t *walletb.Token) { t.ProtocolVersion = "ECv2SigningOnly" }), walletb.ErrUnsupported},
		{"ECv1 token relabelled ECv2", editToken(walletb.VersionECv1, func(t *walletb.Token) { t.ProtocolVersion = walletb.VersionECv2 }), walletb.ErrFormat},
		{"ECv2 token relabelled ECv1", editToken(walletb.VersionECv2, func(t *walletb.Token) { t.ProtocolVersion = walletb.VersionECv1 }), walletb.ErrSignature},
		{"ECv2 without intermediateSigningKey", editToken(walletb.VersionECv2, func(t *walletb.Token) { t.IntermediateSigningKey = nil }), walletb.ErrFormat},
		{"signature not base64", editToken(walletb.VersionECv1, func(t *walletb.Token) { t.Signature = "%%" }), walletb.ErrFormat},
		{"message not JSON", raw(walletb.VersionECv1, `{"messageExpiration":"`+future+`","paymentMethodDetails":{"pan":"`+tokenmakertest.PAN+`"`), walletb.ErrFormat},
		{"paymentMethod not CARD", raw(walletb.VersionECv1, `{"messageExpiration":"`+future+`","messageId":"m","paymentMethod":"TOKENIZED_CARD","paymentMethodDetails":{"pan":"`+tokenmakertest.PAN+`","expirationMonth":1,"expirationYear":2030,"authMethod":"PAN_ONLY"}}`), walletb.ErrUnsupported},
		{"bad expiration month", raw(walletb.VersionECv2, `{"messageExpiration":"`+future+`","messageId":"m","paymentMethod":"CARD","paymentMethodDetails":{"pan":"`+tokenmakertest.PAN+`","expirationMonth":13,"expirationYear":2030,"authMethod":"PAN_ONLY"}}`), walletb.ErrFormat},
		{"CRYPTOGRAM_3DS without cryptogram", raw(walletb.VersionECv2, `{"messageExpiration":"`+future+`","messageId":"m","paymentMethod":"CARD","paymentMethodDetails":{"pan":"`+tokenmakertest.PAN+`","expirationMonth":1,"expirationYear":2030,"authMethod":"CRYPTOGRAM_3DS"}}`), walletb.ErrFormat},
		{"no messageId", raw(walletb.VersionECv2, `{"messageExpiration":"`+future+`","paymentMethod":"CARD","paymentMethodDetails":{"pan":"`+tokenmakertest.PAN+`","expirationMonth":1,"expirationYear":2030,"authMethod":"PAN_ONLY"}}`), walletb.ErrFormat},
		{"no root keys configured", withConfig(walletb.VersionECv1, func(c *walletb.Config) { c.RootKeys = nil }), walletb.ErrConfig},
	} {
		t.Run(c.name, func(t *testing.T) { decoder.Refuses(t, c.make, c.want) })
	}
}

// TestECv1RootKeyWithoutExpiration: ECv1 root keys may omit keyExpiration.
func TestECv1RootKeyWithoutExpiration(t *testing.T) {
	ds, cfg := decoder.Fixture(t)
	cfg.RootKeys = append([]walletb.RootKey(nil), cfg.RootKeys...)
	for i := range cfg.RootKeys {
		cfg.RootKeys[i].KeyExpiration = ""
	}
	tok, err := ds.WalletB(walletb.VersionECv1, input())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := walletb.Decrypt(cfg, tok); err != nil {
		t.Fatal(err)
	}
}

func TestParseRootKeys(t *testing.T) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	spki, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	kv := base64.StdEncoding.EncodeToString(spki)
	keys, err := walletb.ParseRootKeys([]byte(`{"keys":[
		{"keyValue":"` + kv + `","protocolVersion":"ECv1"},
		{"keyValue":"` + kv + `","protocolVersion":"ECv2","keyExpiration":"2154841200000"},
		{"keyValue":"` + kv + `","protocolVersion":"ECv2SigningOnly","keyExpiration":2154841200000}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || keys[0].KeyExpiration != "" || keys[1].KeyExpiration != "2154841200000" || keys[2].KeyExpiration != "2154841200000" {
		t.Fatalf("%+v", keys)
	}
	for name, in := range map[string]string{
		"not JSON":          `{`,
		"empty":             `{"keys":[]}`,
		"bad key":           `{"keys":[{"keyValue":"AAAA","protocolVersion":"ECv2","keyExpiration":"1"}]}`,
		"bad expiration":    `{"keys":[{"keyValue":"` + kv + `","protocolVersion":"ECv2","keyExpiration":"soon"}]}`,
		"no version":        `{"keys":[{"keyValue":"` + kv + `","keyExpiration":"1"}]}`,
		"RSA key not EC256": `{"keys":[{"keyValue":"MA==","protocolVersion":"ECv2","keyExpiration":"1"}]}`,
	} {
		if _, err := walletb.ParseRootKeys([]byte(in)); !errors.Is(err, walletb.ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	id, err := os.ReadFile(filepath.Join("testdata", tokenmaker.FileWalletBRecipientID))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := walletb.LoadConfig(strings.TrimSpace(string(id)),
		filepath.Join("testdata", tokenmaker.FileWalletBRecipientKey), filepath.Join("testdata", tokenmaker.FileWalletBRootKeys))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Now = wallettest.KATClock(0)
	for _, f := range []string{"ecv1.token.json", "ecv2.token.json"} {
		if _, err := walletb.Decrypt(cfg, decoder.ReadToken(t, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func mustSign(k *ecdsa.PrivateKey, digest []byte) []byte {
	sig, err := ecdsa.SignASN1(rand.Reader, k, digest)
	if err != nil {
		panic(err)
	}
	return sig
}

func BenchmarkDecrypt(b *testing.B) {
	decoder.Benchmark(b, []string{walletb.VersionECv1, walletb.VersionECv2}, input())
}
