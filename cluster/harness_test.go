package cluster

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
)

// The in-process cluster: N raft nodes, each with its own raft-wal log,
// snapshot store, Pebble store and FSM, on a faultNet. Every test ends with
// the verifiers (finish): at most one leader per term, every replica at the
// same applied index with the same state digest, every acknowledged change
// present on every replica.

var seedFlag = flag.Int64("seed", 0, "seed of the randomised cluster tests (0: from the clock; always printed)")

// testSeed returns the seed to use and prints how to replay it.
func testSeed(t *testing.T) int64 {
	s := *seedFlag
	if s == 0 {
		s = time.Now().UnixNano() % 1_000_000_000
	}
	t.Logf("seed %d (replay: go test ./cluster -run '^%s$' -seed %d)", s, t.Name(), s)
	return s
}

type harnessOptions struct {
	nodes             int
	snapshotThreshold uint64
	walSegmentBytes   int
	seed              int64
	// memory runs every node over a memState instead of a Pebble store; a
	// restarted node starts with an empty one.
	memory bool
	// heartbeatTimeout replaces hbTimeout and electTimeout (the leader's
	// lease is half of it).
	heartbeatTimeout time.Duration
}

type harness struct {
	t      *testing.T
	opts   harnessOptions
	net    *faultNet
	nodes  []*hnode
	terms  *termLog
	acked  *ackLog
	logger *slog.Logger
}

// hnode is one member. mu guards the running instance: readers hold it
// shared while they use the store, kill and restart hold it exclusively.
type hnode struct {
	id   string
	addr raft.ServerAddress
	dir  string

	// logFailing makes every append to this node's raft log fail
	// (failingLogStore) while it is set.
	logFailing atomic.Bool

	mu    sync.RWMutex
	store *persistence.Store // nil with harnessOptions.memory
	mem   *memState          // set with harnessOptions.memory
	fsm   *FSM
	node  *Node
	up    bool
}

const (
	hbTimeout      = 150 * time.Millisecond
	electTimeout   = 150 * time.Millisecond
	testMerchant   = "mer_test"
	convergeWithin = 20 * time.Second
)

// newHarness starts a cluster: node 0 bootstraps, the others join through
// the leader's Join, as --join does over HTTP.
func newHarness(t *testing.T, o harnessOptions) *harness {
	t.Helper()
	if o.nodes == 0 {
		o.nodes = 3
	}
	h := &harness{t: t, opts: o, net: newFaultNet(o.seed), terms: newTermLog(), acked: &ackLog{},
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for i := 0; i < o.nodes; i++ {
		h.nodes = append(h.nodes, &hnode{id: "n" + strconv.Itoa(i), addr: raft.ServerAddress("inmem-" + strconv.Itoa(i)),
			dir: filepath.Join(t.TempDir(), "n"+strconv.Itoa(i))})
	}
	h.start(0, true)
	first := h.waitLeader(10 * time.Second)
	for i := 1; i < o.nodes; i++ {
		h.start(i, false)
		n := h.nodes[i]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := first.Join(ctx, command.Member{NodeID: n.id, RaftAddr: string(n.addr), HTTPAddr: "http-" + n.id})
		cancel()
		if err != nil {
			t.Fatalf("join %s: %v", n.id, err)
		}
	}
	h.waitConverged(convergeWithin)
	t.Cleanup(h.finish)
	return h
}

func (h *harness) start(i int, bootstrap bool) {
	h.t.Helper()
	n := h.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	var store *persistence.Store
	var mem *memState
	var state StateMachine
	if h.opts.memory {
		mem = newMemState()
		state = mem
	} else {
		var err error
		if store, err = persistence.Open(filepath.Join(n.dir, "state"), h.logger); err != nil {
			h.t.Fatal(err)
		}
		state = StoreState(store)
	}
	fsm, err := NewFSM(state, h.logger)
	if err != nil {
		h.t.Fatal(err)
	}
	hb, et := hbTimeout, electTimeout
	if h.opts.heartbeatTimeout > 0 {
		hb, et = h.opts.heartbeatTimeout, h.opts.heartbeatTimeout
	}
	node, err := Start(Config{
		NodeID: n.id, RaftAddr: string(n.addr), DataDir: n.dir, Bootstrap: bootstrap, Logger: h.logger,
		HeartbeatTimeout: hb, ElectionTimeout: et, ApplyTimeout: 2 * time.Second,
		SnapshotThreshold: h.opts.snapshotThreshold, SnapshotInterval: 50 * time.Millisecond,
		HTTPAddr: "http-" + n.id, Transport: h.net.transport(n.addr), RaftLogOutput: io.Discard,
		WALSegmentBytes: h.opts.walSegmentBytes,
		wrapLogStore:    func(ls raft.LogStore) raft.LogStore { return failingLogStore{LogStore: ls, failing: &n.logFailing} },
	}, fsm)
	if err != nil {
		h.t.Fatal(err)
	}
	h.terms.watch(node.Raft, n.id)
	n.store, n.mem, n.fsm, n.node, n.up = store, mem, fsm, node, true
}

// kill stops a node (raft shut down, store closed); restart brings it back
// on the same directories.
func (h *harness) kill(i int) {
	n := h.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.up {
		return
	}
	h.net.setDown(n.addr)
	if err := n.node.Shutdown(); err != nil {
		h.t.Logf("shutdown %s: %v", n.id, err)
	}
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			h.t.Errorf("close store %s: %v", n.id, err)
		}
	}
	n.up = false
}

