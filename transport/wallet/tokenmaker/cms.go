package tokenmaker

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"slices"
	"time"

	"github.com/paygate/gateway/transport/wallet/internal/ber"
	"github.com/paygate/gateway/transport/wallet/internal/oid"
)

var (
	asn1Null        = []byte{0x05, 0x00}
	sha256Algorithm = seq(mustMarshal(oid.SHA256), asn1Null)
)

// SignCMS makes a detached CMS SignedData (RFC 5652) over content, signed
// by key (EC: ecdsa-with-SHA256, RSA: sha256WithRSAEncryption) for the
// certificate signer, carrying certs and the signed attributes contentType,
// signingTime, CMSAlgorithmProtection and messageDigest. The outer layers
// and the certificate set use indefinite lengths, like the provider's
// tokens; the rest is DER.
func SignCMS(content []byte, signer *x509.Certificate, key crypto.Signer, certs []*x509.Certificate, signingTime time.Time) ([]byte, error) {
	digest := sha256.Sum256(content)
	sigAlg := seq(mustMarshal(oid.ECDSAWithSHA256))
	if !leafKeyIsEC(key) {
		sigAlg = seq(mustMarshal(oid.SHA256WithRSA), asn1Null)
	}
	st, err := asn1.Marshal(signingTime.UTC())
	if err != nil {
		return nil, err
	}
	attrs := [][]byte{
		attribute(oid.AttrContentType, mustMarshal(oid.Data)),
		attribute(oid.AttrSigningTime, st),
		attribute(oid.AttrAlgProtection, seq(sha256Algorithm,
			ber.Encode(ber.ClassContextSpecific, true, 1, bytes.Join(children(sigAlg), nil)))),
		attribute(oid.AttrMessageDigest, ber.Encode(ber.ClassUniversal, false, ber.TagOctetString, digest[:])),
	}
	slices.SortFunc(attrs, bytes.Compare) // DER order of a SET OF
	attrBody := bytes.Join(attrs, nil)
	toSign := sha256.Sum256(ber.Encode(ber.ClassUniversal, true, ber.TagSet, attrBody))
	sig, err := key.Sign(rand.Reader, toSign[:], crypto.SHA256)
	if err != nil {
		return nil, err
	}
	serial, err := asn1.Marshal(signer.SerialNumber)
	if err != nil {
		return nil, err
	}
	signerInfo := seq(
		mustMarshal(1),
		seq(signer.RawIssuer, serial),
		sha256Algorithm,
		ber.Encode(ber.ClassContextSpecific, true, 0, attrBody),
		sigAlg,
		ber.Encode(ber.ClassUniversal, false, ber.TagOctetString, sig),
	)
	var certBytes [][]byte
	for _, c := range certs {
		certBytes = append(certBytes, c.Raw)
	}
	signedData := indefinite(ber.ClassUniversal, ber.TagSequence,
		mustMarshal(1),
		set(sha256Algorithm),
		indefinite(ber.ClassUniversal, ber.TagSequence, mustMarshal(oid.Data)),
		indefinite(ber.ClassContextSpecific, 0, certBytes...),
		set(signerInfo),
	)
	return indefinite(ber.ClassUniversal, ber.TagSequence,
		mustMarshal(oid.SignedData),
		indefinite(ber.ClassContextSpecific, 0, signedData),
	), nil
}

func attribute(id asn1.ObjectIdentifier, value []byte) []byte {
	return seq(mustMarshal(id), set(value))
}

func seq(parts ...[]byte) []byte {
	return ber.Encode(ber.ClassUniversal, true, ber.TagSequence, bytes.Join(parts, nil))
}

func set(parts ...[]byte) []byte {
	return ber.Encode(ber.ClassUniversal, true, ber.TagSet, bytes.Join(parts, nil))
}

func indefinite(class, tag int, parts ...[]byte) []byte {
	id := ber.Encode(class, true, tag, nil) // identifier and a zero length
	out := append(id[:len(id)-1], 0x80)
	out = append(out, bytes.Join(parts, nil)...)
	return append(out, 0, 0)
}

// children returns the encodings of a constructed element's elements.
func children(der []byte) [][]byte {
	n, err := ber.Parse(der)
	if err != nil {
		panic(err)
	}
	out := make([][]byte, len(n.Children))
	for i, c := range n.Children {
		out[i] = c.DER()
	}
	return out
}

func mustMarshal(v any) []byte {
	b, err := asn1.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// leafKeyIsEC reports the signature algorithm family of a signing key.
func leafKeyIsEC(k crypto.Signer) bool {
	_, ok := k.Public().(*ecdsa.PublicKey)
	return ok
}
