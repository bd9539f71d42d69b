package iso8583

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Known answers. There is no published byte string for exactly this
// gateway's field set, so these are built by hand from the ISO 8583:1987
// field definitions (the lengths and charsets in Fields) and checked against
// the published bitmaps they share:
//
//   - the network management echo 0800 with fields 7, 11 and 70 has the
//     primary bitmap 8220000000000000 and the secondary 0400000000000000,
//     the bitmaps of the 0800 echo in jPOS's examples and most ISO 8583
//     tutorials (bit 1: a secondary bitmap follows; bits 7 and 11; bit 70);
//   - Wikipedia's ISO 8583 article reads the bitmap 4210001102C04804 as
//     fields 2, 7, 12, 28, 32, 39, 41, 42, 50, 53 and 62 (TestPublishedBitmap).
func echoBytes() []byte {
	b := []byte("0800")
	b = append(b, 0x82, 0x20, 0, 0, 0, 0, 0, 0) // primary: 1 (secondary follows), 7, 11
	b = append(b, 0x04, 0, 0, 0, 0, 0, 0, 0)    // secondary: 70
	b = append(b, "1128013000"...)              // 7  MMDDhhmmss
	b = append(b, "000001"...)                  // 11 STAN
	b = append(b, "301"...)                     // 70 echo
	return b
}

// authBytes is a 0100 authorisation of 10.00 USD on the test card
// 4111111111111111 with CVV2 123.
func authBytes() []byte {
	b := []byte("0100")
	// 2 3 4 7 | 11 12 13 14 | 22 | 37 | 41 42 48 | 49
	b = append(b, 0x72, 0x3C, 0x04, 0x00, 0x08, 0xC1, 0x80, 0x00)
	b = append(b, "164111111111111111"...) // 2  LLVAR: "16" then 16 digits
	b = append(b, "000000"...)             // 3  purchase
	b = append(b, "000000001000"...)       // 4  1000 minor units
	b = append(b, "1128013000"...)         // 7
	b = append(b, "000002"...)             // 11
	b = append(b, "013000"...)             // 12 hhmmss
	b = append(b, "1128"...)               // 13 MMDD
	b = append(b, "3512"...)               // 14 YYMM
	b = append(b, "810"...)                // 22 e-commerce
	b = append(b, "A1B2C3D4E5F6"...)       // 37 RRN
	b = append(b, "GW000001"...)           // 41 terminal
	b = append(b, "SHOP01         "...)    // 42 MID, space-padded to 15
	b = append(b, "008CV003123"...)        // 48 LLLVAR: "008", then TLV CV 003 123
	b = append(b, "840"...)                // 49 USD
	return b
}

func authMessage() *Message {
	m := New("0100")
	m.Set(FieldPAN, "4111111111111111").Set(FieldProcessingCode, "000000").SetNumber(FieldAmount, 1000)
	m.Set(FieldTransmissionTime, "1128013000").SetNumber(FieldSTAN, 2).Set(FieldLocalTime, "013000")
	m.Set(FieldLocalDate, "1128").Set(FieldExpiry, "3512").Set(FieldPOSEntryMode, "810")
	m.Set(FieldRRN, "A1B2C3D4E5F6").Set(FieldTerminalID, "GW000001").Set(FieldCardAcceptorID, "SHOP01         ")
	tlv, _ := AppendTLV(nil, TagCVV2, "123")
	m.Set(FieldAdditionalData, string(tlv)).Set(FieldCurrency, "840")
	return m
}

func TestPackKnownAnswers(t *testing.T) {
	echo := New("0800").Set(FieldTransmissionTime, "1128013000").SetNumber(FieldSTAN, 1).Set(FieldNetworkManagement, "301")
	for name, c := range map[string]struct {
		m    *Message
		want []byte
	}{"0800 echo": {echo, echoBytes()}, "0100 authorisation": {authMessage(), authBytes()}} {
		got, err := c.m.Pack()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s:\n got %x\nwant %x", name, got, c.want)
		}
		back, err := Unpack(c.want)
		if err != nil {
			t.Fatalf("%s: unpack: %v", name, err)
		}
		if back.MTI != c.m.MTI || !slices.Equal(back.Fields(), c.m.Fields()) {
			t.Fatalf("%s: unpacked %s, want %s", name, back.Dump(), c.m.Dump())
		}
		for _, n := range c.m.Fields() {
			if back.Value(n) != c.m.Value(n) {
				t.Errorf("%s: field %d = %q, want %q", name, n, back.Value(n), c.m.Value(n))
			}
		}
	}
}

