package walletb

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/internal/field"
)

// HKDFInfo is the HKDF info of the key derivation.
const HKDFInfo = "Google"

// Key sizes per protocol version: AES-CTR key, then HMAC-SHA256 key.
var keySizes = map[string][2]int{
	VersionECv1: {16, 16},
	VersionECv2: {32, 32},
}

// DeriveKeys is the ECIES-KEM key derivation: HKDF-SHA256 with
// IKM = ephemeralPublicKey ‖ sharedSecret, a salt of 32 zero bytes (the same
// as no salt), info "Google", then split into the AES-CTR key and the
// HMAC-SHA256 key (16+16 bytes for ECv1, 32+32 for ECv2).
func DeriveKeys(version string, ephemeralPublicKey, sharedSecret []byte) (encKey, macKey []byte, err error) {
	sizes, ok := keySizes[version]
	if !ok {
		return nil, nil, fmt.Errorf("%w: protocolVersion %q", ErrUnsupported, field.Clip(version))
	}
	ikm := make([]byte, 0, len(ephemeralPublicKey)+len(sharedSecret))
	ikm = append(ikm, ephemeralPublicKey...)
	ikm = append(ikm, sharedSecret...)
	okm, err := hkdf.Key(sha256.New, ikm, make([]byte, sha256.Size), HKDFInfo, sizes[0]+sizes[1])
	if err != nil {
		return nil, nil, err
	}
	return okm[:sizes[0]], okm[sizes[0]:], nil
}

// Tag is HMAC-SHA256(macKey, ciphertext).
func Tag(macKey, ciphertext []byte) []byte {
	m := hmac.New(sha256.New, macKey)
	m.Write(ciphertext)
	return m.Sum(nil)
}

// CTR applies AES-CTR with an all-zero IV (encryption and decryption are
// the same operation).
func CTR(key, in []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(in))
	cipher.NewCTR(block, make([]byte, aes.BlockSize)).XORKeyStream(out, in)
	return out, nil
}

// decryptMessage runs ECDH, DeriveKeys, checks the tag, then decrypts.
func decryptMessage(priv *ecdh.PrivateKey, version string, sm SignedMessage) ([]byte, error) {
	ephBytes, err := field.Base64("signedMessage.ephemeralPublicKey", sm.EphemeralPublicKey)
	if err != nil {
		return nil, err
	}
	ct, err := field.Base64("signedMessage.encryptedMessage", sm.EncryptedMessage)
	if err != nil {
		return nil, err
	}
	tag, err := field.Base64("signedMessage.tag", sm.Tag)
	if err != nil {
		return nil, err
	}
	eph, err := ecdh.P256().NewPublicKey(ephBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: signedMessage.ephemeralPublicKey is not an uncompressed P-256 point", ErrFormat)
	}
	z, err := priv.ECDH(eph)
	if err != nil {
		return nil, fmt.Errorf("%w: ECDH failed", ErrDecrypt)
	}
	encKey, macKey, err := DeriveKeys(version, ephBytes, z)
	if err != nil {
		return nil, err
	}
	if !hmac.Equal(tag, Tag(macKey, ct)) {
		return nil, fmt.Errorf("%w: tag does not match (wrong recipient key or altered ciphertext)", ErrDecrypt)
	}
	plain, err := CTR(encKey, ct)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecrypt, err)
	}
	return plain, nil
}

// verifyAny reports whether any signature verifies msg (ECDSA-SHA256, DER)
// under any of the keys.
func verifyAny(keys []*ecdsa.PublicKey, msg []byte, sigs [][]byte) bool {
	digest := sha256.Sum256(msg)
	for _, k := range keys {
		for _, s := range sigs {
			if ecdsa.VerifyASN1(k, digest[:], s) {
				return true
			}
		}
	}
	return false
}

