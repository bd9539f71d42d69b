package order

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends the view's JSON to dst. It produces exactly the bytes
// json.Marshal(v, json.Deterministic(true)) would (a randomised test holds
// the two equal) without reflection: the view is rendered on every
// response, status read and notification, so this is the hot path's
// encoder. When a field is added to View or its parts, add it here too; the
// equality test fails until you do.
func (v *View) AppendJSON(dst []byte) []byte {
	w := jsonWriter{b: dst}
	w.open()
	w.str("order_id", v.OrderID)
	w.int("amount", v.Amount)
	w.str("currency", v.Currency)
	w.int("refunded_amount", v.RefundedAmount)
	w.int("settled_amount", v.SettledAmount)
	w.str("status", string(v.Status))
	w.str("descriptor", v.Descriptor)
	w.decline(v.Decline)
	if r := v.Risk; r != nil {
		w.key("risk")
		w.open()
		w.str("decision", r.Decision)
		w.close()
	}
	w.nullableStr("avs_check", v.AVSCheck)
	w.nullableStr("cvv_check", v.CVVCheck)
	if t := v.ThreeDS; t != nil {
		w.key("three_ds")
		w.open()
		w.strOmit("enrolled", t.Enrolled)
		w.strOmit("authentication_result", t.AuthenticationResult)
		w.strOmit("version", t.Version)
		w.strOmit("eci", t.ECI)
		w.strOmit("xid", t.XID)
		w.strOmit("cavv", t.CAVV)
		w.close()
	}
	w.str("website", v.Website)
	w.str("processing_mid", v.ProcessingMID)
	w.strOmit("subscription_id", v.SubscriptionID)
	w.strOmit("redirect_url", v.RedirectURL)
	if v.Transaction != nil {
		w.key("transaction")
		w.txn(v.Transaction)
	}
	if v.Transactions != nil { // {} for an order without transactions (interface 4.8)
		w.key("transactions")
		w.open()
		ids := make([]string, 0, len(v.Transactions))
		for id := range v.Transactions {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			w.key(id)
			if t := v.Transactions[id]; t != nil {
				w.txn(t)
			} else {
				w.raw("null")
			}
		}
		w.close()
	}
	if s := v.PaymentSource; s != nil {
		w.key("payment_source")
		w.source(s)
	}
	w.close()
	return w.b
}

func (w *jsonWriter) txn(t *TxnView) {
	w.open()
	w.str("id", t.ID)
	w.str("created_at", t.CreatedAt)
	w.str("updated_at", t.UpdatedAt)
	w.str("operation", string(t.Operation))
	w.str("status", string(t.Status))
	w.str("currency", t.Currency)
	w.int("amount", t.Amount)
	w.strOmit("auth_code", t.AuthCode)
	w.strOmit("arn", t.ARN)
	w.strOmit("refund_reason_code", t.RefundReasonCode)
	w.decline(t.Decline)
	w.close()
}

func (w *jsonWriter) decline(d *Decline) {
	if d == nil {
		return
	}
	w.key("decline")
	w.open()
	w.str("code", d.Code)
	w.str("message", d.Message)
	w.close()
}

func (w *jsonWriter) source(s *SourceView) {
	w.open()
	w.str("type", s.Type)
	w.strOmit("card_id", s.CardID)
	w.strOmit("token_expiration_date", s.TokenExpirationDate)
	w.strOmit("payment_token", s.PaymentToken)
	w.strOmit("issuer", s.Issuer)
	w.strOmit("bin", s.BIN)
	w.strOmit("card_brand", s.CardBrand)
	w.strOmit("card_type", s.CardType)
	w.strOmit("card_exp_month", s.CardExpMonth)
	w.strOmit("card_exp_year", s.CardExpYear)
	w.strOmit("card_holder_name", s.CardHolderName)
	w.strOmit("masked_card_number", s.MaskedCardNumber)
	w.strOmit("issuer_country", s.IssuerCountry)
	if a := s.BillingAddress; a != nil {
		w.key("billing_address")
		w.open()
		w.strOmit("line1", a.Line1)
		w.strOmit("line2", a.Line2)
		w.strOmit("city", a.City)
		w.strOmit("state", a.State)
		w.strOmit("zip", a.Zip)
		w.strOmit("country", a.Country)
		w.close()
	}
	w.close()
}

// jsonWriter appends one JSON object at a time, tracking commas.
type jsonWriter struct {
	b     []byte
	first bool // no member written yet in the current object
}

func (w *jsonWriter) open() {
	w.b = append(w.b, '{')
	w.first = true
}

func (w *jsonWriter) close() {
	w.b = append(w.b, '}')
	w.first = false
}

func (w *jsonWriter) key(k string) {
	if !w.first {
		w.b = append(w.b, ',')
	}
	w.first = false
	w.b = appendJSONString(w.b, k)
	w.b = append(w.b, ':')
}

func (w *jsonWriter) raw(s string) { w.b = append(w.b, s...) }

func (w *jsonWriter) str(k, v string) {
	w.key(k)
	w.b = appendJSONString(w.b, v)
}

func (w *jsonWriter) strOmit(k, v string) {
	if v != "" {
		w.str(k, v)
	}
}

func (w *jsonWriter) nullableStr(k string, v *string) {
	if v == nil {
		w.key(k)
		w.raw("null")
		return
	}
	w.str(k, *v)
}

func (w *jsonWriter) int(k string, v int64) {
	w.key(k)
	w.b = strconv.AppendInt(w.b, v, 10)
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s the way encoding/json/v2 does by default: the
// short escapes for \b \t \n \f \r, \uXXXX for other control characters,
// \" and \\, and everything else (valid UTF-8) as is. Invalid UTF-8 never
// reaches a view: requests are refused at decoding.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\ufffd"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
