package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/paygate/gateway/persistence"
)

// The rule on what a follower heard: nothing until an AppendEntries names
// the leader's commit index; then that index for readyLag, then the index
// the leader had named readyLag ago; after contact is lost, start over.
func TestLeaderCommitsTarget(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newLeaderCommits(time.Second)
	c.clock = func() time.Time { return now }
	named := func(commit uint64) { // an AppendEntries of a leader in the middle of its log
		c.observe(&raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 10, PrevLogTerm: 2, LeaderCommitIndex: commit})
	}
	want := func(what string, lo, hi uint64) {
		t.Helper()
		got, ok := c.target()
		if lo == 0 && hi == 0 {
			if ok {
				t.Fatalf("%s: target %d, want none", what, got)
			}
			return
		}
		if !ok || got < lo || got > hi {
			t.Fatalf("%s: target %d (%v), want %d..%d", what, got, ok, lo, hi)
		}
	}

	want("nothing heard", 0, 0)
	c.observe(&raft.AppendEntriesRequest{Term: 2}) // a heartbeat: who leads, not how far
	c.observe(&raft.RequestVoteRequest{Term: 3})   // a candidate: ignored
	want("heartbeat only", 0, 0)

	now = now.Add(10 * time.Millisecond)
	named(100)
	want("first AppendEntries", 100, 100)
	// The leader commits on; for readyLag the target stays at what it
	// named first, then follows what it had named readyLag earlier (to
	// the precision of a sample, readyLag/4).
	for k := uint64(1); k <= 40; k++ {
		now = now.Add(50 * time.Millisecond)
		named(100 + 10*k)
		if k == 10 {
			want("500 ms in", 100, 100)
		}
	}
	want("2 s in", 250, 300) // 500 named now, 300 named 1 s ago
	named(90)                // an older leader's, late: the highest counts
	want("a lower index", 250, 300)

	// No leader RPC for longer than the heartbeat timeout: contact lost.
	now = now.Add(1500 * time.Millisecond)
	want("contact lost", 0, 0)
	c.observe(&raft.AppendEntriesRequest{Term: 3})
	want("heartbeat of a new contact", 0, 0)
	c.observe(&raft.InstallSnapshotRequest{Term: 3, LastLogIndex: 1000})
	want("a snapshot names no commit index", 0, 0)
	now = now.Add(20 * time.Millisecond)
	named(900)
	want("first AppendEntries of the new contact", 1000, 1000)
	now = now.Add(20 * time.Millisecond)
	named(1200)
	want("within readyLag of the new contact", 1000, 1000)
}

// The wrapper hands raft every RPC unchanged, with its answer, and notes
// the commit index; it keeps the transport's pre-vote and close, and sees
// heartbeats the transport hands to raft's fast path.
func TestObservedTransport(t *testing.T) {
	_, leaderT := raft.NewInmemTransport("")
	followerAddr, followerT := raft.NewInmemTransport("")
	leaderT.Connect(followerAddr, followerT)
	commits := newLeaderCommits(time.Second)
	ot := observeLeader(followerT, commits)
	tr := ot.forRaft()
	if _, ok := tr.(raft.WithPreVote); !ok {
		t.Fatal("pre-vote support lost")
	}
	if _, ok := tr.(raft.WithClose); !ok {
		t.Fatal("no Close")
	}
	got := make(chan any, 1)
	go func() {
		for rpc := range tr.Consumer() {
			got <- rpc.Command
			rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil)
		}
	}()
	req := &raft.AppendEntriesRequest{Term: 7, PrevLogEntry: 3, PrevLogTerm: 1, LeaderCommitIndex: 42}
	var resp raft.AppendEntriesResponse
	if err := leaderT.AppendEntries("f", followerAddr, req, &resp); err != nil || !resp.Success || resp.Term != 7 {
		t.Fatalf("AppendEntries through the wrapper: %v %+v", err, resp)
	}
	if cmd := <-got; cmd != req {
		t.Fatalf("raft got %#v, want the request as sent", cmd)
	}
	if idx, ok := commits.target(); !ok || idx != 42 {
		t.Fatalf("target %d %v, want 42", idx, ok)
	}
	if err := tr.(raft.WithClose).Close(); err != nil {
		t.Fatal(err)
	}

	// A transport without pre-vote, with a heartbeat fast path.
	stub := &stubTransport{rpcs: make(chan raft.RPC)}
	commits = newLeaderCommits(time.Second)
	ot = observeLeader(stub, commits)
	tr = ot.forRaft()
	if _, ok := tr.(raft.WithPreVote); ok {
		t.Fatal("pre-vote claimed for a transport without it")
	}
	var beats int
	tr.SetHeartbeatHandler(func(raft.RPC) { beats++ })
	stub.heartbeat(raft.RPC{Command: &raft.AppendEntriesRequest{Term: 3}})
	commits.mu.Lock()
	contact := commits.contact
	commits.mu.Unlock()
	if beats != 1 || contact.IsZero() {
		t.Fatalf("heartbeat: handler ran %d times, contact %v", beats, contact)
	}
	if err := tr.(raft.WithClose).Close(); err != nil || !stub.closed {
		t.Fatalf("Close: %v, transport closed %v", err, stub.closed)
	}
}

