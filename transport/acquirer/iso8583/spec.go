// Package iso8583 packs and unpacks the ISO 8583 messages of the acquirer
// link (contract section 12): the 1987 field layout, an ASCII MTI, a binary
// primary bitmap (and a secondary one when a field above 64 is present),
// numeric and text fields in ASCII, LLVAR/LLLVAR lengths in ASCII digits,
// and a 2-byte big-endian length before each message on the wire.
//
// The codec is the project's own: the module proxy this project builds with
// does not serve moov-io/iso8583, the usual Go library. It is kept small and
// table-driven, as jPOS's packagers are: every field the link uses is one row
// of Fields (number, length type, charset, maximum length), and one
// pack/unpack loop reads the table, so a new field is a row, not a function.
// Anything not in the table is refused, and every value is checked for its
// length and charset both ways, so a malformed message is an error naming
// the field, never a panic or a silently wrong amount.
//
// Card data: field 2 (the card number) and the CVV2 tag of field 48 travel
// in these messages. Nothing here logs; Dump, the only text form of a
// message, masks field 2 (first 6, last 4) and leaves out the CVV2 tag.
package iso8583

// LengthType says how a field's length is known.
type LengthType uint8

const (
	Fixed  LengthType = iota // always Max long
	LLVar                    // 2 ASCII digits of length, then up to Max (at most 99)
	LLLVar                   // 3 ASCII digits of length, then up to Max (at most 999)
)

// Charset says which bytes a field may hold.
type Charset uint8

const (
	Numeric      Charset = iota // n: ASCII digits
	Alpha                       // an: ASCII letters and digits
	AlphaSpecial                // ans: printable ASCII, space to '~'
	Binary                      // b: any byte; Max counts bytes
)

// Spec describes one field.
type Spec struct {
	Name    string
	Length  LengthType
	Charset Charset
	Max     int // the length of a Fixed field, the maximum of a variable one
}

// Field numbers used by the acquirer link (contract section 12).
const (
	FieldPAN                 = 2
	FieldProcessingCode      = 3
	FieldAmount              = 4
	FieldTransmissionTime    = 7
	FieldSTAN                = 11
	FieldLocalTime           = 12
	FieldLocalDate           = 13
	FieldExpiry              = 14
	FieldPOSEntryMode        = 22
	FieldRRN                 = 37
	FieldAuthCode            = 38
	FieldResponseCode        = 39
	FieldTerminalID          = 41
	FieldCardAcceptorID      = 42
	FieldAdditionalData      = 48
	FieldCurrency            = 49
	FieldPINData             = 52
	FieldNetworkManagement   = 70
	FieldOriginalDataElement = 90
)

// MaxField is the highest field number a message can carry: primary and
// secondary bitmap (a tertiary bitmap, bit 65, is not supported).
const MaxField = 128

// Fields is the field table: the only fields this codec packs or accepts.
// Field 52 (PIN data) is never sent by the gateway; it is here because it is
// the 1987 layout's binary field, accepted from a host that sends it.
var Fields = map[int]Spec{
	FieldPAN:                 {"primary account number", LLVar, Numeric, 19},
	FieldProcessingCode:      {"processing code", Fixed, Numeric, 6},
	FieldAmount:              {"amount, transaction", Fixed, Numeric, 12},
	FieldTransmissionTime:    {"transmission date and time", Fixed, Numeric, 10},
	FieldSTAN:                {"systems trace audit number", Fixed, Numeric, 6},
	FieldLocalTime:           {"time, local transaction", Fixed, Numeric, 6},
	FieldLocalDate:           {"date, local transaction", Fixed, Numeric, 4},
	FieldExpiry:              {"date, expiration", Fixed, Numeric, 4},
	FieldPOSEntryMode:        {"point of service entry mode", Fixed, Numeric, 3},
	FieldRRN:                 {"retrieval reference number", Fixed, Alpha, 12},
	FieldAuthCode:            {"authorization identification response", Fixed, Alpha, 6},
	FieldResponseCode:        {"response code", Fixed, Alpha, 2},
	FieldTerminalID:          {"card acceptor terminal identification", Fixed, AlphaSpecial, 8},
	FieldCardAcceptorID:      {"card acceptor identification code", Fixed, AlphaSpecial, 15},
	FieldAdditionalData:      {"additional data, private", LLLVar, AlphaSpecial, 999},
	FieldCurrency:            {"currency code, transaction", Fixed, Numeric, 3},
	FieldPINData:             {"personal identification number data", Fixed, Binary, 8},
	FieldNetworkManagement:   {"network management information code", Fixed, Numeric, 3},
	FieldOriginalDataElement: {"original data elements", Fixed, Numeric, 42},
}

// specs is Fields as an array, for the pack and unpack loops.
var specs [MaxField + 1]*Spec

func init() {
	for n, s := range Fields {
		if n < 2 || n > MaxField || n == 65 {
			panic("iso8583: field table holds an impossible field number")
		}
		if s.Length == LLVar && s.Max > 99 || s.Length == LLLVar && s.Max > 999 || s.Max < 1 {
			panic("iso8583: field table holds a maximum its length prefix cannot express")
		}
		s := s
		specs[n] = &s
	}
}

// validChar reports whether c belongs to cs.
func validChar(cs Charset, c byte) bool {
	switch cs {
	case Numeric:
		return c >= '0' && c <= '9'
	case Alpha:
		return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
	case AlphaSpecial:
		return c >= ' ' && c <= '~'
	}
	return true
}

func (cs Charset) String() string {
	switch cs {
	case Numeric:
		return "digits"
	case Alpha:
		return "letters and digits"
	case AlphaSpecial:
		return "printable ASCII"
	}
	return "bytes"
}
