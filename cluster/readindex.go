package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Reads on the leader (see DESIGN.md, "Read path").
//
// A leader's store holds every acknowledged change once two things hold:
//
//  1. the term barrier: in its current term the leader has applied every
//     entry committed before the term began (raft.Barrier appends an entry
//     of the new term and returns when it and all before it are applied);
//  2. leadership confirmed after the request arrived: a quorum answered, in
//     this leader's term, heartbeats sent after it arrived (VerifyLeader,
//     then termacks.go, since VerifyLeader also counts answers to older
//     requests), so no newer leader can have acknowledged a change this
//     node has not seen.
//
// Changes acknowledged in the current term went through this leader, whose
// Propose returns only after the local FSM applied them. So a read that
// passes ReadBarrier sees every change acknowledged before it started: the
// read-index protocol, with the commit-index wait folded into (1).

// ReadBarrier makes the local store safe for a linearizable read and for the
// order actors' local decisions. It fails with ErrNoLeader when this node is
// not, or stops being, the leader. It is bounded by the node's apply timeout
// even when ctx has no deadline.
//
// A leader that is the only voter of the latest configuration skips the
// confirmation round: raft's VerifyLeader answers such a leader at once
// (its quorum is itself), and no other node can be elected or commit
// without its vote. Skipping it saves the trip through raft's leader loop
// and the goroutines around it: 13 % of a single node's CPU per status
// read, back to back (docs/performance.md).
func (n *Node) ReadBarrier(ctx context.Context) error {
	if n.Raft.State() != raft.Leader {
		return fmt.Errorf("%w: not the leader", ErrNoLeader)
	}
	term, err := n.leaderBarrier(ctx)
	if err != nil {
		return err
	}
	if !n.soleVoter() {
		if err := n.verifyLeader(ctx); err != nil {
			return err
		}
	}
	// Still the leader of the term whose barrier passed: a node deposed
	// and elected again meanwhile would lead a term whose barrier it has
	// not passed.
	if n.Raft.CurrentTerm() != term || n.Raft.State() != raft.Leader {
		return fmt.Errorf("%w: leadership changed during the read barrier", ErrNoLeader)
	}
	return nil
}

// soleVoter reports whether this node is the only voter of raft's latest
// configuration (committed or not: a voter being added counts at once, as
// it does for raft's quorum).
func (n *Node) soleVoter() bool {
	voters, self := 0, false
	for _, s := range n.Raft.GetConfiguration().Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters++
			self = self || s.ID == raft.ServerID(n.cfg.NodeID)
		}
	}
	return voters == 1 && self
}

// LeaderBarrier returns once this leader has applied everything committed
// before its current term; after the first call in a term it costs nothing.
func (n *Node) LeaderBarrier(ctx context.Context) error {
	_, err := n.leaderBarrier(ctx)
	return err
}

// leaderBarrier is LeaderBarrier, returning the term it passed.
func (n *Node) leaderBarrier(ctx context.Context) (uint64, error) {
	term := n.Raft.CurrentTerm()
	if n.readyTerm.Load() == term {
		return term, nil
	}
	n.barrierMu.Lock()
	defer n.barrierMu.Unlock()
	if n.readyTerm.Load() == term {
		return term, nil
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if err := n.Raft.Barrier(timeout).Error(); err != nil {
		return 0, leaderErr(err)
	}
	if n.Raft.CurrentTerm() == term && n.Raft.State() == raft.Leader {
		n.readyTerm.Store(term)
		return term, nil
	}
	return 0, fmt.Errorf("%w: term changed during the leader barrier", ErrNoLeader)
}

// verifyLeader confirms leadership with a quorum, bounded by ctx.
// Concurrent reads share confirmations: a read joins the next round that
// starts after it arrived (a round in flight may have begun before it, so
// it cannot count), and one VerifyLeader answers the whole round. Under
// load that is one heartbeat round per batch of reads instead of one per
// read, with the same guarantee.
func (n *Node) verifyLeader(ctx context.Context) error {
	done := make(chan error, 1)
	v := &n.verify
	v.mu.Lock()
	v.waiting = append(v.waiting, done)
	if !v.running {
		v.running = true
		go n.verifyRounds()
	}
	v.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: leadership not confirmed: %v", ErrNoLeader, ctx.Err())
	}
}

// verifyRounds runs rounds until no read is waiting.
func (n *Node) verifyRounds() {
	v := &n.verify
	for {
		v.mu.Lock()
		round := v.waiting
		v.waiting = nil
		if len(round) == 0 {
			v.running = false
			v.mu.Unlock()
			return
		}
		v.mu.Unlock()
		v.rounds.Add(1)
		err := n.verifyRound()
		for _, done := range round {
			done <- err
		}
	}
}

// verifyRound runs one VerifyLeader, then waits until a quorum has answered
// requests sent since the round began: VerifyLeader may have counted an
// answer to an older one (termacks.go). The round is bounded by the apply
// timeout: raft answers VerifyLeader once a quorum has (or has not)
// heartbeated back, but the bound is here so that no reader waits on raft
// alone. It costs one timer per round, not one per read: callers need not
// bring a deadline of their own.
func (n *Node) verifyRound() error {
	since, term := time.Now(), n.Raft.CurrentTerm()
	t := time.NewTimer(n.cfg.ApplyTimeout)
	defer t.Stop()
	f := n.Raft.VerifyLeader()
	answer := make(chan error, 1)
	go func() { answer <- f.Error() }()
	select {
	case err := <-answer:
		if err != nil {
			return leaderErr(err)
		}
	case <-t.C:
		return fmt.Errorf("%w: leadership not confirmed within %s", ErrNoLeader, n.cfg.ApplyTimeout)
	}
	return n.awaitFreshAnswers(term, since, t.C)
}

// awaitFreshAnswers waits until self and the voters that answered requests
// of term sent at or after since make a quorum. After a VerifyLeader that
// passed on fresh answers it returns at once; one that passed on stale ones
// waits for the heartbeats VerifyLeader sent, and a deposed leader gets no
// answer in its term: it fails when raft steps down or at the deadline.
func (n *Node) awaitFreshAnswers(term uint64, since time.Time, deadline <-chan time.Time) error {
	var poll <-chan time.Time
	for {
		ok, changed := n.acks.confirmed(term, since, raft.ServerID(n.cfg.NodeID), n.Raft.GetConfiguration().Configuration().Servers)
		if ok {
			return nil
		}
		if n.Raft.State() != raft.Leader || n.Raft.CurrentTerm() != term {
			return fmt.Errorf("%w: leadership changed during the read barrier", ErrNoLeader)
		}
		if poll == nil {
			// A step-down records no answer: look at raft's state too.
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			poll = tick.C
		}
		select {
		case <-changed:
		case <-poll:
		case <-deadline:
			return fmt.Errorf("%w: leadership not confirmed by answers sent after the read, within %s", ErrNoLeader, n.cfg.ApplyTimeout)
		}
	}
}

// verifyRounds' state: the reads waiting for the next round.
type leaderVerifier struct {
	mu      sync.Mutex
	waiting []chan error
	running bool
	rounds  atomic.Uint64 // VerifyLeader calls made
}

// leaderErr maps raft's "not leader" family to ErrNoLeader.
func leaderErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
		errors.Is(err, raft.ErrEnqueueTimeout) || errors.Is(err, raft.ErrRaftShutdown) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		return fmt.Errorf("%w: %v", ErrNoLeader, err)
	}
	return err
}

// Term is the current raft term.
func (n *Node) Term() uint64 { return n.Raft.CurrentTerm() }
