package ber

import (
	"bytes"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"testing"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestToDER(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"definite copied", "3006020101020102", "3006020101020102"},
		{"indefinite sequence", "30800201010201020000", "3006020101020102"},
		{"nested indefinite", "3080308002010100000000", "30053003020101"},
		{"context tag indefinite", "a08004020102 0000", "a004040201 02"},
		{"constructed octet string", "2480040201020401030000", "0403010203"},
		{"constructed octet string, definite", "240704020102040103", "0403010203"},
		{"octet string pieces inside definite sequence", "3009240704020102040103", "30050403010203"},
		{"long form length", "048180" + string(bytes.Repeat([]byte("00"), 128)), "048180" + string(bytes.Repeat([]byte("00"), 128))},
		{"high tag number", "9f81000100", "9f81000100"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ToDER(unhex(t, stripSpaces(c.in)))
			if err != nil {
				t.Fatal(err)
			}
			if want := unhex(t, stripSpaces(c.want)); !bytes.Equal(got, want) {
				t.Fatalf("got %x, want %x", got, want)
			}
		})
	}
}

func stripSpaces(s string) string { return string(bytes.ReplaceAll([]byte(s), []byte(" "), nil)) }

func TestMalformed(t *testing.T) {
	for _, c := range []struct{ name, in string }{
		{"empty", ""},
		{"truncated length", "30"},
		{"length beyond input", "3005020101"},
		{"missing end-of-contents", "3080020101"},
		{"indefinite primitive", "04800000"},
		{"trailing bytes", "0500ff"},
		{"stray end-of-contents in definite", "30020000"},
		{"five length octets", "04850000000001"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ToDER(unhex(t, c.in)); !errors.Is(err, ErrSyntax) {
				t.Fatalf("err = %v, want ErrSyntax", err)
			}
		})
	}
}

func TestDepthAndCountLimits(t *testing.T) {
	deep := bytes.Repeat([]byte{0x30, 0x80}, MaxDepthCount+2)
	deep = append(deep, bytes.Repeat([]byte{0, 0}, MaxDepthCount+2)...)
	if _, err := Parse(deep); !errors.Is(err, ErrSyntax) {
		t.Fatalf("deep nesting: %v", err)
	}
	many := []byte{0x30, 0x80}
	for range MaxNodesCount + 1 {
		many = append(many, 0x05, 0x00)
	}
	many = append(many, 0, 0)
	if _, err := Parse(many); !errors.Is(err, ErrSyntax) {
		t.Fatalf("many elements: %v", err)
	}
}

// TestIndefiniteRoundTrip: any DER value re-encoded with indefinite lengths
// converts back to the same bytes, and Go's asn1 reads the result.
func TestIndefiniteRoundTrip(t *testing.T) {
	type inner struct {
		OID  asn1.ObjectIdentifier
		Data []byte
		Set  []int `asn1:"set"`
	}
	type outer struct {
		A    int
		In   inner
		Tail []byte `asn1:"explicit,tag:0"`
	}
	v := outer{A: 7, In: inner{OID: asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}, Data: bytes.Repeat([]byte{9}, 300), Set: []int{1, 2}}, Tail: []byte("x")}
	der, err := asn1.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Parse(der)
	if err != nil {
		t.Fatal(err)
	}
	ber := n.Indefinite()
	if bytes.Equal(ber, der) {
		t.Fatal("Indefinite changed nothing")
	}
	back, err := ToDER(ber)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, der) {
		t.Fatalf("round trip changed bytes:\n%x\n%x", back, der)
	}
	var got outer
	if _, err := asn1.Unmarshal(back, &got); err != nil || got.A != 7 || len(got.In.Data) != 300 {
		t.Fatalf("asn1 read %+v, %v", got, err)
	}
}

func TestRawKeptForDefiniteElements(t *testing.T) {
	// A definite certificate-like element inside indefinite layers keeps its
	// exact bytes, even with a non-minimal length encoding.
	inner := unhex(t, "30820003020101") // non-minimal long-form length
	in := append(append([]byte{0x30, 0x80}, inner...), 0, 0)
	n, err := Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Children[0].DER(); !bytes.Equal(got, inner) {
		t.Fatalf("definite child re-encoded: %x", got)
	}
}
