package cluster

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// A follower's readiness (Node.Ready; docs/cluster.md, "4. Bring the old
// leader back").
//
// raft's commit index on a follower says nothing about how far behind it
// is: after a restart it is 0 until the first AppendEntries it accepts,
// and then min(the leader's commit index, the follower's last log index).
// (Nor does raft's applied index say what the store holds: raft counts an
// entry applied once it has handed it to the FSM; see storeHolds.) The leader's own commit index travels in every AppendEntries
// request (the leader sends one every CommitTimeout, 50–100 ms, even when
// idle), but raft keeps it to itself. So the node reads it off the
// transport: observedTransport relays the RPCs raft consumes and notes, in
// leaderCommits, the commit index each one names.
//
// A follower is ready when the store holds every entry the leader had
// committed readyLag ago, and at least everything the leader named in its
// first AppendEntries after contact began (at start, or again after no RPC
// from a leader for a heartbeat timeout). Chasing the very latest commit
// index would flap under load: every AppendEntries names a commit index
// the follower applies only after it has stored the request's entries.

// readyLag is how far (in time) a ready follower may trail the leader.
const readyLag = time.Second

// commitSamples is how many samples of the commit index are kept, one per
// readyLag/4 at most: enough to look readyLag back.
const commitSamples = 8

// leaderCommits is what a follower heard of the leader's commit index.
type leaderCommits struct {
	lost  time.Duration // contact is lost after this long without a leader RPC
	lag   time.Duration // readyLag
	clock func() time.Time

	mu      sync.Mutex
	contact time.Time // last RPC from a leader (zero: none since start)
	// heard: an AppendEntries named the leader's commit index since
	// contact began; first is the index known then.
	heard bool
	first uint64
	top   uint64 // the highest commit index named since contact began
	// samples of top; samples[(n-1)%commitSamples] is the latest.
	samples [commitSamples]commitSample
	n       int
}

// commitSample is top as it stood at the last RPC (to) of an interval
// beginning at from.
type commitSample struct {
	from, to time.Time
	commit   uint64
}

func newLeaderCommits(heartbeatTimeout time.Duration) *leaderCommits {
	return &leaderCommits{lost: heartbeatTimeout, lag: readyLag, clock: time.Now}
}

// observe notes an RPC a leader sent (requests from candidates are
// ignored). Each leader's commit index is committed for good, so the
// highest one heard is a lower bound of the cluster's, whoever sent it.
func (c *leaderCommits) observe(cmd any) {
	var commit uint64
	names := false
	switch r := cmd.(type) {
	case *raft.AppendEntriesRequest:
		commit = r.LeaderCommitIndex
		// A heartbeat (no entries, no previous entry, commit index 0)
		// says who leads, not how far the log is committed.
		names = commit != 0 || r.PrevLogEntry != 0 || len(r.Entries) != 0
	case *raft.InstallSnapshotRequest:
		commit = r.LastLogIndex // committed, but the leader's commit index follows
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock()
	if c.contact.IsZero() || now.Sub(c.contact) > c.lost {
		c.heard, c.first, c.top, c.n = false, 0, 0, 0
	}
	c.contact = now
	c.top = max(c.top, commit)
	if names && !c.heard {
		c.heard, c.first = true, c.top
	}
	if c.n > 0 {
		if s := &c.samples[(c.n-1)%commitSamples]; now.Sub(s.from) < c.lag/4 {
			s.to, s.commit = now, c.top
			return
		}
	}
	c.samples[c.n%commitSamples] = commitSample{from: now, to: now, commit: c.top}
	c.n++
}

// target returns the index the store must hold for the follower to be
// ready, or false when no leader has named its commit index since contact
// began (or contact is lost).
func (c *leaderCommits) target() (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock()
	if !c.heard || now.Sub(c.contact) > c.lost {
		return 0, false
	}
	cut := now.Add(-c.lag)
	for i := c.n - 1; i >= 0 && i >= c.n-commitSamples; i-- {
		if s := c.samples[i%commitSamples]; !s.to.After(cut) {
			return max(c.first, s.commit), true
		}
	}
	return c.first, true
}

// observedTransport is the raft transport with the leader's RPCs noted on
// their way in. Outgoing calls (all a leader makes) go straight to the
// transport; incoming ones take one more goroutine hop, which the
// Transport interface leaves no way around (Consumer hands raft the
// channel itself). Heartbeats on the transport's fast path are seen
// without a hop.
type observedTransport struct {
	raft.Transport
	commits *leaderCommits
	out     chan raft.RPC
	done    chan struct{}
	once    sync.Once
}

// observedPreVoteTransport keeps the transport's pre-vote support: raft
// enables pre-vote only when its transport implements raft.WithPreVote.
type observedPreVoteTransport struct {
	*observedTransport
	preVote raft.WithPreVote
}

func (t observedPreVoteTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress,
	args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.preVote.RequestPreVote(id, target, args, resp)
}

// observeLeader wraps trans; the result implements raft.WithPreVote when
// trans does, and raft.WithClose always (closing trans when it can close).
func observeLeader(trans raft.Transport, commits *leaderCommits) *observedTransport {
	t := &observedTransport{Transport: trans, commits: commits, out: make(chan raft.RPC), done: make(chan struct{})}
	go t.relay(trans.Consumer())
	return t
}

// forRaft is the value to hand to raft.NewRaft.
func (t *observedTransport) forRaft() raft.Transport {
	if pv, ok := t.Transport.(raft.WithPreVote); ok {
		return observedPreVoteTransport{observedTransport: t, preVote: pv}
	}
	return t
}

func (t *observedTransport) relay(in <-chan raft.RPC) {
	for {
		select {
		case rpc, ok := <-in:
			if !ok {
				close(t.out)
				return
			}
			t.commits.observe(rpc.Command)
			select {
			case t.out <- rpc:
			case <-t.done:
				return
			}
		case <-t.done:
			return
		}
	}
}

// Consumer implements raft.Transport.
func (t *observedTransport) Consumer() <-chan raft.RPC { return t.out }

// SetHeartbeatHandler implements raft.Transport: heartbeats the transport
// hands to cb directly are noted too (they keep contact alive).
func (t *observedTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	if cb == nil {
		t.Transport.SetHeartbeatHandler(nil)
		return
	}
	t.Transport.SetHeartbeatHandler(func(rpc raft.RPC) {
		t.commits.observe(rpc.Command)
		cb(rpc)
	})
}

// stop ends the relay, leaving the transport open.
func (t *observedTransport) stop() { t.once.Do(func() { close(t.done) }) }

// Close implements raft.WithClose (raft calls it on shutdown).
func (t *observedTransport) Close() error {
	t.stop()
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// maxReadyScan bounds the log entries one Ready call reads.
const maxReadyScan = 64

// readiness is a follower's side of Node.Ready.
type readiness struct {
	commits *leaderCommits
	logs    raft.LogStore
	// covered: the store holds every effect of the entries up to it
	// (storeHolds).
	covered atomic.Uint64
}

// followerReady: the store holds what the leader had committed (see the
// top of this file).
func (n *Node) followerReady() bool {
	target, ok := n.ready.commits.target()
	return ok && n.storeHolds(target) >= target
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

var (
	_ raft.WithClose   = (*observedTransport)(nil)
	_ raft.WithPreVote = observedPreVoteTransport{}
)
