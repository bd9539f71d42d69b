package cluster

import (
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Leadership confirmations that a paused leader cannot take from the past
// (readindex.go, DESIGN.md "Read path").
//
// raft's VerifyLeader counts every AppendEntries answer that arrives after
// the verification began, answers to requests sent before it included. A
// leader whose process stopped with a heartbeat in flight reads the answer,
// given in its old term, when it resumes: by then the others may have
// elected a leader and committed writes, and the stale answer with the
// leader's own vote makes a quorum of three. The node tests met it with
// SIGSTOP; TestReadBarrierIgnoresAnswersSentBeforeIt stages it.
//
// ackTransport wraps raft's transport and records, per peer, when the
// latest AppendEntries the peer answered in the sender's own term was sent.
// A peer that answers in term T has not voted in any later term, so once a
// quorum answered requests sent after a read arrived, no newer leader can
// have committed anything before the read: the read-index confirmation,
// with the timing on the request rather than the answer.
//
// Only plain AppendEntries calls are recorded: raft's heartbeats, which
// VerifyLeader sends to every follower at once, and non-pipelined
// replication. Pipelined answers confirm nothing here; the heartbeat that
// goes with them does.
type ackTransport struct {
	raft.Transport
	mu   sync.Mutex
	acks map[raft.ServerID]termAck
	// changed is closed at the next recorded answer; nil while no
	// confirmation waits.
	changed chan struct{}
}

// termAck is the latest request a peer answered in its sender's term.
type termAck struct {
	term   uint64
	sentAt time.Time // monotonic
}

// errNoPreVote: raft turns pre-vote off for a transport without it, and
// this wrapper must not change what raft does.
var errNoPreVote = errors.New("raft transport without pre-vote")

func newAckTransport(t raft.Transport) (*ackTransport, error) {
	if _, ok := t.(raft.WithPreVote); !ok {
		return nil, errNoPreVote
	}
	return &ackTransport{Transport: t, acks: map[raft.ServerID]termAck{}}, nil
}

// AppendEntries implements raft.Transport.
func (t *ackTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	sent := time.Now()
	err := t.Transport.AppendEntries(id, target, args, resp)
	if err == nil && resp.Term == args.Term {
		t.record(id, args.Term, sent)
	}
	return err
}

// RequestPreVote implements raft.WithPreVote.
func (t *ackTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.Transport.(raft.WithPreVote).RequestPreVote(id, target, args, resp)
}

// Close implements raft.WithClose.
func (t *ackTransport) Close() error {
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

func (t *ackTransport) record(id raft.ServerID, term uint64, sent time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.acks[id]; !ok || term > a.term || (term == a.term && sent.After(a.sentAt)) {
		t.acks[id] = termAck{term: term, sentAt: sent}
	}
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// confirmed reports whether self and the voters among servers (raft's
// latest configuration, the one its quorum is counted from) that answered
// requests of term sent at or after since make a quorum of voters. When
// they do not, changed is closed at the next recorded answer.
func (t *ackTransport) confirmed(term uint64, since time.Time, self raft.ServerID, servers []raft.Server) (ok bool, changed <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	voters, votes := 0, 1 // the leader's own vote, as raft counts it
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if a, found := t.acks[s.ID]; s.ID != self && found && a.term == term && !a.sentAt.Before(since) {
			votes++
		}
	}
	if votes >= voters/2+1 {
		return true, nil
	}
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	return false, t.changed
}
