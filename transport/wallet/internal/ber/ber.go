// Package ber reads BER-encoded ASN.1 (indefinite lengths and constructed
// strings included) and writes it back as DER, so that encoding/asn1 and
// crypto/x509, which accept DER only, can read CMS structures produced by
// BER encoders (walleta-pay signatures use indefinite lengths).
//
// The conversion is conservative: an element encoded with a definite length
// whose descendants are all definite is copied byte for byte, so embedded
// certificates keep the exact bytes their signatures cover. Only indefinite
// lengths are replaced by definite ones and universal constructed OCTET
// STRINGs are joined into one primitive OCTET STRING. SET OF elements are not
// re-sorted.
package ber

import (
	"errors"
	"fmt"
)

// Limits on what Parse accepts. A walleta-pay signature is a few kilobytes
// with a depth of about 12.
const (
	// MaxDepthCount is the deepest nesting of constructed elements.
	MaxDepthCount = 64
	// MaxNodesCount is the largest number of elements in one input.
	MaxNodesCount = 10000
	// maxLengthBytes is the most length octets in a long-form length.
	maxLengthBytes = 4
)

// Class values of an element's identifier octets.
const (
	ClassUniversal       = 0
	ClassApplication     = 1
	ClassContextSpecific = 2
	ClassPrivate         = 3
)

// Universal tag numbers used here.
const (
	TagOctetString = 4
	TagSequence    = 16
	TagSet         = 17
)

// ErrSyntax is wrapped by every Parse error.
var ErrSyntax = errors.New("ber: malformed encoding")

// Node is one decoded element. For a primitive element Content holds its
// contents octets; for a constructed one Children holds its elements.
type Node struct {
	Class       int
	Tag         int
	Constructed bool
	Content     []byte
	Children    []*Node
	// Raw is the element's original encoding when it (and everything under
	// it) used definite lengths, else nil.
	Raw []byte
}

type parser struct {
	nodes int
}

// Parse decodes exactly one element filling all of b.
func Parse(b []byte) (*Node, error) {
	p := &parser{}
	n, rest, err := p.parse(b, 0)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrSyntax, len(rest))
	}
	return n, nil
}

// ToDER converts one BER element to DER (see the package comment for what is
// changed).
func ToDER(b []byte) ([]byte, error) {
	n, err := Parse(b)
	if err != nil {
		return nil, err
	}
	return n.DER(), nil
}

func (p *parser) parse(b []byte, depth int) (*Node, []byte, error) {
	if depth > MaxDepthCount {
		return nil, nil, fmt.Errorf("%w: nested deeper than %d", ErrSyntax, MaxDepthCount)
	}
	p.nodes++
	if p.nodes > MaxNodesCount {
		return nil, nil, fmt.Errorf("%w: more than %d elements", ErrSyntax, MaxNodesCount)
	}
	start := b
	if len(b) < 2 {
		return nil, nil, fmt.Errorf("%w: truncated element", ErrSyntax)
	}
	n := &Node{Class: int(b[0] >> 6), Constructed: b[0]&0x20 != 0, Tag: int(b[0] & 0x1f)}
	b = b[1:]
	if n.Tag == 0x1f { // high tag number form, base 128
		n.Tag = 0
		for i := 0; ; i++ {
			if len(b) == 0 || i == 4 {
				return nil, nil, fmt.Errorf("%w: bad tag number", ErrSyntax)
			}
			c := b[0]
			b = b[1:]
			n.Tag = n.Tag<<7 | int(c&0x7f)
			if c&0x80 == 0 {
				break
			}
		}
	}
	if len(b) == 0 {
		return nil, nil, fmt.Errorf("%w: truncated length", ErrSyntax)
	}
	l := int(b[0])
	b = b[1:]
	switch {
	case l == 0x80: // indefinite
		if !n.Constructed {
			return nil, nil, fmt.Errorf("%w: indefinite length on a primitive element", ErrSyntax)
		}
		for {
			if len(b) >= 2 && b[0] == 0 && b[1] == 0 {
				return n, b[2:], nil
			}
			if len(b) == 0 {
				return nil, nil, fmt.Errorf("%w: missing end-of-contents", ErrSyntax)
			}
			c, rest, err := p.parse(b, depth+1)
			if err != nil {
				return nil, nil, err
			}
			n.Children = append(n.Children, c)
			b = rest
		}
	case l > 0x80:
		k := l & 0x7f
		if k > maxLengthBytes || k > len(b) {
			return nil, nil, fmt.Errorf("%w: bad length", ErrSyntax)
		}
		l = 0
		for _, c := range b[:k] {
			l = l<<8 | int(c)
		}
		b = b[k:]
	}
	if l < 0 || l > len(b) {
		return nil, nil, fmt.Errorf("%w: length exceeds input", ErrSyntax)
	}
	content, rest := b[:l], b[l:]
	raw := start[:len(start)-len(rest)]
	if !n.Constructed {
		if n.Class == ClassUniversal && n.Tag == 0 {
			return nil, nil, fmt.Errorf("%w: unexpected end-of-contents", ErrSyntax)
		}
		n.Content = content
		n.Raw = raw
		return n, rest, nil
	}
	definite := true
	for len(content) > 0 {
		c, r, err := p.parse(content, depth+1)
		if err != nil {
			return nil, nil, err
		}
		if c.Raw == nil {
			definite = false
		}
		n.Children = append(n.Children, c)
		content = r
	}
	if definite {
		n.Raw = raw
	}
	return n, rest, nil
}

