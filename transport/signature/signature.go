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

// Verify reports whether sig is the signature of body for the key pair, in
// constant time. For repeated use of one key pair, Key is cheaper.
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
	// publicKey is kept as bytes: converting a string for each Write would
	// allocate, since the hash is behind an interface.
	publicKey []byte
	pool      sync.Pool // *keyedMAC
}

// keyedMAC is an HMAC state keyed with the secret, with room for its sum:
// a sum on the stack would escape through the hash.Hash interface.
type keyedMAC struct {
	mac hash.Hash
	sum [sha512.Size]byte
}

// NewKey prepares a key pair.
func NewKey(publicKey, secret string) *Key {
	k := &Key{publicKey: []byte(publicKey)}
	k.pool.New = func() any { return &keyedMAC{mac: hmac.New(sha512.New, []byte(secret))} }
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
	m := k.pool.Get().(*keyedMAC)
	m.mac.Reset()
	m.mac.Write(k.publicKey)
	m.mac.Write(body)
	m.mac.Write(k.publicKey)
	var hx [hexLen]byte
	hex.Encode(hx[:], m.mac.Sum(m.sum[:0]))
	k.pool.Put(m)
	base64.StdEncoding.Encode(dst, hx[:])
}
