// Package api holds the merchant API's request shapes (interface sections 2.6,
// 2.7, 4.1-4.9), their strict decoding and their validation. It is pure: no I/O,
// no clock reads except the "now" passed in for card expiry checks. It is an
// inbound edge: the card rules and the currency table it checks with are the
// domain's (order/card, order/currency), and its errors are the catalogue's
// (transport/apierr); only transport/server calls it.
//
// Optional fields are pointers (or nil maps/slices) so validation can tell
// "absent" from "zero". Unknown JSON fields are ignored for forward
// compatibility; duplicate keys and invalid UTF-8 are refused.
package api

import "github.com/go-json-experiment/json/jsontext"

// Address is interface 2.6.
type Address struct {
	Line1   *string `json:"line1,omitempty"`
	Line2   *string `json:"line2,omitempty"`
	City    *string `json:"city,omitempty"`
	State   *string `json:"state,omitempty"`
	Zip     *string `json:"zip,omitempty"`
	Country *string `json:"country,omitempty"`
}

// Customer is interface 2.7.
type Customer struct {
	UserID          *string  `json:"user_id,omitempty"`
	Email           *string  `json:"email,omitempty"`
	IPAddress       *string  `json:"ip_address,omitempty"`
	FirstName       *string  `json:"first_name,omitempty"`
	LastName        *string  `json:"last_name,omitempty"`
	PhoneNumber     *string  `json:"phone_number,omitempty"`
	DateOfBirth     *string  `json:"date_of_birth,omitempty"`
	IPCountry       *string  `json:"ip_country,omitempty"`
	DeliveryAddress *Address `json:"delivery_address,omitempty"`
}

// Settle is the shared `settle` object (interface 4.9).
type Settle struct {
	DelayHours *int64 `json:"delay_hours,omitempty"`
}

// MPIData is three_ds.mpi_data (interface 4.3).
type MPIData struct {
	CAVV            *string `json:"cavv,omitempty"`
	DSTransactionID *string `json:"ds_transaction_id,omitempty"`
	ECI             *string `json:"eci,omitempty"`
	Version         *string `json:"version,omitempty"`
	XID             *string `json:"xid,omitempty"`
}

// ThreeDS is the request's three_ds object (interface 4.1, 4.3).
type ThreeDS struct {
	Force            *bool    `json:"force,omitempty"`
	AttemptNonSecure *bool    `json:"attempt_non_secure,omitempty"`
	MPIData          *MPIData `json:"mpi_data,omitempty"`
}

// Recurring is interface 4.3 `recurring`.
type Recurring struct {
	Type         *string `json:"type,omitempty"` // may be JSON null
	RetryAttempt *int64  `json:"retry_attempt,omitempty"`
}

// WalletAHeader is walleta-pay's payment_source.header (interface 4.4).
type WalletAHeader struct {
	TransactionID      *string `json:"transactionId,omitempty"`
	PublicKeyHash      *string `json:"publicKeyHash,omitempty"`
	WrappedKey         *string `json:"wrappedKey,omitempty"`
	EphemeralPublicKey *string `json:"ephemeralPublicKey,omitempty"`
	ApplicationData    *string `json:"applicationData,omitempty"`
}

// PaymentSource is the request's payment_source: card, token, and the two
// wallet shapes share one struct because `type` selects which fields apply.
type PaymentSource struct {
	Type           *string  `json:"type,omitempty"`
	CardNumber     *string  `json:"card_number,omitempty"`
	CardHolderName *string  `json:"card_holder_name,omitempty"`
	CardExpMonth   *string  `json:"card_exp_month,omitempty"`
	CardExpYear    *string  `json:"card_exp_year,omitempty"`
	CardCVV        *string  `json:"card_cvv,omitempty"`
	PaymentToken   *string  `json:"payment_token,omitempty"`
	BillingAddress *Address `json:"billing_address,omitempty"`

	// walleta-pay
	Signature *string        `json:"signature,omitempty"`
	Version   *string        `json:"version,omitempty"`
	Data      *string        `json:"data,omitempty"`
	Header    *WalletAHeader `json:"header,omitempty"`
	Network   *string        `json:"network,omitempty"`

	// walletb-pay (signature shared with walleta-pay)
	ProtocolVersion *string `json:"protocolVersion,omitempty"`
	SignedMessage   *string `json:"signedMessage,omitempty"`
	// IntermediateSigningKey is not in interface 4.4 but ECv2 cannot be
	// verified without it: the provider's own field name and shape.
	IntermediateSigningKey *IntermediateSigningKey `json:"intermediateSigningKey,omitempty"`
}

// IntermediateSigningKey is walletb-pay ECv2's intermediateSigningKey: the
// signedKey JSON string and the root keys' signatures over it.
type IntermediateSigningKey struct {
	SignedKey  *string  `json:"signedKey,omitempty"`
	Signatures []string `json:"signatures,omitempty"`
}

