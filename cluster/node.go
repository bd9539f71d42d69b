// Package cluster runs the Raft log: the node's raft instance, its FSM over
// a StateMachine (the store in a node, StoreState), and the Proposer the
// order actors use. Actors never touch raft directly; they hand commands to
// Propose and get the applied result back. The log's format is package
// persistence/command's.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
)

// ErrNoLeader means this node cannot commit right now: it is not the leader
// or lost leadership. The command may or may not have committed; clients
// retry with the same order_id / Idempotency-Key, which makes that safe.
var ErrNoLeader = errors.New("cluster: no leader")

// ErrOutcomeUnknown is wrapped, beside ErrNoLeader, when the command had
// reached raft before the failure, so it may still commit. Without it the
// command was never proposed. Only an operation that is not idempotent by
// itself (a refund without an Idempotency-Key) needs to tell the two apart.
var ErrOutcomeUnknown = errors.New("cluster: outcome unknown")

// Config configures a node's raft.
type Config struct {
	NodeID   string
	RaftAddr string
	DataDir  string
	// RaftLogDir holds the raft log (default DataDir/raft/wal). On its own
	// device, the log's fsyncs do not queue behind Pebble's flushes and
	// compactions (docs/performance.md, large stores). Snapshots stay in
	// DataDir/raft: written whole, they would stall the log the same way.
	RaftLogDir string
	// Bootstrap a single-node cluster when the data dir is new.
	Bootstrap bool
	Logger    *slog.Logger
	// Timeouts; zero picks the defaults (1 s heartbeat/election).
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	// SnapshotThreshold is how many log entries trigger a snapshot.
	SnapshotThreshold uint64
	// ApplyTimeout bounds how long a proposal waits to be enqueued.
	ApplyTimeout time.Duration
	// SnapshotBytesPerSec bounds how fast a snapshot is written to disk
	// (0: as fast as the disk takes it); see pace.go.
	SnapshotBytesPerSec int64
	// SnapshotInterval is how often raft checks whether SnapshotThreshold
	// entries have accumulated; zero picks raft's default (2 min).
	SnapshotInterval time.Duration
	// HTTPAddr is the address peers reach this node's HTTP API on; it goes
	// into the node's member record (followers forward to the leader's).
	HTTPAddr string
	// WALSegmentBytes is the raft-wal segment size (0: 64 MiB). Compacted
	// entries stay readable until their whole segment is deleted, so a
	// follower is sent a snapshot only once the segments holding what it
	// lacks are gone; tests use small segments to get there quickly.
	WALSegmentBytes int
	// Transport replaces the TCP transport (in-process cluster tests).
	Transport raft.Transport
	// StreamLayer carries raft's RPCs (the cluster port's raft connections,
	// cluster/link) when Transport is nil. Without either, raft gets a
	// plain TCP transport of its own on RaftAddr (tests only).
	StreamLayer raft.StreamLayer
	// RaftLogOutput receives raft's own warnings (default stderr).
	RaftLogOutput io.Writer
	// wrapLogStore, in tests, wraps the raft log store (to fail appends).
	wrapLogStore func(raft.LogStore) raft.LogStore
}

// logCacheEntries is how many recent log entries raft keeps in memory.
// Entries are read back within milliseconds of their append (one at a time
// is in flight from the proposer), so a few hundred cover replication and
// apply; the bound keeps the worst case (256 commands an entry) near 30 MB.
const logCacheEntries = 256

// stageBuckets bound the commit path's latency histograms: from 0.1 ms,
// doubling, to 1.6 s. Prometheus's default buckets start at 5 ms, above
// where most of these stages end.
var stageBuckets = metrics.ExponentialBuckets(0.0001, 2, 15)

// timedLogStore times the log's appends. Each is one fsynced write of the
// entries raft had queued: the durable half of every commit, and the part
// the disk decides.
type timedLogStore struct {
	raft.LogStore
	appendLat *metrics.PrometheusHistogram
}

// StoreLogs implements raft.LogStore.
func (s timedLogStore) StoreLogs(logs []*raft.Log) error {
	start := time.Now()
	err := s.LogStore.StoreLogs(logs)
	s.appendLat.UpdateDuration(start)
	return err
}

