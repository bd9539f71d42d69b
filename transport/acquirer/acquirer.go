// Package acquirer is what the gateway knows of card acquirers (contract
// sections 7 and 12), an outbound edge: the vocabulary of the call the
// order actors make through the interface they declare (actors.Acquirer:
// AuthRequest, AuthResult, decline codes), the one table from ISO 8583
// response codes to the contract's decline codes, the test cards, and the
// sandbox BIN and 3-D Secure directory tables. Card rules come from the
// domain (order/card), never from the API's validator.
//
// The acquirer itself is a separate service spoken to over ISO 8583:
// iso8583 is the codec, host the sandbox acquirer host (cmd/acquirerd, also
// run in-process by a node without --acquirer-addr), and link the node's
// connection to a host, whose Acquirer the actors call. docs/acquirer.md
// describes the protocol.
//
// Authorize is idempotent on AuthRequest.Reference (the gateway's transaction
// id): the link sends every attempt for a reference with the same RRN
// (RRN(reference)), and the host answers a repeat with its first answer
// without authorising again. A new attempt (e.g. after 3-D Secure) therefore
// needs a new reference.
//
// Card data in requests is never logged or kept by this package.
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
	// MID is the order's processing_mid: the card acceptor id (field 42)
	// when it fits (CardAcceptorID).
	MID string
	// AcquirerAddr is the host the order's MID is registered with (contract
	// 12); empty: the node's default acquirer.
	AcquirerAddr string
	// Sale asks for authorisation and capture in one message (0200): an
	// order with settle.delay_hours 0.
	Sale bool

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
	// Trace is the answer's STAN and transmission time (fields 11 and 7,
	// 16 digits): a capture or reversal names them in field 90.
	Trace string
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
// (actors.Acquirer: Authorize, Enrollment, CardInfo); link.Acquirer
// implements it. Authorize asks for an authorisation (or a sale,
// AuthRequest.Sale); a declined payment is a result, not an error; an error
// is a transport failure (or ctx ended) and is retryable with the same
// Reference (ErrNoReference and ErrInvalidRequest, caller bugs, are the
// exceptions). Enrollment is a directory lookup, not an acquirer message
// (SandboxDirectory).

// Luhn reports whether pan is all digits, 12 to 19 long, and passes the Luhn
// check (the length bound is the acquirer's; the checksum is the domain's,
// order/card).
func Luhn(pan string) bool {
	return len(pan) >= 12 && len(pan) <= 19 && card.Luhn(pan)
}

// Brand returns the card brand from the number's prefix: the same ranges
// the API validates with (order/card).
func Brand(pan string) string { return card.Brand(pan) }