// isConstructedOctetString reports a universal OCTET STRING sent in pieces.
func (n *Node) isConstructedOctetString() bool {
	return n.Class == ClassUniversal && n.Tag == TagOctetString && n.Constructed
}

// Bytes returns the contents of a primitive element, or the joined contents
// of a constructed string's pieces.
func (n *Node) Bytes() []byte {
	if !n.Constructed {
		return n.Content
	}
	var out []byte
	for _, c := range n.Children {
		out = append(out, c.Bytes()...)
	}
	return out
}

// DER returns the element's DER encoding: Raw when the element was definite
// throughout (and holds no constructed OCTET STRING), else a re-encoding.
func (n *Node) DER() []byte {
	if n.Raw != nil && !n.hasConstructedOctetString() {
		return n.Raw
	}
	if n.isConstructedOctetString() {
		return encode(n.Class, false, n.Tag, n.Bytes())
	}
	if !n.Constructed {
		return encode(n.Class, false, n.Tag, n.Content)
	}
	var body []byte
	for _, c := range n.Children {
		body = append(body, c.DER()...)
	}
	return encode(n.Class, true, n.Tag, body)
}

func (n *Node) hasConstructedOctetString() bool {
	if n.isConstructedOctetString() {
		return true
	}
	for _, c := range n.Children {
		if c.hasConstructedOctetString() {
			return true
		}
	}
	return false
}

// Indefinite returns a BER encoding of the element in which every
// constructed element uses the indefinite length form. Tests use it to make
// the encodings real walleta-pay tokens carry.
func (n *Node) Indefinite() []byte {
	if !n.Constructed {
		return encode(n.Class, false, n.Tag, n.Content)
	}
	out := identifier(n.Class, true, n.Tag)
	out = append(out, 0x80)
	for _, c := range n.Children {
		out = append(out, c.Indefinite()...)
	}
	return append(out, 0, 0)
}

// Encode returns the definite-length encoding of one element with the given
// contents.
func Encode(class int, constructed bool, tag int, content []byte) []byte {
	return encode(class, constructed, tag, content)
}

func encode(class int, constructed bool, tag int, content []byte) []byte {
	out := identifier(class, constructed, tag)
	out = appendLength(out, len(content))
	return append(out, content...)
}

func identifier(class int, constructed bool, tag int) []byte {
	b := byte(class << 6)
	if constructed {
		b |= 0x20
	}
	if tag < 0x1f {
		return []byte{b | byte(tag)}
	}
	out := []byte{b | 0x1f}
	var digits []byte
	for t := tag; t > 0; t >>= 7 {
		digits = append([]byte{byte(t & 0x7f)}, digits...)
	}
	for i := range len(digits) - 1 {
		digits[i] |= 0x80
	}
	return append(out, digits...)
}

func appendLength(out []byte, l int) []byte {
	if l < 0x80 {
		return append(out, byte(l))
	}
	var digits []byte
	for v := l; v > 0; v >>= 8 {
		digits = append([]byte{byte(v)}, digits...)
	}
	out = append(out, 0x80|byte(len(digits)))
	return append(out, digits...)
}
