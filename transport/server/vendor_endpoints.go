package server

import (
	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/transport/api"
	"github.com/paygate/gateway/transport/wallet"
)

// vendorEndpoints are the operations the card vendor's own client library
// calls (contract section 15), so that merchants who already run it need
// only a new base address. Each is another route to an operation of this
// API, with its decoding, validation and error mapping:
//
//   - auth: a charge that is never settled automatically (its order is
//     made with order.SettleManually; the request has no settle);
//   - recurring, resign: a token charge whose payment_source is
//     recurring_token (plus card_cvv for resign); answers name the
//     request's fields, not the charge's (api.RecurringNames);
//   - apple-pay, google-pay: walleta-pay and walletb-pay, bodies and all;
//   - arn-code: the order's acquirer reference numbers.
func (s *Server) vendorEndpoints() map[string]endpoint {
	wallets := s.walletEndpoints()
	return map[string]endpoint{
		"auth": operation(api.ValidateAuth, func(s *Server, c *call, r *api.ChargeRequest) answer {
			return s.pay(c, "auth", r, order.SettleManually)
		}),
		"recurring":  operation(api.ValidateRecurring, recurringPayment("recurring", false)),
		"resign":     operation(api.ValidateResign, recurringPayment("resign", true)),
		"apple-pay":  wallets[wallet.WalletA],
		"google-pay": wallets[wallet.WalletB],
		"arn-code":   operation(ignoreNow(api.ValidateStatus), (*Server).arnCodes),
	}
}

// recurringPayment pays with the token charge a recurring or resign request
// stands for; the order actor's refusals of the token (7.01) or of the
// card's CVV (2.06) are renamed to the request's fields.
func recurringPayment(op string, withCVV bool) func(*Server, *call, *api.RecurringRequest) answer {
	return func(s *Server, c *call, r *api.RecurringRequest) answer {
		a := s.pay(c, op, r.Charge(withCVV), *r.Settle.DelayHours)
		a.err = api.RecurringNames(a.err)
		return a
	}
}

// arnCodeAnswer is the arn-code response.
type arnCodeAnswer struct {
	ARNCodes []order.ARNCode `json:"arn_codes"`
}

// arnCodes reads the applied order, as status does (forward ran the
// leader's read barrier): another merchant's order is not found.
func (s *Server) arnCodes(c *call, r *api.ARNCodeRequest) answer {
	o, err := s.cfg.Store.GetOrder(c.merchant.ID, *r.OrderID)
	if err != nil {
		return answer{err: s.errorFor("arn-code", err)}
	}
	if o == nil {
		return answer{err: orderNotFound()}
	}
	body, err := marshalJSON(arnCodeAnswer{ARNCodes: order.ARNCodes(o)})
	if err != nil {
		return answer{err: s.errorFor("arn-code", err)}
	}
	return answer{body: body}
}
