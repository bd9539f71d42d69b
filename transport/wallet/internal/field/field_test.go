package field

import (
	"errors"
	"strings"
	"testing"

	"github.com/paygate/gateway/transport/wallet"
)

func TestBase64(t *testing.T) {
	for _, s := range []string{"AQID", "AQI=", "AQI"} {
		if _, err := Base64("f", s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"", "%%", strings.Repeat("A", MaxBytes+4)} {
		if _, err := Base64("f", s); !errors.Is(err, wallet.ErrFormat) {
			t.Errorf("%.8q: %v", s, err)
		}
	}
}

func TestHex(t *testing.T) {
	if b, err := Hex("f", "", false); err != nil || b != nil {
		t.Errorf("optional empty: %v %v", b, err)
	}
	if _, err := Hex("f", "", true); !errors.Is(err, wallet.ErrFormat) {
		t.Errorf("required empty: %v", err)
	}
	if b, err := Hex("f", "0aFF", true); err != nil || len(b) != 2 {
		t.Errorf("hex: %v %v", b, err)
	}
	if _, err := Hex("f", "0g", true); !errors.Is(err, wallet.ErrFormat) || strings.Contains(err.Error(), "0g") {
		t.Errorf("bad hex: %v", err)
	}
}

func TestDigitsAndClip(t *testing.T) {
	if !Digits("0123456789012", 12, 19) || Digits("12345678901", 12, 19) || Digits("12345678901a", 12, 19) {
		t.Error("Digits")
	}
	if got := Clip(strings.Repeat("x", 40)); len(got) != 35 {
		t.Errorf("Clip: %q", got)
	}
}
