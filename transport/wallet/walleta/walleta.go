// Package walleta verifies and decrypts walleta-pay tokens: the Apple Pay
// payment token format, versions EC_v1 and RSA_v1.
//
// Decrypt checks, in order: the token's fields decode; the detached CMS
// (PKCS#7) SignedData signature parses (BER accepted); its signer
// certificate carries the leaf marker extension and chains through an
// intermediate carrying the intermediate marker extension to a configured
// root; the signed messageDigest is SHA-256 of ephemeralPublicKey (or
// wrappedKey) ‖ data ‖ transactionId ‖ applicationData; the signature over
// the signed attributes verifies; the signing time is within MaxSigningAge
// of Now; header.publicKeyHash names one of the configured processing keys.
// Then it derives the key (EC_v1: ECDH P-256 and the NIST SP 800-56A
// single-step KDF; RSA_v1: RSA-OAEP SHA-256 unwrap) and opens data with
// AES-GCM under a 16-byte zero nonce.
//
// Replay: the package keeps no state. Payment.ReplayKey names the token by
// header.transactionId ‖ applicationData, as signed; the caller must refuse
// one it has already accepted (for at least MaxSigningAge plus clock skew,
// after which the signing-time check refuses the token anyway).
package walleta

import (
	"crypto"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/internal/field"
	"github.com/paygate/gateway/transport/wallet/internal/oid"
)

// Token versions.
const (
	VersionEC  = "EC_v1"
	VersionRSA = "RSA_v1"
)

// DefaultMaxSigningAge is the signing-time window used when
// Config.MaxSigningAge is zero (contract 9: 5 minutes).
const DefaultMaxSigningAge = 5 * time.Minute

// MaxFieldBytes bounds each base64 or hex field of a token before decoding.
const MaxFieldBytes = field.MaxBytes

// Marker extensions the provider puts in its signing certificates.
var (
	// OIDLeafMarker is carried by the leaf (signing) certificate.
	OIDLeafMarker = oid.LeafMarker
	// OIDIntermediateMarker is carried by the intermediate CA certificate.
	OIDIntermediateMarker = oid.IntermediateMarker
)

// Sentinels, shared with package wallet (errors.Is works with either name).
var (
	ErrFormat        = wallet.ErrFormat
	ErrUnsupported   = wallet.ErrUnsupported
	ErrSignature     = wallet.ErrSignature
	ErrChain         = wallet.ErrChain
	ErrExpired       = wallet.ErrExpired
	ErrDecrypt       = wallet.ErrDecrypt
	ErrWrongMerchant = wallet.ErrWrongMerchant
	ErrConfig        = wallet.ErrConfig
)

// Config is one node's walleta-pay set-up.
type Config struct {
	// MerchantID is --walleta-merchant-id; the EC_v1 KDF's party V is its
	// SHA-256.
	MerchantID string
	// ProcessingKey is *ecdsa.PrivateKey or *ecdh.PrivateKey (P-256) for
	// EC_v1, *rsa.PrivateKey for RSA_v1.
	ProcessingKey crypto.PrivateKey
	// ExtraProcessingKeys are further processing keys (for example the RSA
	// key next to the EC key, or the old key during a rotation). The token's
	// publicKeyHash selects among ProcessingKey and these.
	ExtraProcessingKeys []crypto.PrivateKey
	// Roots holds the root certificate the signing chain must reach.
	Roots *x509.CertPool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxSigningAge bounds |Now - signing time|; zero means
	// DefaultMaxSigningAge.
	MaxSigningAge time.Duration
}

// Header is the token's header; every field is a string as on the wire.
type Header struct {
	EphemeralPublicKey string `json:"ephemeralPublicKey,omitempty"` // base64 SubjectPublicKeyInfo DER (EC_v1)
	WrappedKey         string `json:"wrappedKey,omitempty"`         // base64 RSA-OAEP ciphertext (RSA_v1)
	PublicKeyHash      string `json:"publicKeyHash"`                // base64 SHA-256 of the processing key's SPKI DER
	TransactionID      string `json:"transactionId"`                // hex
	ApplicationData    string `json:"applicationData,omitempty"`    // hex, optional
}

// Token is payment_source's walleta-pay fields (interface 4.4), with the
// wire's JSON names.
type Token struct {
	Version   string `json:"version"`
	Data      string `json:"data"`      // base64 ciphertext ‖ GCM tag
	Signature string `json:"signature"` // base64 detached CMS SignedData
	Header    Header `json:"header"`
}

