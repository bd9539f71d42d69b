package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
)

// A follower restarted after missing writes has caught up only once it
// has applied what the leader had committed; on an idle cluster, where the
// leader's commit index names its own no-op, a restarted node catches up
// without another write. (transport/server's /readyz asks the leader for
// its commit index; here the harness reads it.)
func TestFollowerReadyWaitsForTheLeadersCommit(t *testing.T) {
	seed := testSeed(t)
	h := newHarness(t, harnessOptions{seed: seed})
	ln, l := h.waitLeaderNode(5 * time.Second)
	// A follower is ready only with the leader's member record (to forward
	// to); the harness records the joiners' alone (gatewayd its own).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, n := range h.nodes {
		if err := l.Join(ctx, command.Member{NodeID: n.id, RaftAddr: string(n.addr), HTTPAddr: "http-" + n.id}); err != nil {
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
		commit := l.Raft.CommitIndex()
		h.nodes[fi].with(func(nd *Node, _ *persistence.Store) {
			ready, applied = readyAgainst(nd, commit), nd.FSM.AppliedIndex()
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
		commit := nl.Raft.CommitIndex()
		h.nodes[li].with(func(nd *Node, _ *persistence.Store) { ready = readyAgainst(nd, commit) })
	}
	if applied, commit := nl.FSM.AppliedIndex(), nl.Raft.CommitIndex(); applied >= commit {
		t.Errorf("the leader's last committed entry is not its no-op (applied %d, commit %d): the case is not tested", applied, commit)
	}
}

// readyAgainst is a follower's /readyz with the leader's commit index
// given: what it knows itself, then caught up within a moment.
func readyAgainst(nd *Node, leaderCommit uint64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	return nd.Ready() && nd.CaughtUp(ctx, leaderCommit)
}
