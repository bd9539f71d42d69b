package cluster

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
)

// replayFixture is an FSM over a store in a folder that can be reopened.
type replayFixture struct {
	t     *testing.T
	dir   string
	store *persistence.Store
	fsm   *FSM
}

func (r *replayFixture) open() {
	r.t.Helper()
	s, err := persistence.Open(r.dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		r.t.Fatal(err)
	}
	// No checkpoint but the ones the test asks for.
	s.SetPendingCheckpointEvery(time.Hour)
	f, err := NewFSM(StoreState(s), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		r.t.Fatal(err)
	}
	r.store, r.fsm = s, f
}

func (r *replayFixture) pending() []string {
	r.t.Helper()
	refs, err := r.store.PendingAuths()
	if err != nil {
		r.t.Fatal(err)
	}
	var ids []string
	for _, ref := range refs {
		ids = append(ids, ref.OrderID)
	}
	return ids
}

func (r *replayFixture) wantPending(what string, want ...string) {
	r.t.Helper()
	if got := r.pending(); !slices.Equal(got, want) {
		r.t.Fatalf("%s: pending %q, want %q", what, got, want)
	}
}

// entry is a command entry at index idx.
func entry(t *testing.T, idx uint64, cmds ...command.Cmd) *raft.Log {
	t.Helper()
	data, err := command.EncodeEntry(cmds)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
}

func acceptance(id string) command.Cmd {
	return command.Cmd{Order: &order.Command{
		Kind: order.KindCreate, Time: 1, Merchant: "m1", OrderID: id, TxnID: "t-" + id, RequestHash: "h-" + id,
		Create: &order.CreateData{Amount: 100, Currency: "USD", ProcessingMID: "mid", SettleDelayHours: 1,
			Source: order.PaymentSource{Type: "card", CardID: "c-" + id}},
	}}
}

func approval(id string) command.Cmd {
	return command.Cmd{Order: &order.Command{
		Kind: order.KindAuthOutcome, Time: 2, Merchant: "m1", OrderID: id, TxnID: "t-" + id,
		Outcome: &order.OutcomeData{Approved: true, AuthCode: "123456"},
	}}
}

// After a kill, the pending-authorisation set is rebuilt from the
// checkpoint a snapshot wrote and the orders of the entries raft replays
// after it, which the store had already applied: without either, an
// authorisation would never be sent again (or one answered would be).
func TestReplayRebuildsThePendingAuthorisations(t *testing.T) {
	r := &replayFixture{t: t, dir: t.TempDir()}
	r.open()
	e1 := entry(t, 1, acceptance("a"), acceptance("b"))
	r.fsm.ApplyBatch([]*raft.Log{e1})
	snap, err := r.fsm.Snapshot() // raft's latest snapshot: index 1
	if err != nil {
		t.Fatal(err)
	}
	snap.Release()
	e2 := entry(t, 2, approval("a"), acceptance("c"))
	e3 := entry(t, 3, acceptance("d"))
	r.fsm.ApplyBatch([]*raft.Log{e2})
	r.fsm.ApplyBatch([]*raft.Log{e3})
	r.wantPending("before the kill", "b", "c", "d")
	if err := r.store.CloseAsKilled(); err != nil {
		t.Fatal(err)
	}

	r.open()
	if r.fsm.AppliedIndex() != 3 {
		t.Fatalf("applied index %d after reopening, want 3", r.fsm.AppliedIndex())
	}
	r.wantPending("the snapshot's checkpoint", "a", "b")
	// Raft hands the FSM the entries after its snapshot again; the store
	// has applied them, so they change nothing but the set.
	r.fsm.ApplyBatch([]*raft.Log{e2, e3})
	r.wantPending("after the replay", "b", "c", "d")
	// A replayed entry and a new one in one batch.
	r.store.CloseAsKilled()
	r.open()
	r.fsm.ApplyBatch([]*raft.Log{e2, e3, entry(t, 4, approval("c"), acceptance("e"))})
	r.wantPending("after a replay with a new entry", "b", "d", "e")

	// A clean close checkpoints the set: the next replay has nothing to
	// recheck, and does not even decode what it skips.
	if err := r.store.Close(); err != nil {
		t.Fatal(err)
	}
	r.open()
	r.wantPending("after a clean close", "b", "d", "e")
	garbage := &raft.Log{Index: 4, Term: 1, Type: raft.LogCommand, Data: []byte("not an entry")}
	r.fsm.ApplyBatch([]*raft.Log{e2, e3, garbage})
	r.wantPending("after replaying past a clean close", "b", "d", "e")
	r.store.Close()
}

// A store killed before its first checkpoint has no record of where its
// pending set is exact. Its first opening records that the set is exact at
// the start (index 0), so a kill in the first second of a new node's life
// (before any checkpoint) still has every applied entry rechecked. Found
// by TestLedgersAgreeUnderRandomFaultsRealProcesses, which killed a new
// node four times within its first second: a refund's movement was left
// unsent.
func TestReplayAfterAKillBeforeTheFirstCheckpoint(t *testing.T) {
	r := &replayFixture{t: t, dir: t.TempDir()}
	r.open()
	e1 := entry(t, 1, acceptance("a"), acceptance("b"))
	e2 := entry(t, 2, approval("a"))
	r.fsm.ApplyBatch([]*raft.Log{e1})
	r.fsm.ApplyBatch([]*raft.Log{e2})
	r.wantPending("before the kill", "b")
	if err := r.store.CloseAsKilled(); err != nil {
		t.Fatal(err)
	}

	r.open()
	r.fsm.ApplyBatch([]*raft.Log{e1, e2})
	r.wantPending("after the replay", "b")
	// Killed again, still before a checkpoint: the second opening must not
	// take the applied index for the set's.
	e3 := entry(t, 3, acceptance("c"))
	r.fsm.ApplyBatch([]*raft.Log{e3})
	r.store.CloseAsKilled()
	r.open()
	r.fsm.ApplyBatch([]*raft.Log{e1, e2, e3})
	r.wantPending("after the second replay", "b", "c")
	r.store.Close()
}