// PaymentForm is init-payment's payment_form (interface 4.1).
type PaymentForm struct {
	Language *string `json:"language,omitempty"`
}

// OrderFields are the shared order request fields (interface 4.9).
type OrderFields struct {
	OrderID               *string `json:"order_id,omitempty"`
	Amount                *int64  `json:"amount,omitempty"`
	Currency              *string `json:"currency,omitempty"`
	OrderDescription      *string `json:"order_description,omitempty"`
	OrderDate             *string `json:"order_date,omitempty"`
	OrderItems            *string `json:"order_items,omitempty"`
	OrderNumber           *int64  `json:"order_number,omitempty"`
	SubscriptionProductID *string `json:"subscription_product_id,omitempty"`
	CallbackURL           *string `json:"callback_url,omitempty"`
	FailURL               *string `json:"fail_url,omitempty"`
	SuccessURL            *string `json:"success_url,omitempty"`
	Settle                *Settle `json:"settle,omitempty"`
	Website               *string `json:"website,omitempty"`
	ProcessingMID         *string `json:"processing_mid,omitempty"`
	DynamicDescriptor     *string `json:"dynamic_descriptor,omitempty"`
	// OrderMetadata keeps raw values: at most 10 properties, any JSON value each.
	OrderMetadata map[string]jsontext.Value `json:"order_metadata,omitempty"`
	Customer      *Customer                 `json:"customer,omitempty"`
}

// Shared returns the shared order fields of an order-creating request
// (charge, init-payment, wallet payments): the server's callback guard
// finds callback_url through it.
func (o *OrderFields) Shared() *OrderFields { return o }

// ChargeRequest is POST /charge (interface 4.3).
type ChargeRequest struct {
	OrderFields
	ThreeDS       *ThreeDS       `json:"three_ds,omitempty"`
	Recurring     *Recurring     `json:"recurring,omitempty"`
	PaymentSource *PaymentSource `json:"payment_source,omitempty"`
}

// RecurringRequest is POST /recurring and /resign (contract section 15, the
// vendor's client library's names): a charge whose payment_source is
// replaced by recurring_token, the payment_token of an earlier charge. A
// resign adds the card's CVV (card_cvv).
type RecurringRequest struct {
	OrderFields
	ThreeDS        *ThreeDS   `json:"three_ds,omitempty"`
	Recurring      *Recurring `json:"recurring,omitempty"`
	RecurringToken *string    `json:"recurring_token,omitempty"`
	CardCVV        *string    `json:"card_cvv,omitempty"`
}

// Charge is the token charge the request stands for, with the card's CVV
// when withCVV (a resign). Its fields point at the request's values.
func (r *RecurringRequest) Charge(withCVV bool) *ChargeRequest {
	token := SourceToken
	ps := &PaymentSource{Type: &token, PaymentToken: r.RecurringToken}
	if withCVV {
		ps.CardCVV = r.CardCVV
	}
	return &ChargeRequest{OrderFields: r.OrderFields, ThreeDS: r.ThreeDS, Recurring: r.Recurring, PaymentSource: ps}
}

// InitPaymentRequest is POST /init-payment (interface 4.1).
type InitPaymentRequest struct {
	OrderFields
	ThreeDS     *ThreeDS     `json:"three_ds,omitempty"` // force, attempt_non_secure only
	PaymentForm *PaymentForm `json:"payment_form,omitempty"`
}

// WalletRequest is POST /walleta-pay and /walletb-pay (interface 4.4): shared
// order fields limited to callback_url (fail_url, success_url are not read).
type WalletRequest struct {
	OrderFields
	PaymentSource *PaymentSource `json:"payment_source,omitempty"`
}

// SettleRequest is POST /settle (interface 4.5). amount is optional
// (contract section 15): without it the whole authorised amount is settled.
type SettleRequest struct {
	OrderID *string `json:"order_id,omitempty"`
	Amount  *int64  `json:"amount,omitempty"`
}

// VoidRequest is POST /void (interface 4.6). amount is optional: a void is
// always for the full order amount, and a request that names another
// amount is refused rather than taken for the whole (docs/api.md).
type VoidRequest struct {
	OrderID *string `json:"order_id,omitempty"`
	Amount  *int64  `json:"amount,omitempty"`
}

// RefundRequest is POST /refund (interface 4.7). refund_reason_code is an
// optional 4-digit code (interface 2.2) recorded on the refund transaction.
type RefundRequest struct {
	OrderID          *string `json:"order_id,omitempty"`
	Amount           *int64  `json:"amount,omitempty"`
	RefundReasonCode *string `json:"refund_reason_code,omitempty"`
}

// StatusRequest is POST /status (interface 4.8).
type StatusRequest struct {
	OrderID *string `json:"order_id,omitempty"`
}

// ARNCodeRequest is POST /arn-code (contract section 15): {"order_id"},
// validated as status.
type ARNCodeRequest = StatusRequest
