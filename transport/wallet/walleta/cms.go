package walleta

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/paygate/gateway/transport/wallet/internal/ber"
	"github.com/paygate/gateway/transport/wallet/internal/oid"
)

var errNotSignedDataShape = fmt.Errorf("%w: signature is not a CMS SignedData", ErrFormat)

// Bounds on the CMS structure (a real token has 2 certificates and 4
// signed attributes).
const (
	maxCertificatesCount     = 10
	maxSignedAttributesCount = 32
)

// signedData is what verifySignature needs from the CMS structure.
type signedData struct {
	certs       []*x509.Certificate
	sid         *ber.Node
	digestAlg   asn1.ObjectIdentifier
	signedAttrs *ber.Node // [0] IMPLICIT SET OF Attribute
	sigAlg      asn1.ObjectIdentifier
	signature   []byte
}

// parseSignedData walks ContentInfo → SignedData → the single SignerInfo.
func parseSignedData(der []byte) (*signedData, error) {
	root, err := ber.Parse(der)
	if err != nil {
		return nil, fmt.Errorf("%w: signature: %v", ErrFormat, err)
	}
	// ContentInfo ::= SEQUENCE { contentType, [0] EXPLICIT content }
	if !isUniversal(root, ber.TagSequence, true) || len(root.Children) != 2 {
		return nil, errNotSignedDataShape
	}
	if id, err := parseOID(root.Children[0]); err != nil || !id.Equal(oid.SignedData) {
		return nil, errNotSignedDataShape
	}
	wrap := root.Children[1]
	if !isContext(wrap, 0, true) || len(wrap.Children) != 1 {
		return nil, errNotSignedDataShape
	}
	sd := wrap.Children[0]
	// SignedData ::= SEQUENCE { version, digestAlgorithms SET,
	//   encapContentInfo, [0] certificates OPTIONAL, [1] crls OPTIONAL,
	//   signerInfos SET }
	if !isUniversal(sd, ber.TagSequence, true) || len(sd.Children) < 4 {
		return nil, errNotSignedDataShape
	}
	encap := sd.Children[2]
	if !isUniversal(encap, ber.TagSequence, true) || len(encap.Children) == 0 {
		return nil, errNotSignedDataShape
	}
	if id, err := parseOID(encap.Children[0]); err != nil || !id.Equal(oid.Data) {
		return nil, fmt.Errorf("%w: signed content type is not id-data", ErrFormat)
	}
	out := &signedData{}
	var signerInfos *ber.Node
	for _, n := range sd.Children[3:] {
		switch {
		case isContext(n, 0, true) && out.certs == nil && signerInfos == nil:
			if len(n.Children) > maxCertificatesCount {
				return nil, fmt.Errorf("%w: more than %d certificates", ErrFormat, maxCertificatesCount)
			}
			for _, c := range n.Children {
				cert, err := x509.ParseCertificate(c.DER())
				if err != nil {
					return nil, fmt.Errorf("%w: certificate in signature: %v", ErrFormat, err)
				}
				out.certs = append(out.certs, cert)
			}
		case isContext(n, 1, true) && signerInfos == nil: // crls: not used
		case isUniversal(n, ber.TagSet, true) && signerInfos == nil:
			signerInfos = n
		default:
			return nil, errNotSignedDataShape
		}
	}
	if signerInfos == nil {
		return nil, errNotSignedDataShape
	}
	if len(signerInfos.Children) != 1 {
		return nil, fmt.Errorf("%w: %d signers (want 1)", ErrFormat, len(signerInfos.Children))
	}
	// SignerInfo ::= SEQUENCE { version, sid, digestAlgorithm,
	//   [0] signedAttrs OPTIONAL, signatureAlgorithm, signature,
	//   [1] unsignedAttrs OPTIONAL }
	si := signerInfos.Children[0]
	if !isUniversal(si, ber.TagSequence, true) || len(si.Children) < 5 {
		return nil, fmt.Errorf("%w: malformed SignerInfo", ErrFormat)
	}
	out.sid = si.Children[1]
	if out.digestAlg, err = parseAlgorithm(si.Children[2]); err != nil {
		return nil, err
	}
	rest := si.Children[3:]
	if isContext(rest[0], 0, true) {
		out.signedAttrs = rest[0]
		rest = rest[1:]
	}
	if len(rest) < 2 {
		return nil, fmt.Errorf("%w: malformed SignerInfo", ErrFormat)
	}
	if out.sigAlg, err = parseAlgorithm(rest[0]); err != nil {
		return nil, err
	}
	if !isUniversal(rest[1], ber.TagOctetString, rest[1].Constructed) {
		return nil, fmt.Errorf("%w: malformed SignerInfo signature", ErrFormat)
	}
	out.signature = rest[1].Bytes()
	return out, nil
}

