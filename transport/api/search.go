package api

import (
	"fmt"
	"strconv"
	"time"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/transport/apierr"
)

// ListOrdersRequest is an order search (contract 13): the body of a
// merchant's POST /list-orders, and the query of the admin API's
// GET /admin/v1/orders (ListOrdersQuery), with the same names.
type ListOrdersRequest struct {
	// MerchantID is the admin search's scope. A merchant's list-orders is
	// scoped by its signature: the member is refused there (422), so that a
	// client that believes it can list another merchant learns otherwise.
	MerchantID    *string `json:"merchant_id,omitempty"`
	Status        *string `json:"status,omitempty"`
	CreatedFrom   *string `json:"created_from,omitempty"`
	CreatedTo     *string `json:"created_to,omitempty"`
	Email         *string `json:"email,omitempty"`
	CardLast4     *string `json:"card_last4,omitempty"`
	BIN           *string `json:"bin,omitempty"`
	OrderIDPrefix *string `json:"order_id_prefix,omitempty"`
	AmountMin     *int64  `json:"amount_min,omitempty"`
	AmountMax     *int64  `json:"amount_max,omitempty"`
	Limit         *int64  `json:"limit,omitempty"`
	Cursor        *string `json:"cursor,omitempty"`
}

// OrderSearch is a validated search; zero fields do not filter.
type OrderSearch struct {
	MerchantID             string
	Status                 order.Status
	CreatedFrom, CreatedTo time.Time
	Email, CardLast4, BIN  string
	OrderIDPrefix          string
	AmountMin, AmountMax   *int64
	Limit                  int
	Cursor                 string
}

// Search limits (contract 13).
const (
	SearchLimitMax     = 1000
	SearchLimitDefault = 100
	cursorCharsMax     = 1024
)

// ListOrdersQuery reads an admin search's query parameters; get returns a
// parameter's value and whether it is present. A number that does not
// parse is a violation naming its parameter.
func ListOrdersQuery(get func(name string) (string, bool)) (*ListOrdersRequest, *apierr.Error) {
	var v violations
	r := &ListOrdersRequest{}
	str := func(name string) *string {
		if s, ok := get(name); ok && s != "" {
			return &s
		}
		return nil
	}
	num := func(name string) *int64 {
		s := str(name)
		if s == nil {
			return nil
		}
		n, err := strconv.ParseInt(*s, 10, 64)
		if err != nil {
			v.add(famGeneral, name, name+" should be an integer")
			return nil
		}
		return &n
	}
	r.MerchantID, r.Status, r.CreatedFrom, r.CreatedTo = str("merchant_id"), str("status"), str("created_from"), str("created_to")
	r.Email, r.CardLast4, r.BIN, r.OrderIDPrefix = str("email"), str("card_last4"), str("bin"), str("order_id_prefix")
	r.AmountMin, r.AmountMax, r.Limit, r.Cursor = num("amount_min"), num("amount_max"), num("limit"), str("cursor")
	return r, v.result()
}

// ValidateListOrders validates a merchant's list-orders body.
func ValidateListOrders(r *ListOrdersRequest) *apierr.Error {
	if r == nil {
		return errNotObject()
	}
	_, err := validateSearch(r, false)
	return err
}

// Search validates r into an OrderSearch; admin allows merchant_id.
func Search(r *ListOrdersRequest, admin bool) (OrderSearch, *apierr.Error) {
	return validateSearch(r, admin)
}

func validateSearch(r *ListOrdersRequest, admin bool) (OrderSearch, *apierr.Error) {
	var v violations
	var s OrderSearch
	if r.MerchantID != nil {
		if !admin {
			v.add(famGeneral, "merchant_id", "merchant_id is not accepted: list-orders lists the signing merchant's own orders")
		} else {
			s.MerchantID, _ = v.optString("merchant_id", r.MerchantID, 255)
		}
	}
	if r.Status != nil {
		switch st := order.Status(*r.Status); st {
		case order.StatusCreated, order.StatusProcessing, order.StatusAuthorized, order.StatusDeclined,
			order.StatusSettled, order.StatusVoided, order.StatusRefunded, order.StatusExpired:
			s.Status = st
		default:
			v.add(famGeneral, "status", "status should be one of created, processing, authorized, declined, settled, voided, refunded, expired")
		}
	}
	s.CreatedFrom = v.rfc3339("created_from", r.CreatedFrom)
	s.CreatedTo = v.rfc3339("created_to", r.CreatedTo)
	if !s.CreatedFrom.IsZero() && !s.CreatedTo.IsZero() && !s.CreatedFrom.Before(s.CreatedTo) {
		v.add(famGeneral, "created_to", "created_to should be after created_from")
	}
	s.Email, _ = v.optString("email", r.Email, 100)
	if r.CardLast4 != nil {
		if s.CardLast4 = *r.CardLast4; !digits(s.CardLast4, 4, 4) {
			v.add(famGeneral, "card_last4", "card_last4 should have exactly 4 digits")
		}
	}
	if r.BIN != nil {
		if s.BIN = *r.BIN; !digits(s.BIN, 6, 8) {
			v.add(famGeneral, "bin", "bin should have 6 to 8 digits")
		}
	}
	s.OrderIDPrefix, _ = v.optString("order_id_prefix", r.OrderIDPrefix, 255)
	for _, a := range []struct {
		name string
		p    *int64
	}{{"amount_min", r.AmountMin}, {"amount_max", r.AmountMax}} {
		if a.p != nil && *a.p < 0 {
			v.add(famGeneral, a.name, a.name+" should be 0 or more (minor units)")
		}
	}
	s.AmountMin, s.AmountMax = r.AmountMin, r.AmountMax
	if s.AmountMin != nil && s.AmountMax != nil && *s.AmountMin > *s.AmountMax {
		v.add(famGeneral, "amount_max", "amount_max should be at least amount_min")
	}
	s.Limit = SearchLimitDefault
	if r.Limit != nil {
		if *r.Limit < 1 || *r.Limit > SearchLimitMax {
			v.add(famGeneral, "limit", fmt.Sprintf("limit should be from 1 to %d", SearchLimitMax))
		}
		s.Limit = int(*r.Limit)
	}
	s.Cursor, _ = v.optString("cursor", r.Cursor, cursorCharsMax)
	return s, v.result()
}

// rfc3339 parses an optional RFC 3339 time.
func (v *violations) rfc3339(attr string, p *string) time.Time {
	if p == nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, *p)
	if err != nil {
		v.add(famGeneral, attr, attr+" should be an RFC 3339 time, such as 2026-11-01T00:00:00Z")
	}
	return t
}

// digits reports whether s is min to max ASCII digits.
func digits(s string, min, max int) bool {
	if len(s) < min || len(s) > max {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
