package persistence

import (
	"slices"
	"testing"
	"time"
)

// pendingIDs is the store's pending-authorisation set, as order ids.
func pendingIDs(t *testing.T, s *Store) []string {
	t.Helper()
	refs, err := s.PendingAuths()
	return orderIDsOf(t, refs, err, refOrderID)
}

// storedPendingIDs is what the p/ keys hold.
func storedPendingIDs(t *testing.T, s *Store) []string {
	t.Helper()
	var ids []string
	err := s.scan([]byte(prefixPending), prefixEnd(prefixPending), func(k, _ []byte) bool {
		ids = append(ids, splitRef(k[len(prefixPending):]).OrderID)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func wantIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %q, want %q", what, got, want)
	}
}

// The pending-authorisation set follows every applied change in memory,
// reaches the p/ keys only at a checkpoint (here a snapshot's), and after a
// kill is the p/ keys corrected by Recheck of the orders changed since
// (what the FSM does with the log entries raft replays).
func TestPendingAuthsInMemoryUntilCheckpoint(t *testing.T) {
	s := newTestStore(t)
	s.SetPendingCheckpointEvery(time.Hour)
	createA, answerA := chargeCmds("a", 1)
	createB, answerB := chargeCmds("b", 2)
	createC, _ := chargeCmds("c", 3)

	s.apply(1, createA, createB)
	wantIDs(t, "after two acceptances", pendingIDs(t, s.Store), "a", "b")
	wantIDs(t, "p/ keys before any snapshot", storedPendingIDs(t, s.Store))

	// An acceptance and its answer in one batch leave nothing behind.
	createD, answerD := chargeCmds("d", 4)
	s.apply(2, createD, answerD)
	wantIDs(t, "after d's acceptance and answer", pendingIDs(t, s.Store), "a", "b")

	if err := s.SyncForSnapshot(); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "p/ keys at the snapshot", storedPendingIDs(t, s.Store), "a", "b")

	// After the snapshot: a is answered, c accepted. Only memory knows.
	s.apply(3, answerA, createC)
	wantIDs(t, "after the snapshot", pendingIDs(t, s.Store), "b", "c")
	wantIDs(t, "p/ keys after the snapshot", storedPendingIDs(t, s.Store), "a", "b")

	// A restart after a kill reads the snapshot's set ...
	if err := s.CloseAsKilled(); err != nil {
		t.Fatal(err)
	}
	s.open()
	s.SetPendingCheckpointEvery(time.Hour)
	if s.PendingExactAt() != 2 {
		t.Fatalf("checkpoint exact at %d, want 2", s.PendingExactAt())
	}
	wantIDs(t, "reopened", pendingIDs(t, s.Store), "a", "b")
	// ... and the replayed entries' orders (a and c, index 3) correct it.
	if err := s.Recheck([]OrderRef{{"m_bench", "a"}, {"m_bench", "c"}, {"m_bench", "a"}}); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "after recheck", pendingIDs(t, s.Store), "b", "c")

	// The next snapshot writes only the difference, and a follower
	// restoring it gets the set with it.
	s.apply(4, answerB)
	if err := s.SyncForSnapshot(); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "p/ keys at the second snapshot", storedPendingIDs(t, s.Store), "c")
	follower := newTestStore(t)
	follower.apply(1, createA) // state the restore replaces
	restoreFrom(t, follower.Store, s.Store)
	wantIDs(t, "follower after restore", pendingIDs(t, follower.Store), "c")

	// Each node writes its p/ keys at its own snapshots: the digest leaves
	// them out (the orders they name are in it), so replicas still agree.
	createE, _ := chargeCmds("e", 5)
	s.apply(5, createE)
	follower.apply(5, createE)
	if err := s.SyncForSnapshot(); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "leader's p/ keys", storedPendingIDs(t, s.Store), "c", "e")
	wantIDs(t, "follower's p/ keys", storedPendingIDs(t, follower.Store), "c")
	d1, i1, _ := s.Digest()
	d2, i2, _ := follower.Digest()
	if d1 != d2 || i1 != 5 || i2 != 5 {
		t.Fatalf("digests %s@%d and %s@%d", d1, i1, d2, i2)
	}

	// A batch after the checkpoint interval carries a checkpoint of the set
	// as it stood before it, exact at the batch before; a clean close
	// writes the rest.
	s.SetPendingCheckpointEvery(0)
	_, answerC := chargeCmds("c", 3)
	s.apply(6, answerC)
	wantIDs(t, "p/ keys after a batch's checkpoint", storedPendingIDs(t, s.Store), "c", "e")
	if s.PendingExactAt() != 6 {
		t.Fatalf("exact at %d after the batch, want 6", s.PendingExactAt())
	}
	s.reopen()
	wantIDs(t, "after a clean close", pendingIDs(t, s.Store), "e")
	wantIDs(t, "p/ keys after a clean close", storedPendingIDs(t, s.Store), "e")
	if s.PendingExactAt() != 6 {
		t.Fatalf("exact at %d after a clean close, want 6", s.PendingExactAt())
	}
}
