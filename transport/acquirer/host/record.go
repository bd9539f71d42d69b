package host

import (
	"encoding/binary"
	"strconv"
	"unicode/utf8"
)

// appendJSON appends r as encoding/json's Marshal writes it, byte for byte
// (fields in declaration order, the omitempty ones left out when empty,
// strings escaped as Marshal escapes them, HTML characters included), so
// ledger files read the same by anyone, old and new. Marshal's reflection
// was a third of the host's CPU per decision (issue 35, docs/acquirer.md
// round 5); TestRecordJSONIsMarshals holds the two together.
func (r *Record) appendJSON(b []byte) []byte {
	b = append(b, `{"time":`...)
	b = strconv.AppendInt(b, r.Time, 10)
	b = appendField(b, `,"date":`, r.Date)
	b = appendField(b, `,"kind":`, r.Kind)
	b = appendField(b, `,"mti":`, r.MTI)
	b = appendField(b, `,"mid":`, r.MID)
	b = appendField(b, `,"rrn":`, r.RRN)
	b = appendField(b, `,"stan":`, r.STAN)
	b = appendField(b, `,"sent":`, r.Sent)
	b = append(b, `,"amount":`...)
	b = strconv.AppendInt(b, r.Amount, 10)
	b = appendField(b, `,"currency":`, r.Currency)
	b = appendField(b, `,"response":`, r.Response)
	for _, f := range [...]struct{ name, v string }{
		{`,"auth_code":`, r.AuthCode}, {`,"arn":`, r.ARN}, {`,"avs":`, r.AVS},
		{`,"cvv":`, r.CVV}, {`,"original":`, r.Original},
	} {
		if f.v != "" { // omitempty
			b = appendField(b, f.name, f.v)
		}
	}
	return append(b, '}')
}

func appendField(b []byte, name, v string) []byte {
	return appendJSONString(append(b, name...), v)
}

// appendJSONString quotes s as encoding/json does with HTML escaping (its
// default): ", \ and control characters escaped (\b \f \n \r \t short,
// others \u00xx), <, > and & as \u003c \u003e \u0026, invalid UTF-8 as
// \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// packedRecord is a Record in one string, as the repeat index holds it: a
// Record is fourteen strings, and 200,000 of them (repeatWindowMax) were
// ~3 million pointers that every garbage collection of the process marked,
// a node's included when the host runs in it (docs/performance.md, "Order
// search", eighth series). A packed record's bytes hold no pointer.
//
// Layout: Time and Amount (8 bytes each, big-endian), then each string
// field in packedFields' order as a uvarint length and its bytes.
type packedRecord string

// packedFields lists the string fields of r, in the packed order.
func packedFields(r *Record) [14]*string {
	return [14]*string{&r.Date, &r.Kind, &r.MTI, &r.MID, &r.RRN, &r.STAN, &r.Sent,
		&r.Currency, &r.Response, &r.AuthCode, &r.ARN, &r.AVS, &r.CVV, &r.Original}
}

func pack(r *Record) packedRecord {
	fields := packedFields(r)
	n := 16
	for _, f := range fields {
		n += binary.MaxVarintLen16 + len(*f)
	}
	b := make([]byte, 0, n)
	b = binary.BigEndian.AppendUint64(b, uint64(r.Time))
	b = binary.BigEndian.AppendUint64(b, uint64(r.Amount))
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(*f)))
		b = append(b, *f...)
	}
	return packedRecord(b)
}

// record unpacks p; its strings share p's bytes.
func (p packedRecord) record() *Record {
	r := &Record{Time: int64(be64(p[:8])), Amount: int64(be64(p[8:16]))}
	rest := p[16:]
	for _, f := range packedFields(r) {
		n, w := uvarint(rest)
		*f, rest = string(rest[w:w+n]), rest[w+n:]
	}
	return r
}

// be64 is binary.BigEndian.Uint64 over a string, without copying it.
func be64(s packedRecord) uint64 {
	var x uint64
	for i := range 8 {
		x = x<<8 | uint64(s[i])
	}
	return x
}

// uvarint is binary.Uvarint over a string, without copying it.
func uvarint(s packedRecord) (n, width int) {
	var x uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int(x), i + 1
		}
	}
	panic("acquirer host: truncated packed record") // only pack writes them
}
