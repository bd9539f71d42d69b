// Package signature computes and checks request and notification signatures
// (contract section 2):
//
//	signature = base64( lowercase_hex( HMAC-SHA512( secret, public_key + body + public_key ) ) )
//
// The API key pair signs merchant requests; the webhook key pair signs the
// notifications the gateway sends. Verification is constant-time.
package signature

import (
	"crypto/hmac"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"sync"
)

// hexLen is the length of the lowercase hex of a SHA-512 MAC; encodedLen its base64.
const (
	hexLen     = sha512.Size * 2
	encodedLen = (hexLen + 2) / 3 * 4
)

// Sign returns the signature of body for the key pair (publicKey, secret).
func Sign(publicKey, secret string, body []byte) string {
	var out [encodedLen]byte
	sign(out[:], publicKey, secret, body)
	return string(out[:])
}

// Verify reports whether sig is the signature of body for the key pair. It
// does not allocate for well-formed input and compares in constant time.
func Verify(publicKey, secret string, body []byte, sig []byte) bool {
	var want [encodedLen]byte
	sign(want[:], publicKey, secret, body)
	// ConstantTimeCompare returns 0 at once for a length mismatch, which only
	// reveals the (public) signature length.
	return subtle.ConstantTimeCompare(want[:], sig) == 1
}

func sign(dst []byte, publicKey, secret string, body []byte) {
	mac := hmac.New(sha512.New, []byte(secret))
	mac.Write([]byte(publicKey))
	mac.Write(body)
	mac.Write([]byte(publicKey))
	var sum [sha512.Size]byte
	var hx [hexLen]byte
	hex.Encode(hx[:], mac.Sum(sum[:0]))
	base64.StdEncoding.Encode(dst, hx[:])
}

// Key is a key pair prepared for repeated use: its HMAC states are pooled
// and reset between uses instead of rebuilt (the key schedule of
// HMAC-SHA512 is most of a short message's cost). Safe for concurrent use.
type Key struct {
	publicKey string
	pool      sync.Pool // hash.Hash keyed with the secret
}

// NewKey prepares a key pair.
func NewKey(publicKey, secret string) *Key {
	k := &Key{publicKey: publicKey}
	k.pool.New = func() any { return hmac.New(sha512.New, []byte(secret)) }
	return k
}

// Verify reports whether sig is the signature of body, in constant time.
func (k *Key) Verify(body, sig []byte) bool {
	var want [encodedLen]byte
	k.sign(want[:], body)
	return subtle.ConstantTimeCompare(want[:], sig) == 1
}

// Sign returns the signature of body.
func (k *Key) Sign(body []byte) string {
	var out [encodedLen]byte
	k.sign(out[:], body)
	return string(out[:])
}

func (k *Key) sign(dst, body []byte) {
	mac := k.pool.Get().(hash.Hash)
	mac.Reset()
	mac.Write([]byte(k.publicKey))
	mac.Write(body)
	mac.Write([]byte(k.publicKey))
	var sum [sha512.Size]byte
	var hx [hexLen]byte
	hex.Encode(hx[:], mac.Sum(sum[:0]))
	k.pool.Put(mac)
	base64.StdEncoding.Encode(dst, hx[:])
}
