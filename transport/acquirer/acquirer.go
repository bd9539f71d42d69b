// Package acquirer connects the gateway to the card acquirer (contract
// section 7): an outbound edge. The order actors call it through the
// interface they declare (actors.Acquirer); Sandbox is its first
// implementation, deciding each outcome by the card number, with a
// configurable answer latency. This package defines the vocabulary of that
// call (AuthRequest, AuthResult, decline codes) and reads card rules from
// the domain (order/card), never from the API's validator.
//
// Authorize is idempotent on AuthRequest.Reference (the gateway's transaction
// id): a reference is bound to the result of its first authorisation, and any
// later call with it returns that result without authorising again. A new
// attempt (e.g. after 3-D Secure) therefore needs a new reference.
//
// Card data in requests is never logged or kept by this package; the sandbox
// remembers only the result per reference.
package acquirer

import (
	"github.com/paygate/gateway/order/card"
)

// Decline codes (contract section 3).
const (
	CodeInvalidCVV          = "2.06"
	CodeCardExpired         = "2.09"
	CodeInsufficientFunds   = "3.02"
	CodeDoNotHonour         = "3.08"
	CodeBlockedByRisk       = "4.01"
	Code3DSFailed           = "5.01"
	CodeAcquirerUnreachable = "6.02"
)

// Decline messages matching the codes above.
const (
	MsgInvalidCVV          = "Invalid CVV"
	MsgCardExpired         = "Card expired"
	MsgInsufficientFunds   = "Insufficient funds"
	MsgDoNotHonour         = "Do not honour"
	MsgBlockedByRisk       = "Blocked by risk rules"
	Msg3DSFailed           = "3-D Secure authentication failed or required"
	MsgAcquirerUnreachable = "Acquirer unreachable"
)

// Risk decisions reported in AuthResult.RiskDecision.
const (
	RiskAccept  = "accept"
	RiskDecline = "decline"
)

// AVS and CVV check letters used by the sandbox.
const (
	AVSMatch       = "Y" // address matches
	AVSUnavailable = "U" // address not verified (acquirer not reached)

	CVVMatch        = "M" // CVV matches
	CVVNoMatch      = "N" // CVV does not match
	CVVNotProcessed = "P" // no CVV supplied, or not processed
)

// ThreeDSData is the outcome of 3-D Secure authentication, from the gateway's
// own flow or an external MPI. The zero value means no authentication.
type ThreeDSData struct {
	Authenticated bool
	// NonSecure: the issuer does not take part in 3-D Secure and the
	// merchant asked for a payment without it (three_ds.force with
	// attempt_non_secure); the order's three_ds.enrolled is "N".
	NonSecure       bool
	ECI             string
	CAVV            string
	XID             string
	DSTransactionID string
	Version         string
}

// AuthRequest is one authorisation request.
type AuthRequest struct {
	// Reference is the gateway's transaction id: the acquirer's idempotency
	// reference.
	Reference string

	PAN        string
	ExpMonth   string
	ExpYear    string
	HolderName string
	// CVV may be empty (e.g. a payment resumed after a restart: the CVV is
	// never stored).
	CVV string

	Amount     int64 // smallest currency unit
	Currency   string
	Descriptor string
	MerchantID string

	// ThreeDS carries 3-D Secure or external MPI data; zero value = none.
	ThreeDS ThreeDSData
	// Cryptogram and ECI carry wallet CRYPTOGRAM_3DS data; may be empty.
	Cryptogram string
	ECI        string
}

// AuthResult is the acquirer's answer to an authorisation.
type AuthResult struct {
	Approved       bool
	AuthCode       string // 6 uppercase alphanumerics when approved, else empty
	ARN            string // acquirer reference number, 23 digits, when approved
	AVSCheck       string // one letter
	CVVCheck       string // one letter
	DeclineCode    string // contract section 3 decline code when declined
	DeclineMessage string
	RiskDecision   string // RiskAccept or RiskDecline
}

// Enrollment is the issuer's 3-D Secure enrolment for a card.
type Enrollment int

const (
	// NotApplicable: an ordinary card, no 3-D Secure enrolment information.
	NotApplicable Enrollment = iota
	// Enrolled: the issuer requires a 3-D Secure challenge.
	Enrolled
	// NotEnrolled: the issuer does not take part in 3-D Secure; the caller
	// decides whether to proceed non-secure.
	NotEnrolled
)

// String returns "enrolled", "not_enrolled" or "not_applicable".
func (e Enrollment) String() string {
	switch e {
	case Enrolled:
		return "enrolled"
	case NotEnrolled:
		return "not_enrolled"
	case NotApplicable:
		return "not_applicable"
	}
	return "unknown"
}

// Letter returns the one-letter form used in three_ds.enrolled: "Y", "N", or
// "U" when not applicable.
func (e Enrollment) Letter() string {
	switch e {
	case Enrolled:
		return "Y"
	case NotEnrolled:
		return "N"
	}
	return "U"
}

// CardInfo is the BIN lookup result for a card number.
type CardInfo struct {
	Brand   string // BrandVisa, BrandMastercard, ...
	Issuer  string
	Type    string // TypeCredit, TypeDebit, TypePrepaid or TypeCharge
	Country string // ISO 3166-1 alpha-2
}

// Card brands reported in CardInfo.Brand.
const (
	BrandVisa       = card.BrandVisa
	BrandMastercard = card.BrandMastercard
	BrandAmex       = card.BrandAmex
	BrandDiscover   = card.BrandDiscover
	BrandJCB        = card.BrandJCB
	BrandUnknown    = card.BrandUnknown
)

// Card types reported in CardInfo.Type.
const (
	TypeCredit  = "Credit"
	TypeDebit   = "Debit"
	TypePrepaid = "Prepaid"
	TypeCharge  = "Charge"
)

// The order actors call an acquirer through their own small interface
// (actors.Acquirer: Authorize, Enrollment, CardInfo); Sandbox implements it.

// Luhn reports whether pan is all digits, 12 to 19 long, and passes the Luhn
// check (the length bound is the acquirer's; the checksum is the domain's,
// order/card).
func Luhn(pan string) bool {
	return len(pan) >= 12 && len(pan) <= 19 && card.Luhn(pan)
}

// Brand returns the card brand from the number's prefix: the same ranges
// the API validates with (order/card).
func Brand(pan string) string { return card.Brand(pan) }
