package cluster

import (
	"errors"
	"io"
	"math/rand"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// faultNet is an in-memory network between raft nodes that can partition,
// delay and drop RPCs, after hashicorp/raft's fuzzy/transport.go. Every
// node's transport asks gate before each RPC; a refused RPC fails at once,
// as a dead TCP peer would.
type faultNet struct {
	mu    sync.Mutex
	rng   *rand.Rand
	trans map[raft.ServerAddress]*faultTransport
	// group assigns each address to a partition; RPCs cross groups never.
	group map[raft.ServerAddress]int
	down  map[raft.ServerAddress]bool
	// maxDelay delays each RPC by a uniform [0, maxDelay); dropRate fails
	// that fraction of RPCs.
	maxDelay time.Duration
	dropRate float64
	stats    netStats
	// heartbeats counts the heartbeats each link carried or refused.
	heartbeats map[[2]raft.ServerAddress]int
	// hold, once armed, keeps the answer to the next heartbeat on its link
	// from its sender until released: a request in flight when the
	// sender's process stopped, its answer read when it resumes.
	hold *heldAnswer
}

// heldAnswer is one heartbeat answer kept from its sender.
type heldAnswer struct {
	from, to raft.ServerAddress
	held     chan struct{} // closed once an answer is held
	release  chan struct{} // closed to hand it over
	taken    bool
}

type netStats struct{ sent, cut, dropped uint64 }

var errPartitioned = errors.New("faultnet: partitioned")
var errDropped = errors.New("faultnet: dropped")
var errDown = errors.New("faultnet: peer down")

func newFaultNet(seed int64) *faultNet {
	return &faultNet{rng: rand.New(rand.NewSource(seed)), trans: map[raft.ServerAddress]*faultTransport{},
		group: map[raft.ServerAddress]int{}, down: map[raft.ServerAddress]bool{},
		heartbeats: map[[2]raft.ServerAddress]int{}}
}

// holdNextHeartbeat arms a hold on the link from -> to; close the returned
// release to let the held answer through.
func (n *faultNet) holdNextHeartbeat(from, to raft.ServerAddress) (held <-chan struct{}, release chan struct{}) {
	h := &heldAnswer{from: from, to: to, held: make(chan struct{}), release: make(chan struct{})}
	n.mu.Lock()
	n.hold = h
	n.mu.Unlock()
	return h.held, h.release
}

// heartbeatsOn is how many heartbeats the link from -> to has been asked
// to carry, partitioned or not.
func (n *faultNet) heartbeatsOn(from, to raft.ServerAddress) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.heartbeats[[2]raft.ServerAddress{from, to}]
}

// isHeartbeat tells raft's heartbeats from replication: they carry no
// entries and no log position.
func isHeartbeat(args *raft.AppendEntriesRequest) bool {
	return len(args.Entries) == 0 && args.PrevLogEntry == 0 && args.LeaderCommitIndex == 0
}

// answered passes an AppendEntries answer to its sender, unless an armed
// hold takes it.
func (n *faultNet) answered(from, to raft.ServerAddress, args *raft.AppendEntriesRequest) {
	if !isHeartbeat(args) {
		return
	}
	n.mu.Lock()
	h := n.hold
	take := h != nil && !h.taken && h.from == from && h.to == to
	if take {
		h.taken = true
	}
	n.mu.Unlock()
	if take {
		close(h.held)
		<-h.release
	}
}

// transport makes (or remakes, after a restart) the transport of addr and
// connects it both ways to every other node.
func (n *faultNet) transport(addr raft.ServerAddress) *faultTransport {
	_, inner := raft.NewInmemTransportWithTimeout(addr, 500*time.Millisecond)
	t := &faultTransport{net: n, inner: inner}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.trans[addr] = t
	delete(n.down, addr)
	for a, o := range n.trans {
		if a != addr {
			o.inner.Connect(addr, inner)
			inner.Connect(a, o.inner)
		}
	}
	return t
}