// StoreLog implements raft.LogStore.
func (s timedLogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// IsMonotonic passes raft-wal's answer through (raft.MonotonicLogStore):
// raft-wal cannot delete entries from the middle of its log, so raft must
// know to drop all of it when it installs a snapshot.
func (s timedLogStore) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// Node is a running raft member.
type Node struct {
	cfg       Config
	Raft      *raft.Raft
	FSM       *FSM
	wal       *raftwal.WAL
	transport *raft.NetworkTransport // nil when Config.Transport was given
	// acks wraps raft's transport: which requests each peer answered in
	// this node's term, and when they were sent (termacks.go).
	acks      *ackTransport
	commitLat *metrics.PrometheusHistogram
	// entryCommands is how many commands each proposed entry packed.
	entryCommands *metrics.PrometheusHistogram
	// proposalWait is how long a proposal waited for its entry.
	proposalWait *metrics.PrometheusHistogram
	collector    *collector
	// hadState is whether the data dir held raft state when it started.
	hadState bool
	// readyTerm is the term in which this node, as leader, has applied
	// every entry committed before its term (readindex.go).
	readyTerm atomic.Uint64
	barrierMu sync.Mutex
	verify    leaderVerifier
	// ready is what a follower's CaughtUp goes by (readiness.go).
	ready *readiness
}

// Start opens the raft log and joins or bootstraps the cluster.
func Start(cfg Config, fsm *FSM) (*Node, error) {
	if cfg.ApplyTimeout == 0 {
		cfg.ApplyTimeout = 10 * time.Second
	}
	fsm.pace = newPacer(cfg.SnapshotBytesPerSec)
	dir := filepath.Join(cfg.DataDir, "raft")
	logDir := cfg.RaftLogDir
	if logDir == "" {
		logDir = filepath.Join(dir, "wal")
	}
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, err
	}
	segBytes := cfg.WALSegmentBytes
	if segBytes <= 0 {
		segBytes = raftwal.DefaultSegmentSize
	}
	// A rotation cut short by a crash leaves a sealed tail raftwal.Open
	// cannot append to (walrepair.go).
	if _, err := repairSealedTail(logDir, segBytes, cfg.Logger); err != nil {
		return nil, fmt.Errorf("repair raft log: %w", err)
	}
	wal, err := raftwal.Open(logDir, raftwal.WithSegmentSize(segBytes))
	if err != nil {
		return nil, fmt.Errorf("open raft log: %w", err)
	}
	logOut := cfg.RaftLogOutput
	if logOut == nil {
		logOut = os.Stderr
	}
	hlog := hclog.New(&hclog.LoggerOptions{
		Name: "raft", Level: hclog.Warn, Output: logOut, JSONFormat: true,
	})
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hlog)
	if err != nil {
		wal.Close()
		return nil, fmt.Errorf("open snapshot store: %w", err)
	}
	// A store that a crash left mid-restore, or that lost what the log has
	// since compacted, is restored from raft's snapshot before raft starts
	// replaying the log on top.
	if err := fsm.recoverStore(snaps, dir); err != nil {
		wal.Close()
		return nil, err
	}
	var netTrans *raft.NetworkTransport
	trans := cfg.Transport
	if trans == nil && cfg.StreamLayer != nil {
		netTrans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream: cfg.StreamLayer, MaxPool: 8, Timeout: 10 * time.Second, Logger: hlog,
		})
		trans = netTrans
	}
	if trans == nil {
		addr, err := net.ResolveTCPAddr("tcp", cfg.RaftAddr)
		if err != nil {
			wal.Close()
			return nil, fmt.Errorf("raft address: %w", err)
		}
		netTrans, err = raft.NewTCPTransportWithLogger(cfg.RaftAddr, addr, 8, 10*time.Second, hlog)
		if err != nil {
			wal.Close()
			return nil, fmt.Errorf("raft transport: %w", err)
		}
		trans = netTrans
	}

	acks, err := newAckTransport(trans)
	if err != nil {
		wal.Close()
		return nil, err
	}
	trans = acks

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = hlog
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 512
	// The store is persistent: on start raft must not wipe it with the last
	// snapshot; the FSM skips entries it already applied instead.
	rc.NoSnapshotRestoreOnStart = true
	if cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = cfg.HeartbeatTimeout
		rc.LeaderLeaseTimeout = cfg.HeartbeatTimeout / 2
	}
	if cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = cfg.ElectionTimeout
	}
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
		rc.TrailingLogs = cfg.SnapshotThreshold / 2
	}
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}

	hasState, err := raft.HasExistingState(wal, wal, snaps)
	if err != nil {
		wal.Close()
		return nil, err
	}
	if err := checkLogCoversStore(fsm.store, fsm.AppliedIndex(), wal, snaps, dir, logDir); err != nil {
		wal.Close()
		return nil, err
	}
	// Recent entries stay in memory: the leader reads each entry back to
	// send it to every follower, and every node reads it again to apply
	// it. Without the cache each of those reads goes to the WAL's files.
	var logStore raft.LogStore = timedLogStore{
		LogStore: wal, appendLat: metrics.GetOrCreatePrometheusHistogramExt(`gateway_raft_log_append_seconds`, stageBuckets),
	}
	if cfg.wrapLogStore != nil {
		logStore = cfg.wrapLogStore(logStore)
	}
	logs, err := raft.NewLogCache(logCacheEntries, logStore)
	if err != nil {
		wal.Close()
		return nil, err
	}
	r, err := raft.NewRaft(rc, fsm, logs, wal, snaps, trans)
	if err != nil {
		wal.Close()
		return nil, fmt.Errorf("start raft: %w", err)
	}
	if !hasState && cfg.Bootstrap {
		f := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{
			ID: rc.LocalID, Address: trans.LocalAddr(),
		}}})
		if err := f.Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			r.Shutdown()
			wal.Close()
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
	}
	n := &Node{
		cfg: cfg, Raft: r, FSM: fsm, wal: wal, transport: netTrans, acks: acks, hadState: hasState,
		ready:         &readiness{logs: logs},
		commitLat:     metrics.GetOrCreatePrometheusHistogramExt(`gateway_raft_commit_seconds`, stageBuckets),
		entryCommands: metrics.GetOrCreatePrometheusHistogramExt(`gateway_raft_entry_commands`, entryCommandBuckets),
		proposalWait:  metrics.GetOrCreatePrometheusHistogramExt(`gateway_raft_proposal_wait_seconds`, stageBuckets),
	}
	n.collector = newCollector(n)
	go n.collector.run()
	n.electSoleVoterNow(rc.LeaderLeaseTimeout)
	return n, nil
}

