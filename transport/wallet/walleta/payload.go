package walleta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/paygate/gateway/order/currency"
	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/internal/field"
)

// Payment data types of the decrypted payload.
const (
	PaymentDataType3DS = "3DSecure"
	PaymentDataTypeEMV = "EMV"
)

// Payload is the decrypted JSON of a token (field names as on the wire).
// Token makers marshal it; Decrypt reads it.
type Payload struct {
	ApplicationPrimaryAccountNumber string      `json:"applicationPrimaryAccountNumber"`
	ApplicationExpirationDate       string      `json:"applicationExpirationDate"` // YYMMDD
	CurrencyCode                    string      `json:"currencyCode"`              // ISO-4217 numeric
	TransactionAmount               json.Number `json:"transactionAmount"`
	CardholderName                  string      `json:"cardholderName,omitempty"`
	DeviceManufacturerIdentifier    string      `json:"deviceManufacturerIdentifier"`
	PaymentDataType                 string      `json:"paymentDataType"`
	PaymentData                     PaymentData `json:"paymentData"`
}

// PaymentData is the payload's paymentData: the cryptogram for 3DSecure,
// the EMV data for EMV.
type PaymentData struct {
	OnlinePaymentCryptogram string `json:"onlinePaymentCryptogram,omitempty"`
	EciIndicator            string `json:"eciIndicator,omitempty"`
	EmvData                 string `json:"emvData,omitempty"`
	EncryptedPINData        string `json:"encryptedPINData,omitempty"`
}

// parsePayload checks and converts the decrypted JSON. Errors name the
// field, never its value.
func parsePayload(plain []byte) (*wallet.Payment, error) {
	var pl Payload
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.UseNumber()
	if err := dec.Decode(&pl); err != nil {
		return nil, fmt.Errorf("%w: decrypted payload is not the expected JSON object", ErrFormat)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: decrypted payload has trailing data", ErrFormat)
	}
	p := &wallet.Payment{Wallet: wallet.WalletA, DeviceManufacturerID: pl.DeviceManufacturerIdentifier}
	if !field.Digits(pl.ApplicationPrimaryAccountNumber, 12, 19) {
		return nil, fmt.Errorf("%w: applicationPrimaryAccountNumber is not 12 to 19 digits", ErrFormat)
	}
	p.PAN = pl.ApplicationPrimaryAccountNumber
	exp := pl.ApplicationExpirationDate
	if !field.Digits(exp, 6, 6) || exp[2:4] < "01" || exp[2:4] > "12" {
		return nil, fmt.Errorf("%w: applicationExpirationDate is not YYMMDD", ErrFormat)
	}
	p.ExpYear, p.ExpMonth = "20"+exp[:2], exp[2:4]
	if !field.Digits(pl.CurrencyCode, 3, 3) {
		return nil, fmt.Errorf("%w: currencyCode is not a 3-digit ISO-4217 code", ErrFormat)
	}
	p.CurrencyNumeric = pl.CurrencyCode
	if c, ok := currency.LookupNumeric(pl.CurrencyCode); ok {
		p.Currency = c.Alpha
	}
	amount, err := strconv.ParseInt(pl.TransactionAmount.String(), 10, 64)
	if err != nil || amount < 0 {
		return nil, fmt.Errorf("%w: transactionAmount is not a non-negative integer", ErrFormat)
	}
	p.Amount = amount
	switch pl.PaymentDataType {
	case PaymentDataType3DS:
		if pl.PaymentData.OnlinePaymentCryptogram == "" {
			return nil, fmt.Errorf("%w: 3DSecure payload without onlinePaymentCryptogram", ErrFormat)
		}
		p.AuthMethod = wallet.AuthCryptogram3DS
		p.Cryptogram = pl.PaymentData.OnlinePaymentCryptogram
		p.ECI = pl.PaymentData.EciIndicator
	case PaymentDataTypeEMV:
		if pl.PaymentData.EmvData == "" {
			return nil, fmt.Errorf("%w: EMV payload without emvData", ErrFormat)
		}
		p.AuthMethod = wallet.AuthEMV
		p.EMVData = pl.PaymentData.EmvData
	default:
		return nil, fmt.Errorf("%w: paymentDataType %q (want 3DSecure or EMV)", ErrFormat, field.Clip(pl.PaymentDataType))
	}
	return p, nil
}
