package node_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"github.com/paygate/gateway/node/nodetest"
)

// A node killed after raft-wal sealed a full log segment and before it
// recorded the seal (the background rotation) comes back able to commit:
// without cluster's repair of the raft log it would read its log but fail
// every append, never be ready, and answer every write with 503.
//
// The crash state is built from a real run with small segments: the copy of
// wal-meta.db taken before the charge whose entries filled the segment, and
// the segment files without the one the rotation created. Only a rotation
// after which nothing was appended to the new segment is used (the entries
// after the seal would be lost with the file, and the store, which applied
// them, would rightly refuse the shorter log); the node is restarted and
// charged again until one comes.
func TestRestartAfterInterruptedWALRotation(t *testing.T) {
	const segBytes = 16 << 10
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--raft-wal-segment-bytes", "16384"}})
	m := n.CreateMerchant(t, 10000)
	walDir := filepath.Join(n.DataDir, "raft", "wal")

	var acked []string
	charge := func() {
		t.Helper()
		// Order ids of varying length vary the entries' sizes, so the
		// segment fills on a different entry of a charge each time round:
		// with entries of fixed sizes the filling entry can be the same
		// one (not the charge's last) in every try.
		id := newOrderID("walrot" + strings.Repeat("x", len(acked)*37%97))
		if r := m.Post(t, "charge", chargeBody(id, "4111111111111111", 700, 24)); r.Status != 200 {
			t.Fatalf("charge: %d %s", r.Status, r.Body)
		}
		m.WaitStatus(t, id, "authorized", 5*time.Second)
		acked = append(acked, id)
	}

	var oldMeta []byte
	var newSeg string
	for attempt := 0; newSeg == ""; attempt++ {
		if attempt == 15 {
			t.Fatal("no rotation without appends after it in 15 tries")
		}
		segs := walSegments(t, walDir)
		var metas [][]byte // wal-meta.db before each charge
		for i := 0; i < 200 && newSeg == ""; i++ {
			b, err := os.ReadFile(filepath.Join(walDir, metadb.FileName))
			if err != nil {
				t.Fatal(err)
			}
			metas = append(metas, b)
			charge()
			time.Sleep(20 * time.Millisecond) // let a rotation finish
			for _, s := range walSegments(t, walDir) {
				if !slices.Contains(segs, s) {
					newSeg = s
				}
			}
		}
		if newSeg == "" {
			t.Fatal("no segment rotation in 200 charges")
		}
		n.Kill()
		var base, id uint64
		parseSegment(t, newSeg, &base, &id)
		// The meta before the rotation still has the new segment's id to give.
		oldMeta = nil
		for i := len(metas) - 1; i >= 0 && oldMeta == nil; i-- {
			if nextSegmentID(t, metas[i]) == id {
				oldMeta = metas[i]
			}
		}
		if oldMeta == nil {
			t.Fatalf("no copy of %s from before segment %s", metadb.FileName, newSeg)
		}
		if last := walLastIndex(t, walDir, segBytes); last != base-1 {
			t.Logf("entries %d..%d were appended after the rotation; charging on", base, last)
			newSeg = ""
			n.Restart()
		}
	}

	// The disk as if the node had died between the seal and its record.
	if err := os.WriteFile(filepath.Join(walDir, metadb.FileName), oldMeta, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(walDir, newSeg)); err != nil {
		t.Fatal(err)
	}
	n.Restart() // waits for /readyz 200
	if !strings.Contains(n.Logs(), "finished a segment rotation") {
		t.Fatalf("no warning about the repaired raft log:\n%s", n.Logs())
	}
	for _, id := range acked {
		m.WaitStatus(t, id, "authorized", 5*time.Second)
	}
	before := len(acked)
	for i := 0; i < 30; i++ { // across more rotations
		charge()
	}
	if err := n.Stop(20 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, n.Logs())
	}
	n.Restart()
	for _, id := range acked {
		m.WaitStatus(t, id, "authorized", 5*time.Second)
	}
	t.Logf("%d charges before the crash state, %d after", before, len(acked)-before)
}

func walSegments(t *testing.T, dir string) []string {
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

// parseSegment reads a segment file's name: <BaseIndex>-<ID hex>.wal.
func parseSegment(t *testing.T, name string, base, id *uint64) {
	t.Helper()
	if _, err := fmt.Sscanf(name, "%020d-%016x.wal", base, id); err != nil {
		t.Fatalf("segment file %s: %v", name, err)
	}
}

// nextSegmentID loads a copy of wal-meta.db.
func nextSegmentID(t *testing.T, meta []byte) uint64 {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, metadb.FileName), meta, 0o600); err != nil {
		t.Fatal(err)
	}
	db := &metadb.BoltMetaDB{}
	defer db.Close()
	st, err := db.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st.NextSegmentID
}

// walLastIndex opens a copy of the raft log in dir.
func walLastIndex(t *testing.T, dir string, segBytes int) uint64 {
	t.Helper()
	cp := t.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cp, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w, err := raftwal.Open(cp, raftwal.WithSegmentSize(segBytes))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	last, err := w.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	return last
}
