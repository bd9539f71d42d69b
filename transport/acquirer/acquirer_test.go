package acquirer

import (
	"fmt"
	"strings"
	"testing"
)

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

func TestTestCardsAreLuhnValid(t *testing.T) {
	for _, pan := range []string{
		CardVisaApproved, CardMastercardApproved, CardAmexApproved, CardDoNotHonour,
		CardInsufficientFunds, CardExpired, CardInvalidCVV, CardUnreachable,
		CardRiskBlocked, Card3DSEnrolled, Card3DSNotEnrolled,
	} {
		if !Luhn(pan) {
			t.Errorf("%s fails Luhn", pan)
		}
	}
}

func TestEnrollmentString(t *testing.T) {
	for e, want := range map[Enrollment]string{Enrolled: "enrolled", NotEnrolled: "not_enrolled", NotApplicable: "not_applicable", 9: "unknown"} {
		if e.String() != want {
			t.Errorf("%d: %q", int(e), e.String())
		}
	}
	if NotApplicable.Letter() != "U" {
		t.Error("NotApplicable letter")
	}
	var zero Enrollment
	if zero != NotApplicable {
		t.Error("zero Enrollment is not NotApplicable")
	}
}

func TestAuthCodeAndARN(t *testing.T) {
	codes := make(map[string]bool)
	arns := make(map[string]bool)
	for i := range 2000 {
		ref := fmt.Sprintf("ref-%d", i)
		c, a := AuthCode(ref), ARN(ref)
		if c != AuthCode(ref) || a != ARN(ref) {
			t.Fatal("not deterministic")
		}
		if len(c) != 6 || strings.Trim(c, authCodeAlphabet) != "" {
			t.Fatalf("auth code %q", c)
		}
		if len(a) != 23 || !isDigits(a) || !luhnAny(a) {
			t.Fatalf("arn %q", a)
		}
		codes[c], arns[a] = true, true
	}
	if len(codes) < 1990 || len(arns) != 2000 {
		t.Errorf("poor spread: %d codes, %d arns", len(codes), len(arns))
	}
}

// luhnAny checks the Luhn digit of any digit string (Luhn caps length at 19).
func luhnAny(s string) bool {
	sum, double := 0, false
	for i := len(s) - 1; i >= 0; i-- {
		d := int(s[i] - '0')
		if double {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

func TestLuhn(t *testing.T) {
	cases := map[string]bool{
		"4111111111111111":     true,
		"4111111111111112":     false,
		"378282246310005":      true,
		"79927398713":          false, // valid Luhn but too short for a card
		"":                     false,
		"4111 1111 1111 1111":  false,
		"411111111111111a":     false,
		"4111111111111111000":  false,
		"6011000990139424":     true,
		"12345678901234567890": false, // too long
	}
	for pan, want := range cases {
		if Luhn(pan) != want {
			t.Errorf("Luhn(%q) = %v", pan, !want)
		}
	}
}

func TestCardInfo(t *testing.T) {
	var s SandboxDirectory
	cases := []struct {
		pan  string
		want CardInfo
	}{
		{"4111111111111111", CardInfo{"visa", "Sandbox Bank", "Credit", "US"}},
		{"5555555555554444", CardInfo{"mastercard", "Sandbox Mastercard Bank", "Debit", "GB"}},
		{"378282246310005", CardInfo{"amex", "Sandbox Amex", "Charge", "US"}},
		{"4000000000000002", CardInfo{"visa", "Sandbox Issuer", "Credit", "US"}},
		{"5105105105105100", CardInfo{"mastercard", "Sandbox Issuer", "Credit", "US"}},
		{"2221000000000009", CardInfo{"mastercard", "Sandbox Issuer", "Credit", "US"}},
		{"2720990000000007", CardInfo{"mastercard", "Sandbox Issuer", "Credit", "US"}},
		{"371449635398431", CardInfo{"amex", "Sandbox Issuer", "Credit", "US"}},
		{"340000000000009", CardInfo{"amex", "Sandbox Issuer", "Credit", "US"}},
		{"6011111111111117", CardInfo{"discover", "Sandbox Issuer", "Credit", "US"}},
		{"6500000000000002", CardInfo{"discover", "Sandbox Issuer", "Credit", "US"}},
		{"3528000000000007", CardInfo{"jcb", "Sandbox Issuer", "Credit", "US"}},
		{"3589000000000003", CardInfo{"jcb", "Sandbox Issuer", "Credit", "US"}},
		{"3527000000000000", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
		{"3590000000000000", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
		{"2220000000000000", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
		{"2721000000000000", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
		{"5600000000000000", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
		{"6012000000000000", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
		{"9999999999999995", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
		{"", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
		{"5", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
	}
	for _, tc := range cases {
		if got := s.CardInfo(tc.pan); got != tc.want {
			t.Errorf("CardInfo(%q) = %+v, want %+v", tc.pan, got, tc.want)
		}
	}
}

// Every decline code of contract section 12 has its response code, and an
// unknown code is a decline, never an approval.
func TestResponseTable(t *testing.T) {
	want := map[string]string{"00": "", "05": "3.08", "51": "3.02", "54": "2.09", "N7": "2.06", "59": "4.01", "91": "6.02", "96": "6.02"}
	for iso, code := range want {
		if r := ResponseFor(iso); r.Decline != code {
			t.Errorf("%s: decline %q, want %q", iso, r.Decline, code)
		}
	}
	if r := ResponseFor("Q9"); r.Decline != CodeDoNotHonour {
		t.Errorf("unknown code: %+v", r)
	}
	if ResponseFor(RespSuspectedFraud).Risk != RiskDecline || ResponseFor(RespDoNotHonour).Risk != RiskAccept {
		t.Error("risk decision")
	}
	seen := map[string]bool{}
	for _, r := range Responses {
		if seen[r.ISO] || len(r.ISO) != 2 {
			t.Errorf("row %q repeated or malformed", r.ISO)
		}
		seen[r.ISO] = true
	}
}

func TestRRNAndCardAcceptorID(t *testing.T) {
	seen := map[string]bool{}
	for i := range 5000 {
		ref := fmt.Sprintf("0193c0de-0000-7000-8000-%012d", i)
		r := RRN(ref)
		if len(r) != 12 || strings.Trim(r, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") != "" || r != RRN(ref) {
			t.Fatalf("RRN(%q) = %q", ref, r)
		}
		seen[r] = true
	}
	if len(seen) != 5000 {
		t.Fatalf("%d distinct RRNs of 5000", len(seen))
	}
	if got := CardAcceptorID("shop-1", "m1"); got != "shop-1         " {
		t.Errorf("short processing_mid: %q", got)
	}
	long := CardAcceptorID(strings.Repeat("x", 16), "m1")
	if len(long) != 15 || long != CardAcceptorID("", "m1") || long == CardAcceptorID("", "m2") {
		t.Errorf("derived MIDs %q %q %q", long, CardAcceptorID("", "m1"), CardAcceptorID("", "m2"))
	}
}
