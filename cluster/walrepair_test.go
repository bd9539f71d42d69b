package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
)

const repairTestSegment = 8 << 10

// repairTestData is entry i's payload, ~300 bytes.
func repairTestData(i uint64) []byte {
	return []byte(fmt.Sprintf("entry %06d %s", i, strings.Repeat(fmt.Sprintf("%03d", i%1000), 96)))
}

func walFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		names[i] = filepath.Base(n)
	}
	return names
}

// dirContents maps every file in dir to its bytes.
func dirContents(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string][]byte, len(ents))
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = b
	}
	return m
}

func sameContents(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	for name, b := range dirContents(t, from) {
		if err := os.WriteFile(filepath.Join(to, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func appendEntry(w *raftwal.WAL, i uint64) error {
	return w.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: repairTestData(i)}})
}

func checkEntries(t *testing.T, w *raftwal.WAL, from, to uint64) {
	t.Helper()
	for i := from; i <= to; i++ {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if l.Index != i || l.Term != 1 || !bytes.Equal(l.Data, repairTestData(i)) {
			t.Fatalf("entry %d read back as index %d term %d data %.20q", i, l.Index, l.Term, l.Data)
		}
	}
}

// sealedTailCrash builds, in a new directory, what the disk holds when the
// process dies after an append sealed the first segment and before raft-wal's
// background rotation recorded the seal in wal-meta.db: the meta as it was
// before that append, and the segment files without the one the rotation
// creates (rotation never rewrites the sealed one). It returns the directory
// and the last index in it (the sealing append's).
func sealedTailCrash(t *testing.T) (string, uint64) {
	t.Helper()
	src := t.TempDir()
	w, err := raftwal.Open(src, raftwal.WithSegmentSize(repairTestSegment))
	if err != nil {
		t.Fatal(err)
	}
	metaBefore := map[uint64][]byte{} // entry index -> wal-meta.db before its append
	var newSeg string
	for i := uint64(1); newSeg == "" && i < 1000; i++ {
		b, err := os.ReadFile(filepath.Join(src, metadb.FileName))
		if err != nil {
			t.Fatal(err)
		}
		metaBefore[i] = b
		if err := appendEntry(w, i); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if files := walFiles(t, src); len(files) > 1 {
			newSeg = files[len(files)-1]
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if newSeg == "" {
		t.Fatal("no segment rotation after 1000 appends")
	}
	// Segment files are named <BaseIndex>-<ID>.wal: the new segment starts
	// right after the entry whose append sealed the old one.
	var base, id uint64
	if _, err := fmt.Sscanf(newSeg, "%020d-%016x.wal", &base, &id); err != nil {
		t.Fatalf("segment file %s: %v", newSeg, err)
	}
	last := base - 1
	meta, ok := metaBefore[last]
	if !ok {
		t.Fatalf("no copy of the meta before entry %d", last)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, metadb.FileName), meta, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range walFiles(t, src) {
		if name == newSeg {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, last
}

// A kill between raft-wal sealing a full segment and recording the seal
// leaves a log raftwal.Open opens but can never append to again (every
// StoreLogs fails with ErrSealed: a node that cannot commit, a follower
// that cannot catch up). repairSealedTail finishes the rotation.
func TestRepairSealedTailFinishesInterruptedRotation(t *testing.T) {
	dir, last := sealedTailCrash(t)

	// The crash state is the bug: without the repair the log is stuck.
	// (If this starts failing, raft-wal recovers the state by itself now.)
	stuck := t.TempDir()
	copyDir(t, dir, stuck)
	w, err := raftwal.Open(stuck, raftwal.WithSegmentSize(repairTestSegment))
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, w, 1, last)
	if err := appendEntry(w, last+1); !errors.Is(err, raftwal.ErrSealed) {
		t.Fatalf("unrepaired crash state: append %d returned %v, want raftwal.ErrSealed", last+1, err)
	}
	w.Close()

	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	repaired, err := repairSealedTail(dir, repairTestSegment, logger)
	if err != nil {
		t.Fatal(err)
	}
	if !repaired {
		t.Fatal("repairSealedTail did not repair the crash state")
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "segment rotation") {
		t.Fatalf("no warning logged for the repair:\n%s", logs.String())
	}

	w, err = raftwal.Open(dir, raftwal.WithSegmentSize(repairTestSegment))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := w.LastIndex(); err != nil || got != last {
		t.Fatalf("last index after repair: %d, %v; want %d", got, err, last)
	}
	checkEntries(t, w, 1, last)
	// Appends work again, across more rotations too.
	end := last + 100
	for i := last + 1; i <= end; i++ {
		if err := appendEntry(w, i); err != nil {
			t.Fatalf("append %d after repair: %v", i, err)
		}
	}
	checkEntries(t, w, 1, end)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	// The repaired log stays healthy: a second repair finds nothing to do,
	// and a reopen reads everything back.
	before := dirContents(t, dir)
	repaired, err = repairSealedTail(dir, repairTestSegment, logger)
	if err != nil || repaired {
		t.Fatalf("second repair: repaired %v, err %v; want false, nil", repaired, err)
	}
	if !sameContents(before, dirContents(t, dir)) {
		t.Fatal("a repair with nothing to do changed the log's files")
	}
	w, err = raftwal.Open(dir, raftwal.WithSegmentSize(repairTestSegment))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	checkEntries(t, w, 1, end)
	if err := appendEntry(w, end+1); err != nil {
		t.Fatalf("append %d after reopen: %v", end+1, err)
	}
}

// On anything but the interrupted rotation the repair changes nothing.
func TestRepairSealedTailNoOp(t *testing.T) {
	noop := func(t *testing.T, dir string) {
		t.Helper()
		before := dirContents(t, dir)
		var logs bytes.Buffer
		repaired, err := repairSealedTail(dir, repairTestSegment, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil || repaired {
			t.Fatalf("repaired %v, err %v; want false, nil", repaired, err)
		}
		if !sameContents(before, dirContents(t, dir)) {
			t.Fatal("the repair changed the log's files")
		}
		if logs.Len() > 0 {
			t.Fatalf("the repair logged:\n%s", logs.String())
		}
	}

	t.Run("empty dir", func(t *testing.T) {
		dir := t.TempDir()
		noop(t, dir)
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Fatalf("the repair created %d files in an empty dir", len(ents))
		}
	})

	t.Run("healthy log", func(t *testing.T) {
		dir := t.TempDir()
		w, err := raftwal.Open(dir, raftwal.WithSegmentSize(repairTestSegment))
		if err != nil {
			t.Fatal(err)
		}
		for i := uint64(1); i <= 100; i++ { // a few rotations, tail mid-segment
			if err := appendEntry(w, i); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if n := len(walFiles(t, dir)); n < 3 {
			t.Fatalf("want several segments, got %d", n)
		}
		noop(t, dir)
		w, err = raftwal.Open(dir, raftwal.WithSegmentSize(repairTestSegment))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		checkEntries(t, w, 1, 100)
		if err := appendEntry(w, 101); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("new tail file not created", func(t *testing.T) {
		// The crash raft-wal recovers by itself: the rotation recorded the
		// new segment but died before creating its file.
		dir := t.TempDir()
		w, err := raftwal.Open(dir, raftwal.WithSegmentSize(repairTestSegment))
		if err != nil {
			t.Fatal(err)
		}
		for i := uint64(1); len(walFiles(t, dir)) < 2; i++ {
			if err := appendEntry(w, i); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		// The log as if the new segment's file had never been created (an
		// entry appended to it after the rotation goes with it).
		files := walFiles(t, dir)
		newest := files[len(files)-1]
		var base uint64
		if _, err := fmt.Sscanf(newest, "%020d-", &base); err != nil {
			t.Fatal(err)
		}
		last := base - 1
		if err := os.Remove(filepath.Join(dir, newest)); err != nil {
			t.Fatal(err)
		}
		noop(t, dir)
		w, err = raftwal.Open(dir, raftwal.WithSegmentSize(repairTestSegment))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		checkEntries(t, w, 1, last)
		if err := appendEntry(w, last+1); err != nil {
			t.Fatal(err)
		}
	})
}

// A seal whose index block does not match the entries (a torn final write)
// is not recorded: raft-wal would serve entries through that index.
func TestRepairSealedTailRefusesBadIndex(t *testing.T) {
	dir, _ := sealedTailCrash(t)
	meta := &metadb.BoltMetaDB{}
	st, err := meta.Load(dir)
	meta.Close()
	if err != nil {
		t.Fatal(err)
	}
	tail := st.Segments[len(st.Segments)-1]
	sw, err := segment.NewFiler(dir, fs.New()).RecoverTail(tail)
	if err != nil {
		t.Fatal(err)
	}
	sealed, indexStart, _ := sw.Sealed()
	sw.Close()
	if !sealed {
		t.Fatal("crash state's tail is not sealed")
	}
	// Swap the index block's first two offsets: both still point at entries.
	name := filepath.Join(dir, segment.FileName(tail))
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	ix := b[indexStart : indexStart+8]
	var first [4]byte
	copy(first[:], ix[:4])
	copy(ix[:4], ix[4:8])
	copy(ix[4:8], first[:])
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}

	before := dirContents(t, dir)
	repaired, err := repairSealedTail(dir, repairTestSegment, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || repaired {
		t.Fatalf("repair of a segment with a bad index block: repaired %v, err %v; want an error", repaired, err)
	}
	t.Logf("refused: %v", err)
	if !sameContents(before, dirContents(t, dir)) {
		t.Fatal("the refused repair changed the log's files")
	}
}