// LoadConfig reads the node's wallet flags: the merchant id, a PEM file of
// processing keys (every key in it is used, the first as ProcessingKey) and
// a PEM root certificate file.
func LoadConfig(merchantID, processingKeyFile, rootCertFile string) (Config, error) {
	kb, err := os.ReadFile(processingKeyFile)
	if err != nil {
		return Config{}, fmt.Errorf("%w: processing key: %v", ErrConfig, err)
	}
	keys, err := wallet.ParsePrivateKeysPEM(kb)
	if err != nil {
		return Config{}, fmt.Errorf("processing key file: %w", err)
	}
	rb, err := os.ReadFile(rootCertFile)
	if err != nil {
		return Config{}, fmt.Errorf("%w: root certificate: %v", ErrConfig, err)
	}
	roots, err := wallet.ParseCertPoolPEM(rb)
	if err != nil {
		return Config{}, fmt.Errorf("root certificate file: %w", err)
	}
	cfg := Config{MerchantID: merchantID, ProcessingKey: keys[0], ExtraProcessingKeys: keys[1:], Roots: roots}
	return cfg, cfg.Validate()
}

// Validate reports a Config that cannot accept any token.
func (c Config) Validate() error {
	if c.Roots == nil {
		return fmt.Errorf("%w: no root certificate", ErrConfig)
	}
	if c.ProcessingKey == nil {
		return fmt.Errorf("%w: no processing key", ErrConfig)
	}
	for _, k := range c.keys() {
		if _, err := processingPublicKeyHash(k); err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	if strings.TrimSpace(c.MerchantID) == "" {
		return fmt.Errorf("%w: no merchant id", ErrConfig)
	}
	return nil
}

func (c Config) keys() []crypto.PrivateKey {
	return append([]crypto.PrivateKey{c.ProcessingKey}, c.ExtraProcessingKeys...)
}

// Decrypt verifies t and returns its card. Every error wraps one of the
// sentinels; none carries key material or the card number. Decrypt does not
// refuse a replayed token: the caller checks Payment.ReplayKey.
func Decrypt(cfg Config, t Token) (*wallet.Payment, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	now := time.Now()
	if cfg.Now != nil {
		now = cfg.Now()
	}
	maxAge := cfg.MaxSigningAge
	if maxAge <= 0 {
		maxAge = DefaultMaxSigningAge
	}

	var keyField, keyName string
	switch t.Version {
	case VersionEC:
		keyField, keyName = t.Header.EphemeralPublicKey, "header.ephemeralPublicKey"
	case VersionRSA:
		keyField, keyName = t.Header.WrappedKey, "header.wrappedKey"
	case "":
		return nil, fmt.Errorf("%w: version missing", ErrFormat)
	default:
		return nil, fmt.Errorf("%w: version %q (want EC_v1 or RSA_v1)", ErrUnsupported, field.Clip(t.Version))
	}
	keyBytes, err := field.Base64(keyName, keyField)
	if err != nil {
		return nil, err
	}
	data, err := field.Base64("data", t.Data)
	if err != nil {
		return nil, err
	}
	sig, err := field.Base64("signature", t.Signature)
	if err != nil {
		return nil, err
	}
	pkh, err := field.Base64("header.publicKeyHash", t.Header.PublicKeyHash)
	if err != nil {
		return nil, err
	}
	txID, err := field.Hex("header.transactionId", t.Header.TransactionID, true)
	if err != nil {
		return nil, err
	}
	appData, err := field.Hex("header.applicationData", t.Header.ApplicationData, false)
	if err != nil {
		return nil, err
	}

	// The signed content: ephemeralPublicKey or wrappedKey ‖ data ‖
	// transactionId ‖ applicationData.
	content := make([]byte, 0, len(keyBytes)+len(data)+len(txID)+len(appData))
	content = append(content, keyBytes...)
	content = append(content, data...)
	content = append(content, txID...)
	content = append(content, appData...)

	signingTime, err := verifySignature(sig, content, cfg.Roots, now)
	if err != nil {
		return nil, err
	}
	if d := now.Sub(signingTime); d > maxAge || d < -maxAge {
		return nil, fmt.Errorf("%w: signing time %s is %s from now (allowed %s)",
			ErrExpired, signingTime.UTC().Format(time.RFC3339), d.Round(time.Second), maxAge)
	}

	key, err := selectKey(cfg, t.Version, pkh)
	if err != nil {
		return nil, err
	}
	var plain []byte
	if t.Version == VersionEC {
		plain, err = decryptEC(key, cfg.MerchantID, keyBytes, data)
	} else {
		plain, err = decryptRSA(key, keyBytes, data)
	}
	if err != nil {
		return nil, err
	}
	p, err := parsePayload(plain)
	if err != nil {
		return nil, err
	}
	p.Version = t.Version
	p.TransactionID = strings.ToLower(t.Header.TransactionID)
	p.ApplicationData = strings.ToLower(t.Header.ApplicationData)
	p.SigningTime = signingTime
	return p, nil
}