func (h *harness) restart(i int) { h.start(i, false) }

// with runs fn on node i's running instance; false when it is down.
func (n *hnode) with(fn func(node *Node, store *persistence.Store)) bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if !n.up {
		return false
	}
	fn(n.node, n.store)
	return true
}

// getOrder reads an order from the node's state, Pebble or memory.
func (n *hnode) getOrder(st *persistence.Store, merchant, id string) (*order.Order, error) {
	if n.mem != nil {
		return n.mem.getOrder(merchant, id), nil
	}
	return st.GetOrder(merchant, id)
}

// leader returns the node that leads now, or nil.
func (h *harness) leader() (*hnode, *Node) { return leaderAmong(h.nodes) }

// leaderAmong returns the one of nodes that leads now, or nil.
func leaderAmong(nodes []*hnode) (*hnode, *Node) {
	for _, n := range nodes {
		var node *Node
		n.with(func(nd *Node, _ *persistence.Store) {
			if nd.IsLeader() {
				node = nd
			}
		})
		if node != nil {
			return n, node
		}
	}
	return nil, nil
}

func (h *harness) waitLeader(timeout time.Duration) *Node {
	h.t.Helper()
	_, l := h.waitLeaderNode(timeout)
	return l
}

// waitLeaderNode waits for a leader and returns it with its harness node.
// Tests ask this rather than leader() when they need one: with 150 ms
// timeouts on a loaded machine an election can be under way at any moment.
func (h *harness) waitLeaderNode(timeout time.Duration) (*hnode, *Node) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if n, l := h.leader(); l != nil {
			return n, l
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatalf("no leader after %s", timeout)
	return nil, nil
}

