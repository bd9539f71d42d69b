package api

import (
	"time"

	"github.com/paygate/gateway/transport/apierr"
)

// FormCardRequest is the card the hosted payment form posts to
// /api/v3/purchase/{token}/pay: the card fields of a charge's
// payment_source (interface 4.3), nothing else. The form sends an empty
// input as an absent field; NormalizeFormCard maps "" to nil for clients
// that do not.
type FormCardRequest struct {
	CardNumber     *string `json:"card_number,omitempty"`
	CardHolderName *string `json:"card_holder_name,omitempty"`
	CardExpMonth   *string `json:"card_exp_month,omitempty"`
	CardExpYear    *string `json:"card_exp_year,omitempty"`
	CardCVV        *string `json:"card_cvv,omitempty"`
}

// NormalizeFormCard maps empty inputs to absent fields (see README:
// "the hosted form must map empty inputs to nil").
func NormalizeFormCard(r *FormCardRequest) {
	for _, p := range []**string{&r.CardNumber, &r.CardHolderName, &r.CardExpMonth, &r.CardExpYear, &r.CardCVV} {
		if *p != nil && **p == "" {
			*p = nil
		}
	}
}

// PaymentSource is the card as a charge's payment_source of type card.
func (r *FormCardRequest) PaymentSource() *PaymentSource {
	t := SourceCard
	return &PaymentSource{Type: &t, CardNumber: r.CardNumber, CardHolderName: r.CardHolderName,
		CardExpMonth: r.CardExpMonth, CardExpYear: r.CardExpYear, CardCVV: r.CardCVV}
}

// ValidateFormCard checks a form's card with exactly the rules of a charge's
// payment_source of type card: the same attributes
// (payment_source.card_number, ...), messages and codes (2.01, 2.06, 2.08,
// 2.09). now is the clock for the expiry check.
func ValidateFormCard(r *FormCardRequest, now time.Time) *apierr.Error {
	if r == nil {
		return errNotObject()
	}
	var v violations
	v.chargeSource(r.PaymentSource(), now)
	return v.result()
}
