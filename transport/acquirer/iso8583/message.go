package iso8583

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
)

// Message is one ISO 8583 message: its MTI and the fields it carries.
// The zero value is an empty message; set the MTI and fields before Pack.
// Pass it by pointer: a copy would share its field storage.
type Message struct {
	MTI     string
	present [2]uint64 // bit n-1 of the 128: field n is set
	// at[n] is 1 + the index of field n's value in values: a message is
	// ~20 fields of 128, and a fixed array of 129 strings (2 KB) cost
	// more to clear and collect than the rest of the message.
	at     [MaxField + 1]uint8
	values []string
	// inline backs values for the fields of a usual message, so a message
	// is one allocation, not two.
	inline [inlineFields]string
}

// inlineFields is the most fields the link's messages carry (an 0100 has 15).
const inlineFields = 20

// New returns a message of the given MTI.
func New(mti string) *Message { return &Message{MTI: mti} }

// Reset empties m and gives it the MTI mti, for reuse.
func (m *Message) Reset(mti string) { *m = Message{MTI: mti} }

// Set sets field n to v. The value is checked by Pack, not here, so a
// message can be built in any order; Set panics only for a field number
// outside 2..128, a programming error.
func (m *Message) Set(n int, v string) *Message {
	if n < 2 || n > MaxField {
		panic(fmt.Sprintf("iso8583: field %d does not exist", n))
	}
	m.put(n, v)
	return m
}

// put stores v as field n.
func (m *Message) put(n int, v string) {
	m.present[(n-1)/64] |= 1 << (63 - uint(n-1)%64)
	if i := m.at[n]; i != 0 {
		m.values[i-1] = v
		return
	}
	if m.values == nil {
		m.values = m.inline[:0]
	}
	m.values = append(m.values, v)
	m.at[n] = uint8(len(m.values))
}

// SetNumber sets the numeric fixed-length field n to v, zero-padded to the
// field's length (an amount of 1000 in field 4 is "000000001000"). A value
// that does not fit is left for Pack to refuse.
func (m *Message) SetNumber(n int, v int64) *Message {
	if sp := specs[n]; sp != nil && sp.Length == Fixed && v >= 0 && sp.Max <= 20 {
		// Digits written into one buffer: one allocation, not two.
		var b [20]byte
		i := len(b)
		for u := uint64(v); u > 0 || i == len(b); u /= 10 {
			i--
			b[i] = byte('0' + u%10)
		}
		if digits := len(b) - i; digits <= sp.Max {
			i = len(b) - sp.Max
			copy(b[i:], zeros[:sp.Max-digits])
		}
		return m.Set(n, string(b[i:]))
	}
	s := strconv.FormatInt(v, 10)
	if sp := specs[n]; sp != nil && sp.Length == Fixed && len(s) < sp.Max && v >= 0 {
		s = zeros[:sp.Max-len(s)] + s
	}
	return m.Set(n, s)
}

const zeros = "000000000000000000000000000000000000000000000000"

// Get returns field n and whether it is set.
func (m *Message) Get(n int) (string, bool) {
	if !m.Has(n) {
		return "", false
	}
	return m.values[m.at[n]-1], true
}

// Value returns field n, or "" when it is not set.
func (m *Message) Value(n int) string {
	if !m.Has(n) {
		return ""
	}
	return m.values[m.at[n]-1]
}

// Has reports whether field n is set.
func (m *Message) Has(n int) bool {
	return n >= 2 && n <= MaxField && m.present[(n-1)/64]&(1<<(63-uint(n-1)%64)) != 0
}

// Unset removes field n.
func (m *Message) Unset(n int) {
	if m.Has(n) {
		m.present[(n-1)/64] &^= 1 << (63 - uint(n-1)%64)
		m.values[m.at[n]-1] = "" // the slot stays; a later Set of n reuses it
	}
}

// Fields lists the numbers of the fields set, in increasing order.
func (m *Message) Fields() []int {
	var out []int
	for w := range m.present {
		for b := m.present[w]; b != 0; {
			i := bits.LeadingZeros64(b)
			out = append(out, w*64+i+1)
			b &^= 1 << (63 - uint(i))
		}
	}
	return out
}

// FieldError is a field that cannot be packed or was malformed on the wire.
type FieldError struct {
	Field  int
	Reason string
}

func (e *FieldError) Error() string {
	name := "unknown field"
	if s := specs[e.Field]; s != nil {
		name = s.Name
	}
	return fmt.Sprintf("iso8583: field %d (%s): %s", e.Field, name, e.Reason)
}

// ErrMTI is a message type indicator that is not four digits of the 1987
// version (first digit 0).
var ErrMTI = errors.New("iso8583: MTI must be 4 ASCII digits starting with 0 (the 1987 version)")

func checkMTI(mti string) error {
	if len(mti) != 4 || mti[0] != '0' {
		return ErrMTI
	}
	for i := 1; i < 4; i++ {
		if mti[i] < '0' || mti[i] > '9' {
			return ErrMTI
		}
	}
	return nil
}

