package walletb

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/internal/wallettest"
)

// TestDeriveKeysKnownAnswer pins the HKDF step. The expected keys were
// computed outside Go (Python hmac, RFC 5869 written out) from the same
// inputs; the test also runs HKDF-Extract/Expand by hand.
func TestDeriveKeysKnownAnswer(t *testing.T) {
	eph := wallettest.MustHex(t, "04389d1cdecd77db5d24b5a4ee75a2a75855bc887ff57d706b51ac33b52d94cc72e6b3ea885d14bc52a45d89d00d1817e4f960d339542ba970e7e76c4d47ca080d")
	z := wallettest.MustHex(t, "fea078eb914144b0f6eb56774782c7dae996be2d887154bf8db2d45ffe179f8d")
	want := map[string][2]string{
		VersionECv1: {"bf2286a23dcd8f292633af11af799cd8", "686518e1157c7d65cbad4e8a40df56c1"},
		VersionECv2: {"bf2286a23dcd8f292633af11af799cd8686518e1157c7d65cbad4e8a40df56c1",
			"a65c88307a0552933b8d64ba1f009f8e91f18116147a3239276ed9308549a354"},
	}
	// By hand: PRK = HMAC(salt = 32 zero bytes, eph ‖ Z); T(i) = HMAC(PRK,
	// T(i-1) ‖ "Google" ‖ i).
	prk := hmacSHA256(make([]byte, 32), append(append([]byte{}, eph...), z...))
	t1 := hmacSHA256(prk, append([]byte("Google"), 1))
	t2 := hmacSHA256(prk, append(append(append([]byte{}, t1...), "Google"...), 2))
	byHand := append(t1, t2...)
	if hex.EncodeToString(byHand[:32]) != want[VersionECv1][0]+want[VersionECv1][1] ||
		hex.EncodeToString(byHand) != want[VersionECv2][0]+want[VersionECv2][1] {
		t.Fatalf("by-hand HKDF = %x", byHand)
	}
	for v, w := range want {
		enc, mac, err := DeriveKeys(v, eph, z)
		if err != nil {
			t.Fatal(err)
		}
		if hex.EncodeToString(enc) != w[0] || hex.EncodeToString(mac) != w[1] {
			t.Errorf("%s: enc %x mac %x", v, enc, mac)
		}
	}
	_, mac, _ := DeriveKeys(VersionECv1, eph, z)
	if got := hex.EncodeToString(Tag(mac, []byte("walletb-pay ciphertext"))); got != "4db33fdcd55c3b66249e21641e98c32f007dddc362e03269df685e273216071e" {
		t.Errorf("Tag = %s", got)
	}
}

func TestSignedStringLayout(t *testing.T) {
	got := SignedString("Google", "gateway:x", "ECv1", "{}")
	want := []byte("\x06\x00\x00\x00Google\x09\x00\x00\x00gateway:x\x04\x00\x00\x00ECv1\x02\x00\x00\x00{}")
	if !bytes.Equal(got, want) {
		t.Fatalf("SignedString = %q", got)
	}
	if got := SignedKeyString("Google", "ECv2", "k"); !bytes.Equal(got, []byte("\x06\x00\x00\x00Google\x04\x00\x00\x00ECv2\x01\x00\x00\x00k")) {
		t.Fatalf("SignedKeyString = %q", got)
	}
}

// TestKnownAnswerStepByStep checks the committed tokens without Decrypt:
// signatures over the length-prefixed strings, ECDH, HKDF, HMAC, AES-CTR
// with a zero IV, all written out here; the plaintext must equal the
// committed one.
func TestKnownAnswerStepByStep(t *testing.T) {
	roots, err := ParseRootKeys(wallettest.ReadFile(t, "walletb-root-keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	rootKey := func(v string) *ecdsa.PublicKey {
		for _, rk := range roots {
			if rk.ProtocolVersion == v {
				k, err := parseECPublicKey(rk.KeyValue)
				if err != nil {
					t.Fatal(err)
				}
				return k
			}
		}
		t.Fatalf("no %s root key", v)
		return nil
	}
	recipientID := string(bytes.TrimSpace(wallettest.ReadFile(t, "walletb-recipient-id.txt")))
	k, err := wallet.ParsePrivateKeyPEM(wallettest.ReadFile(t, "walletb-recipient-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	priv, err := k.(*ecdsa.PrivateKey).ECDH()
	if err != nil {
		t.Fatal(err)
	}
	lv := func(parts ...string) []byte {
		var out []byte
		for _, p := range parts {
			n := len(p)
			out = append(out, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
			out = append(out, p...)
		}
		return out
	}
	verify := func(pub *ecdsa.PublicKey, msg []byte, sigB64 string) {
		t.Helper()
		d := sha256.Sum256(msg)
		if !ecdsa.VerifyASN1(pub, d[:], wallettest.MustB64(t, sigB64)) {
			t.Fatal("signature does not verify")
		}
	}

	for _, c := range []struct{ file, version string }{{"ecv1", VersionECv1}, {"ecv2", VersionECv2}} {
		t.Run(c.version, func(t *testing.T) {
			var tok Token
			if err := json.Unmarshal(wallettest.ReadFile(t, c.file+".token.json"), &tok); err != nil {
				t.Fatal(err)
			}
			signer := rootKey(VersionECv1)
			if c.version == VersionECv2 {
				verify(rootKey(VersionECv2), lv("Google", "ECv2", tok.IntermediateSigningKey.SignedKey), tok.IntermediateSigningKey.Signatures[0])
				var sk SignedKey
				if err := json.Unmarshal([]byte(tok.IntermediateSigningKey.SignedKey), &sk); err != nil {
					t.Fatal(err)
				}
				signer, err = parseECPublicKey(sk.KeyValue)
				if err != nil {
					t.Fatal(err)
				}
			}
			verify(signer, lv("Google", recipientID, c.version, tok.SignedMessage), tok.Signature)

			var sm SignedMessage
			if err := json.Unmarshal([]byte(tok.SignedMessage), &sm); err != nil {
				t.Fatal(err)
			}
			ephBytes := wallettest.MustB64(t, sm.EphemeralPublicKey)
			eph, err := ecdh.P256().NewPublicKey(ephBytes)
			if err != nil {
				t.Fatal(err)
			}
			z, err := priv.ECDH(eph)
			if err != nil {
				t.Fatal(err)
			}
			size := 16
			if c.version == VersionECv2 {
				size = 32
			}
			prk := hmacSHA256(make([]byte, 32), append(append([]byte{}, ephBytes...), z...))
			t1 := hmacSHA256(prk, append([]byte("Google"), 1))
			t2 := hmacSHA256(prk, append(append(append([]byte{}, t1...), "Google"...), 2))
			okm := append(t1, t2...)
			encKey, macKey := okm[:size], okm[size:2*size]
			ct := wallettest.MustB64(t, sm.EncryptedMessage)
			if !hmac.Equal(hmacSHA256(macKey, ct), wallettest.MustB64(t, sm.Tag)) {
				t.Fatal("tag mismatch")
			}
			block, err := aes.NewCipher(encKey)
			if err != nil {
				t.Fatal(err)
			}
			plain := make([]byte, len(ct))
			cipher.NewCTR(block, make([]byte, 16)).XORKeyStream(plain, ct)
			if want := wallettest.ReadFile(t, c.file+".plain.json"); !bytes.Equal(plain, want) {
				t.Fatalf("plaintext differs:\n%s\n%s", plain, want)
			}
		})
	}
}

func hmacSHA256(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}
