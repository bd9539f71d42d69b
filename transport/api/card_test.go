package api

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

func TestCardBrand(t *testing.T) {
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
		if got := CardBrand(pan); got != want {
			t.Errorf("CardBrand(%q) = %q, want %q", pan, got, want)
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

func TestMaskPAN(t *testing.T) {
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
		if got := MaskPAN(pan); got != want {
			t.Errorf("MaskPAN(%q) = %q, want %q", pan, got, want)
		}
	}
}
