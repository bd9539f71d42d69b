package iso8583

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"time"
)

// MaxFrameBytes is the longest message a 2-byte length prefix can announce.
const MaxFrameBytes = 1<<16 - 1

// AppendFrame appends the 2-byte big-endian length prefix and the packed
// message to dst.
func (m *Message) AppendFrame(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0)
	dst, err := m.AppendPack(dst)
	if err != nil {
		return dst[:start], err
	}
	size := len(dst) - start - 2
	if size > MaxFrameBytes {
		return dst[:start], fmt.Errorf("iso8583: message of %d bytes is longer than a length prefix can say", size)
	}
	binary.BigEndian.PutUint16(dst[start:], uint16(size))
	return dst, nil
}

// ReadFrame reads one length-prefixed message from r into buf (grown as
// needed) and returns its bytes, without the prefix.
func ReadFrame(r io.Reader, buf []byte) ([]byte, error) {
	var prefix [2]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	size := int(binary.BigEndian.Uint16(prefix[:]))
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// FrameWriter writes length-prefixed messages to one connection from any
// number of goroutines. Frames sent while a write is under way are
// gathered and go out together in the next write: under load one system
// call carries many messages instead of one each.
type FrameWriter struct {
	w io.Writer

	mu      sync.Mutex
	queued  []byte // frames waiting for the writer
	spare   []byte // the last batch written, reused for the next queue
	writing bool   // a goroutine is writing; it takes what is queued next
	err     error  // the first write error: every later Send fails with it
	cond    *sync.Cond
	written uint64 // frames written so far, or failed
	total   uint64 // frames queued so far
}

// NewFrameWriter returns a FrameWriter on w.
func NewFrameWriter(w io.Writer) *FrameWriter {
	fw := &FrameWriter{w: w}
	fw.cond = sync.NewCond(&fw.mu)
	return fw
}

// Send packs m and returns once its frame was written (or failed). A
// message that does not pack is refused without touching the connection.
func (fw *FrameWriter) Send(m *Message) error {
	fw.mu.Lock()
	if fw.err != nil {
		err := fw.err
		fw.mu.Unlock()
		return err
	}
	var err error
	before := len(fw.queued)
	if fw.queued, err = m.AppendFrame(fw.queued); err != nil {
		fw.queued = fw.queued[:before]
		fw.mu.Unlock()
		return err
	}
	fw.total++
	mine := fw.total
	if fw.writing {
		// The goroutine writing takes this frame with its next batch.
		for fw.written < mine {
			fw.cond.Wait()
		}
		err := fw.err
		fw.mu.Unlock()
		return err
	}
	fw.writing = true
	for len(fw.queued) > 0 && fw.err == nil {
		batch, upTo := fw.queued, fw.total
		fw.queued, fw.spare = fw.spare[:0], nil
		fw.mu.Unlock()
		_, werr := fw.w.Write(batch)
		fw.mu.Lock()
		if cap(batch) <= 64<<10 { // a burst's buffer is not kept for ever
			fw.spare = batch
		}
		if werr != nil {
			fw.err = werr
		}
		fw.written = upTo
		fw.cond.Broadcast()
	}
	if fw.err != nil {
		fw.written = fw.total
		fw.cond.Broadcast()
	}
	fw.writing = false
	err = fw.err
	fw.mu.Unlock()
	return err
}

// Date and time fields, from a UTC time: 7 (MMDDhhmmss), 12 (hhmmss) and
// 13 (MMDD). Written digit by digit: time.Format was a tenth of the link's
// CPU.
func TransmissionTime(t time.Time) string {
	var b [10]byte
	_, mo, d := t.Date()
	h, mi, s := t.Clock()
	put2(b[0:], int(mo))
	put2(b[2:], d)
	put2(b[4:], h)
	put2(b[6:], mi)
	put2(b[8:], s)
	return string(b[:])
}

// LocalTime is field 12, hhmmss.
func LocalTime(t time.Time) string { return TransmissionTime(t)[4:] }

// LocalDate is field 13, MMDD.
func LocalDate(t time.Time) string { return TransmissionTime(t)[:4] }

func put2(b []byte, v int) { b[0], b[1] = byte('0'+v/10), byte('0'+v%10) }

// FrameReader reads length-prefixed messages from one connection, several
// frames per read system call under load.
type FrameReader struct {
	r      *bufio.Reader
	buf    []byte // a frame longer than r's buffer
	peeked int    // bytes of r's buffer the last frame was read from in place
}

// NewFrameReader returns a FrameReader on r.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{r: bufio.NewReaderSize(r, 16<<10)}
}

// NextInto is Next reading into m, replacing what m held: for a reader
// that reuses its messages (the acquirer host answers one and is done with
// it). The fields of m are substrings of a copy of the frame, so they stay
// valid after m is reused.
func (fr *FrameReader) NextInto(m *Message, malformed func(error)) error {
	for {
		b, err := fr.frame()
		if err != nil {
			return err
		}
		err = m.Unpack(b)
		fr.r.Discard(fr.peeked) // Unpack copied what it keeps
		if err == nil {
			return nil
		}
		malformed(err)
	}
}

// frame returns the next frame's bytes, without the prefix: in the read
// buffer when it fits there (Peek, no copy; NextInto discards it after
// unpacking), else read into fr.buf. No allocation but fr.buf's growth
// (ReadFrame's prefix array escapes through the io.Reader interface: an
// allocation a message).
func (fr *FrameReader) frame() ([]byte, error) {
	fr.peeked = 0
	prefix, err := fr.r.Peek(2)
	if len(prefix) < 2 {
		if err == io.EOF && len(prefix) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	size := int(binary.BigEndian.Uint16(prefix))
	if 2+size <= fr.r.Size() {
		b, err := fr.r.Peek(2 + size)
		if len(b) < 2+size {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		fr.peeked = 2 + size
		return b[2:], nil
	}
	fr.r.Discard(2)
	if cap(fr.buf) < size {
		fr.buf = make([]byte, size)
	}
	b := fr.buf[:size]
	if _, err := io.ReadFull(fr.r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

// Next reads and unpacks the next message. A frame that is not a valid
// message is skipped and reported through malformed (its error names a
// field, never a value); an error is the connection's.
func (fr *FrameReader) Next(malformed func(error)) (*Message, error) {
	m := &Message{}
	if err := fr.NextInto(m, malformed); err != nil {
		return nil, err
	}
	return m, nil
}