// verifySignature checks the detached CMS signature over content and the
// certificate chain, and returns the signed signing time (the caller checks
// its age).
func verifySignature(sig, content []byte, roots *x509.CertPool, now time.Time) (time.Time, error) {
	sd, err := parseSignedData(sig)
	if err != nil {
		return time.Time{}, err
	}
	leaf, err := sd.signer()
	if err != nil {
		return time.Time{}, err
	}
	if err := verifyChain(leaf, sd.certs, roots, now); err != nil {
		return time.Time{}, err
	}
	if !sd.digestAlg.Equal(oid.SHA256) {
		return time.Time{}, fmt.Errorf("%w: digest algorithm %s (want SHA-256)", ErrSignature, sd.digestAlg)
	}
	if sd.signedAttrs == nil {
		return time.Time{}, fmt.Errorf("%w: no signed attributes", ErrSignature)
	}
	attrs, err := parseSignedAttributes(sd.signedAttrs)
	if err != nil {
		return time.Time{}, err
	}
	want := sha256.Sum256(content)
	if subtle.ConstantTimeCompare(attrs.messageDigest, want[:]) != 1 {
		return time.Time{}, fmt.Errorf("%w: messageDigest does not match the token's content", ErrSignature)
	}
	// The signature covers the DER encoding of the attributes as a SET
	// (RFC 5652 5.4). Try the encoding as sent, then sorted as DER
	// demands, for signers that sorted only when signing.
	var verr error
	for _, enc := range signedAttributeEncodings(sd.signedAttrs) {
		if verr = verifyWithKey(leaf.PublicKey, sd.sigAlg, enc, sd.signature); verr == nil {
			break
		}
	}
	if verr != nil {
		return time.Time{}, verr
	}
	if attrs.signingTime.IsZero() {
		return time.Time{}, fmt.Errorf("%w: no signingTime attribute", ErrSignature)
	}
	return attrs.signingTime, nil
}

// signer returns the certificate the SignerInfo's sid names.
func (sd *signedData) signer() (*x509.Certificate, error) {
	sid := sd.sid
	switch {
	case isUniversal(sid, ber.TagSequence, true) && len(sid.Children) == 2:
		// IssuerAndSerialNumber ::= SEQUENCE { issuer Name, serialNumber }
		issuer := sid.Children[0].DER()
		serial := new(big.Int)
		if _, err := asn1.Unmarshal(sid.Children[1].DER(), &serial); err != nil {
			return nil, fmt.Errorf("%w: signer serial number: %v", ErrFormat, err)
		}
		for _, c := range sd.certs {
			if c.SerialNumber.Cmp(serial) == 0 && bytes.Equal(c.RawIssuer, issuer) {
				return c, nil
			}
		}
	case isContext(sid, 0, false): // subjectKeyIdentifier
		for _, c := range sd.certs {
			if len(c.SubjectKeyId) > 0 && bytes.Equal(c.SubjectKeyId, sid.Content) {
				return c, nil
			}
		}
	default:
		return nil, fmt.Errorf("%w: malformed signer identifier", ErrFormat)
	}
	return nil, fmt.Errorf("%w: signer certificate not in the signature", ErrChain)
}

// verifyChain requires leaf → intermediate → configured root, the leaf
// marker on the leaf and the intermediate marker on the intermediate.
func verifyChain(leaf *x509.Certificate, certs []*x509.Certificate, roots *x509.CertPool, now time.Time) error {
	if !hasExtension(leaf, OIDLeafMarker) {
		return fmt.Errorf("%w: signing certificate lacks the leaf marker extension %s", ErrChain, OIDLeafMarker)
	}
	inter := x509.NewCertPool()
	for _, c := range certs {
		if c != leaf {
			inter.AddCert(c)
		}
	}
	chains, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrChain, err)
	}
	for _, ch := range chains {
		if len(ch) == 3 && hasExtension(ch[1], OIDIntermediateMarker) {
			return nil
		}
	}
	return fmt.Errorf("%w: no chain leaf → intermediate (with marker extension %s) → root", ErrChain, OIDIntermediateMarker)
}

func hasExtension(c *x509.Certificate, oid asn1.ObjectIdentifier) bool {
	for _, e := range c.Extensions {
		if e.Id.Equal(oid) {
			return true
		}
	}
	return false
}

type signedAttributes struct {
	messageDigest []byte
	signingTime   time.Time
}