func TestPublishedBitmap(t *testing.T) {
	raw, _ := hex.DecodeString("4210001102C04804")
	m := &Message{}
	for i := range 8 {
		m.present[0] |= uint64(raw[i]) << (56 - 8*i)
	}
	// (Fields reads the bitmap only.)
	if got, want := m.Fields(), []int{2, 7, 12, 28, 32, 39, 41, 42, 50, 53, 62}; !slices.Equal(got, want) {
		t.Fatalf("fields %v, want %v", got, want)
	}
}

func TestFraming(t *testing.T) {
	frame, err := authMessage().AppendFrame(nil)
	if err != nil {
		t.Fatal(err)
	}
	body := authBytes()
	if int(frame[0])<<8|int(frame[1]) != len(body) || !bytes.Equal(frame[2:], body) {
		t.Fatalf("frame % x does not start with the big-endian length %d", frame[:2], len(body))
	}
	got, err := ReadFrame(bytes.NewReader(frame), nil)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("ReadFrame = %x, %v", got, err)
	}
	if _, err := ReadFrame(bytes.NewReader(frame[:len(frame)-1]), nil); err == nil {
		t.Fatal("a truncated frame was read")
	}
}

func TestPackRefusesInvalidFields(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Message)
		field int
		text  string
	}{
		{"amount too long", func(m *Message) { m.SetNumber(FieldAmount, 1e12) }, 4, "exactly 12"},
		{"negative amount", func(m *Message) { m.SetNumber(FieldAmount, -5) }, 4, ""},
		{"letters in the PAN", func(m *Message) { m.Set(FieldPAN, "41111111x1111111") }, 2, "digits"},
		{"PAN of 20 digits", func(m *Message) { m.Set(FieldPAN, strings.Repeat("4", 20)) }, 2, "at most 19"},
		{"RRN with a dash", func(m *Message) { m.Set(FieldRRN, "A1B2C3-4E5F6") }, 37, "letters and digits"},
		{"MID of 16", func(m *Message) { m.Set(FieldCardAcceptorID, "SHOP01          ") }, 42, "exactly 15"},
		{"control byte in 48", func(m *Message) { m.Set(FieldAdditionalData, "CV003\n23") }, 48, "printable"},
		{"empty 48", func(m *Message) { m.Set(FieldAdditionalData, "") }, 48, "empty"},
		{"field outside the table", func(m *Message) { m.Set(5, "000000000001") }, 5, "not in the field table"},
	}
	for _, c := range cases {
		m := authMessage()
		c.edit(m)
		_, err := m.Pack()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: error %v, want a field %d error saying %q", c.name, err, c.field, c.text)
		}
	}
	if _, err := New("1100").Pack(); !errors.Is(err, ErrMTI) {
		t.Errorf("MTI of the 1993 version: %v, want ErrMTI", err)
	}
}

func TestUnpackRefusesMalformedMessages(t *testing.T) {
	good := authBytes()
	cases := map[string][]byte{
		"truncated":               good[:len(good)-1],
		"trailing byte":           append(slices.Clone(good), '0'),
		"bad MTI":                 append([]byte("01X0"), good[4:]...),
		"bad LLVAR prefix":        slices.Concat(good[:12], []byte("1A"), good[14:]),
		"empty secondary bitmap":  slices.Concat([]byte("0800"), []byte{0x82, 0x20, 0, 0, 0, 0, 0, 0}, make([]byte, 8), []byte("1128013000000001")),
		"secondary bitmap cut":    slices.Concat([]byte("0800"), []byte{0x80, 0, 0, 0, 0, 0, 0, 0}, []byte{4}),
		"field 5 (not in table)":  slices.Concat([]byte("0100"), []byte{0x08, 0, 0, 0, 0, 0, 0, 0}, []byte("000000001000")),
		"bit 65 (tertiary)":       slices.Concat([]byte("0800"), []byte{0x80, 0, 0, 0, 0, 0, 0, 0}, []byte{0x80, 0, 0, 0, 0, 0, 0, 0}),
		"amount with a space":     slices.Concat([]byte("0100"), []byte{0x10, 0, 0, 0, 0, 0, 0, 0}, []byte("00000000 000")),
		"LLVAR longer than limit": slices.Concat([]byte("0100"), []byte{0x40, 0, 0, 0, 0, 0, 0, 0}, []byte("20"), bytes.Repeat([]byte("4"), 20)),
	}
	for name, b := range cases {
		if m, err := Unpack(b); err == nil {
			t.Errorf("%s: accepted as %s", name, m.Dump())
		}
	}
}

