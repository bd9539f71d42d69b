// Package apierr is the single source of truth for the error catalogue of the
// merchant API (contract section 3): every error a merchant can see has one
// entry here with its HTTP status and stable N.NN code. Handlers, docs and
// tests all read this table; nothing else spells a code.
package apierr

import (
	"sort"
	"strings"
)

// Code is a stable catalogue entry: an N.NN code and the HTTP status it travels with.
type Code struct {
	Code   string // N.NN, what merchants' client libraries read
	HTTP   int    // HTTP status of the answer
	Reason string // one line for the docs
}

// The catalogue (contract section 3). Two entries may share an N.NN code with
// different HTTP statuses (2.01 is both "field invalid" and "body too large").
var (
	Auth              = Code{"1.01", 401, "authentication failed: merchant or signature header missing, merchant unknown, signature mismatch"}
	AdminAuth         = Code{"1.01", 401, "admin API: bearer token missing or wrong"}
	SignInFailed      = Code{"1.01", 401, "back office sign-in: email or password wrong, or operator disabled"}
	RoleForbidden     = Code{"1.02", 403, "back office: the operator's role may not do this"}
	BodyTooLarge      = Code{"2.01", 413, "request body over the size limit"}
	Invalid           = Code{"2.01", 422, "one or more fields violate a constraint; every violating field is listed"}
	AmountInvalid     = Code{"2.02", 422, "amount invalid for the operation (settle or refund above what is left)"}
	CurrencyInvalid   = Code{"2.03", 422, "currency is not an ISO-4217 code"}
	NotFound          = Code{"2.05", 404, "no order with that order_id for this merchant"}
	CVVInvalid        = Code{"2.06", 422, "card CVV invalid"}
	BadBody           = Code{"2.07", 400, "body empty or not a JSON object"}
	CardNumberInvalid = Code{"2.08", 422, "card number invalid (Luhn or length)"}
	ExpiryInvalid     = Code{"2.09", 422, "card expiry invalid"}
	IllegalStatus     = Code{"0.03", 409, "operation illegal in the order's status"}
	Conflict          = Code{"5.06", 409, "order_id or Idempotency-Key reused with a different request"}
	RateLimited       = Code{"5.07", 429, "merchant over its rate limit"}
	SignInLimited     = Code{"5.07", 429, "back office sign-in: too many attempts for this email or from this address"}
	OperatorExists    = Code{"5.06", 409, "back office: an operator with this email exists (disabled ones too)"}
	TokenInvalid      = Code{"7.01", 422, "payment_token unknown, expired or of another merchant"}
	Unavailable       = Code{"6.02", 503, "no leader, or this node cannot reach it; safe to retry"}
	Internal          = Code{"5.03", 500, "unexpected error"}
	// Transport-level answers that still carry a JSON body (contract section 3).
	// An unknown operation has a code of its own (contract section 15): a
	// client library that branches on error.code must not read a missing
	// endpoint as a missing order (2.05).
	UnknownPath      = Code{"0.01", 404, "no such operation or path"}
	MethodNotAllowed = Code{"2.07", 405, "method not allowed for this path"}
)

// Catalogue lists every entry, for docs and tests.
func Catalogue() []Code {
	return []Code{Auth, AdminAuth, SignInFailed, RoleForbidden, BodyTooLarge, Invalid, AmountInvalid, CurrencyInvalid, NotFound, CVVInvalid,
		BadBody, CardNumberInvalid, ExpiryInvalid, IllegalStatus, Conflict, OperatorExists, RateLimited, SignInLimited, TokenInvalid,
		Unavailable, Internal, UnknownPath, MethodNotAllowed}
}

// Error is an API error: a catalogue code plus messages per attribute.
// It renders as {"error":{"code":"N.NN","messages":{"attr":["msg"]}}}.
type Error struct {
	Code     Code
	Messages map[string][]string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Code.Code)
	for _, k := range e.Attributes() {
		for _, m := range e.Messages[k] {
			b.WriteString("; ")
			b.WriteString(m)
		}
	}
	return b.String()
}

// Attributes returns the attribute names in sorted order.
func (e *Error) Attributes() []string {
	keys := make([]string, 0, len(e.Messages))
	for k := range e.Messages {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// New makes an error with one attribute and one message.
func New(code Code, attribute, message string) *Error {
	return &Error{Code: code, Messages: map[string][]string{attribute: {message}}}
}

// Add appends a message for an attribute.
func (e *Error) Add(attribute, message string) {
	if e.Messages == nil {
		e.Messages = map[string][]string{}
	}
	e.Messages[attribute] = append(e.Messages[attribute], message)
}

// Body is the wire shape of an error answer.
type Body struct {
	Error BodyError `json:"error"`
}

// BodyError is the inner object of Body.
type BodyError struct {
	Code     string              `json:"code"`
	Messages map[string][]string `json:"messages"`
}

// Body returns the wire shape.
func (e *Error) Body() Body {
	msgs := e.Messages
	if msgs == nil {
		msgs = map[string][]string{}
	}
	return Body{Error: BodyError{Code: e.Code.Code, Messages: msgs}}
}
