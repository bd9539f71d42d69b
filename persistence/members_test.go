package persistence

import (
	"io"
	"log/slog"
	"testing"

	"github.com/paygate/gateway/persistence/command"
)

// Member records are replicated state: written and deleted by commands,
// carried by snapshots, and covered by the digest; the digest leaves out
// only the per-node applied index.
func TestMembersDigestAndSnapshot(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func() *Store {
		s, err := Open(t.TempDir(), logger)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	apply := func(s *Store, idx uint64, cmds ...command.Cmd) []Result {
		b := s.NewBatch()
		defer b.Close()
		var out []Result
		for i := range cmds {
			out = append(out, b.Apply(&cmds[i]))
		}
		if err := b.Commit(idx); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b := open(), open()
	n1 := command.Member{NodeID: "n1", RaftAddr: "127.0.0.1:7001", HTTPAddr: "127.0.0.1:8081"}
	n2 := command.Member{NodeID: "n2", RaftAddr: "127.0.0.1:7002", HTTPAddr: "127.0.0.1:8082"}
	apply(a, 5, command.Cmd{Member: &n1}, command.Cmd{Member: &n2})
	apply(b, 9, command.Cmd{Member: &n1}, command.Cmd{Member: &n2}) // same state, other applied index
	if res := apply(a, 6, command.Cmd{Member: &command.Member{}}); res[0].Err == nil {
		t.Fatal("a member without node_id must be refused")
	}
	apply(b, 10)
	da, ia, _ := a.Digest()
	db, ib, _ := b.Digest()
	if da == "" || da != db || ia != 6 || ib != 10 {
		t.Fatalf("digests %s@%d and %s@%d", da, ia, db, ib)
	}
	apply(b, 11, command.Cmd{Member: &command.Member{NodeID: "n2", Removed: true}})
	if ms, _ := b.Members(); len(ms) != 1 || ms[0] != n1 {
		t.Fatalf("after remove: %+v", ms)
	}
	if d, _, err := b.Digest(); err != nil || d == da {
		t.Fatalf("digest unchanged by a removal (%v)", err)
	}
	// A snapshot of a restores into b: same records, same digest, a's index.
	restoreFrom(t, b, a)
	if m, _ := b.Member("n2"); m == nil || *m != n2 {
		t.Fatalf("n2 after restore: %+v", m)
	}
	if d, i, _ := b.Digest(); d != da || i != 6 {
		t.Fatalf("after restore %s@%d, want %s@6", d, i, da)
	}
	if partial, _ := b.RestoreIncomplete(); partial {
		t.Fatal("restore marker left behind")
	}
}
