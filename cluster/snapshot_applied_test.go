package cluster

import (
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/paygate/gateway/persistence"
)

// snapshotApplied reads the applied index from the head of the state file
// raft's file store keeps, without Open (which reads and checksums the whole
// file), and falls back to Open when the file is not where it expects.
func TestSnapshotAppliedReadsTheStateFileHead(t *testing.T) {
	dir := t.TempDir()
	store, id := snapshotAt(t, dir, 87)
	got, err := snapshotApplied(unopenable{store}, dir, id)
	if err != nil || got != 87 {
		t.Fatalf("read from the state file: %d, %v; want 87", got, err)
	}
	// Elsewhere than raft's layout: through Open.
	got, err = snapshotApplied(store, t.TempDir(), id)
	if err != nil || got != 87 {
		t.Fatalf("read through Open: %d, %v; want 87", got, err)
	}
}

// unopenable is a snapshot store whose Open fails.
type unopenable struct{ raft.SnapshotStore }

func (unopenable) Open(string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	return nil, nil, errors.New("Open was called")
}

// snapshotAt writes a snapshot to raft's file store in dir whose stream
// holds the applied index (raft's own index of it is 3 later: no-ops) and
// one merchant record.
func snapshotAt(t *testing.T, dir string, applied uint64) (*raft.FileSnapshotStore, string) {
	t.Helper()
	store, err := raft.NewFileSnapshotStore(dir, 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := store.Create(raft.SnapshotVersionMax, applied+3, 3, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stream []byte
	record := func(k, v []byte) {
		stream = binary.AppendUvarint(stream, uint64(len(k)))
		stream = append(stream, k...)
		stream = binary.AppendUvarint(stream, uint64(len(v)))
		stream = append(stream, v...)
	}
	record([]byte("a/applied"), binary.BigEndian.AppendUint64(nil, applied))
	record([]byte("m/merchant"), []byte("{}"))
	stream = append(stream, 0)
	if _, err := sink.Write(stream); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return store, sink.ID()
}

// recoverStore restores a store that holds less than the latest snapshot,
// leaves one that holds as much alone, and with a snapshot it cannot read
// starts a store that has data but refuses an empty one.
func TestRecoverStoreDecides(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	fsmAt := func(t *testing.T, applied uint64) *FSM {
		store, err := persistence.Open(filepath.Join(t.TempDir(), "state"), logger)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		f, err := NewFSM(store, logger)
		if err != nil {
			t.Fatal(err)
		}
		f.applied.Store(applied) // what the store would say it applied
		return f
	}
	t.Run("behind: restored", func(t *testing.T) {
		dir := t.TempDir()
		snaps, _ := snapshotAt(t, dir, 87)
		f := fsmAt(t, 0)
		if err := f.recoverStore(snaps, dir); err != nil || f.AppliedIndex() != 87 || f.Restores() != 1 {
			t.Fatalf("err %v, applied %d, restores %d: want the snapshot restored", err, f.AppliedIndex(), f.Restores())
		}
	})
	t.Run("as much: left alone", func(t *testing.T) {
		dir := t.TempDir()
		snaps, _ := snapshotAt(t, dir, 87)
		f := fsmAt(t, 87)
		if err := f.recoverStore(snaps, dir); err != nil || f.Restores() != 0 {
			t.Fatalf("err %v, restores %d: want nothing restored", err, f.Restores())
		}
	})
	t.Run("unreadable snapshot", func(t *testing.T) {
		dir := t.TempDir()
		snaps, id := snapshotAt(t, dir, 87)
		if err := os.WriteFile(filepath.Join(dir, "snapshots", id, "state.bin"), []byte{0xff}, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := fsmAt(t, 40).recoverStore(snaps, dir); err != nil {
			t.Fatalf("a store with data: %v, want it started", err)
		}
		if err := fsmAt(t, 0).recoverStore(snaps, dir); err == nil || !strings.Contains(err.Error(), "store is empty") {
			t.Fatalf("an empty store: %v, want a refusal", err)
		}
	})
}
