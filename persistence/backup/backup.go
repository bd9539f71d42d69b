// Package backup is the file format of a node's backup: a header saying
// what the copy is (format version, the Raft index it is consistent at, the
// cluster configuration it was taken in), the store's snapshot stream
// (persistence.Snapshot), and a trailer holding the file's length and its
// SHA-256. A restore reads the trailer first, so a file cut short or changed
// by a single bit is refused before anything is written.
//
// Layout:
//
//	"PAYGATE-BACKUP\x00\x01"  magic (16 bytes; the last byte is the format version)
//	uint32 BE                  header length
//	header JSON                Header
//	snapshot stream            persistence's key/value records, ending with a zero key length
//	"PGBK-END"                 trailer magic (8 bytes)
//	uint64 BE                  length of everything before the trailer
//	[32]byte                   SHA-256 of everything before the trailer
package backup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"time"

	"github.com/go-json-experiment/json"
)

// FormatVersion is the version this binary writes and reads.
const FormatVersion = 1

var (
	magic        = []byte("PAYGATE-BACKUP\x00\x01")
	trailerMagic = []byte("PGBK-END")
)

const (
	trailerBytes   = 8 + 8 + sha256.Size
	headerBytesMax = 1 << 20
)

// Server is one member of the configuration the backup was taken in.
type Server struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
}

// Header describes a backup.
type Header struct {
	FormatVersion int `json:"format_version"`
	// AppliedIndex is the Raft index the copy is consistent at: every
	// entry up to it, and none after it, is in the state.
	AppliedIndex uint64    `json:"applied_index"`
	Term         uint64    `json:"term"`
	NodeID       string    `json:"node_id"`
	CreatedAt    time.Time `json:"created_at"`
	// Configuration is informational: a restore starts a single-node
	// cluster of the restoring node, which the others join.
	Configuration []Server `json:"configuration"`
}

// Writer writes a backup: Begin writes the header, the caller writes the
// snapshot stream to it, and Finish appends the trailer.
type Writer struct {
	w   io.Writer
	sum hash.Hash
	n   uint64
	err error
}

// NewWriter starts a backup on w with header h.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	h.FormatVersion = FormatVersion
	hj, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	bw := &Writer{w: w, sum: sha256.New()}
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(hj)))
	bw.Write(magic)
	bw.Write(l[:])
	bw.Write(hj)
	return bw, bw.err
}

// Write writes part of the snapshot stream.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.w.Write(p)
	w.sum.Write(p[:n])
	w.n += uint64(n)
	w.err = err
	return n, err
}