// electSoleVoterNow starts the election of a node that is the only voter of
// its configuration (a new single-node cluster, any single node restarting)
// without waiting out raft's heartbeat timeout: 1-2 s of a node that cannot
// take requests, for an election no one else can vote in. raft does the
// same once its timer fires; lowering the heartbeat timeout fires it at
// once (ReloadConfig kicks a follower's timer), and the configured value is
// put back straight after. A node with other voters waits as before: they
// may have a leader.
func (n *Node) electSoleVoterNow(lease time.Duration) {
	if !n.soleVoter() || n.Raft.State() != raft.Follower {
		return
	}
	rc := n.Raft.ReloadableConfig()
	quick := rc
	// The lowest value raft accepts: the leader lease may not exceed it.
	quick.HeartbeatTimeout = lease
	if err := n.Raft.ReloadConfig(quick); err != nil {
		n.cfg.Logger.Warn("immediate election of a sole voter", "error", err)
		return
	}
	if err := n.Raft.ReloadConfig(rc); err != nil {
		n.cfg.Logger.Error("raft heartbeat timeout not restored", "error", err)
	}
}

// checkLogCoversStore refuses a store that has applied entries beyond the
// end of the raft log and its snapshots: the log it was written with is
// missing (a wrong --raft-log-dir, a lost folder). raft would append new
// entries at indexes the FSM has already applied, and skip them.
//
// A snapshot covers the applied index its stream holds, which can be past
// its raft index: raft names a snapshot taken while a restarted node
// replays its log after the last entry replayed so far, but the stream is
// the whole store. A follower that installed such a snapshot and was
// stopped before its log reached the stream's index is whole.
func checkLogCoversStore(state StateMachine, applied uint64, logs raft.LogStore, snaps raft.SnapshotStore, snapDir, logDir string) error {
	end, err := logs.LastIndex()
	if err != nil {
		return err
	}
	list, err := snaps.List()
	if err != nil {
		return err
	}
	if len(list) > 0 {
		end = max(end, list[0].Index)
		if applied > end {
			if holds, err := snapshotApplied(state, snaps, snapDir, list[0].ID); err == nil {
				end = max(end, holds)
			}
		}
	}
	if applied > end {
		return fmt.Errorf("cluster: the store has applied the raft log up to index %d, but the log in %s ends at %d: "+
			"start with the raft log this store was written with, or empty both to join again as a new node", applied, logDir, end)
	}
	return nil
}

// Propose replicates one command and returns its applied result. A nil
// error means the command is committed in the log and applied locally.
// Concurrent proposals share log entries (proposer.go).
func (n *Node) Propose(ctx context.Context, cmd *command.Cmd) (persistence.Result, error) {
	return n.collector.propose(ctx, cmd)
}

// IsLeader reports whether this node is the leader.
func (n *Node) IsLeader() bool { return n.Raft.State() == raft.Leader }

// LeaderID returns the current leader's id and raft address ("" when none).
func (n *Node) LeaderID() (id, addr string) {
	a, i := n.Raft.LeaderWithID()
	return string(i), string(a)
}

// Ready reports whether the node can serve as far as it alone can tell: it
// knows a leader it can reach (itself, or another at its raft address, to
// forward to over the cluster port) and has applied its log up to the commit index
// it knows. That is all of it for the leader. A follower's own commit index
// trails the leader's by what it has not yet stored (it is 0 after a
// restart until entries arrive), so whether a follower has caught up is
// asked of the leader: CaughtUp (readiness.go), which transport/server's
// /readyz adds.
func (n *Node) Ready() bool {
	if r := n.Route(); !r.Self && r.LeaderRaft == "" {
		return false
	}
	return n.FSM.AppliedIndex() >= n.Raft.CommitIndex() || n.Raft.AppliedIndex() >= n.Raft.CommitIndex()
}

// WaitLeader waits until some node leads or ctx ends.
func (n *Node) WaitLeader(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if _, id := n.Raft.LeaderWithID(); id != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Barrier waits until every entry committed before it is applied locally.
func (n *Node) Barrier(timeout time.Duration) error {
	return n.Raft.Barrier(timeout).Error()
}

// Shutdown stops raft and closes the log.
func (n *Node) Shutdown() error {
	n.collector.close()
	if n.FSM.pace != nil {
		n.FSM.pace.stop() // raft's shutdown waits for a snapshot being written
	}
	err := n.Raft.Shutdown().Error()
	if n.transport != nil {
		n.transport.Close()
	}
	if cerr := n.wal.Close(); err == nil {
		err = cerr
	}
	return err
}
