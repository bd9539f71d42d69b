package vault

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
)

// TokenPrefix starts every payment token.
const TokenPrefix = "tok_"

// tokenBytes is the entropy of a payment token: 256 bits.
const tokenBytes = 32

// TokenLen is the length of a payment token: the prefix and 43 base64url
// characters.
const TokenLen = len(TokenPrefix) + (tokenBytes*8+5)/6

// NewToken returns an opaque payment token: 32 random bytes from crypto/rand,
// base64url without padding, prefixed "tok_". It carries no card data; the
// caller maps it to the sealed card and to the merchant it was issued to.
func NewToken() (string, error) {
	var b [tokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("vault: random token: %w", err)
	}
	// Encoded after the prefix in one buffer: only the string is allocated.
	var tok [TokenLen]byte
	copy(tok[:], TokenPrefix)
	base64.RawURLEncoding.Encode(tok[len(TokenPrefix):], b[:])
	return string(tok[:]), nil
}

// ValidTokenFormat reports whether s has the shape of a token made by
// NewToken. It says nothing about whether the token was ever issued.
func ValidTokenFormat(s string) bool {
	if len(s) != TokenLen || !strings.HasPrefix(s, TokenPrefix) {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s[len(TokenPrefix):])
	return err == nil && len(b) == tokenBytes
}