// stubTransport has no RequestPreVote; it keeps the heartbeat handler.
type stubTransport struct {
	raft.Transport
	rpcs      chan raft.RPC
	heartbeat func(raft.RPC)
	closed    bool
}

func (s *stubTransport) Consumer() <-chan raft.RPC             { return s.rpcs }
func (s *stubTransport) SetHeartbeatHandler(cb func(raft.RPC)) { s.heartbeat = cb }
func (s *stubTransport) Close() error                          { s.closed = true; return nil }

// A follower restarted after missing writes is ready only once it has
// applied what the leader had committed; on an idle cluster, where the
// leader's commit index names its own no-op, a restarted node becomes
// ready without another write.
func TestFollowerReadyWaitsForTheLeadersCommit(t *testing.T) {
	seed := testSeed(t)
	h := newHarness(t, harnessOptions{seed: seed})
	ln, l := h.waitLeaderNode(5 * time.Second)
	// A follower is ready only with the leader's member record (to forward
	// to); the harness records the joiners' alone (gatewayd its own).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, n := range h.nodes {
		if err := l.Join(ctx, persistence.Member{NodeID: n.id, RaftAddr: string(n.addr), HTTPAddr: "http-" + n.id}); err != nil {
			t.Fatal(err)
		}
	}
	fi := (indexOf(h, ln) + 1) % len(h.nodes)
	h.kill(fi)

	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 150; i++ {
				oid := fmt.Sprintf("ready-%d-%d", w, i)
				if _, err := h.propose(createCmd(oid, "txn-"+oid), 5*time.Second); err != nil {
					t.Errorf("propose: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	_, l = h.waitLeaderNode(5 * time.Second)
	atStop := l.Raft.CommitIndex()

	h.restart(fi)
	var applied uint64
	deadline := time.Now().Add(20 * time.Second)
	for ready := false; !ready; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready: %s", h.nodes[fi].id, h.describe())
		}
		h.nodes[fi].with(func(nd *Node, _ *persistence.Store) {
			ready, applied = nd.Ready(), nd.FSM.AppliedIndex()
		})
	}
	if applied < atStop {
		t.Fatalf("%s ready at applied index %d, behind the leader's commit index %d before it restarted",
			h.nodes[fi].id, applied, atStop)
	}
	t.Logf("%s ready at applied index %d; the leader had committed %d", h.nodes[fi].id, applied, atStop)

	// Idle: kill the leader; its successor's no-op is the last entry.
	ln, _ = h.waitLeaderNode(5 * time.Second)
	li := indexOf(h, ln)
	h.kill(li)
	_, nl := h.waitLeaderNode(5 * time.Second)
	h.restart(li)
	deadline = time.Now().Add(10 * time.Second)
	for ready := false; !ready; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready on an idle cluster: %s", h.nodes[li].id, h.describe())
		}
		h.nodes[li].with(func(nd *Node, _ *persistence.Store) { ready = nd.Ready() })
	}
	if applied, commit := nl.FSM.AppliedIndex(), nl.Raft.CommitIndex(); applied >= commit {
		t.Errorf("the leader's last committed entry is not its no-op (applied %d, commit %d): the case is not tested", applied, commit)
	}
}
