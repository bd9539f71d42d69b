// Package oid names the object identifiers of the CMS structures (RFC 5652)
// and algorithms that walleta-pay signatures use, for the verifier and the
// token maker alike.
package oid

import "encoding/asn1"

var (
	Data               = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}
	SignedData         = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}
	AttrContentType    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 3}
	AttrMessageDigest  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 4}
	AttrSigningTime    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 5}
	AttrAlgProtection  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 52} // CMSAlgorithmProtection, RFC 6211
	SHA256             = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	ECDSAWithSHA256    = asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}
	ECPublicKey        = asn1.ObjectIdentifier{1, 2, 840, 10045, 2, 1}
	RSAEncryption      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 1}
	SHA256WithRSA      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 11}
	LeafMarker         = asn1.ObjectIdentifier{1, 2, 840, 113635, 100, 6, 29}
	IntermediateMarker = asn1.ObjectIdentifier{1, 2, 840, 113635, 100, 6, 2, 14}
)
