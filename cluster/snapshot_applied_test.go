package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
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
	got, err := snapshotApplied(StoreState(nil), unopenable{store}, dir, id)
	if err != nil || got != 87 {
		t.Fatalf("read from the state file: %d, %v; want 87", got, err)
	}
	// Elsewhere than raft's layout: through Open.
	got, err = snapshotApplied(StoreState(nil), store, t.TempDir(), id)
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
	return snapshotAtIndex(t, dir, applied, applied+3)
}

// snapshotAtIndex is snapshotAt with raft's index of the snapshot given.
func snapshotAtIndex(t *testing.T, dir string, applied, raftIndex uint64) (*raft.FileSnapshotStore, string) {
	t.Helper()
	store, err := raft.NewFileSnapshotStore(dir, 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := store.Create(raft.SnapshotVersionMax, raftIndex, 3, raft.Configuration{}, 1, nil)
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
		f, err := NewFSM(StoreState(store), logger)
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

// A snapshot taken while a restarted node replayed its log has a raft index
// below the applied index its stream holds (raft names it after the last
// entry replayed, the stream is the whole store). A follower that installed
// it holds that applied index with an empty log: it is whole, and starts.
// A store past both is still refused.
func TestLogCoversStoreUpToTheSnapshotsAppliedIndex(t *testing.T) {
	dir := t.TempDir()
	snaps, _ := snapshotAtIndex(t, dir, 4013, 513)
	logs := raft.NewInmemStore()
	if err := checkLogCoversStore(StoreState(nil), 4013, logs, snaps, dir, "wal"); err != nil {
		t.Fatalf("a store at the snapshot's applied index: %v", err)
	}
	if err := checkLogCoversStore(StoreState(nil), 4014, logs, snaps, dir, "wal"); err == nil {
		t.Fatal("a store past the snapshot and the log was accepted")
	}
}

// A restore that fails has emptied the store; raft, on a failed install,
// would carry on and apply its next entries to it. The node stops instead,
// and its next start restores raft's snapshot again.
func TestFailedRestoreStopsTheNode(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	stateDir := filepath.Join(t.TempDir(), "state")
	store, err := persistence.Open(stateDir, logger)
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFSM(StoreState(store), logger)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "restore failed") {
				t.Errorf("recovered %v, want the restore's panic", r)
			}
		}()
		err := f.Restore(io.NopCloser(&failingReader{after: 200}))
		t.Errorf("Restore returned %v: the node carries on with an emptied store", err)
	}()
	store.Close()

	// The next start: the marker sends it to raft's snapshot.
	store, err = persistence.Open(stateDir, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	f, err = NewFSM(StoreState(store), logger)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	snaps, _ := snapshotAt(t, dir, 87)
	if err := f.recoverStore(snaps, dir); err != nil || f.AppliedIndex() != 87 || f.Restores() != 1 {
		t.Fatalf("err %v, applied %d, restores %d: want the snapshot restored at start", err, f.AppliedIndex(), f.Restores())
	}
}
