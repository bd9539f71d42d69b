// Package vault protects card data at rest (contract section 8).
//
// Card data is sealed with envelope encryption: every Seal draws a fresh
// random 256-bit data key, encrypts the plaintext under it with AES-256-GCM,
// and wraps the data key with AES-256-GCM under the key-encryption key (KEK)
// given to New. The result is a single self-describing blob:
//
//	offset  size  field
//	0       1     format version (1)
//	1       8     key id: first 8 bytes of SHA-256(KEK)
//	9       12    nonce of the wrapped data key
//	21      48    wrapped data key (32 bytes + 16-byte GCM tag)
//	69      12    nonce of the data ciphertext
//	81      n+16  ciphertext of the plaintext (+ GCM tag)
//
// The caller's additional authenticated data (AAD), e.g. merchant id and card
// id, is bound into both GCM operations together with the blob header, so a
// blob copied to another record, or with any byte altered, fails to open.
// The key id selects the KEK that opens a blob: the current one, or the
// previous one during a key rotation (WithPrevious).
//
// The card verification value has no place here: Card has no CVV field and
// nothing in this package stores one.
package vault

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// KeySize is the size in bytes of the key-encryption key and of data keys.
const KeySize = 32

// KeyIDSize is the size in bytes of the key id stored in each blob.
const KeyIDSize = 8

const (
	version1    = 1
	nonceSize   = 12
	tagSize     = 16
	wrappedSize = KeySize + tagSize
	headerSize  = 1 + KeyIDSize
	offWrapNon  = headerSize
	offWrapped  = offWrapNon + nonceSize
	offDataNon  = offWrapped + wrappedSize
	offData     = offDataNon + nonceSize
	minBlobSize = offData + tagSize
)

// Errors returned by Open. They never include key or plaintext material.
var (
	// ErrMalformed reports a blob that is truncated or of an unknown version.
	ErrMalformed = errors.New("vault: malformed blob")
	// ErrUnknownKey reports a blob sealed under a different key-encryption key.
	ErrUnknownKey = errors.New("vault: blob sealed under an unknown key")
	// ErrDecrypt reports a blob that failed authentication: tampered, or
	// opened with AAD other than the one it was sealed with.
	ErrDecrypt = errors.New("vault: blob failed authentication")
)

// Vault seals and opens data under one key-encryption key. It is safe for
// concurrent use.
type Vault struct {
	kek   cipher.AEAD
	keyID [KeyIDSize]byte
	// prev opens blobs sealed under the previous KEK during a rotation
	// (nil: none); nothing is sealed under it.
	prev   cipher.AEAD
	prevID [KeyIDSize]byte
}

// WithPrevious returns a vault that seals under v's key and opens blobs
// sealed under v's key or under previous (a key rotation: contract
// section 14). The same key as v's is refused: it would hide a mistake in
// the key files.
func (v *Vault) WithPrevious(previous []byte) (*Vault, error) {
	if len(previous) != KeySize {
		return nil, fmt.Errorf("vault: previous key-encryption key must be %d bytes, got %d", KeySize, len(previous))
	}
	id := KeyID(previous)
	if id == v.keyID {
		return nil, errors.New("vault: the previous key is the current key")
	}
	aead, err := newGCM(previous)
	if err != nil {
		return nil, err
	}
	w := *v
	w.prev, w.prevID = aead, id
	return &w, nil
}

// HasPrevious reports whether the vault opens blobs of a previous key.
func (v *Vault) HasPrevious() bool { return v.prev != nil }

// SealedUnderCurrent reports whether blob names the current key. A
// malformed blob does not.
func (v *Vault) SealedUnderCurrent(blob []byte) bool {
	return len(blob) >= headerSize && bytes.Equal(blob[1:headerSize], v.keyID[:])
}

// Reseal opens blob (under either key) and seals its plaintext again under
// the current key, bound to the same aad.
func (v *Vault) Reseal(blob, aad []byte) ([]byte, error) {
	pt, err := v.Open(blob, aad)
	if err != nil {
		return nil, err
	}
	defer clear(pt)
	return v.Seal(pt, aad)
}

// New returns a Vault for a 32-byte (AES-256) key-encryption key. The key
// bytes are not retained beyond the cipher's expanded key schedule.
func New(kek []byte) (*Vault, error) {
	if len(kek) != KeySize {
		return nil, fmt.Errorf("vault: key-encryption key must be %d bytes, got %d", KeySize, len(kek))
	}
	aead, err := newGCM(kek)
	if err != nil {
		return nil, err
	}
	v := &Vault{kek: aead}
	v.keyID = KeyID(kek)
	return v, nil
}

