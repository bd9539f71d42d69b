package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/hashicorp/raft"

	"github.com/paygate/gateway/persistence/command"
)

// A paced writer hands everything on, no faster than its rate after the
// first burst (a lower bound only: a slow machine can only take longer).
func TestPacedWriterKeepsItsRate(t *testing.T) {
	p := newPacer(4 << 20) // 4 MiB/s
	var out bytes.Buffer
	in := bytes.Repeat([]byte("snapshot"), (1<<20)/8) // 1 MiB
	start := time.Now()
	n, err := p.writer(&out).Write(in)
	took := time.Since(start)
	if err != nil || n != len(in) || !bytes.Equal(out.Bytes(), in) {
		t.Fatalf("wrote %d of %d bytes, err %v, equal %v", n, len(in), err, bytes.Equal(out.Bytes(), in))
	}
	// (1 MiB - the 256 KiB burst) at 4 MiB/s is 187 ms.
	if took < 150*time.Millisecond {
		t.Errorf("1 MiB at 4 MiB/s took %s", took)
	}
	if newPacer(0).writer(&out) != &out {
		t.Error("a rate of 0 must not wrap the writer")
	}
}

// Shutting a node down while it writes a paced snapshot ends the snapshot
// instead of waiting for it: at 64 KiB/s this one would take half a minute.
func TestShutdownStopsAPacedSnapshot(t *testing.T) {
	dataDir := t.TempDir()
	node, store, err := startAloneWith(t, dataDir, "", func(c *Config) { c.SnapshotBytesPerSec = 64 << 10 })
	if err != nil {
		t.Fatal(err)
	}
	waitLeaderAlone(t, node)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pad := strings.Repeat("x", 10_000)
	for i := range 200 { // ~2 MB of state
		m := &command.Merchant{ID: "mer_" + string(rune('a'+i%26)) + strings.Repeat("y", i), Name: pad}
		if _, err := node.Propose(ctx, &command.Cmd{Merchant: m}); err != nil {
			t.Fatal(err)
		}
	}
	snap := node.Raft.Snapshot()
	// The snapshot is being written once raft's unfinished snapshot folder
	// holds some of the state.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		written, _ := filepath.Glob(filepath.Join(dataDir, "raft", "snapshots", "*.tmp", "state.bin"))
		if len(written) > 0 {
			if fi, err := os.Stat(written[0]); err == nil && fi.Size() > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the snapshot did not start writing")
		}
	}
	start := time.Now()
	if err := node.Shutdown(); err != nil {
		t.Logf("shutdown: %v", err)
	}
	took := time.Since(start)
	store.Close()
	if err := snap.Error(); err == nil {
		t.Error("the paced snapshot completed: shutdown did not stop it")
	} else if !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "stopped") {
		t.Logf("snapshot: %v", err)
	}
	if took > 10*time.Second {
		t.Errorf("shutdown took %s: it waited for the paced snapshot", took)
	}
}

// A written snapshot is timed, and its size is the size raft recorded.
func TestSnapshotMetrics(t *testing.T) {
	dataDir := t.TempDir()
	node, store, err := startAlone(t, dataDir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stopAlone(t, node, store)
	waitLeaderAlone(t, node)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := node.Propose(ctx, &command.Cmd{Merchant: &command.Merchant{ID: "mer_snap", Name: strings.Repeat("n", 5000)}}); err != nil {
		t.Fatal(err)
	}
	before := snapshotCount(t)
	if err := node.Raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if got := snapshotCount(t); got != before+1 {
		t.Errorf("gateway_raft_snapshot_seconds_count went from %d to %d, want one more", before, got)
	}
	snaps, err := raft.NewFileSnapshotStore(filepath.Join(dataDir, "raft"), 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("snapshots: %v, %v", metas, err)
	}
	if got := node.FSM.snapshotBytes.Get(); got != float64(metas[0].Size) || got < 5000 {
		t.Errorf("gateway_raft_snapshot_bytes = %v, raft recorded %d bytes", got, metas[0].Size)
	}
}

func snapshotCount(t *testing.T) int64 {
	t.Helper()
	var b bytes.Buffer
	metrics.WritePrometheus(&b, false)
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "gateway_raft_snapshot_seconds_count "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no gateway_raft_snapshot_seconds_count in /metrics")
	return 0
}
