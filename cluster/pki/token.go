package pki

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"strings"
)

// A join token lets a new node obtain a node certificate (docs/security.md).
// It reads v1.<id>.<secret>.<ca fingerprint>:
//
//   - id (16 hex) names the token, so a member finds its record;
//   - secret (32 hex, 128 bits) proves the joiner was given the token. The
//     cluster keeps only its SHA-256, replicated through the log, so any
//     member can check it and a copy of the store reveals no usable token;
//   - the fingerprint (64 hex) is the SHA-256 of the cluster CA certificate.
//     The joiner trusts the CA only if it has that fingerprint, and sends the
//     secret only over a TLS connection whose server certificate that CA
//     signed, as kubeadm's --discovery-token-ca-cert-hash pins the CA.

// Token is a parsed join token.
type Token struct {
	ID            string
	Secret        string
	CAFingerprint string
}

// ErrTokenFormat is a string that is not a join token.
var ErrTokenFormat = errors.New("not a join token: want v1.<id>.<secret>.<ca fingerprint>, as gatewayctl cluster join-token prints it")

// NewToken makes a token for the CA with that fingerprint.
func NewToken(caFingerprint string) Token {
	return Token{ID: randomHex(8), Secret: randomHex(16), CAFingerprint: caFingerprint}
}

func (t Token) String() string {
	return "v1." + t.ID + "." + t.Secret + "." + t.CAFingerprint
}

// SecretHash is what the cluster stores of the secret.
func (t Token) SecretHash() string { return HashSecret(t.Secret) }

// HashSecret is the lowercase hex SHA-256 of a token secret.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// SecretMatches compares a presented secret with a stored hash in constant
// time.
func SecretMatches(secret, storedHash string) bool {
	return subtle.ConstantTimeCompare([]byte(HashSecret(secret)), []byte(storedHash)) == 1
}

// ParseToken reads a token string.
func ParseToken(s string) (Token, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) != 4 || parts[0] != "v1" || !isHex(parts[1], 16) || !isHex(parts[2], 32) || !isHex(parts[3], 64) {
		return Token{}, ErrTokenFormat
	}
	return Token{ID: parts[1], Secret: parts[2], CAFingerprint: parts[3]}, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail
	}
	return hex.EncodeToString(b)
}
