package cluster

import (
	"bytes"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
)

// The timing wrapper must not hide what raft asks of raft-wal: raft-wal
// cannot delete from the middle of its log, and raft only knows to drop
// the whole log on a snapshot install if the store says it is monotonic.
func TestTimedLogStoreKeepsWALBehaviour(t *testing.T) {
	wal, err := raftwal.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer wal.Close()
	set := metrics.NewSet()
	store := timedLogStore{LogStore: wal, appendLat: set.GetOrCreatePrometheusHistogram(`append_seconds`)}
	cache, err := raft.NewLogCache(16, store)
	if err != nil {
		t.Fatal(err)
	}
	if !cache.IsMonotonic() {
		t.Fatal("raft-wal behind the timing wrapper is not reported as monotonic")
	}

	if err := cache.StoreLogs([]*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("a")},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("b")},
	}); err != nil {
		t.Fatal(err)
	}
	if err := cache.StoreLog(&raft.Log{Index: 3, Term: 1, Type: raft.LogCommand, Data: []byte("c")}); err != nil {
		t.Fatal(err)
	}
	var got raft.Log
	if err := wal.GetLog(3, &got); err != nil || string(got.Data) != "c" {
		t.Fatalf("entry 3 in the WAL: %q, %v", got.Data, err)
	}

	var out bytes.Buffer
	set.WritePrometheus(&out)
	if !strings.Contains(out.String(), "append_seconds_count 2\n") {
		t.Fatalf("want 2 timed appends (one batch, one single entry), got:\n%s", out.String())
	}
}
