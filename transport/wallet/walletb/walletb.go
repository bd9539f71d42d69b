// Package walletb verifies and decrypts walletb-pay tokens: the Google Pay
// payment data cryptography, protocol versions ECv1 and ECv2.
//
// Decrypt checks, in order: the protocol version is ECv1 or ECv2 (ECv0, the
// value assumed when protocolVersion is unset, is refused as unsupported
// legacy); for ECv2 the intermediate signing key is signed by a configured,
// unexpired ECv2 root key and is itself unexpired; the message signature
// (by an ECv1 root key, or by the ECv2 intermediate key) covers "Google",
// the configured recipient id, the protocol version and signedMessage, so a
// token for another recipient fails; the HMAC-SHA256 tag over the
// ciphertext matches (constant time, before anything is decrypted); then it
// decrypts with AES-CTR and refuses an expired message.
//
// Replay: the package keeps no state. Payment.TransactionID is the
// message's messageId; the caller must refuse one it has already accepted
// (until the message's own messageExpiration, Payment.MessageExpiration).
package walletb

import (
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/internal/field"
)

// Protocol versions.
const (
	VersionECv0 = "ECv0"
	VersionECv1 = "ECv1"
	VersionECv2 = "ECv2"
)

// SenderID is the sender id in every signed string.
const SenderID = "Google"

// MaxFieldBytes bounds each string field of a token.
const MaxFieldBytes = field.MaxBytes

// maxSignaturesCount bounds intermediateSigningKey.signatures.
const maxSignaturesCount = 8

// Sentinels, shared with package wallet (errors.Is works with either name).
var (
	ErrFormat      = wallet.ErrFormat
	ErrUnsupported = wallet.ErrUnsupported
	ErrSignature   = wallet.ErrSignature
	ErrExpired     = wallet.ErrExpired
	ErrDecrypt     = wallet.ErrDecrypt
	ErrConfig      = wallet.ErrConfig
)

// RootKey is one entry of the provider's root signing key list.
type RootKey struct {
	KeyValue        string `json:"keyValue"`        // base64 SubjectPublicKeyInfo DER, EC P-256
	ProtocolVersion string `json:"protocolVersion"` // the only version this key verifies
	KeyExpiration   string `json:"keyExpiration"`   // ms since the epoch; required except for ECv1
}