// parseSignedAttributes reads contentType, messageDigest and signingTime;
// other attributes are accepted and ignored. Each of the three may appear
// once, with one value.
func parseSignedAttributes(set *ber.Node) (*signedAttributes, error) {
	if len(set.Children) > maxSignedAttributesCount {
		return nil, fmt.Errorf("%w: more than %d signed attributes", ErrFormat, maxSignedAttributesCount)
	}
	out := &signedAttributes{}
	seen := map[string]bool{}
	for _, a := range set.Children {
		// Attribute ::= SEQUENCE { attrType OID, attrValues SET OF ANY }
		if !isUniversal(a, ber.TagSequence, true) || len(a.Children) != 2 ||
			!isUniversal(a.Children[1], ber.TagSet, true) {
			return nil, fmt.Errorf("%w: malformed signed attribute", ErrFormat)
		}
		id, err := parseOID(a.Children[0])
		if err != nil {
			return nil, err
		}
		key := id.String()
		known := id.Equal(oid.AttrContentType) || id.Equal(oid.AttrMessageDigest) || id.Equal(oid.AttrSigningTime)
		if !known {
			continue
		}
		if seen[key] || len(a.Children[1].Children) != 1 {
			return nil, fmt.Errorf("%w: signed attribute %s must have exactly one value", ErrSignature, key)
		}
		seen[key] = true
		v := a.Children[1].Children[0]
		switch {
		case id.Equal(oid.AttrContentType):
			ct, err := parseOID(v)
			if err != nil || !ct.Equal(oid.Data) {
				return nil, fmt.Errorf("%w: contentType attribute is not id-data", ErrSignature)
			}
		case id.Equal(oid.AttrMessageDigest):
			if !isUniversal(v, ber.TagOctetString, v.Constructed) {
				return nil, fmt.Errorf("%w: messageDigest is not an OCTET STRING", ErrFormat)
			}
			out.messageDigest = v.Bytes()
		case id.Equal(oid.AttrSigningTime):
			var t time.Time
			if rest, err := asn1.Unmarshal(v.DER(), &t); err != nil || len(rest) != 0 {
				return nil, fmt.Errorf("%w: signingTime is not a time", ErrFormat)
			}
			out.signingTime = t
		}
	}
	if out.messageDigest == nil {
		return nil, fmt.Errorf("%w: no messageDigest attribute", ErrSignature)
	}
	return out, nil
}

// signedAttributeEncodings returns the SET encoding of the attributes as
// received and, when different, with the elements in DER order.
func signedAttributeEncodings(set *ber.Node) [][]byte {
	elems := make([][]byte, len(set.Children))
	for i, c := range set.Children {
		elems[i] = c.DER()
	}
	asSent := ber.Encode(ber.ClassUniversal, true, ber.TagSet, bytes.Join(elems, nil))
	sorted := slices.Clone(elems)
	slices.SortFunc(sorted, bytes.Compare)
	asSorted := ber.Encode(ber.ClassUniversal, true, ber.TagSet, bytes.Join(sorted, nil))
	if bytes.Equal(asSent, asSorted) {
		return [][]byte{asSent}
	}
	return [][]byte{asSent, asSorted}
}

// verifyWithKey checks an ECDSA-SHA256 or RSA PKCS#1 v1.5 SHA-256 signature.
func verifyWithKey(pub any, alg asn1.ObjectIdentifier, msg, sig []byte) error {
	digest := sha256.Sum256(msg)
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if !alg.Equal(oid.ECDSAWithSHA256) && !alg.Equal(oid.ECPublicKey) {
			return fmt.Errorf("%w: signature algorithm %s does not fit an EC key", ErrSignature, alg)
		}
		if !ecdsa.VerifyASN1(k, digest[:], sig) {
			return fmt.Errorf("%w: ECDSA signature over the signed attributes is invalid", ErrSignature)
		}
	case *rsa.PublicKey:
		if !alg.Equal(oid.SHA256WithRSA) && !alg.Equal(oid.RSAEncryption) {
			return fmt.Errorf("%w: signature algorithm %s does not fit an RSA key", ErrSignature, alg)
		}
		if err := rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], sig); err != nil {
			return fmt.Errorf("%w: RSA signature over the signed attributes is invalid", ErrSignature)
		}
	default:
		return fmt.Errorf("%w: signing key type %T not supported", ErrSignature, pub)
	}
	return nil
}

func isUniversal(n *ber.Node, tag int, constructed bool) bool {
	return n.Class == ber.ClassUniversal && n.Tag == tag && n.Constructed == constructed
}

func isContext(n *ber.Node, tag int, constructed bool) bool {
	return n.Class == ber.ClassContextSpecific && n.Tag == tag && n.Constructed == constructed
}

func parseOID(n *ber.Node) (asn1.ObjectIdentifier, error) {
	var id asn1.ObjectIdentifier
	if rest, err := asn1.Unmarshal(n.DER(), &id); err != nil || len(rest) != 0 {
		return nil, fmt.Errorf("%w: expected an object identifier", ErrFormat)
	}
	return id, nil
}

func parseAlgorithm(n *ber.Node) (asn1.ObjectIdentifier, error) {
	var ai pkix.AlgorithmIdentifier
	if rest, err := asn1.Unmarshal(n.DER(), &ai); err != nil || len(rest) != 0 {
		return nil, fmt.Errorf("%w: malformed algorithm identifier", ErrFormat)
	}
	return ai.Algorithm, nil
}