// waitLeaderAmong waits until one of nodes leads and returns it: a new
// leader elected while an old one, cut off, still believes it leads.
func (h *harness) waitLeaderAmong(timeout time.Duration, nodes ...*hnode) *Node {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, leader := leaderAmong(nodes); leader != nil {
			return leader
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.t.Fatalf("none of %d nodes leads after %s: %s", len(nodes), timeout, h.describe())
	return nil
}

// waitConverged waits until every running node has applied what the
// leader has, after a barrier, and returns the applied index.
func (h *harness) waitConverged(timeout time.Duration) uint64 {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		_, l := h.leader()
		if l == nil || l.Barrier(time.Second) != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		want := l.FSM.AppliedIndex()
		same := true
		for _, n := range h.nodes {
			n.with(func(nd *Node, _ *persistence.Store) { same = same && nd.FSM.AppliedIndex() == want })
		}
		if same {
			return want
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatalf("replicas did not converge within %s: %s", timeout, h.describe())
	return 0
}

func (h *harness) describe() string {
	s := ""
	for _, n := range h.nodes {
		if !n.with(func(nd *Node, _ *persistence.Store) {
			s += fmt.Sprintf("[%s %s term=%d commit=%d fsm=%d last=%d] ", n.id, nd.Raft.State(), nd.Term(),
				nd.Raft.CommitIndex(), nd.FSM.AppliedIndex(), nd.Raft.LastIndex())
		}) {
			s += fmt.Sprintf("[%s down] ", n.id)
		}
	}
	return s
}

// finish heals the network, restarts every stopped node, waits for the
// replicas to converge, runs the verifiers and shuts everything down.
func (h *harness) finish() {
	t := h.t
	defer func() {
		for i := range h.nodes {
			h.kill(i)
		}
	}()
	if t.Failed() {
		t.Logf("cluster at failure: %s", h.describe())
		return
	}
	h.net.heal()
	for i, n := range h.nodes {
		n.mu.RLock()
		up := n.up
		n.mu.RUnlock()
		if !up {
			h.restart(i)
		}
	}
	h.waitConverged(convergeWithin)
	h.verifyOneLeaderPerTerm()
	h.verifyDigests()
	h.verifyAcked()
	h.net.mu.Lock()
	st := h.net.stats
	h.net.mu.Unlock()
	t.Logf("net: %d RPCs, %d cut, %d dropped; %d acknowledged changes", st.sent, st.cut, st.dropped, h.acked.len())
}

func (h *harness) verifyOneLeaderPerTerm() {
	for term, ids := range h.terms.snapshot() {
		if len(ids) > 1 {
			h.t.Errorf("term %d had %d leaders: %v", term, len(ids), ids)
		}
	}
}

// verifyDigests: every replica at the same applied index, same digest,
// and on Pebble the same search index keys (the back office's, which the
// whole digest covers too: this names them when they differ).
func (h *harness) verifyDigests() {
	type view struct {
		digest, search string
		idx            uint64
	}
	views := map[string]view{}
	for _, n := range h.nodes {
		n.with(func(nd *Node, st *persistence.Store) {
			d, idx, err := nd.FSM.store.Digest()
			if err != nil {
				h.t.Errorf("digest %s: %v", n.id, err)
			}
			v := view{digest: d, idx: idx}
			if st != nil {
				if v.search, _, err = st.SearchIndexDigest(); err != nil {
					h.t.Errorf("search index digest %s: %v", n.id, err)
				}
			}
			views[n.id] = v
		})
	}
	ref := views[h.nodes[0].id]
	for id, v := range views {
		if v != ref {
			h.t.Errorf("replica %s at index %d has digest %.12s (search index %.12s); %s at index %d has %.12s (%.12s)",
				id, v.idx, v.digest, v.search, h.nodes[0].id, ref.idx, ref.digest, ref.search)
		}
	}
	if len(views) != len(h.nodes) {
		h.t.Errorf("only %d of %d replicas answered", len(views), len(h.nodes))
	}
}

// verifyAcked: each acknowledged change is on every replica.
func (h *harness) verifyAcked() {
	for _, a := range h.acked.all() {
		for _, n := range h.nodes {
			n.with(func(_ *Node, st *persistence.Store) {
				o, err := n.getOrder(st, testMerchant, a.orderID)
				switch {
				case err != nil:
					h.t.Errorf("%s: read %s: %v", n.id, a.orderID, err)
				case o == nil:
					h.t.Errorf("%s: acknowledged %s of order %s lost: no order", n.id, a.kind, a.orderID)
				case o.Txn(a.txnID) == nil:
					h.t.Errorf("%s: acknowledged %s %s of order %s lost", n.id, a.kind, a.txnID, a.orderID)
				}
			})
		}
	}
}

// termLog records which node became leader in which term. The observer's
// filter runs on raft's own goroutine as the state changes, so the term it
// reads is the term the node won.
type termLog struct {
	mu      sync.Mutex
	leaders map[uint64]map[string]bool
}

func newTermLog() *termLog { return &termLog{leaders: map[uint64]map[string]bool{}} }

func (l *termLog) watch(r *raft.Raft, id string) {
	r.RegisterObserver(raft.NewObserver(nil, false, func(o *raft.Observation) bool {
		if st, ok := o.Data.(raft.RaftState); ok && st == raft.Leader {
			term := o.Raft.CurrentTerm()
			l.mu.Lock()
			if l.leaders[term] == nil {
				l.leaders[term] = map[string]bool{}
			}
			l.leaders[term][id] = true
			l.mu.Unlock()
		}
		return false
	}))
}

func (l *termLog) snapshot() map[uint64][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[uint64][]string{}
	for term, ids := range l.leaders {
		for id := range ids {
			out[term] = append(out[term], id)
		}
	}
	return out
}

// ackLog lists the changes whose Propose returned nil.
type ackLog struct {
	mu   sync.Mutex
	list []ack
}

type ack struct {
	orderID, txnID string
	kind           order.Kind
}

func (a *ackLog) add(x ack) {
	a.mu.Lock()
	a.list = append(a.list, x)
	a.mu.Unlock()
}

func (a *ackLog) all() []ack {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]ack(nil), a.list...)
}

func (a *ackLog) len() int { return len(a.all()) }

