package walleta

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
)

// gcmNonceSize is the provider's 16-byte all-zero GCM initialisation vector.
const gcmNonceSize = 16

// kdfAlgorithmID is the KDF's AlgorithmID: a length byte (13) and
// "id-aes256-GCM".
var kdfAlgorithmID = append([]byte{0x0d}, "id-aes256-GCM"...)

// kdfPartyU is the KDF's PartyUInfo.
const kdfPartyU = "Apple"

// DeriveKeyEC is the EC_v1 key derivation: the NIST SP 800-56A single-step
// (concatenation) KDF with SHA-256 and one round,
//
//	SHA-256(00000001 ‖ Z ‖ 0x0D ‖ "id-aes256-GCM" ‖ "Apple" ‖ SHA-256(merchantID))
//
// where Z is the ECDH shared secret (the x-coordinate). It returns the
// 32-byte AES-256-GCM key.
func DeriveKeyEC(z []byte, merchantID string) []byte {
	partyV := sha256.Sum256([]byte(merchantID))
	h := sha256.New()
	h.Write([]byte{0, 0, 0, 1})
	h.Write(z)
	h.Write(kdfAlgorithmID)
	h.Write([]byte(kdfPartyU))
	h.Write(partyV[:])
	return h.Sum(nil)
}

// processingPublicKeyHash is PublicKeyHash of a processing private key.
func processingPublicKeyHash(k crypto.PrivateKey) ([]byte, error) {
	switch k := k.(type) {
	case *ecdsa.PrivateKey:
		return PublicKeyHash(&k.PublicKey)
	case *ecdh.PrivateKey:
		return PublicKeyHash(k.PublicKey())
	case *rsa.PrivateKey:
		return PublicKeyHash(&k.PublicKey)
	default:
		return nil, fmt.Errorf("processing key: type %T not supported", k)
	}
}

// PublicKeyHash is SHA-256 of a processing public key's SubjectPublicKeyInfo
// DER: what header.publicKeyHash carries (base64) in a token for that key.
// pub is *ecdsa.PublicKey or *ecdh.PublicKey (P-256) or *rsa.PublicKey.
func PublicKeyHash(pub crypto.PublicKey) ([]byte, error) {
	if k, ok := pub.(*ecdh.PublicKey); ok && k.Curve() != ecdh.P256() {
		return nil, errors.New("processing key: ECDH key is not P-256")
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("processing key: %v", err)
	}
	h := sha256.Sum256(der)
	return h[:], nil
}

// selectKey returns the configured processing key whose public key hash is
// pkh and whose type fits version.
func selectKey(cfg Config, version string, pkh []byte) (crypto.PrivateKey, error) {
	for _, k := range cfg.keys() {
		h, err := processingPublicKeyHash(k)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		if subtle.ConstantTimeCompare(h, pkh) != 1 {
			continue
		}
		_, isRSA := k.(*rsa.PrivateKey)
		if isRSA != (version == VersionRSA) {
			return nil, fmt.Errorf("%w: publicKeyHash names a key that does not fit %s", ErrWrongMerchant, version)
		}
		return k, nil
	}
	return nil, fmt.Errorf("%w: publicKeyHash matches no configured processing key", ErrWrongMerchant)
}

// decryptEC opens EC_v1 data: ECDH with the ephemeral key, DeriveKeyEC,
// AES-256-GCM.
func decryptEC(key crypto.PrivateKey, merchantID string, ephemeralSPKI, data []byte) ([]byte, error) {
	var priv *ecdh.PrivateKey
	switch k := key.(type) {
	case *ecdh.PrivateKey:
		priv = k
	case *ecdsa.PrivateKey:
		var err error
		if priv, err = k.ECDH(); err != nil {
			return nil, fmt.Errorf("%w: processing key: %v", ErrConfig, err)
		}
	default:
		return nil, fmt.Errorf("%w: EC_v1 needs an EC processing key", ErrWrongMerchant)
	}
	if priv.Curve() != ecdh.P256() {
		return nil, fmt.Errorf("%w: EC_v1 needs a P-256 processing key", ErrWrongMerchant)
	}
	pubAny, err := x509.ParsePKIXPublicKey(ephemeralSPKI)
	if err != nil {
		return nil, fmt.Errorf("%w: header.ephemeralPublicKey is not an EC public key", ErrFormat)
	}
	var pub *ecdh.PublicKey
	switch p := pubAny.(type) {
	case *ecdsa.PublicKey:
		if pub, err = p.ECDH(); err != nil {
			return nil, fmt.Errorf("%w: header.ephemeralPublicKey: %v", ErrFormat, err)
		}
	case *ecdh.PublicKey:
		pub = p
	default:
		return nil, fmt.Errorf("%w: header.ephemeralPublicKey is not an EC public key", ErrFormat)
	}
	if pub.Curve() != ecdh.P256() {
		return nil, fmt.Errorf("%w: header.ephemeralPublicKey is not on P-256", ErrFormat)
	}
	z, err := priv.ECDH(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: ECDH failed", ErrDecrypt)
	}
	return openGCM(DeriveKeyEC(z, merchantID), data)
}

// decryptRSA opens RSA_v1 data: RSA-OAEP (SHA-256, MGF1-SHA-256) unwraps a
// 16-byte key for AES-128-GCM.
func decryptRSA(key crypto.PrivateKey, wrapped, data []byte) ([]byte, error) {
	priv, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: RSA_v1 needs an RSA processing key", ErrWrongMerchant)
	}
	sym, err := rsa.DecryptOAEP(sha256.New(), nil, priv, wrapped, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot unwrap header.wrappedKey", ErrDecrypt)
	}
	if len(sym) != 16 {
		return nil, fmt.Errorf("%w: unwrapped key is %d bytes (want 16)", ErrDecrypt, len(sym))
	}
	return openGCM(sym, data)
}

func openGCM(key, data []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecrypt, err)
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, gcmNonceSize)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecrypt, err)
	}
	if len(data) < gcm.Overhead() {
		return nil, fmt.Errorf("%w: data shorter than the GCM tag", ErrDecrypt)
	}
	plain, err := gcm.Open(nil, make([]byte, gcmNonceSize), data, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: GCM authentication failed", ErrDecrypt)
	}
	return plain, nil
}

// SealGCM is the encryption side of the token format (AES-GCM, 16-byte
// zero nonce, no additional data), for token makers.
func SealGCM(key, plain []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, gcmNonceSize)
	if err != nil {
		return nil, err
	}
	return gcm.Seal(nil, make([]byte, gcmNonceSize), plain, nil), nil
}