// Payment methods and auth methods of the decrypted message.
const (
	PaymentMethodCard    = "CARD"
	AuthMethodPANOnly    = "PAN_ONLY"
	AuthMethodCryptogram = "CRYPTOGRAM_3DS"
)

// Message is the decrypted JSON (field names as on the wire). Token makers
// marshal it; Decrypt reads it.
type Message struct {
	GatewayMerchantID    string               `json:"gatewayMerchantId,omitempty"` // ECv2
	MessageExpiration    string               `json:"messageExpiration"`           // ms since the epoch
	MessageID            string               `json:"messageId"`
	PaymentMethod        string               `json:"paymentMethod"`
	PaymentMethodDetails PaymentMethodDetails `json:"paymentMethodDetails"`
}

// PaymentMethodDetails is the card of a Message.
type PaymentMethodDetails struct {
	PAN             string      `json:"pan"`
	ExpirationMonth json.Number `json:"expirationMonth"`
	ExpirationYear  json.Number `json:"expirationYear"`
	AuthMethod      string      `json:"authMethod"`
	Cryptogram      string      `json:"cryptogram,omitempty"`
	EciIndicator    string      `json:"eciIndicator,omitempty"`
}

// parsePayload checks and converts the decrypted JSON. Errors name the
// field, never its value.
func parsePayload(plain []byte, version string, now time.Time) (*wallet.Payment, error) {
	var m Message
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || dec.More() {
		return nil, fmt.Errorf("%w: decrypted message is not the expected JSON object", ErrFormat)
	}
	exp, err := parseMillis(m.MessageExpiration)
	if err != nil {
		return nil, fmt.Errorf("%w: messageExpiration is not milliseconds", ErrFormat)
	}
	if !now.Before(exp) {
		return nil, fmt.Errorf("%w: message expired at %s", ErrExpired, exp.UTC().Format(time.RFC3339))
	}
	if m.MessageID == "" {
		return nil, fmt.Errorf("%w: messageId missing", ErrFormat)
	}
	if m.PaymentMethod != PaymentMethodCard {
		return nil, fmt.Errorf("%w: paymentMethod %q (want CARD)", ErrUnsupported, field.Clip(m.PaymentMethod))
	}
	d := m.PaymentMethodDetails
	if !field.Digits(d.PAN, 12, 19) {
		return nil, fmt.Errorf("%w: pan is not 12 to 19 digits", ErrFormat)
	}
	month, err := strconv.Atoi(d.ExpirationMonth.String())
	if err != nil || month < 1 || month > 12 {
		return nil, fmt.Errorf("%w: expirationMonth is not 1 to 12", ErrFormat)
	}
	year, err := strconv.Atoi(d.ExpirationYear.String())
	if err != nil || year < 2000 || year > 9999 {
		return nil, fmt.Errorf("%w: expirationYear is not a 4-digit year", ErrFormat)
	}
	p := &wallet.Payment{
		Wallet:            wallet.WalletB,
		PAN:               d.PAN,
		ExpMonth:          fmt.Sprintf("%02d", month),
		ExpYear:           strconv.Itoa(year),
		TransactionID:     m.MessageID,
		MessageExpiration: exp,
	}
	if version == VersionECv2 {
		p.GatewayMerchantID = m.GatewayMerchantID
	}
	switch d.AuthMethod {
	case AuthMethodPANOnly:
		p.AuthMethod = wallet.AuthPANOnly
	case AuthMethodCryptogram:
		if d.Cryptogram == "" {
			return nil, fmt.Errorf("%w: CRYPTOGRAM_3DS without cryptogram", ErrFormat)
		}
		p.AuthMethod = wallet.AuthCryptogram3DS
		p.Cryptogram = d.Cryptogram
		p.ECI = d.EciIndicator
	default:
		return nil, fmt.Errorf("%w: authMethod %q (want PAN_ONLY or CRYPTOGRAM_3DS)", ErrFormat, field.Clip(d.AuthMethod))
	}
	return p, nil
}
