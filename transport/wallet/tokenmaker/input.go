package tokenmaker

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/paygate/gateway/transport/wallet"
)

// PaymentInput is the card and the knobs of a token. Zero fields take the
// defaults noted.
type PaymentInput struct {
	PAN        string // default "4111111111111111"
	ExpMonth   string // "01".."12", default "12"
	ExpYear    string // 4 digits, default 3 years from now
	Amount     int64  // walleta-pay only, default 1000
	Currency   string // walleta-pay only: ISO-4217 alphabetic or numeric, default "USD"
	Cryptogram string // CRYPTOGRAM_3DS: default 20 random bytes, base64
	ECI        string // CRYPTOGRAM_3DS: default "05"
	// AuthMethod is wallet.AuthCryptogram3DS (default), wallet.AuthPANOnly
	// (walletb-pay only) or wallet.AuthEMV (walleta-pay only).
	AuthMethod string
	// TransactionID is the walleta-pay header.transactionId (hex) or the
	// walletb-pay messageId; random when empty.
	TransactionID string
	// ApplicationData is the walleta-pay header.applicationData (hex),
	// optional.
	ApplicationData string
	// GatewayMerchantID is the walletb-pay ECv2 gatewayMerchantId.
	GatewayMerchantID string
	// RecipientID overrides the set's walletb-pay recipient id (to make a
	// token for another gateway).
	RecipientID string

	// SigningTime is the walleta-pay CMS signing time; default now.
	SigningTime time.Time
	// MessageExpiration is the walletb-pay messageExpiration; default now
	// plus one hour.
	MessageExpiration time.Time
	// IntermediateExpiration is the walletb-pay ECv2 intermediate key's
	// keyExpiration; default now plus one day.
	IntermediateExpiration time.Time
}

func (p PaymentInput) withDefaults(now time.Time) (PaymentInput, error) {
	if p.PAN == "" {
		p.PAN = "4111111111111111"
	}
	if p.ExpMonth == "" {
		p.ExpMonth = "12"
	}
	if p.ExpYear == "" {
		p.ExpYear = strconv.Itoa(now.Year() + 3)
	}
	if m, err := strconv.Atoi(p.ExpMonth); err != nil || m < 1 || m > 12 {
		return p, fmt.Errorf("tokenmaker: ExpMonth must be 01..12")
	}
	if y, err := strconv.Atoi(p.ExpYear); err != nil || len(p.ExpYear) != 4 || y < 2000 {
		return p, fmt.Errorf("tokenmaker: ExpYear must have 4 digits")
	}
	if p.Amount == 0 {
		p.Amount = 1000
	}
	if p.Currency == "" {
		p.Currency = "USD"
	}
	if p.AuthMethod == "" {
		p.AuthMethod = wallet.AuthCryptogram3DS
	}
	if p.AuthMethod == wallet.AuthCryptogram3DS {
		if p.Cryptogram == "" {
			p.Cryptogram = base64.StdEncoding.EncodeToString(randomBytes(20))
		}
		if p.ECI == "" {
			p.ECI = "05"
		}
	}
	if p.SigningTime.IsZero() {
		p.SigningTime = now
	}
	if p.MessageExpiration.IsZero() {
		p.MessageExpiration = now.Add(time.Hour)
	}
	if p.IntermediateExpiration.IsZero() {
		p.IntermediateExpiration = now.Add(24 * time.Hour)
	}
	return p, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}

func randomHex(n int) string { return hex.EncodeToString(randomBytes(n)) }

// PaymentInputWithDefaults returns p with its zero fields set as WalletA
// and WalletB set them, now being the clock.
func PaymentInputWithDefaults(p PaymentInput, now time.Time) (PaymentInput, error) {
	return p.withDefaults(now)
}