// propose sends one command to whichever node leads; ok means
// acknowledged. A change that was acknowledged is recorded.
func (h *harness) propose(cmd *order.Command, timeout time.Duration) (persistence.Result, error) {
	_, l := h.leader()
	if l == nil {
		return persistence.Result{}, ErrNoLeader
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := l.Propose(ctx, &command.Cmd{Order: cmd})
	// An idempotency replay changed nothing: its empty outcome is not an
	// acknowledged change of this order.
	if err == nil && res.Err == nil && res.Replayed == nil && res.Outcome.Changed() {
		h.acked.add(ack{orderID: cmd.OrderID, txnID: cmd.TxnID, kind: cmd.Kind})
	}
	return res, err
}

// workload drives real order commands at the cluster from several workers,
// each owning its orders (as the order actors serialise one order's
// commands). It decides each command from the leader's applied state.
type workload struct {
	h       *harness
	wg      sync.WaitGroup
	stop    chan struct{}
	mu      sync.Mutex
	sent    int
	failed  int
	txnSeq  int
	txnSeqM sync.Mutex
}

func (h *harness) startWorkload(seed int64, workers, ordersEach int) *workload {
	w := &workload{h: h, stop: make(chan struct{})}
	for i := 0; i < workers; i++ {
		w.wg.Add(1)
		go w.worker(rand.New(rand.NewSource(seed+int64(i))), i, ordersEach)
	}
	return w
}

// halt stops the workers and returns how many proposals were sent and failed.
func (w *workload) halt() (sent, failed int) {
	close(w.stop)
	w.wg.Wait()
	return w.sent, w.failed
}

func (w *workload) worker(rng *rand.Rand, id, orders int) {
	defer w.wg.Done()
	gen := make([]int, orders) // an order in a final state makes room for a new one
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		slot := rng.Intn(orders)
		oid := fmt.Sprintf("o-%d-%d-%d", id, slot, gen[slot])
		cmd, final := w.next(rng, oid)
		if final && rng.Intn(10) > 0 {
			gen[slot]++
			continue
		}
		if cmd == nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		_, err := w.h.propose(cmd, time.Second)
		w.mu.Lock()
		w.sent++
		if err != nil {
			w.failed++
		}
		w.mu.Unlock()
		if err != nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func (w *workload) txnID() string {
	w.txnSeqM.Lock()
	defer w.txnSeqM.Unlock()
	w.txnSeq++
	return fmt.Sprintf("txn-%06d", w.txnSeq)
}

// next picks the order's next command from the leader's view of it;
// final reports an order in a final state (the command is then illegal).
func (w *workload) next(rng *rand.Rand, oid string) (cmd *order.Command, final bool) {
	ln, _ := w.h.leader()
	if ln == nil {
		return nil, false
	}
	var cur *order.Order
	var rerr error
	if !ln.with(func(_ *Node, st *persistence.Store) { cur, rerr = ln.getOrder(st, testMerchant, oid) }) || rerr != nil {
		return nil, false
	}
	cmd = &order.Command{Time: time.Now().UnixNano(), Merchant: testMerchant, OrderID: oid, TxnID: w.txnID()}
	switch {
	case cur == nil:
		cmd.Kind, cmd.RequestHash = order.KindCreate, "req-"+oid
		cmd.Create = &order.CreateData{Amount: 100 + rng.Int63n(9900), Currency: "USD", ProcessingMID: "mid",
			SettleDelayHours: int64(rng.Intn(2)) * 24, SealedCard: []byte("sealed-" + oid),
			Source: order.PaymentSource{Type: "card", CardID: "card-" + oid, BIN: "411111", Masked: "411111******1111"}}
		if rng.Intn(2) == 0 {
			cmd.Create.CallbackURL = "https://merchant.example/hook"
		}
	case cur.Pending != nil:
		cmd.Kind, cmd.TxnID = order.KindAuthOutcome, cur.Pending.TxnID
		cmd.Outcome = &order.OutcomeData{Approved: rng.Intn(10) > 0, AuthCode: "A1", DeclineCode: "3.08"}
	case cur.Status == order.StatusAuthorized && rng.Intn(4) == 0:
		cmd.Kind = order.KindVoid
	case cur.Status == order.StatusAuthorized:
		cmd.Kind, cmd.Amount = order.KindSettle, 1+rng.Int63n(cur.Amount)
	case cur.Status == order.StatusSettled && rng.Intn(5) == 0:
		final = true // leave some settled orders partly refunded
		fallthrough
	case cur.Status == order.StatusSettled:
		cmd.Kind, cmd.Amount = order.KindRefund, 1+rng.Int63n(max(1, cur.SettledAmount-cur.RefundedAmount))
		if rng.Intn(3) == 0 {
			cmd.IdempotencyKey, cmd.RequestHash = "idem-"+cmd.TxnID, "h-"+cmd.TxnID
		}
	default:
		// Final state: an illegal operation, refused the same way everywhere.
		cmd.Kind, cmd.Amount, final = order.KindSettle, 1, true
	}
	return cmd, final
}
