// Package wire holds the primitives of the project's binary record formats:
// the order and command codec (package command) and the records
// persistence keeps beside orders. It says how a value is written, not what
// a record contains.
//
//	string            uvarint length, bytes
//	[]byte            uvarint length, bytes (empty decodes as nil)
//	int64             varint (zig-zag), binary.AppendVarint
//	uint64            uvarint, binary.AppendUvarint
//	bool              one byte, 0 or 1
//	pointer           presence byte 0 or 1, then the value
//	slice             uvarint count, then each element (0 decodes as nil)
//
// A record starts with a version byte. Decoding never panics: every length
// is bounds-checked, and a bool or presence byte other than 0 or 1, a
// truncated value and trailing bytes are errors.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrCodec is wrapped by every decoding error.
var ErrCodec = errors.New("binary codec")

// AppendString appends s with its length.
func AppendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// AppendStrings appends each of ss as AppendString does: a record's run of
// string fields in one line, read back by Decoder.Strs in the same order.
func AppendStrings(dst []byte, ss ...string) []byte {
	for _, s := range ss {
		dst = AppendString(dst, s)
	}
	return dst
}

// AppendBytes appends b with its length.
func AppendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// AppendBool appends v as one byte, 0 or 1; also a pointer's presence.
func AppendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// Decoder reads from one string copy of the input, so every decoded string
// is a substring of it: one allocation for all of them, and none aliases the
// input (Pebble reuses its value buffers). A value that keeps one of them
// keeps the whole copy. The first error sticks; later reads return zero
// values.
//
// Uvarint, Str and Bool try a one-byte case first: almost every value of a
// record is a short string, a small number or a flag.
type Decoder struct {
	s    string // what is left to read
	n    int    // input length, for error positions
	err  error
	what string
}

// NewDecoder starts decoding b, which must begin with version; what names
// the record in errors.
func NewDecoder(b []byte, version byte, what string) Decoder {
	d := Decoder{what: what, n: len(b)}
	switch {
	case len(b) == 0:
		d.Fail("empty input")
	case b[0] != version:
		d.Fail(fmt.Sprintf("unknown format version %d", b[0]))
	default:
		d.s = string(b)[1:]
	}
	return d
}

// Fail records an error at the current position, unless one is recorded.
func (d *Decoder) Fail(msg string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: decode %s: %s at byte %d", ErrCodec, d.what, msg, d.n-len(d.s))
	}
	d.s = ""
}

// Finish returns the first error, or an error if bytes are left over.
func (d *Decoder) Finish() error {
	if d.err == nil && len(d.s) != 0 {
		d.Fail(fmt.Sprintf("%d trailing bytes", len(d.s)))
	}
	return d.err
}

// Uvarint reads a uint64.
func (d *Decoder) Uvarint() uint64 {
	if s := d.s; s != "" && s[0] < 0x80 {
		d.s = s[1:]
		return uint64(s[0])
	}
	return d.uvarintSlow()
}

func (d *Decoder) uvarintSlow() uint64 {
	var x uint64
	for i := range binary.MaxVarintLen64 {
		if len(d.s) == 0 {
			d.Fail("truncated varint")
			return 0
		}
		c := d.s[0]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			d.s = d.s[1:]
			return x | uint64(c)<<(7*i)
		}
		d.s = d.s[1:]
		x |= uint64(c&0x7f) << (7 * i)
	}
	d.Fail("varint overflows 64 bits")
	return 0
}

// Varint reads an int64.
func (d *Decoder) Varint() int64 {
	ux := d.Uvarint()
	return int64(ux>>1) ^ -int64(ux&1)
}

// length reads a length and checks that many bytes remain.
func (d *Decoder) length() int {
	n := d.Uvarint()
	if n > uint64(len(d.s)) {
		d.Fail(fmt.Sprintf("length %d exceeds the input", n))
		return 0
	}
	return int(n)
}

// Str reads a string.
func (d *Decoder) Str() string {
	if s := d.s; s != "" && s[0] < 0x80 {
		if n := int(s[0]) + 1; n <= len(s) {
			d.s = s[n:]
			return s[1:n]
		}
	}
	return d.strSlow()
}

// Strs reads a run of strings into ps, in order: what AppendStrings wrote.
func (d *Decoder) Strs(ps ...*string) {
	for _, p := range ps {
		*p = d.Str()
	}
}

func (d *Decoder) strSlow() string {
	n := d.length()
	v := d.s[:n]
	d.s = d.s[n:]
	return v
}

// Bytes reads a byte slice, nil when empty; it has its own copy.
func (d *Decoder) Bytes() []byte {
	n := d.length()
	if n == 0 {
		return nil
	}
	b := []byte(d.s[:n])
	d.s = d.s[n:]
	return b
}

// Count reads a slice length; each element takes at least elemMin bytes,
// so a count the remaining input cannot hold is refused before the caller
// allocates for it.
func (d *Decoder) Count(elemMin int) int {
	n := d.Uvarint()
	if n > uint64(len(d.s)/elemMin) {
		d.Fail(fmt.Sprintf("count %d exceeds the input", n))
		return 0
	}
	return int(n)
}

// Bool reads a bool.
func (d *Decoder) Bool() bool {
	if s := d.s; s != "" && s[0] <= 1 {
		d.s = s[1:]
		return s[0] == 1
	}
	d.boolSlow()
	return false
}

func (d *Decoder) boolSlow() {
	if len(d.s) == 0 {
		d.Fail("truncated")
		return
	}
	d.Fail(fmt.Sprintf("byte %#x is not a bool", d.s[0]))
}

// Present reads a pointer's presence byte.
func (d *Decoder) Present() bool { return d.Bool() }