// Finish writes the trailer and returns the checksum (hex).
func (w *Writer) Finish() (string, error) {
	if w.err != nil {
		return "", w.err
	}
	sum := w.sum.Sum(nil)
	var t [trailerBytes]byte
	copy(t[:], trailerMagic)
	binary.BigEndian.PutUint64(t[8:], w.n)
	copy(t[16:], sum)
	if _, err := w.w.Write(t[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(sum), nil
}

// ErrTruncated and ErrCorrupt say why a file is refused.
var (
	ErrTruncated = errors.New("backup: the file is truncated (no complete trailer: copy it again)")
	ErrCorrupt   = errors.New("backup: the checksum does not match (the file is corrupted)")
	ErrNotBackup = errors.New("backup: not a gateway backup file")
)

// Verify checks a whole backup read from r of size bytes: its trailer, its
// length and its checksum, then its header. It returns the header and the
// checksum (hex).
func Verify(r io.ReaderAt, size int64) (Header, string, error) {
	if size < int64(len(magic)+4+trailerBytes) {
		return Header{}, "", ErrTruncated
	}
	var t [trailerBytes]byte
	if _, err := r.ReadAt(t[:], size-trailerBytes); err != nil {
		return Header{}, "", fmt.Errorf("backup: read trailer: %w", err)
	}
	body := size - trailerBytes
	if !bytes.Equal(t[:8], trailerMagic) || binary.BigEndian.Uint64(t[8:16]) != uint64(body) {
		// A file cut short ends in the middle of the stream; one with
		// bytes appended has a trailer at the wrong place.
		if head, err := readMagic(io.NewSectionReader(r, 0, size)); err != nil || !head {
			return Header{}, "", ErrNotBackup
		}
		return Header{}, "", ErrTruncated
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(r, 0, body)); err != nil {
		return Header{}, "", fmt.Errorf("backup: read: %w", err)
	}
	if !bytes.Equal(h.Sum(nil), t[16:]) {
		return Header{}, "", ErrCorrupt
	}
	hdr, _, err := readHeader(bufio.NewReader(io.NewSectionReader(r, 0, body)))
	if err != nil {
		return Header{}, "", err
	}
	return hdr, hex.EncodeToString(t[16:]), nil
}

// VerifyFile is Verify of a file.
func VerifyFile(path string) (Header, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Header{}, "", err
	}
	return Verify(f, st.Size())
}

// OpenFile verifies a backup file and returns its header and a reader of
// its snapshot stream (close it when done).
func OpenFile(path string) (Header, io.ReadCloser, error) {
	hdr, _, err := VerifyFile(path)
	if err != nil {
		return Header{}, nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return Header{}, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return Header{}, nil, err
	}
	br := bufio.NewReader(io.NewSectionReader(f, 0, st.Size()-trailerBytes))
	if _, _, err := readHeader(br); err != nil {
		f.Close()
		return Header{}, nil, err
	}
	return hdr, struct {
		io.Reader
		io.Closer
	}{br, f}, nil
}

func readMagic(r io.Reader) (bool, error) {
	m := make([]byte, len(magic))
	if _, err := io.ReadFull(r, m); err != nil {
		return false, err
	}
	return bytes.Equal(m[:len(m)-1], magic[:len(magic)-1]), nil
}

// readHeader reads the magic and the header, leaving r at the stream.
func readHeader(r io.Reader) (Header, int, error) {
	m := make([]byte, len(magic)+4)
	if _, err := io.ReadFull(r, m); err != nil {
		return Header{}, 0, ErrTruncated
	}
	if !bytes.Equal(m[:len(magic)-1], magic[:len(magic)-1]) {
		return Header{}, 0, ErrNotBackup
	}
	if v := m[len(magic)-1]; v != FormatVersion {
		return Header{}, 0, fmt.Errorf("backup: format version %d, this binary reads version %d", v, FormatVersion)
	}
	l := binary.BigEndian.Uint32(m[len(magic):])
	if l > headerBytesMax {
		return Header{}, 0, ErrCorrupt
	}
	hj := make([]byte, l)
	if _, err := io.ReadFull(r, hj); err != nil {
		return Header{}, 0, ErrTruncated
	}
	var h Header
	if err := json.Unmarshal(hj, &h); err != nil {
		return Header{}, 0, fmt.Errorf("backup: header: %w", err)
	}
	if h.FormatVersion != FormatVersion {
		return Header{}, 0, fmt.Errorf("backup: format version %d, this binary reads version %d", h.FormatVersion, FormatVersion)
	}
	return h, len(m) + int(l), nil
}

// WriteFileAtomic writes a backup to path through a temporary file in the
// same folder, synced and renamed only once write succeeded and the written
// file verifies; it returns the header and the checksum.
func WriteFileAtomic(path string, write func(io.Writer) error) (Header, string, error) {
	dir, base := splitPath(path)
	tmp, err := os.CreateTemp(dir, "."+base+".partial-*")
	if err != nil {
		return Header{}, "", err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := write(bw); err != nil {
		return Header{}, "", err
	}
	if err := bw.Flush(); err != nil {
		return Header{}, "", err
	}
	if err := tmp.Sync(); err != nil {
		return Header{}, "", err
	}
	st, err := tmp.Stat()
	if err != nil {
		return Header{}, "", err
	}
	hdr, sum, err := Verify(tmp, st.Size())
	if err != nil {
		return Header{}, "", err
	}
	if err := tmp.Close(); err != nil {
		return Header{}, "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return Header{}, "", err
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		d.Sync() // the rename itself survives a crash
		d.Close()
	}
	return hdr, sum, nil
}

func splitPath(path string) (dir, base string) {
	for i := len(path) - 1; i >= 0; i-- {
		if os.IsPathSeparator(path[i]) {
			return path[:i+1], path[i+1:]
		}
	}
	return ".", path
}
