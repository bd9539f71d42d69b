package cluster

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// A follower's readiness (docs/cluster.md, "4. Bring the old leader back").
//
// raft's commit index on a follower says nothing about how far behind it
// is: after a restart it is 0 until the first AppendEntries it accepts,
// and then min(the leader's commit index, the follower's last log index).
// (Nor does raft's applied index say what the store holds: raft counts an
// entry applied once it has handed it to the FSM; see storeHolds.) So a
// follower's /readyz asks the leader for its commit index
// (transport/server) and answers 200 once the store holds it (CaughtUp).
//
// An earlier version read the leader's commit index off the raft
// transport, relaying every incoming RPC through one more goroutine: three
// nodes took ~9 % fewer charges for it. Asking the leader costs one request
// per /readyz, and nothing on the replication path.

// maxReadyScan bounds the log entries one storeHolds call reads.
const maxReadyScan = 64

// caughtUpPoll is how often CaughtUp looks at the store again.
const caughtUpPoll = 5 * time.Millisecond

// readiness is a follower's side of readiness.
type readiness struct {
	logs raft.LogStore
	// covered: the store holds every effect of the entries up to it
	// (storeHolds).
	covered atomic.Uint64
}

// LeaderCommit returns the commit index when this node leads.
func (n *Node) LeaderCommit() (uint64, bool) {
	if n.Raft.State() != raft.Leader {
		return 0, false
	}
	return n.Raft.CommitIndex(), true
}

// CaughtUp reports whether the store holds everything up to leaderCommit
// (the leader's commit index, asked of it just before), waiting until ctx
// ends for it to get there: a follower that keeps up applies the leader's
// latest commits within milliseconds, one that is behind does not.
func (n *Node) CaughtUp(ctx context.Context, leaderCommit uint64) bool {
	t := time.NewTicker(caughtUpPoll)
	defer t.Stop()
	for n.storeHolds(leaderCommit) < leaderCommit {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// storeHolds returns an index up to which the store holds the effects of
// the whole log: at least the FSM's applied index. raft's own entries
// (no-ops, barriers) have no effect and do not move that index, so on an
// idle cluster the leader's commit index may name one the FSM never sees.
// Once raft has applied up to target, the entries past the FSM's index are
// read from the log (at most maxReadyScan a call), and those without
// effect counted as held; one that is missing was compacted into a
// snapshot the store holds (raft applies no entry it lacks).
func (n *Node) storeHolds(target uint64) uint64 {
	r := n.ready
	held := max(n.FSM.AppliedIndex(), r.covered.Load())
	if held >= target {
		return held
	}
	end := min(target, n.Raft.AppliedIndex(), held+maxReadyScan)
	var l raft.Log
	for i := held + 1; i <= end; i++ {
		if err := r.logs.GetLog(i, &l); err != nil {
			if !errors.Is(err, raft.ErrLogNotFound) {
				break
			}
		} else if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			break // the FSM's: not applied yet (or applied since we looked)
		}
		held = i
	}
	for c := r.covered.Load(); held > c && !r.covered.CompareAndSwap(c, held); c = r.covered.Load() {
	}
	return held
}