// KeyID returns the key id recorded in blobs sealed under kek: the first 8
// bytes of its SHA-256 digest.
func KeyID(kek []byte) [KeyIDSize]byte {
	sum := sha256.Sum256(kek)
	var id [KeyIDSize]byte
	copy(id[:], sum[:KeyIDSize])
	return id
}

// KeyID returns the id of the vault's key-encryption key.
func (v *Vault) KeyID() [KeyIDSize]byte { return v.keyID }

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	return aead, nil
}

// boundAADRoom is the room Seal keeps for the bound AAD without allocating
// it: the header and a card's AAD(merchant id, card id) take ~75 bytes. A
// longer one is allocated as before. (88: Seal's scratch is then 144 bytes,
// what its three allocations took.)
const boundAADRoom = 88

// appendBoundAAD appends the AAD given to both GCM operations to dst: the
// blob header followed by the caller's AAD. Binding the header means the
// version and key id cannot be altered either.
func appendBoundAAD(dst, header, aad []byte) []byte {
	dst = append(dst, header...)
	return append(dst, aad...)
}

// Seal encrypts plaintext bound to aad and returns a self-describing blob.
// Two seals of the same input differ (fresh data key and nonces).
func (v *Vault) Seal(plaintext, aad []byte) ([]byte, error) {
	// The data key, the nonces and the bound AAD (when it fits, as a
	// merchant's card AAD does) share one array: each escapes into the
	// ciphers anyway, and one allocation per seal costs less than three.
	var scratch struct {
		dataKey [KeySize]byte
		nonces  [2 * nonceSize]byte
		bound   [boundAADRoom]byte
	}
	dataKey := scratch.dataKey[:]
	defer clear(dataKey)
	if _, err := rand.Read(dataKey); err != nil {
		return nil, fmt.Errorf("vault: random data key: %w", err)
	}
	dataAEAD, err := newGCM(dataKey)
	if err != nil {
		return nil, err
	}

	var header [headerSize]byte
	header[0] = version1
	copy(header[1:], v.keyID[:])
	nonces := scratch.nonces[:]
	if _, err := rand.Read(nonces); err != nil {
		return nil, fmt.Errorf("vault: random nonce: %w", err)
	}
	wrapNonce, dataNonce := nonces[:nonceSize], nonces[nonceSize:]
	bound := appendBoundAAD(scratch.bound[:0], header[:], aad)

	blob := make([]byte, 0, offData+len(plaintext)+tagSize)
	blob = append(blob, header[:]...)
	blob = append(blob, wrapNonce...)
	blob = v.kek.Seal(blob, wrapNonce, dataKey, bound)
	blob = append(blob, dataNonce...)
	blob = dataAEAD.Seal(blob, dataNonce, plaintext, bound)
	return blob, nil
}

// Open authenticates and decrypts a blob made by Seal with the same aad.
// It fails with ErrMalformed, ErrUnknownKey or ErrDecrypt.
func (v *Vault) Open(blob, aad []byte) ([]byte, error) {
	if len(blob) < minBlobSize || blob[0] != version1 {
		return nil, ErrMalformed
	}
	kek := v.kek
	if !bytes.Equal(blob[1:headerSize], v.keyID[:]) {
		if v.prev == nil || !bytes.Equal(blob[1:headerSize], v.prevID[:]) {
			return nil, ErrUnknownKey
		}
		kek = v.prev
	}
	bound := appendBoundAAD(make([]byte, 0, headerSize+len(aad)), blob[:headerSize], aad)

	dataKey, err := kek.Open(nil, blob[offWrapNon:offWrapped], blob[offWrapped:offDataNon], bound)
	if err != nil {
		return nil, ErrDecrypt
	}
	defer clear(dataKey)
	dataAEAD, err := newGCM(dataKey)
	if err != nil {
		return nil, err
	}
	plaintext, err := dataAEAD.Open(nil, blob[offDataNon:offData], blob[offData:], bound)
	if err != nil {
		return nil, ErrDecrypt
	}
	return plaintext, nil
}

// AAD joins parts (e.g. merchant id and card id) into an unambiguous AAD
// value: each part is length-prefixed, so ("ab","c") and ("a","bc") differ.
func AAD(parts ...string) []byte {
	n := 0
	for _, p := range parts {
		n += 4 + len(p)
	}
	b := make([]byte, 0, n)
	for _, p := range parts {
		b = appendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

func appendUint32(b []byte, v uint32) []byte {
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}