func TestTLV(t *testing.T) {
	var f []byte
	for _, e := range []TLV{{TagCVV2, "123"}, {TagECI, "05"}, {TagCAVV, "AAABBEg0VhI0VniQEjRWAAAAAAA="}} {
		var err error
		if f, err = AppendTLV(f, e.Tag, e.Value); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.HasPrefix(string(f), "CV003123EC00205CA028") {
		t.Fatalf("field 48 %q", f)
	}
	if v, ok := LookupTLV(string(f), TagECI); !ok || v != "05" {
		t.Fatalf("ECI %q %v", v, ok)
	}
	for _, bad := range []string{"CV0031", "C", "CVxx3123", "C-003123"} {
		if _, err := ParseTLV(bad); err == nil {
			t.Errorf("ParseTLV(%q) accepted", bad)
		}
	}
	if _, err := AppendTLV(nil, "C", "1"); err == nil {
		t.Error("a one-character tag was accepted")
	}
}

// The dump, the only text form of a message, shows no card number and no CVV.
func TestDumpHidesCardData(t *testing.T) {
	m := authMessage()
	tlv, _ := AppendTLV([]byte(m.Value(FieldAdditionalData)), TagECI, "05")
	m.Set(FieldAdditionalData, string(tlv))
	d := m.Dump()
	if strings.Contains(d, "4111111111111111") || strings.Contains(d, "CV003") || strings.Contains(d, "123EC") {
		t.Fatalf("dump shows card data: %s", d)
	}
	if !strings.Contains(d, `2="411111******1111"`) || !strings.Contains(d, `48="EC00205"`) {
		t.Fatalf("dump lacks the masked card number or the other field 48 elements: %s", d)
	}
	m.Set(FieldAdditionalData, "CV0031234") // does not parse: hidden whole
	if d := m.Dump(); strings.Contains(d, "123") {
		t.Fatalf("malformed field 48 shown: %s", d)
	}
}

func FuzzUnpack(f *testing.F) {
	f.Add(echoBytes())
	f.Add(authBytes())
	answer, _ := New("0110").Set(FieldSTAN, "000002").Set(FieldRRN, "A1B2C3D4E5F6").Set(FieldAuthCode, "AB12CD").
		Set(FieldResponseCode, "00").Set(FieldAdditionalData, "AR00370000").Set(FieldPINData, "\x00\x01\xfe\xff\x10\x20\x30\x40").Pack()
	f.Add(answer)
	rev, _ := New("0400").SetNumber(FieldSTAN, 3).Set(FieldOriginalDataElement, "0100"+"000002"+"1128013000"+strings.Repeat("0", 22)).Pack()
	f.Add(rev)
	f.Add([]byte("0800"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Unpack(b)
		if err != nil {
			return
		}
		again, err := m.Pack()
		if err != nil {
			t.Fatalf("unpacked %s but cannot pack it: %v", m.Dump(), err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("round trip changed the message:\n in %x\nout %x", b, again)
		}
		if pan := m.Value(FieldPAN); len(pan) > 10 && strings.Contains(m.Dump(), ` 2="`+pan+`"`) {
			t.Fatalf("dump shows the card number: %s", m.Dump())
		}
	})
}

func TestDateTimeFields(t *testing.T) {
	tm := time.Date(2026, 3, 7, 9, 5, 4, 0, time.UTC)
	if TransmissionTime(tm) != tm.Format("0102150405") || LocalTime(tm) != "090504" || LocalDate(tm) != "0307" {
		t.Fatalf("%s %s %s", TransmissionTime(tm), LocalTime(tm), LocalDate(tm))
	}
}

// Frames sent at once from many goroutines arrive whole, each once.
func TestFrameWriterConcurrent(t *testing.T) {
	r, w := io.Pipe()
	fw := NewFrameWriter(w)
	got := make(chan string, 500)
	go func() {
		br := bufio.NewReader(r)
		for {
			b, err := ReadFrame(br, nil)
			if err != nil {
				close(got)
				return
			}
			m, err := Unpack(b)
			if err != nil {
				t.Error(err)
			}
			got <- m.Value(FieldSTAN)
		}
	}()
	var wg sync.WaitGroup
	for i := range 500 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fw.Send(New("0800").SetNumber(FieldSTAN, int64(i+1)).Set(FieldTransmissionTime, "1128013000").Set(70, "301")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	w.Close()
	seen := map[string]bool{}
	for s := range got {
		if seen[s] {
			t.Fatalf("STAN %s twice", s)
		}
		seen[s] = true
	}
	if len(seen) != 500 {
		t.Fatalf("%d frames of 500", len(seen))
	}
	if err := fw.Send(New("0800").SetNumber(FieldSTAN, 1).Set(FieldTransmissionTime, "1128013000").Set(70, "301")); err == nil {
		t.Fatal("a send on a closed pipe succeeded")
	}
}

func BenchmarkPackUnpack(b *testing.B) {
	m := authMessage()
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		var err error
		if buf, err = m.AppendPack(buf[:0]); err != nil {
			b.Fatal(err)
		}
		if _, err := Unpack(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// SetNumber pads to the field's length, zero included, and leaves a value
// too long for the field unpadded, for Pack to refuse.
func TestSetNumber(t *testing.T) {
	for _, c := range []struct {
		field int
		v     int64
		want  string
	}{{FieldSTAN, 0, "000000"}, {FieldSTAN, 42, "000042"}, {FieldSTAN, 999999, "999999"},
		{FieldAmount, 1000, "000000001000"}, {FieldAmount, 1e12, "1000000000000"}, {FieldAmount, -5, "-5"},
		{FieldOriginalDataElement, 7, "000000000000000000000000000000000000000007"}} {
		if got := New("0100").SetNumber(c.field, c.v).Value(c.field); got != c.want {
			t.Errorf("SetNumber(%d, %d) = %q, want %q", c.field, c.v, got, c.want)
		}
	}
}

// FrameReader reads frames in place from its buffer when they fit and into
// its own buffer when not, skips a malformed one (reporting it), and a
// message reused by NextInto leaves the strings read from it before
// intact (they are a copy, not the read buffer).
func TestFrameReaderInPlaceAndBeyondItsBuffer(t *testing.T) {
	first := authMessage()
	second := authMessage().Set(FieldRRN, "999999999999").Set(FieldAdditionalData, strings.Repeat("x", 900))
	var stream []byte
	stream, _ = first.AppendFrame(stream)
	stream = append(stream, 0, 3, 'b', 'a', 'd') // a frame that is no message
	stream, _ = second.AppendFrame(stream)
	stream = append(stream, 0, 40, '0', '1')   // cut short
	for _, size := range []int{16 << 10, 16} { // 16: every frame is longer than the buffer
		fr := &FrameReader{r: bufio.NewReaderSize(bytes.NewReader(stream), size)}
		var bad []error
		malformed := func(err error) { bad = append(bad, err) }
		m := &Message{}
		if err := fr.NextInto(m, malformed); err != nil {
			t.Fatalf("buffer %d: first frame: %v", size, err)
		}
		rrn, f48 := m.Value(FieldRRN), m.Value(FieldAdditionalData)
		want, _ := first.Pack()
		if got, _ := m.Pack(); !bytes.Equal(got, want) {
			t.Fatalf("buffer %d: first message %x, want %x", size, got, want)
		}
		if err := fr.NextInto(m, malformed); err != nil {
			t.Fatalf("buffer %d: second frame: %v", size, err)
		}
		want, _ = second.Pack()
		if got, _ := m.Pack(); !bytes.Equal(got, want) {
			t.Fatalf("buffer %d: second message %x, want %x", size, got, want)
		}
		if len(bad) != 1 {
			t.Fatalf("buffer %d: %d malformed frames reported, want 1", size, len(bad))
		}
		if rrn != first.Value(FieldRRN) || f48 != first.Value(FieldAdditionalData) {
			t.Fatalf("buffer %d: the first message's values changed after the reader went on: %q %q", size, rrn, f48)
		}
		if err := fr.NextInto(m, malformed); err != io.ErrUnexpectedEOF {
			t.Fatalf("buffer %d: truncated frame: %v, want io.ErrUnexpectedEOF", size, err)
		}
	}
	fr := NewFrameReader(bytes.NewReader(nil))
	if _, err := fr.Next(func(error) {}); err != io.EOF {
		t.Fatalf("empty stream: %v, want io.EOF", err)
	}
}