// Config is one node's walletb-pay set-up.
type Config struct {
	// RecipientID is --walletb-recipient-id, "gateway:<id>".
	RecipientID string
	// PrivateKey is the recipient key: *ecdh.PrivateKey or
	// *ecdsa.PrivateKey, P-256.
	PrivateKey crypto.PrivateKey
	// RootKeys are the provider's root signing keys (ParseRootKeys).
	RootKeys []RootKey
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// IntermediateSigningKey is the ECv2 token's intermediateSigningKey.
type IntermediateSigningKey struct {
	SignedKey  string   `json:"signedKey"` // JSON {"keyValue":..,"keyExpiration":..}
	Signatures []string `json:"signatures"`
}

// Token is payment_source's walletb-pay fields (interface 4.4) plus the
// ECv2 intermediateSigningKey (JSON name "intermediateSigningKey").
type Token struct {
	ProtocolVersion        string                  `json:"protocolVersion"`
	Signature              string                  `json:"signature"`
	SignedMessage          string                  `json:"signedMessage"`
	IntermediateSigningKey *IntermediateSigningKey `json:"intermediateSigningKey,omitempty"`
}

// SignedKey is the JSON in IntermediateSigningKey.SignedKey.
type SignedKey struct {
	KeyValue      string `json:"keyValue"`      // base64 SPKI DER, EC P-256
	KeyExpiration string `json:"keyExpiration"` // ms since the epoch
}

// SignedMessage is the JSON in Token.SignedMessage.
type SignedMessage struct {
	EncryptedMessage   string `json:"encryptedMessage"`   // base64
	EphemeralPublicKey string `json:"ephemeralPublicKey"` // base64 uncompressed P-256 point
	Tag                string `json:"tag"`                // base64 HMAC-SHA256
}

// ParseRootKeys reads the provider's key list,
// {"keys":[{"keyValue":..,"protocolVersion":"ECv2","keyExpiration":".."}]}.
// Every key must parse as an EC P-256 public key.
func ParseRootKeys(data []byte) ([]RootKey, error) {
	var doc struct {
		Keys []struct {
			KeyValue        string          `json:"keyValue"`
			ProtocolVersion string          `json:"protocolVersion"`
			KeyExpiration   json.RawMessage `json:"keyExpiration"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: root keys: %v", ErrConfig, err)
	}
	if len(doc.Keys) == 0 {
		return nil, fmt.Errorf("%w: root keys: empty list", ErrConfig)
	}
	out := make([]RootKey, 0, len(doc.Keys))
	for i, k := range doc.Keys {
		rk := RootKey{KeyValue: k.KeyValue, ProtocolVersion: k.ProtocolVersion}
		if len(k.KeyExpiration) > 0 && string(k.KeyExpiration) != "null" {
			// The list carries a string; tolerate a bare number.
			var s string
			if err := json.Unmarshal(k.KeyExpiration, &s); err != nil {
				s = string(k.KeyExpiration)
			}
			rk.KeyExpiration = s
			if _, err := parseMillis(s); err != nil {
				return nil, fmt.Errorf("%w: root key %d: keyExpiration is not milliseconds", ErrConfig, i)
			}
		}
		if _, err := parseECPublicKey(rk.KeyValue); err != nil {
			return nil, fmt.Errorf("%w: root key %d: %v", ErrConfig, i, err)
		}
		if rk.ProtocolVersion == "" {
			return nil, fmt.Errorf("%w: root key %d: no protocolVersion", ErrConfig, i)
		}
		out = append(out, rk)
	}
	return out, nil
}

// LoadConfig reads the node's wallet flags: the recipient id, a PEM EC
// P-256 private key file and the provider's root key list file.
func LoadConfig(recipientID, privateKeyFile, rootKeysFile string) (Config, error) {
	kb, err := os.ReadFile(privateKeyFile)
	if err != nil {
		return Config{}, fmt.Errorf("%w: private key: %v", ErrConfig, err)
	}
	key, err := wallet.ParsePrivateKeyPEM(kb)
	if err != nil {
		return Config{}, fmt.Errorf("private key file: %w", err)
	}
	rb, err := os.ReadFile(rootKeysFile)
	if err != nil {
		return Config{}, fmt.Errorf("%w: root keys: %v", ErrConfig, err)
	}
	roots, err := ParseRootKeys(rb)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{RecipientID: recipientID, PrivateKey: key, RootKeys: roots}
	return cfg, cfg.Validate()
}

// Validate reports a Config that cannot accept any token.
func (c Config) Validate() error {
	if strings.TrimSpace(c.RecipientID) == "" {
		return fmt.Errorf("%w: no recipient id", ErrConfig)
	}
	if _, err := recipientKey(c.PrivateKey); err != nil {
		return err
	}
	if len(c.RootKeys) == 0 {
		return fmt.Errorf("%w: no root keys", ErrConfig)
	}
	return nil
}

func recipientKey(k crypto.PrivateKey) (*ecdh.PrivateKey, error) {
	var priv *ecdh.PrivateKey
	switch k := k.(type) {
	case *ecdh.PrivateKey:
		priv = k
	case *ecdsa.PrivateKey:
		var err error
		if priv, err = k.ECDH(); err != nil {
			return nil, fmt.Errorf("%w: private key: %v", ErrConfig, err)
		}
	case nil:
		return nil, fmt.Errorf("%w: no private key", ErrConfig)
	default:
		return nil, fmt.Errorf("%w: private key type %T (want EC P-256)", ErrConfig, k)
	}
	if priv.Curve() != ecdh.P256() {
		return nil, fmt.Errorf("%w: private key is not P-256", ErrConfig)
	}
	return priv, nil
}

// Decrypt verifies t and returns its card. Every error wraps one of the
// sentinels; none carries key material or the card number. Decrypt does not
// refuse a replayed token: the caller checks Payment.TransactionID
// (messageId). For ECv2 the caller also checks Payment.GatewayMerchantID.
func Decrypt(cfg Config, t Token) (*wallet.Payment, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	priv, _ := recipientKey(cfg.PrivateKey)
	now := time.Now()
	if cfg.Now != nil {
		now = cfg.Now()
	}
	version := t.ProtocolVersion
	switch version {
	case "", VersionECv0:
		return nil, fmt.Errorf("%w: protocolVersion ECv0 (assumed when unset) is an unsupported legacy format; only ECv1 and ECv2 are accepted", ErrUnsupported)
	case VersionECv1, VersionECv2:
	default:
		return nil, fmt.Errorf("%w: protocolVersion %q (want ECv1 or ECv2)", ErrUnsupported, field.Clip(version))
	}
	if t.SignedMessage == "" || len(t.SignedMessage) > MaxFieldBytes {
		return nil, fmt.Errorf("%w: signedMessage missing or longer than %d bytes", ErrFormat, MaxFieldBytes)
	}
	sig, err := field.Base64("signature", t.Signature)
	if err != nil {
		return nil, err
	}

	// Which keys may sign the message.
	var signers []*ecdsa.PublicKey
	if version == VersionECv1 {
		signers = rootKeysFor(cfg.RootKeys, VersionECv1, now)
		if len(signers) == 0 {
			return nil, fmt.Errorf("%w: no unexpired ECv1 root key configured", ErrSignature)
		}
	} else {
		ik, err := verifyIntermediate(cfg.RootKeys, t.IntermediateSigningKey, now)
		if err != nil {
			return nil, err
		}
		signers = []*ecdsa.PublicKey{ik}
	}
	signed := SignedString(SenderID, cfg.RecipientID, version, t.SignedMessage)
	if !verifyAny(signers, signed, [][]byte{sig}) {
		return nil, fmt.Errorf("%w: message signature does not verify for recipient %q", ErrSignature, field.Clip(cfg.RecipientID))
	}

	var sm SignedMessage
	if err := json.Unmarshal([]byte(t.SignedMessage), &sm); err != nil {
		return nil, fmt.Errorf("%w: signedMessage is not the expected JSON object", ErrFormat)
	}
	plain, err := decryptMessage(priv, version, sm)
	if err != nil {
		return nil, err
	}
	p, err := parsePayload(plain, version, now)
	if err != nil {
		return nil, err
	}
	p.Version = version
	return p, nil
}

// verifyIntermediate checks an ECv2 intermediate signing key against the
// ECv2 root keys and its expiration, and returns its public key.
func verifyIntermediate(roots []RootKey, isk *IntermediateSigningKey, now time.Time) (*ecdsa.PublicKey, error) {
	if isk == nil || isk.SignedKey == "" || len(isk.Signatures) == 0 {
		return nil, fmt.Errorf("%w: ECv2 needs intermediateSigningKey with signedKey and signatures", ErrFormat)
	}
	if len(isk.SignedKey) > MaxFieldBytes || len(isk.Signatures) > maxSignaturesCount {
		return nil, fmt.Errorf("%w: intermediateSigningKey too large", ErrFormat)
	}
	signers := rootKeysFor(roots, VersionECv2, now)
	if len(signers) == 0 {
		return nil, fmt.Errorf("%w: no unexpired ECv2 root key configured", ErrSignature)
	}
	sigs := make([][]byte, 0, len(isk.Signatures))
	for i, s := range isk.Signatures {
		b, err := field.Base64(fmt.Sprintf("intermediateSigningKey.signatures[%d]", i), s)
		if err != nil {
			return nil, err
		}
		sigs = append(sigs, b)
	}
	if !verifyAny(signers, SignedKeyString(SenderID, VersionECv2, isk.SignedKey), sigs) {
		return nil, fmt.Errorf("%w: intermediate signing key is not signed by an ECv2 root key", ErrSignature)
	}
	var sk SignedKey
	if err := json.Unmarshal([]byte(isk.SignedKey), &sk); err != nil {
		return nil, fmt.Errorf("%w: signedKey is not the expected JSON object", ErrFormat)
	}
	exp, err := parseMillis(sk.KeyExpiration)
	if err != nil {
		return nil, fmt.Errorf("%w: signedKey.keyExpiration is not milliseconds", ErrFormat)
	}
	if !now.Before(exp) {
		return nil, fmt.Errorf("%w: intermediate signing key expired at %s", ErrExpired, exp.UTC().Format(time.RFC3339))
	}
	pub, err := parseECPublicKey(sk.KeyValue)
	if err != nil {
		return nil, fmt.Errorf("%w: signedKey.keyValue: %v", ErrFormat, err)
	}
	return pub, nil
}

// rootKeysFor returns the unexpired root keys of one protocol version. A
// key expires at its keyExpiration (a key without one never expires for
// ECv1 and is ignored for other versions).
// Unparsable entries are skipped (ParseRootKeys refuses them up front).
func rootKeysFor(roots []RootKey, version string, now time.Time) []*ecdsa.PublicKey {
	var out []*ecdsa.PublicKey
	for _, rk := range roots {
		if rk.ProtocolVersion != version {
			continue
		}
		switch {
		case rk.KeyExpiration != "":
			exp, err := parseMillis(rk.KeyExpiration)
			if err != nil || !now.Before(exp) {
				continue
			}
		case version != VersionECv1:
			// Only ECv1 keys may omit keyExpiration (the provider's
			// reference recipient does the same).
			continue
		}
		pub, err := parseECPublicKey(rk.KeyValue)
		if err != nil {
			continue
		}
		out = append(out, pub)
	}
	return out
}

// SignedString is the message's signed bytes: each of sender id, recipient
// id, protocol version and signedMessage preceded by its length as 4 bytes
// little-endian.
func SignedString(senderID, recipientID, protocolVersion, signedMessage string) []byte {
	return lengthPrefixed(senderID, recipientID, protocolVersion, signedMessage)
}

// SignedKeyString is the ECv2 intermediate key's signed bytes: sender id,
// protocol version and signedKey, each length-prefixed as in SignedString.
func SignedKeyString(senderID, protocolVersion, signedKey string) []byte {
	return lengthPrefixed(senderID, protocolVersion, signedKey)
}

func lengthPrefixed(parts ...string) []byte {
	n := 0
	for _, p := range parts {
		n += 4 + len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		l := uint32(len(p))
		out = append(out, byte(l), byte(l>>8), byte(l>>16), byte(l>>24))
		out = append(out, p...)
	}
	return out
}

func parseECPublicKey(b64 string) (*ecdsa.PublicKey, error) {
	der, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("not base64")
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("not a public key: %v", err)
	}
	k, ok := pub.(*ecdsa.PublicKey)
	if !ok || k.Curve.Params().Name != "P-256" {
		return nil, fmt.Errorf("not an EC P-256 public key")
	}
	return k, nil
}

func parseMillis(s string) (time.Time, error) {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(ms), nil
}
