// Package wallet holds what the wallet token formats share: the decrypted
// card (Payment), the failure sentinels, and PEM key loading for the node's
// wallet flags. The formats themselves live in the subpackages walleta
// (walleta-pay, the Apple Pay payment token format) and walletb
// (walletb-pay, the Google Pay payment data cryptography); tokenmaker makes
// valid tokens for tests, docs and load. See README.md.
package wallet

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Wallet names, as payment_source.type carries them.
const (
	WalletA = "walleta-pay"
	WalletB = "walletb-pay"
)

// Authentication methods of a decrypted card (Payment.AuthMethod).
const (
	// AuthCryptogram3DS: a network token with an online cryptogram
	// (walleta-pay paymentDataType "3DSecure", walletb-pay CRYPTOGRAM_3DS).
	AuthCryptogram3DS = "CRYPTOGRAM_3DS"
	// AuthPANOnly: a card number without cryptogram (walletb-pay only).
	AuthPANOnly = "PAN_ONLY"
	// AuthEMV: walleta-pay paymentDataType "EMV" (EMVData set, no cryptogram).
	AuthEMV = "EMV"
)

// Failure sentinels. Every error Decrypt returns wraps exactly one of them;
// errors.Is tells them apart. Messages never carry key material or a card
// number.
var (
	// ErrFormat: the token is not well formed (bad base64, JSON, ASN.1,
	// missing field, bad decrypted payload).
	ErrFormat = errors.New("wallet: malformed token")
	// ErrUnsupported: a version this gateway does not accept (walletb-pay
	// ECv0, unknown versions).
	ErrUnsupported = errors.New("wallet: unsupported token version")
	// ErrSignature: the signature does not verify (tampered content, wrong
	// signer, wrong recipient, root key of another protocol version).
	ErrSignature = errors.New("wallet: signature does not verify")
	// ErrChain: the walleta-pay signing certificates do not chain to the
	// configured root or lack the provider's marker extensions.
	ErrChain = errors.New("wallet: signing certificate chain refused")
	// ErrExpired: signing time outside the allowed window, intermediate
	// signing key or message expired.
	ErrExpired = errors.New("wallet: token expired")
	// ErrDecrypt: decryption or its integrity check failed.
	ErrDecrypt = errors.New("wallet: decryption failed")
	// ErrWrongMerchant: the token is encrypted for keys this node does not
	// hold (walleta-pay publicKeyHash of another processing key).
	ErrWrongMerchant = errors.New("wallet: token is for another merchant's keys")
	// ErrConfig: the Config cannot decrypt anything (no key, no root).
	ErrConfig = errors.New("wallet: configuration incomplete")
)

// Payment is a decrypted wallet card. It carries the card number: never log
// it; String, GoString and LogValue mask it.
type Payment struct {
	Wallet  string // WalletA or WalletB
	Version string // EC_v1, RSA_v1, ECv1, ECv2

	PAN        string
	ExpMonth   string // "01".."12"
	ExpYear    string // 4 digits
	Cryptogram string // base64 online cryptogram, empty for PAN_ONLY and EMV
	ECI        string // may be empty
	AuthMethod string // AuthCryptogram3DS, AuthPANOnly or AuthEMV

	// TransactionID is the token's id: walleta-pay header.transactionId
	// (hex), walletb-pay messageId. The packages keep no state: the caller
	// refuses a token it has already seen (see ReplayKey).
	TransactionID string
	// ApplicationData is walleta-pay header.applicationData (hex, often
	// empty), part of the replay key: see ReplayKey.
	ApplicationData string

	// Amount and currency signed by the device (walleta-pay only; walletb-pay
	// tokens carry none and leave them zero). Currency is the ISO-4217
	// alphabetic code when the numeric code is known, else empty.
	Amount          int64
	Currency        string
	CurrencyNumeric string

	GatewayMerchantID    string    // walletb-pay ECv2 gatewayMerchantId: the caller checks it
	DeviceManufacturerID string    // walleta-pay deviceManufacturerIdentifier
	EMVData              string    // walleta-pay EMV paymentData.emvData (base64)
	SigningTime          time.Time // walleta-pay CMS signing time
	MessageExpiration    time.Time // walletb-pay messageExpiration
}

// ReplayKey is the key under which a caller records a used token: the wallet
// name, so that the two wallets' ids cannot collide, and TransactionID
// followed by ApplicationData. walleta-pay signs transactionId ‖
// applicationData with no boundary between them, so moving the id's last
// bytes into applicationData keeps the signature valid and changes the id:
// the id alone would let one token pay once per byte of it. The two joined
// are what the signature fixes. (walletb-pay's messageId is inside its
// signed and authenticated message, and it has no ApplicationData.)
func (p *Payment) ReplayKey() string { return p.Wallet + ":" + p.TransactionID + p.ApplicationData }

// MaskedPAN is the first 6 and last 4 digits of the PAN with the rest as '*'.
func (p *Payment) MaskedPAN() string { return MaskPAN(p.PAN) }

// MaskPAN returns pan with all but the first 6 and last 4 characters
// replaced by '*' (everything masked when shorter than 13).
func MaskPAN(pan string) string {
	b := []byte(pan)
	for i := range b {
		if len(b) < 13 || (i >= 6 && i < len(b)-4) {
			b[i] = '*'
		}
	}
	return string(b)
}

// String describes the payment without the card number or the cryptogram.
func (p Payment) String() string {
	return fmt.Sprintf("wallet.Payment{%s %s pan=%s exp=%s/%s auth=%s eci=%q tx=%s amount=%d %s}",
		p.Wallet, p.Version, MaskPAN(p.PAN), p.ExpMonth, p.ExpYear, p.AuthMethod, p.ECI,
		p.TransactionID, p.Amount, p.Currency)
}

// GoString is String, so that %#v masks too.
func (p Payment) GoString() string { return p.String() }

// LogValue masks the card number in slog output.
func (p Payment) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("wallet", p.Wallet),
		slog.String("version", p.Version),
		slog.String("pan", MaskPAN(p.PAN)),
		slog.String("auth_method", p.AuthMethod),
		slog.String("transaction_id", p.TransactionID),
	)
}
