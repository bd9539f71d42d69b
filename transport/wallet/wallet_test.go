package wallet_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/paygate/gateway/transport/wallet"
)

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func TestParsePrivateKeyPEM(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rk, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8EC, _ := x509.MarshalPKCS8PrivateKey(ec)
	sec1, _ := x509.MarshalECPrivateKey(ec)
	pkcs8RSA, _ := x509.MarshalPKCS8PrivateKey(rk)
	ecParams := pemBlock("EC PARAMETERS", []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07})

	for _, c := range []struct {
		name string
		in   []byte
		ec   bool
	}{
		{"PKCS#8 EC", pemBlock("PRIVATE KEY", pkcs8EC), true},
		{"SEC1 EC after EC PARAMETERS (openssl ecparam -genkey)", append(ecParams, pemBlock("EC PRIVATE KEY", sec1)...), true},
		{"PKCS#8 RSA", pemBlock("PRIVATE KEY", pkcs8RSA), false},
		{"PKCS#1 RSA", pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rk)), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, err := wallet.ParsePrivateKeyPEM(c.in)
			if err != nil {
				t.Fatal(err)
			}
			switch k := k.(type) {
			case *ecdsa.PrivateKey:
				if !c.ec || !k.Equal(ec) {
					t.Fatal("wrong EC key")
				}
			case *rsa.PrivateKey:
				if c.ec || !k.Equal(rk) {
					t.Fatal("wrong RSA key")
				}
			default:
				t.Fatalf("type %T", k)
			}
		})
	}

	both := append(pemBlock("PRIVATE KEY", pkcs8EC), pemBlock("PRIVATE KEY", pkcs8RSA)...)
	keys, err := wallet.ParsePrivateKeysPEM(both)
	if err != nil || len(keys) != 2 {
		t.Fatalf("ParsePrivateKeysPEM: %d keys, %v", len(keys), err)
	}

	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"no PEM", []byte("not a key")},
		{"certificate only", pemBlock("CERTIFICATE", []byte{1, 2, 3})},
		{"encrypted PKCS#8", pemBlock("ENCRYPTED PRIVATE KEY", []byte{1, 2, 3})},
		{"corrupt key", pemBlock("PRIVATE KEY", []byte{0x30, 0x03, 0x02, 0x01, 0x00})},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := wallet.ParsePrivateKeyPEM(c.in); !errors.Is(err, wallet.ErrKey) {
				t.Fatalf("err = %v, want ErrKey", err)
			}
		})
	}
}

func TestParseCertPoolPEM(t *testing.T) {
	if _, err := wallet.ParseCertPoolPEM([]byte("nothing")); !errors.Is(err, wallet.ErrKey) {
		t.Fatalf("err = %v", err)
	}
}

func TestPaymentNeverPrintsPAN(t *testing.T) {
	p := &wallet.Payment{Wallet: wallet.WalletA, PAN: "4111111111111111", Cryptogram: "secretcryptogram", TransactionID: "ab"}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "payment", *p)
	for _, s := range []string{fmt.Sprint(p), fmt.Sprintf("%v", *p), fmt.Sprintf("%+v", p), fmt.Sprintf("%#v", *p), logged.String()} {
		if strings.Contains(s, "4111111111111111") || strings.Contains(s, "secretcryptogram") {
			t.Errorf("leaks: %s", s)
		}
		if !strings.Contains(s, "411111******1111") {
			t.Errorf("no masked PAN: %s", s)
		}
	}
	if p.ReplayKey() != "walleta-pay:ab" {
		t.Errorf("ReplayKey %q", p.ReplayKey())
	}
	if wallet.MaskPAN("12345") != "*****" {
		t.Errorf("short PAN not fully masked")
	}
}