// setDown marks a node stopped: RPCs to it fail at once.
func (n *faultNet) setDown(addr raft.ServerAddress) {
	n.mu.Lock()
	n.down[addr] = true
	n.mu.Unlock()
}

// partition splits the network: each list is a group that only talks
// within itself; addresses not listed form one more group together.
func (n *faultNet) partition(groups ...[]raft.ServerAddress) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.group = map[raft.ServerAddress]int{}
	for i, g := range groups {
		for _, a := range g {
			n.group[a] = i + 1
		}
	}
}

// heal removes partitions, delays and drops.
func (n *faultNet) heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.group = map[raft.ServerAddress]int{}
	n.maxDelay, n.dropRate = 0, 0
}

func (n *faultNet) setNoise(maxDelay time.Duration, dropRate float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.maxDelay, n.dropRate = maxDelay, dropRate
}

// gate decides the fate of one RPC and applies its delay.
func (n *faultNet) gate(from, to raft.ServerAddress) error {
	n.mu.Lock()
	n.stats.sent++
	switch {
	case n.down[to]:
		n.mu.Unlock()
		return errDown
	case n.group[from] != n.group[to]:
		n.stats.cut++
		n.mu.Unlock()
		return errPartitioned
	case n.dropRate > 0 && n.rng.Float64() < n.dropRate:
		n.stats.dropped++
		n.mu.Unlock()
		return errDropped
	}
	var d time.Duration
	if n.maxDelay > 0 {
		d = time.Duration(n.rng.Int63n(int64(n.maxDelay)))
	}
	n.mu.Unlock()
	if d == 0 {
		return nil
	}
	time.Sleep(d)
	// A partition that began while the RPC was in flight cuts it too.
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down[to] || n.group[from] != n.group[to] {
		n.stats.cut++
		return errPartitioned
	}
	return nil
}

// faultTransport is one node's raft transport on a faultNet. Pipelining is
// off so every AppendEntries passes the gate.
type faultTransport struct {
	net   *faultNet
	inner *raft.InmemTransport
}

var _ raft.WithPreVote = (*faultTransport)(nil)

func (t *faultTransport) Consumer() <-chan raft.RPC             { return t.inner.Consumer() }
func (t *faultTransport) LocalAddr() raft.ServerAddress         { return t.inner.LocalAddr() }
func (t *faultTransport) SetHeartbeatHandler(cb func(raft.RPC)) {}
func (t *faultTransport) EncodePeer(id raft.ServerID, a raft.ServerAddress) []byte {
	return t.inner.EncodePeer(id, a)
}
func (t *faultTransport) DecodePeer(b []byte) raft.ServerAddress { return t.inner.DecodePeer(b) }
func (t *faultTransport) Close() error                           { return t.inner.Close() }

func (t *faultTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

func (t *faultTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if isHeartbeat(args) {
		t.net.mu.Lock()
		t.net.heartbeats[[2]raft.ServerAddress{t.LocalAddr(), target}]++
		t.net.mu.Unlock()
	}
	if err := t.net.gate(t.LocalAddr(), target); err != nil {
		return err
	}
	if err := t.inner.AppendEntries(id, target, args, resp); err != nil {
		return err
	}
	t.net.answered(t.LocalAddr(), target, args)
	return nil
}

func (t *faultTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if err := t.net.gate(t.LocalAddr(), target); err != nil {
		return err
	}
	return t.inner.RequestVote(id, target, args, resp)
}

func (t *faultTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if err := t.net.gate(t.LocalAddr(), target); err != nil {
		return err
	}
	return t.inner.RequestPreVote(id, target, args, resp)
}

func (t *faultTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if err := t.net.gate(t.LocalAddr(), target); err != nil {
		return err
	}
	return t.inner.InstallSnapshot(id, target, args, resp, data)
}

func (t *faultTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	if err := t.net.gate(t.LocalAddr(), target); err != nil {
		return err
	}
	return t.inner.TimeoutNow(id, target, args, resp)
}
