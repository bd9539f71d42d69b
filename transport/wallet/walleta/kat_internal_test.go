package walleta

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/internal/wallettest"
)

// TestDeriveKeyECKnownAnswer pins the EC_v1 KDF. The expected values were
// computed outside Go (Python hashlib) from the same inputs; the test also
// rebuilds the KDF input byte by byte.
func TestDeriveKeyECKnownAnswer(t *testing.T) {
	z := wallettest.MustHex(t, "ef7889b8ac43f55ed2385acc64defe22da0a370bf11b7cc186f4a11f3a4306fb")
	const merchantID = "merchant.com.example.kat"
	const wantPartyV = "03f5fb319aa392ce18c4e0e819d81936b0c1511678eff824b9fae231147916d8"
	const wantOtherInfo = "0d" + "69642d6165733235362d47434d" + "4170706c65" + wantPartyV // 0x0D ‖ "id-aes256-GCM" ‖ "Apple" ‖ partyV
	const wantKey = "93a13ace8c2b57f23915a4ebdc60a7c6ba8913066f190adbc9c307c5662464e7"

	partyV := sha256.Sum256([]byte(merchantID))
	if hex.EncodeToString(partyV[:]) != wantPartyV {
		t.Fatalf("party V = %x", partyV)
	}
	otherInfo := append(append(append([]byte{0x0d}, "id-aes256-GCM"...), "Apple"...), partyV[:]...)
	if hex.EncodeToString(otherInfo) != wantOtherInfo {
		t.Fatalf("otherInfo = %x", otherInfo)
	}
	stepByStep := sha256.Sum256(append(append([]byte{0, 0, 0, 1}, z...), otherInfo...))
	if hex.EncodeToString(stepByStep[:]) != wantKey {
		t.Fatalf("step-by-step key = %x", stepByStep)
	}
	if got := hex.EncodeToString(DeriveKeyEC(z, merchantID)); got != wantKey {
		t.Fatalf("DeriveKeyEC = %s, want %s", got, wantKey)
	}
}

// TestKnownAnswerStepByStep opens the committed tokens without Decrypt:
// ECDH / RSA-OAEP, the KDF and AES-GCM with a 16-byte zero nonce written
// out here, and compares with the committed plaintext.
func TestKnownAnswerStepByStep(t *testing.T) {
	merchantID := strings.TrimSpace(string(wallettest.ReadFile(t, "walleta-merchant-id.txt")))

	t.Run("EC_v1", func(t *testing.T) {
		tok := readToken(t, "ec_v1.token.json")
		key := readKey(t, "walleta-processing-key-ec.pem").(*ecdsa.PrivateKey)
		eph := wallettest.MustB64(t, tok.Header.EphemeralPublicKey)
		pubAny, err := x509.ParsePKIXPublicKey(eph)
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := pubAny.(*ecdsa.PublicKey).ECDH()
		priv, _ := key.ECDH()
		z, err := priv.ECDH(pub)
		if err != nil {
			t.Fatal(err)
		}
		partyV := sha256.Sum256([]byte(merchantID))
		h := sha256.New()
		h.Write([]byte{0, 0, 0, 1})
		h.Write(z)
		h.Write([]byte("\x0did-aes256-GCMApple"))
		h.Write(partyV[:])
		checkGCM(t, h.Sum(nil), wallettest.MustB64(t, tok.Data), wallettest.ReadFile(t, "ec_v1.plain.json"))
		checkPublicKeyHash(t, tok, &key.PublicKey)
	})
	t.Run("RSA_v1", func(t *testing.T) {
		tok := readToken(t, "rsa_v1.token.json")
		key := readKey(t, "walleta-processing-key-rsa.pem").(*rsa.PrivateKey)
		sym, err := rsa.DecryptOAEP(sha256.New(), nil, key, wallettest.MustB64(t, tok.Header.WrappedKey), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(sym) != 16 {
			t.Fatalf("wrapped key is %d bytes", len(sym))
		}
		checkGCM(t, sym, wallettest.MustB64(t, tok.Data), wallettest.ReadFile(t, "rsa_v1.plain.json"))
		checkPublicKeyHash(t, tok, &key.PublicKey)
	})
}

func checkGCM(t *testing.T, key, data, want []byte) {
	t.Helper()
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, 16)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := gcm.Open(nil, make([]byte, 16), data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plain, want) {
		t.Fatalf("plaintext differs:\n%s\n%s", plain, want)
	}
}

func checkPublicKeyHash(t *testing.T, tok Token, pub any) {
	t.Helper()
	spki, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(spki)
	if base64.StdEncoding.EncodeToString(h[:]) != tok.Header.PublicKeyHash {
		t.Fatal("publicKeyHash is not SHA-256 of the processing key's SPKI")
	}
}

func readToken(t *testing.T, name string) Token {
	t.Helper()
	return wallettest.ReadJSON[Token](t, name)
}

func readKey(t *testing.T, name string) any {
	t.Helper()
	k, err := wallet.ParsePrivateKeyPEM(wallettest.ReadFile(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
