package cluster

import (
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/hashicorp/raft"
)

// snapshotApplied reads the applied index from the head of the state file
// raft's file store keeps, without Open (which reads and checksums the whole
// file), and falls back to Open when the file is not where it expects.
func TestSnapshotAppliedReadsTheStateFileHead(t *testing.T) {
	dir := t.TempDir()
	store, err := raft.NewFileSnapshotStore(dir, 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := store.Create(raft.SnapshotVersionMax, 90, 3, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The stream: the applied index (87: three no-ops after it), one more
	// key, the end.
	var stream []byte
	record := func(k, v []byte) {
		stream = binary.AppendUvarint(stream, uint64(len(k)))
		stream = append(stream, k...)
		stream = binary.AppendUvarint(stream, uint64(len(v)))
		stream = append(stream, v...)
	}
	record([]byte("a/applied"), binary.BigEndian.AppendUint64(nil, 87))
	record([]byte("m/merchant"), []byte("{}"))
	stream = append(stream, 0)
	if _, err := sink.Write(stream); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := snapshotApplied(unopenable{store}, dir, sink.ID())
	if err != nil || got != 87 {
		t.Fatalf("read from the state file: %d, %v; want 87", got, err)
	}
	// Elsewhere than raft's layout: through Open.
	got, err = snapshotApplied(store, t.TempDir(), sink.ID())
	if err != nil || got != 87 {
		t.Fatalf("read through Open: %d, %v; want 87", got, err)
	}
}

// unopenable is a snapshot store whose Open fails.
type unopenable struct{ raft.SnapshotStore }

func (unopenable) Open(string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	return nil, nil, errors.New("Open was called")
}
