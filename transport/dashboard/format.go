package dashboard

import (
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/transport/webhook"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"money":      money,
	"when":       when,
	"whenText":   whenText,
	"badge":      badge,
	"card":       cardText,
	"minor":      minorText,
	"lower":      strings.ToLower,
	"lastAnswer": lastAnswer,
}

// money formats minor units by the currency's exponent, with thousands
// separators: 123456 EUR is "1,234.56 EUR", 1500 JPY "1,500 JPY".
func money(amount int64, cur string) string {
	return minorText(amount, cur) + " " + cur
}

// minorText is money without the currency code (a form's default value
// uses plainText instead: no separators).
func minorText(amount int64, cur string) string {
	neg := amount < 0
	if neg {
		amount = -amount
	}
	exp := exponent(cur)
	digits := strconv.FormatInt(amount, 10)
	if len(digits) <= exp {
		digits = strings.Repeat("0", exp-len(digits)+1) + digits
	}
	whole, frac := digits[:len(digits)-exp], digits[len(digits)-exp:]
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if exp > 0 {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	return b.String()
}

// when renders Unix ns as a <time> element: UTC text that reads without
// JavaScript, and the machine-readable instant app.js turns into the
// viewer's own zone.
func when(ns int64) template.HTML {
	if ns == 0 {
		return "—"
	}
	t := time.Unix(0, ns).UTC()
	return template.HTML(`<time datetime="` + t.Format(time.RFC3339Nano) + `">` + t.Format("2006-01-02 15:04:05") + ` UTC</time>`)
}

// whenText is when for an RFC 3339 text (the notifications' view).
func whenText(s string) template.HTML {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return template.HTML(template.HTMLEscapeString(s))
	}
	return when(t.UnixNano())
}

// badge is the CSS class of a status badge: good, bad, wait or off.
func badge(status any) string {
	switch s, _ := status.(string); s {
	case "settled", "success", "delivered", "200", "ok":
		return "good"
	case "declined", "fail", "failed", "expired", "rate_limited":
		return "bad"
	case "processing", "pending", "verify", "created", "authorized":
		return "wait"
	default:
		if strings.HasPrefix(s, "4") || strings.HasPrefix(s, "5") { // an audit result
			return "bad"
		}
	}
	return "off"
}

// cardText is a card as the dashboard shows it: the brand and the masked
// number the order keeps (never more than the BIN and the last 4).
func cardText(src order.PaymentSource) string {
	parts := []string{}
	if src.Brand != "" {
		parts = append(parts, strings.ToUpper(src.Brand))
	}
	if src.Masked != "" {
		parts = append(parts, src.Masked)
	} else if src.Type != "" && src.Type != "card" {
		parts = append(parts, src.Type)
	}
	return strings.Join(parts, " ")
}

// lastAnswer is a notification's last attempt's answer.
func lastAnswer(v webhook.AdminView) string {
	if len(v.Attempts) == 0 {
		return "no attempt"
	}
	a := v.Attempts[len(v.Attempts)-1]
	out := a.Error
	if a.HTTPCode != 0 {
		out = strings.TrimSpace("HTTP " + strconv.Itoa(a.HTTPCode) + " " + out)
	}
	return out
}

type errAmount string

func (e errAmount) Error() string { return string(e) }

// parseAmount reads a form's amount in major units ("12.50") as minor
// units of cur, exactly: no more decimals than the currency has, no sign,
// no exponent. "" is 0 (settle or void the whole amount).
func parseAmount(v, cur string) (int64, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	exp := exponent(cur)
	whole, frac, hasDot := strings.Cut(v, ".")
	if whole == "" {
		whole = "0"
	}
	if hasDot && (frac == "" || len(frac) > exp) {
		if exp == 0 {
			return 0, errAmount("the amount in " + cur + " has no decimals")
		}
		return 0, errAmount("the amount should have at most " + strconv.Itoa(exp) + " decimals in " + cur)
	}
	frac += strings.Repeat("0", exp-len(frac))
	for _, c := range whole + frac {
		if c < '0' || c > '9' {
			return 0, errAmount("the amount should be a number like 12.50")
		}
	}
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, errAmount("the amount is too large")
	}
	return n, nil
}
