package operator

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"time"
)

// SessionLifetime is how long a session lives from its sign-in at most.
// A session ends at this absolute expiry, after SessionIdleTimeout without
// use, at sign-out, or when its operator is disabled, whichever is first.
// Eight hours is a working day: an operator signs in once a shift.
const SessionLifetime = 8 * time.Hour

// SessionIdleTimeout is how long a session lives unused, by default
// (gatewayd --operator-idle-timeout, from MinSessionIdleTimeout to
// SessionLifetime): PCI DSS v4.0 requirement 8.2.8 asks for
// re-authentication after 15 minutes idle. The idle deadline is in the
// session's replicated record, so every node refuses an idle session from
// its own applied state; using the session renews it through the log at
// most about once a minute, not on every page view
// (transport/server/sessions.go).
const SessionIdleTimeout = 15 * time.Minute

// MinSessionIdleTimeout is the shortest idle timeout a node accepts.
const MinSessionIdleTimeout = time.Minute

// TokenPrefix starts every session token, so that a bearer token is told
// apart from the admin token at a glance (and by the admin API).
const TokenPrefix = "pgs_"

// NewToken makes a session token: 256 random bits, base64url.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// IsToken reports whether s has the shape of a session token.
func IsToken(s string) bool {
	return strings.HasPrefix(s, TokenPrefix) && len(s) == len(TokenPrefix)+43
}

// TokenHash is what the replicated state keeps of a token: its SHA-256,
// hex. The token has 256 random bits, so a plain hash cannot be reversed
// (no salt or slow hash needed, unlike a password).
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// CSRFToken is the CSRF token of a session: a hash of its token under
// another label, so it is never stored and the stored TokenHash does not
// reveal it.
func CSRFToken(token string) string {
	sum := sha256.Sum256([]byte("paygate csrf\n" + token))
	return hex.EncodeToString(sum[:16])
}

// emailBytesMax is RFC 5321's bound on an address.
const emailBytesMax = 254

// NormalizeEmail lower-cases an operator's email and reports whether it is
// a plain address (local@domain: no display name, no spaces, no control
// characters, at most 254 bytes).
func NormalizeEmail(s string) (string, bool) {
	if len(s) > emailBytesMax || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '<' || r == '>' }) {
		return "", false
	}
	local, domain, ok := strings.Cut(s, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") || !strings.Contains(domain, ".") ||
		strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") {
		return "", false
	}
	return strings.ToLower(s), true
}
