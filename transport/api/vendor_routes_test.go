package api

import (
	"strings"
	"testing"

	"github.com/paygate/gateway/transport/apierr"
)

// The vendor client library's operations (contract section 15) are
// charges under other names: the charge's rules, the request's own names.

func validRecurringForTest() *RecurringRequest {
	return &RecurringRequest{OrderFields: validOrderFieldsForTest(), RecurringToken: ptr("tok_1")}
}

func TestValidateAuth(t *testing.T) {
	r := ValidChargeForTest()
	r.Settle = nil
	if err := ValidateAuth(r, testNow); err != nil {
		t.Fatalf("an auth without settle: %v", err.Messages)
	}
	// A charge's body as it is: its settle.delay_hours would not be honoured.
	expectOne(t, ValidateAuth(ValidChargeForTest(), testNow), invalid, "settle", "settle is not part of auth")
	// Everything else is a charge's: a bad card number is its 2.08.
	r.PaymentSource.CardNumber = ptr("4111111111111112")
	expectOne(t, ValidateAuth(r, testNow), apierr.CardNumberInvalid, "payment_source.card_number", "Luhn")
	if err := ValidateAuth(nil, testNow); err == nil || err.Code != apierr.BadBody {
		t.Fatalf("nil: %v", err)
	}
}

func TestValidateRecurringAndResign(t *testing.T) {
	type tc struct {
		name   string
		resign bool
		mutate func(*RecurringRequest)
		code   apierr.Code
		attr   string
		msg    string
	}
	for _, c := range []tc{
		{name: "recurring valid", mutate: func(*RecurringRequest) {}},
		{name: "resign valid", resign: true, mutate: func(r *RecurringRequest) { r.CardCVV = ptr("123") }},
		{name: "resign with a 4-digit CVV (brand known once the token resolves)", resign: true, mutate: func(r *RecurringRequest) { r.CardCVV = ptr("1234") }},
		{"recurring_token missing", false, func(r *RecurringRequest) { r.RecurringToken = nil }, invalid, "recurring_token", "recurring_token is required"},
		{"recurring_token blank", true, func(r *RecurringRequest) { r.RecurringToken = ptr(" "); r.CardCVV = ptr("123") }, invalid, "recurring_token", "recurring_token must not be empty"},
		{"recurring_token too long", false, func(r *RecurringRequest) { r.RecurringToken = long(256) }, invalid, "recurring_token", "at most 255"},
		{"recurring with a CVV", false, func(r *RecurringRequest) { r.CardCVV = ptr("123") }, invalid, "card_cvv", "resign"},
		{"resign without a CVV", true, func(*RecurringRequest) {}, invalid, "card_cvv", "card_cvv is required"},
		{"resign CVV of 2 digits", true, func(r *RecurringRequest) { r.CardCVV = ptr("12") }, apierr.CVVInvalid, "card_cvv", "card_cvv should have 3 or 4 digits"},
		{"settle missing, as on a charge", false, func(r *RecurringRequest) { r.Settle = nil }, invalid, "settle", "settle is required"},
		{"currency, as on a charge", false, func(r *RecurringRequest) { r.Currency = ptr("usd") }, apierr.CurrencyInvalid, "currency", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := validRecurringForTest()
			c.mutate(r)
			validate := ValidateRecurring
			if c.resign {
				validate = ValidateResign
			}
			err := validate(r, testNow)
			if c.code == ok422 {
				if err != nil {
					t.Fatalf("want valid, got %v", err.Messages)
				}
				return
			}
			expectOne(t, err, c.code, c.attr, c.msg)
			for _, msgs := range err.Messages {
				for _, m := range msgs {
					if strings.Contains(m, "payment_source") || strings.Contains(m, "payment_token") {
						t.Errorf("message names the charge's field, not the request's: %q", m)
					}
				}
			}
		})
	}
	// A missing CVV next to a CVV-family error elsewhere is a mix: 2.01.
	r := validRecurringForTest()
	r.Currency = ptr("usd")
	if err := ValidateResign(r, testNow); err == nil || err.Code != apierr.Invalid || len(err.Messages) != 2 {
		t.Fatalf("resign with two violations: %v", err)
	}
}

// The order actor's answers about the token (7.01) and its card's CVV
// (2.06) are renamed the same way.
func TestRecurringNames(t *testing.T) {
	e := apierr.New(apierr.TokenInvalid, "payment_source.payment_token", "payment_token is unknown, expired or belongs to another merchant")
	got := RecurringNames(e)
	if got.Code != apierr.TokenInvalid || len(got.Messages["recurring_token"]) != 1 ||
		got.Messages["recurring_token"][0] != "recurring_token is unknown, expired or belongs to another merchant" {
		t.Fatalf("7.01: %+v", got)
	}
	if e.Messages["payment_source.payment_token"] == nil {
		t.Fatal("RecurringNames changed its argument")
	}
	cvv := RecurringNames(apierr.New(apierr.CVVInvalid, "payment_source.card_cvv", "payment_source.card_cvv should have exactly 3 digits"))
	if cvv.Messages["card_cvv"][0] != "card_cvv should have exactly 3 digits" {
		t.Fatalf("2.06: %+v", cvv)
	}
	if RecurringNames(nil) != nil {
		t.Fatal("nil")
	}
}