// checkValue validates v against field n's spec.
func checkValue(n int, v string) error {
	s := specs[n]
	if s == nil {
		return &FieldError{n, "not in the field table"}
	}
	switch {
	case s.Length == Fixed && len(v) != s.Max:
		return &FieldError{n, fmt.Sprintf("want exactly %d %s, got %d", s.Max, s.Charset, len(v))}
	case s.Length != Fixed && len(v) > s.Max:
		return &FieldError{n, fmt.Sprintf("want at most %d %s, got %d", s.Max, s.Charset, len(v))}
	case s.Length != Fixed && len(v) == 0:
		// An empty variable field says nothing a missing one does not;
		// refusing it keeps one byte string per message.
		return &FieldError{n, "empty (leave the field out instead)"}
	}
	if s.Charset != Binary {
		for i := 0; i < len(v); i++ {
			if !validChar(s.Charset, v[i]) {
				return &FieldError{n, fmt.Sprintf("byte %d is not among %s", i, s.Charset)}
			}
		}
	}
	return nil
}

// Pack returns the message's bytes (without the length prefix: see
// WriteFrame), or an error naming the first invalid part.
func (m *Message) Pack() ([]byte, error) { return m.AppendPack(nil) }

// AppendPack appends the message's bytes to dst.
func (m *Message) AppendPack(dst []byte) ([]byte, error) {
	if err := checkMTI(m.MTI); err != nil {
		return dst, err
	}
	dst = append(dst, m.MTI...)
	primary := m.present[0] &^ (1 << 63)
	secondary := m.present[1]
	if secondary != 0 {
		primary |= 1 << 63
	}
	dst = binary.BigEndian.AppendUint64(dst, primary)
	if secondary != 0 {
		dst = binary.BigEndian.AppendUint64(dst, secondary)
	}
	for w := range m.present {
		for b := m.present[w]; b != 0; {
			i := bits.LeadingZeros64(b)
			b &^= 1 << (63 - uint(i))
			n := w*64 + i + 1
			if n == 1 {
				continue
			}
			v := m.values[m.at[n]-1]
			if err := checkValue(n, v); err != nil {
				return dst, err
			}
			switch specs[n].Length {
			case LLVar:
				dst = append(dst, byte('0'+len(v)/10), byte('0'+len(v)%10))
			case LLLVar:
				dst = append(dst, byte('0'+len(v)/100), byte('0'+len(v)/10%10), byte('0'+len(v)%10))
			}
			dst = append(dst, v...)
		}
	}
	return dst, nil
}

// Unpack parses one message (without its length prefix). It accepts only
// what Pack could have produced: a 1987 MTI, fields of the table, valid
// lengths and charsets, a secondary bitmap only when it has a field, and no
// bytes left over. So Pack(Unpack(b)) == b for every b it accepts.
func Unpack(b []byte) (*Message, error) {
	m := &Message{}
	if err := m.Unpack(b); err != nil {
		return nil, err
	}
	return m, nil
}

// Unpack parses b into m, replacing what m held.
func (m *Message) Unpack(b []byte) error {
	*m = Message{}
	if len(b) < 4+8 {
		return fmt.Errorf("iso8583: message of %d bytes is shorter than an MTI and a bitmap", len(b))
	}
	str := string(b) // one copy; the fields are substrings of it
	m.MTI = str[:4]
	if err := checkMTI(m.MTI); err != nil {
		return err
	}
	present := [2]uint64{binary.BigEndian.Uint64(b[4:12])}
	off := 12
	if present[0]&(1<<63) != 0 {
		if len(b) < off+8 {
			return errors.New("iso8583: bit 1 announces a secondary bitmap the message does not hold")
		}
		present[1] = binary.BigEndian.Uint64(b[off : off+8])
		off += 8
		if present[1] == 0 {
			return errors.New("iso8583: secondary bitmap announced but empty")
		}
	}
	present[0] &^= 1 << 63
	for w := range present {
		for bm := present[w]; bm != 0; {
			i := bits.LeadingZeros64(bm)
			bm &^= 1 << (63 - uint(i))
			n := w*64 + i + 1
			s := specs[n]
			if s == nil {
				return &FieldError{n, "not in the field table"}
			}
			size := s.Max
			if s.Length != Fixed {
				digits := 2
				if s.Length == LLLVar {
					digits = 3
				}
				if len(b) < off+digits {
					return &FieldError{n, "message ends inside the length prefix"}
				}
				size = 0
				for _, c := range b[off : off+digits] {
					if c < '0' || c > '9' {
						return &FieldError{n, "length prefix is not ASCII digits"}
					}
					size = size*10 + int(c-'0')
				}
				off += digits
			}
			if len(b) < off+size {
				return &FieldError{n, fmt.Sprintf("message ends inside the value (%d bytes announced, %d left)", size, len(b)-off)}
			}
			v := str[off : off+size]
			if err := checkValue(n, v); err != nil {
				return err
			}
			m.put(n, v)
			off += size
		}
	}
	if off != len(b) {
		return fmt.Errorf("iso8583: %d bytes after the last field", len(b)-off)
	}
	return nil
}
