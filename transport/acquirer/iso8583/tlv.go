package iso8583

import (
	"fmt"
	"strings"
)

// Field 48 carries tag-length-value data: a 2-character tag (letters and
// digits), 3 ASCII digits of length, then the value (printable ASCII), one
// after the other. The tags the link uses:
const (
	TagCVV2             = "CV" // card verification value; never stored, never dumped
	TagECI              = "EC" // electronic commerce indicator (3-D Secure or wallet)
	TagCAVV             = "CA" // 3-D Secure authentication value
	TagXID              = "XI" // 3-D Secure 1 transaction id
	TagDSTransactionID  = "DS" // 3-D Secure 2 directory server transaction id
	TagThreeDSVersion   = "TV" // 3-D Secure version
	TagThreeDSResult    = "TR" // Y authenticated, N non-secure by the merchant's choice
	TagWalletCryptogram = "WC" // wallet (network token) cryptogram
	TagARN              = "AR" // answer: acquirer reference number
	TagAVSResult        = "AV" // answer: address verification result
	TagCVVResult        = "CR" // answer: CVV2 check result
)

// TLV is one tag-length-value element of field 48.
type TLV struct {
	Tag   string
	Value string
}

// AppendTLV appends one element to a field 48 value. The element is checked
// when the message is packed (charset) and here (tag and length).
func AppendTLV(dst []byte, tag, value string) ([]byte, error) {
	if len(tag) != 2 || !validChar(Alpha, tag[0]) || !validChar(Alpha, tag[1]) {
		return dst, fmt.Errorf("iso8583: TLV tag %q: want 2 letters or digits", tag)
	}
	if len(value) > 999 {
		return dst, fmt.Errorf("iso8583: TLV %s: value of %d bytes is longer than 999", tag, len(value))
	}
	n := len(value)
	dst = append(dst, tag...)
	dst = append(dst, byte('0'+n/100), byte('0'+n/10%10), byte('0'+n%10))
	return append(dst, value...), nil
}

// ParseTLV splits a field 48 value into its elements, in order.
func ParseTLV(s string) ([]TLV, error) {
	var out []TLV
	for len(s) > 0 {
		if len(s) < 5 {
			return nil, fmt.Errorf("iso8583: field 48: %d bytes left, too few for a TLV header", len(s))
		}
		tag := s[:2]
		if !validChar(Alpha, tag[0]) || !validChar(Alpha, tag[1]) {
			return nil, fmt.Errorf("iso8583: field 48: TLV tag %q is not 2 letters or digits", tag)
		}
		n := 0
		for _, c := range []byte(s[2:5]) {
			if c < '0' || c > '9' {
				return nil, fmt.Errorf("iso8583: field 48: TLV %s: length is not 3 digits", tag)
			}
			n = n*10 + int(c-'0')
		}
		if len(s) < 5+n {
			return nil, fmt.Errorf("iso8583: field 48: TLV %s announces %d bytes, %d left", tag, n, len(s)-5)
		}
		out = append(out, TLV{Tag: tag, Value: s[5 : 5+n]})
		s = s[5+n:]
	}
	return out, nil
}

// LookupTLV returns the value of the first element with tag in a field 48
// value, and whether there is one. A malformed field has no elements.
// It walks the elements in place: it is on every answer's path, and
// ParseTLV's slice was a tenth of the link's allocations.
func LookupTLV(s, tag string) (string, bool) {
	found, value := false, ""
	for len(s) > 0 {
		if len(s) < 5 || !validChar(Alpha, s[0]) || !validChar(Alpha, s[1]) {
			return "", false
		}
		n := 0
		for _, c := range []byte(s[2:5]) {
			if c < '0' || c > '9' {
				return "", false
			}
			n = n*10 + int(c-'0')
		}
		if len(s) < 5+n {
			return "", false
		}
		if !found && s[:2] == tag {
			found, value = true, s[5:5+n]
		}
		s = s[5+n:]
	}
	return value, found
}

// Dump returns a one-line text form of the message for debugging: the MTI
// and each field as n=value, with field 2 masked (first 6 and last 4 digits
// kept) and field 48's CVV2 element left out. Binary fields show as hex.
// It is the only text form of a message: never log a field yourself.
func (m *Message) Dump() string {
	var b strings.Builder
	b.WriteString(m.MTI)
	for _, n := range m.Fields() {
		v := m.Value(n)
		switch {
		case n == FieldPAN:
			v = maskPAN(v)
		case n == FieldAdditionalData:
			v = withoutCVV(v)
		case specs[n] != nil && specs[n].Charset == Binary:
			v = fmt.Sprintf("%x", v)
		case specs[n] == nil:
			v = "?"
		}
		fmt.Fprintf(&b, " %d=%q", n, v)
	}
	return b.String()
}

// maskPAN keeps the first 6 and last 4 characters and stars the rest; a
// value too short to hide at least one digit is starred entirely.
func maskPAN(pan string) string {
	if len(pan) <= 10 {
		return strings.Repeat("*", len(pan))
	}
	return pan[:6] + strings.Repeat("*", len(pan)-10) + pan[len(pan)-4:]
}

// withoutCVV is a field 48 value without its CVV2 element; a value that
// does not parse as TLV is hidden whole, since it could hold one.
func withoutCVV(s string) string {
	elems, err := ParseTLV(s)
	if err != nil {
		return "(malformed TLV, hidden)"
	}
	var out []byte
	for _, e := range elems {
		if e.Tag == TagCVV2 {
			continue
		}
		out, _ = AppendTLV(out, e.Tag, e.Value)
	}
	return string(out)
}
