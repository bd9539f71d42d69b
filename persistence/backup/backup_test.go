package backup

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func makeBackup(t *testing.T, stream []byte) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{AppliedIndex: 42, NodeID: "n1", Configuration: []Server{{ID: "n1", Address: "a:1", Suffrage: "Voter"}}})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(stream)
	sum, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), sum
}

// A whole file verifies and gives back its header and stream; a file cut
// anywhere, or with any single bit flipped, is refused.
func TestVerifyRefusesEveryCutAndFlip(t *testing.T) {
	stream := bytes.Repeat([]byte("record"), 100)
	data, sum := makeBackup(t, stream)
	hdr, got, err := Verify(bytes.NewReader(data), int64(len(data)))
	if err != nil || got != sum || hdr.AppliedIndex != 42 || hdr.FormatVersion != FormatVersion || len(hdr.Configuration) != 1 {
		t.Fatalf("whole file: %+v %s %v", hdr, got, err)
	}
	path := filepath.Join(t.TempDir(), "b")
	os.WriteFile(path, data, 0o600)
	_, rc, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	back, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(back, stream) {
		t.Fatalf("stream read back differs: %d bytes, want %d", len(back), len(stream))
	}
	for cut := 0; cut < len(data); cut++ {
		if _, _, err := Verify(bytes.NewReader(data[:cut]), int64(cut)); err == nil {
			t.Fatalf("a file cut at %d of %d bytes verified", cut, len(data))
		}
	}
	for i := 0; i < len(data); i++ {
		bad := append([]byte(nil), data...)
		bad[i] ^= 0x10
		if _, _, err := Verify(bytes.NewReader(bad), int64(len(bad))); err == nil {
			t.Fatalf("a file with byte %d changed verified", i)
		}
	}
	bad := append([]byte(nil), data...)
	bad[len(bad)/2] ^= 1
	if _, _, err := Verify(bytes.NewReader(bad), int64(len(bad))); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a flipped bit in the stream: %v, want ErrCorrupt", err)
	}
	if _, _, err := Verify(bytes.NewReader(data[:len(data)-10]), int64(len(data)-10)); !errors.Is(err, ErrTruncated) {
		t.Fatalf("a cut file: %v, want ErrTruncated", err)
	}
}

// WriteFileAtomic leaves nothing behind when the write fails, and never a
// file that does not verify.
func TestWriteFileAtomicLeavesNothingOnFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.pgbak")
	data, _ := makeBackup(t, []byte("x"))
	_, _, err := WriteFileAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data[:len(data)-5]) // a stream cut short without an error
		return err
	})
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("a cut stream: %v, want ErrTruncated", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
	if _, _, err := WriteFileAtomic(path, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != "out.pgbak" {
		t.Fatalf("after a good write: %v", entries)
	}
}
