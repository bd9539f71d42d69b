// Package card holds the rules of payment cards that the gateway's domain
// knows without asking anyone: the brand of a number (IIN ranges), the Luhn
// checksum, the CVV length a brand takes, the expiry date and the masked form
// a number is shown in. They are facts about cards, not about HTTP: the API's
// validator (transport/api), the order actors (a token charge's card, the
// masked number in an order) and the acquirer adapters all read them here, so
// they cannot disagree.
//
// Naming: the domain is order/ and its sibling fact tables beside it
// (order/card, order/currency); business rejections are order.Rejection.
package card

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Card brands returned by Brand.
const (
	BrandVisa       = "visa"
	BrandMastercard = "mastercard"
	BrandAmex       = "amex"
	BrandDiscover   = "discover"
	BrandJCB        = "jcb"
	BrandUnionPay   = "unionpay"
	BrandDiners     = "diners"
	BrandUnknown    = "unknown"
)

// Brand names the card scheme of a primary account number from its
// leading digits (IIN ranges). It does not check length or Luhn. Anything
// that does not start with digits of a known range is "unknown".
//
//	visa        4
//	mastercard  51-55, 2221-2720
//	amex        34, 37
//	discover    6011, 644-649, 65
//	jcb         3528-3589
//	unionpay    62, 81
//	diners      300-305, 3095, 36, 38, 39
func Brand(pan string) string {
	p2, ok2 := prefixInt(pan, 2)
	p3, ok3 := prefixInt(pan, 3)
	p4, ok4 := prefixInt(pan, 4)
	switch {
	case len(pan) > 0 && pan[0] == '4':
		return BrandVisa
	case ok2 && (p2 == 34 || p2 == 37):
		return BrandAmex
	case ok2 && p2 >= 51 && p2 <= 55, ok4 && p4 >= 2221 && p4 <= 2720:
		return BrandMastercard
	case ok4 && p4 == 6011, ok3 && p3 >= 644 && p3 <= 649, ok2 && p2 == 65:
		return BrandDiscover
	case ok4 && p4 >= 3528 && p4 <= 3589:
		return BrandJCB
	case ok2 && (p2 == 62 || p2 == 81):
		return BrandUnionPay
	case ok3 && p3 >= 300 && p3 <= 305, ok4 && p4 == 3095, ok2 && (p2 == 36 || p2 == 38 || p2 == 39):
		return BrandDiners
	}
	return BrandUnknown
}

// IsAmex reports whether pan is of the American-Express type (starts with
// 34 or 37), whose CVV has 4 digits instead of 3.
func IsAmex(pan string) bool {
	return strings.HasPrefix(pan, "34") || strings.HasPrefix(pan, "37")
}

// IsMastercard reports whether pan is in a Mastercard range (51-55 or
// 2221-2720), which matters for the 3-D Secure 2.x xid rule.
func IsMastercard(pan string) bool {
	return Brand(pan) == BrandMastercard
}

// Luhn reports whether pan is a non-empty string of ASCII digits whose Luhn
// (mod 10) checksum is valid.
func Luhn(pan string) bool {
	return Digits(pan) && luhnSum(pan, false)%10 == 0
}

// CheckDigit returns the digit that, appended to digits (ASCII digits
// only), makes a number that passes the Luhn check.
func CheckDigit[S ~string | ~[]byte](digits S) byte {
	return byte('0' + (10-luhnSum(digits, true)%10)%10)
}

// luhnSum adds the digits from the right, doubling every second one
// (starting with the last when doubleLast) and taking 9 off a doubled digit
// over 9.
func luhnSum[S ~string | ~[]byte](digits S, doubleLast bool) int {
	sum, double := 0, doubleLast
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum
}

// Mask keeps the first 6 and last 4 characters of pan and replaces every
// character in between with '*' ("411111******1111"). A value too short to
// keep 10 characters and still hide at least one is masked entirely, so the
// result never reveals a whole number.
func Mask(pan string) string {
	if isASCII(pan) && len(pan) > 10 {
		// A card number (digits, validated): one allocation, where the
		// rune version below builds four strings.
		b := make([]byte, len(pan))
		copy(b, pan[:6])
		for i := 6; i < len(pan)-4; i++ {
			b[i] = '*'
		}
		copy(b[len(pan)-4:], pan[len(pan)-4:])
		return string(b)
	}
	r := []rune(pan)
	if len(r) <= 10 {
		return strings.Repeat("*", len(r))
	}
	return string(r[:6]) + strings.Repeat("*", len(r)-10) + string(r[len(r)-4:])
}

// isASCII reports whether s is ASCII only, one byte per character.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// prefixInt parses the first n characters of s as a decimal number.
func prefixInt(s string, n int) (int, bool) {
	if len(s) < n {
		return 0, false
	}
	v := 0
	for i := 0; i < n; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// Digits reports whether s is non-empty and only ASCII digits, the shape of
// a card number, a CVV and an expiry field.
func Digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ExpiryYear returns the four-digit expiry year of a card_exp_year ("2030"
// or "30" both give 2030).
func ExpiryYear(s string) (int, bool) {
	if !Digits(s) || (len(s) != 2 && len(s) != 4) {
		return 0, false
	}
	y, _ := strconv.Atoi(s)
	if len(s) == 2 {
		y += 2000
	}
	return y, true
}

// ExpiryMonth returns the month of a card_exp_month ("03" or "3" both give
// 3).
func ExpiryMonth(s string) (int, bool) {
	if !Digits(s) || len(s) > 2 {
		return 0, false
	}
	m, _ := strconv.Atoi(s)
	if m < 1 || m > 12 {
		return 0, false
	}
	return m, true
}

// Expired reports whether a card valid through the end of month/year has
// expired at now (compared in UTC).
func Expired(month, year int, now time.Time) bool {
	end := time.Date(year, time.Month(month)+1, 1, 0, 0, 0, 0, time.UTC)
	return !now.UTC().Before(end)
}

// CVVProblem says what is wrong with cvv for the card number pan, or ""
// when nothing is: 4 digits for an American-Express-type number, 3 for any
// other known number, 3 or 4 when the number is not known (panKnown false).
// The answer is the end of a sentence whose subject is the CVV's attribute
// ("should have exactly 3 digits").
func CVVProblem(cvv, pan string, panKnown bool) string {
	digits := Digits(cvv)
	switch {
	case !panKnown:
		if !digits || (len(cvv) != 3 && len(cvv) != 4) {
			return "should have 3 or 4 digits"
		}
	case IsAmex(pan):
		if !digits || len(cvv) != 4 {
			return "should have exactly 4 digits for an American Express card"
		}
	default:
		if !digits || len(cvv) != 3 {
			return "should have exactly 3 digits"
		}
	}
	return ""
}

// FindPAN returns the first card number standing alone in text: a run of
// 13 to 19 digits, with no letter or digit on either side, that passes the
// Luhn check ("" when there is none). Tests use it to prove that a page or
// a log holds no card number beyond the masked form; digits inside a longer
// token (a hash in hex, a 23-digit ARN) are not one.
func FindPAN(text string) string {
	for i := 0; i < len(text); {
		if !isDigit(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && isDigit(text[j]) {
			j++
		}
		alone := (i == 0 || !isAlnum(text[i-1])) && (j == len(text) || !isAlnum(text[j]))
		if run := text[i:j]; alone && len(run) >= 13 && len(run) <= 19 && Luhn(run) {
			return run
		}
		i = j
	}
	return ""
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnum(c byte) bool { return isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'z' }
