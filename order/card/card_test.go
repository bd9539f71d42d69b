package card

import (
	"testing"
	"time"
)

func mustUTC(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func TestBrand(t *testing.T) {
	cases := map[string]string{
		"4111111111111111":    "visa",
		"4000000000000002":    "visa",
		"5555555555554444":    "mastercard",
		"5105105105105100":    "mastercard",
		"2221000000000009":    "mastercard",
		"2223003122003222":    "mastercard",
		"2720999999999996":    "mastercard",
		"2220999999999999":    "unknown",
		"2721000000000000":    "unknown",
		"378282246310005":     "amex",
		"341111111111111":     "amex",
		"6011111111111117":    "discover",
		"6445644564456445":    "discover",
		"6500000000000002":    "discover",
		"3530111333300000":    "jcb",
		"3589000000000000":    "jcb",
		"6200000000000005":    "unionpay",
		"8100000000000000":    "unionpay",
		"30569309025904":      "diners",
		"36227206271667":      "diners",
		"3095000000000000":    "diners",
		"38520000023237":      "diners",
		"5000000000000000":    "unknown",
		"1234567890123456":    "unknown",
		"":                    "unknown",
		"5":                   "unknown",
		"x411111111111111":    "unknown",
		"6200000000000000000": "unionpay",
	}
	for pan, want := range cases {
		if got := Brand(pan); got != want {
			t.Errorf("Brand(%q) = %q, want %q", pan, got, want)
		}
	}
}

func TestLuhn(t *testing.T) {
	for _, pan := range []string{"4111111111111111", "5555555555554444", "378282246310005", "6011111111111117",
		"4000000000000002", "4000000000009995", "4000000000000069", "4000000000000127", "4000000000000119",
		"4100000000000019", "4000000000003220", "4000000000003063", "2223003122003222", "0"} {
		if !Luhn(pan) {
			t.Errorf("Luhn(%q) = false", pan)
		}
	}
	for _, pan := range []string{"4111111111111112", "1234567812345678", "", "4111 1111 1111 1111", "41111111111111a1"} {
		if Luhn(pan) {
			t.Errorf("Luhn(%q) = true", pan)
		}
	}
}

func TestIsAmex(t *testing.T) {
	if !IsAmex("378282246310005") || !IsAmex("341111111111111") {
		t.Error("34/37 not amex")
	}
	if IsAmex("4111111111111111") || IsAmex("3") || IsAmex("") || IsAmex("35") {
		t.Error("non-amex reported as amex")
	}
}

func TestMask(t *testing.T) {
	cases := map[string]string{
		"4111111111111111":    "411111******1111",
		"378282246310005":     "378282*****0005",
		"500000000009":        "500000**0009",
		"6200000000000000000": "620000*********0000",
		"12345678901":         "123456*8901",
		"1234567890":          "**********",
		"":                    "",
	}
	for pan, want := range cases {
		if got := Mask(pan); got != want {
			t.Errorf("Mask(%q) = %q, want %q", pan, got, want)
		}
	}
}

func TestExpiry(t *testing.T) {
	for in, want := range map[string]int{"1": 1, "01": 1, "9": 9, "12": 12} {
		if got, ok := ExpiryMonth(in); !ok || got != want {
			t.Errorf("ExpiryMonth(%q) = %d, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "0", "00", "13", "012", "1a", "-1", "+1"} {
		if _, ok := ExpiryMonth(in); ok {
			t.Errorf("ExpiryMonth(%q) accepted", in)
		}
	}
	for in, want := range map[string]int{"2030": 2030, "30": 2030, "00": 2000} {
		if got, ok := ExpiryYear(in); !ok || got != want {
			t.Errorf("ExpiryYear(%q) = %d, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "3", "203", "20300", "20a0"} {
		if _, ok := ExpiryYear(in); ok {
			t.Errorf("ExpiryYear(%q) accepted", in)
		}
	}
	// Valid through the last instant of the month, in UTC.
	if Expired(5, 2026, mustUTC(t, "2026-05-15T12:00:00Z")) {
		t.Error("05/2026 expired on 2026-05-15")
	}
	if Expired(12, 2026, mustUTC(t, "2026-12-31T23:59:59Z")) {
		t.Error("12/2026 expired before the end of December")
	}
	if !Expired(12, 2026, mustUTC(t, "2027-01-01T00:00:00Z")) {
		t.Error("12/2026 not expired on 2027-01-01")
	}
	// 2027-01-01 00:30 in UTC+1 is still 2026-12-31 in UTC.
	if Expired(12, 2026, mustUTC(t, "2027-01-01T00:30:00+01:00")) {
		t.Error("expiry must be compared in UTC")
	}
}

func TestCVVProblem(t *testing.T) {
	const visa, amex = "4111111111111111", "378282246310005"
	for _, tc := range []struct {
		cvv, pan string
		known    bool
		want     string
	}{
		{"123", visa, true, ""},
		{"1234", amex, true, ""},
		{"1234", visa, true, "should have exactly 3 digits"},
		{"12a", visa, true, "should have exactly 3 digits"},
		{"123", amex, true, "should have exactly 4 digits for an American Express card"},
		{"123", "", false, ""},
		{"1234", "", false, ""},
		{"12", "", false, "should have 3 or 4 digits"},
	} {
		if got := CVVProblem(tc.cvv, tc.pan, tc.known); got != tc.want {
			t.Errorf("CVVProblem(%q, %q, %v) = %q, want %q", tc.cvv, tc.pan, tc.known, got, tc.want)
		}
	}
}

// CheckDigit completes a number to one that passes Luhn: the last digit of
// every valid test card, from its other digits, as a string or as bytes.
func TestCheckDigit(t *testing.T) {
	for _, pan := range []string{"4111111111111111", "5555555555554444", "378282246310005", "6011111111111117", "79927398713"} {
		body, last := pan[:len(pan)-1], pan[len(pan)-1]
		if got := CheckDigit(body); got != last {
			t.Errorf("CheckDigit(%q) = %c, want %c", body, got, last)
		}
		if got := CheckDigit([]byte(body)); got != last {
			t.Errorf("CheckDigit([]byte(%q)) = %c, want %c", body, got, last)
		}
	}
}

func TestFindPAN(t *testing.T) {
	for text, want := range map[string]string{
		"<td>4111111111111111</td>":         "4111111111111111",
		"card 5555555555554444.":            "5555555555554444",
		"411111******1111":                  "",
		"4111111111111112":                  "", // fails Luhn
		"arn 74111111111111111111111":       "", // 23 digits: an ARN, not a card
		"hash 9dcb054111111111111111aa":     "", // inside a hex token
		"id dash-4111111111111111-x":        "4111111111111111",
		"1795841697728277114 is not a card": "",
	} {
		if got := FindPAN(text); got != want {
			t.Errorf("FindPAN(%q) = %q, want %q", text, got, want)
		}
	}
}
