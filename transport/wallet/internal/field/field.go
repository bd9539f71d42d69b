// Package field decodes and checks token fields the same way for both
// wallets; its errors wrap wallet.ErrFormat and name the field, never its
// value.
package field

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/paygate/gateway/transport/wallet"
)

// MaxBytes bounds each encoded field before decoding.
const MaxBytes = 64 << 10

// Base64 decodes a required standard-base64 field (padding optional).
func Base64(name, s string) ([]byte, error) {
	if err := present(name, s); err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not base64", wallet.ErrFormat, name)
	}
	return b, nil
}

// Hex decodes a hex field; an empty optional field decodes to nil.
func Hex(name, s string, required bool) ([]byte, error) {
	if s == "" && !required {
		return nil, nil
	}
	if err := present(name, s); err != nil {
		return nil, err
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not hex", wallet.ErrFormat, name)
	}
	return b, nil
}

func present(name, s string) error {
	if s == "" {
		return fmt.Errorf("%w: %s missing", wallet.ErrFormat, name)
	}
	if len(s) > MaxBytes {
		return fmt.Errorf("%w: %s longer than %d bytes", wallet.ErrFormat, name, MaxBytes)
	}
	return nil
}

// Digits reports whether s is minLen to maxLen ASCII digits.
func Digits(s string, minLen, maxLen int) bool {
	if len(s) < minLen || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Clip bounds a caller-supplied string (a version, a method name) quoted in
// an error.
func Clip(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}
