package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/hashicorp/raft"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

// FSM is the thin adapter between the Raft log and the state: it decodes
// each committed entry and hands its commands to the StateMachine's batch
// (the store's persistence.Batch.Apply, which runs the pure order state
// machine). One Raft batch is one Pebble batch.
//
// Concurrency: raft calls ApplyBatch, Apply, Snapshot and Restore from its
// single FSM goroutine, never concurrently. FSMSnapshot.Persist runs on
// another goroutine, reading a Pebble snapshot.
type FSM struct {
	store  StateMachine
	logger *slog.Logger
	// applied is the last index whose effects are in the store. Entries at
	// or below it are skipped when raft replays its log after a restart.
	applied atomic.Uint64
	// restores counts snapshot restores (tests check catch-up took one).
	restores atomic.Uint64
	// OnCommit, when set, is called after each committed batch with the
	// notifications it created (the dispatcher wakes on them). It runs on
	// the FSM goroutine: it must not block.
	OnCommit func(created []*outbox.Notification, merchants []*command.Merchant)
	// applyLat times each batch of entries applied to the store.
	applyLat *metrics.PrometheusHistogram
	// pace bounds the write rate of snapshots (nil: unbounded); Start sets
	// it from Config.SnapshotBytesPerSec.
	pace *pacer
	// snapshotLat and snapshotBytes describe the snapshots written: paced,
	// a large store's take tens of seconds.
	snapshotLat   *metrics.PrometheusHistogram
	snapshotBytes *metrics.Gauge
	// between is held while a batch, a snapshot or a restore runs, so a
	// backup (backup.go), which runs on another goroutine, sees the store
	// between two batches as raft's own snapshots do.
	between sync.Mutex
}

// snapshotBuckets bound the snapshot durations: 0.1 s to about 7 minutes.
var snapshotBuckets = metrics.ExponentialBuckets(0.1, 2, 13)

// NewFSM makes an FSM over store: StoreState(the Pebble store) in a node.
func NewFSM(store StateMachine, logger *slog.Logger) (*FSM, error) {
	idx, err := store.AppliedIndex()
	if err != nil {
		return nil, err
	}
	f := &FSM{store: store, logger: logger,
		applyLat:      metrics.GetOrCreatePrometheusHistogramExt(`gateway_fsm_apply_seconds`, stageBuckets),
		snapshotLat:   metrics.GetOrCreatePrometheusHistogramExt(`gateway_raft_snapshot_seconds`, snapshotBuckets),
		snapshotBytes: metrics.GetOrCreateGauge(`gateway_raft_snapshot_bytes`, nil),
	}
	f.applied.Store(idx)
	return f, nil
}

// AppliedIndex is the last log index applied to the store.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// Apply implements raft.FSM.
func (f *FSM) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch implements raft.BatchingFSM. The response for a command entry
// is a []persistence.Result, one per command in the entry.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	start := time.Now()
	defer f.applyLat.UpdateDuration(start)
	f.between.Lock()
	defer f.between.Unlock()
	out := make([]any, len(logs))
	applied := f.applied.Load()
	var last uint64
	b := f.store.Begin()
	defer b.Close()
	var merchants []*command.Merchant
	// replayed names the orders of entries the store has already applied
	// (raft replays its log after a restart) but whose changes to the
	// pending-authorisation set it may not hold: the set is checkpointed
	// about once a second (persistence/pending.go).
	var replayed []persistence.OrderRef
	exactAt := f.store.PendingExactAt()
	for i, l := range logs {
		last = l.Index
		if l.Type != raft.LogCommand || l.Index <= min(applied, exactAt) {
			continue
		}
		cmds, err := command.DecodeEntry(l.Data)
		if err != nil {
			// A committed entry this binary cannot read (one written by a
			// newer version, or a codec bug) holds acknowledged money
			// changes: skipping it would silently diverge from the replicas
			// that can. Stop this replica instead; an upgraded binary
			// replays the entry on restart.
			panic(fmt.Sprintf("cluster: cannot decode committed log entry %d (upgrade this node?): %v", l.Index, err))
		}
		if l.Index <= applied {
			for j := range cmds {
				if c := cmds[j].Order; c != nil {
					replayed = append(replayed, persistence.OrderRef{Merchant: c.Merchant, OrderID: c.OrderID})
				}
			}
			continue
		}
		results := make([]persistence.Result, len(cmds))
		for j := range cmds {
			results[j] = b.Apply(&cmds[j])
			if cmds[j].Merchant != nil {
				merchants = append(merchants, cmds[j].Merchant)
			}
			if m := results[j].Merchant; m != nil {
				merchants = append(merchants, m) // a key rotation
			}
			merchants = append(merchants, results[j].Resealed...) // a vault re-wrap
		}
		out[i] = results
	}
	f.recheck(replayed)
	if last > applied {
		if err := b.Commit(last); err != nil {
			// The state and the log would diverge: stop this replica.
			panic(fmt.Sprintf("cluster: commit batch at index %d: %v", last, err))
		}
		f.applied.Store(last)
		if created := b.Created(); f.OnCommit != nil && (len(created) > 0 || len(merchants) > 0) {
			f.OnCommit(created, merchants)
		}
	}
	return out
}

// recheck hands the orders of replayed entries to the store, before the
// batch commits: the batch's own changes to the set are then made on top.
func (f *FSM) recheck(replayed []persistence.OrderRef) {
	if len(replayed) == 0 {
		return
	}
	if err := f.store.Recheck(replayed); err != nil {
		// Without it an authorisation could be left unsent: stop rather
		// than run with a pending set that may be short.
		panic(fmt.Sprintf("cluster: recheck pending authorisations of replayed entries: %v", err))
	}
}

// Snapshot implements raft.FSM. It syncs the store first: once raft
// compacts the log up to this snapshot, the store is the only copy of those
// entries' effects.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.between.Lock()
	defer f.between.Unlock()
	if err := f.store.SyncForSnapshot(); err != nil {
		return nil, fmt.Errorf("sync store before snapshot: %w", err)
	}
	return &fsmSnapshot{snap: f.store.NewSnapshot(), pace: f.pace, lat: f.snapshotLat, size: f.snapshotBytes}, nil
}

// Restore implements raft.FSM: the store is replaced by the snapshot (a
// follower installing the leader's).
//
// A restore that fails stops the node. The store has by then been emptied
// (its marker says so), and raft, on a failed install, carries on with its
// old log and applied index: the entries it would then hand over would be
// applied to the empty store, and this node would diverge from the others
// (an order not found, a charge taken again). At the next start
// recoverStore sees the marker and restores raft's snapshot again, as after
// a crash in the middle of one.
func (f *FSM) Restore(rc io.ReadCloser) error {
	if err := f.restore(rc); err != nil {
		panic(fmt.Sprintf("cluster: snapshot restore failed, the store is incomplete: %v", err))
	}
	return nil
}

// restore replaces the store by the snapshot rc holds.
func (f *FSM) restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.between.Lock()
	defer f.between.Unlock()
	if err := f.store.Restore(rc); err != nil {
		return err
	}
	idx, err := f.store.AppliedIndex()
	if err != nil {
		return err
	}
	f.applied.Store(idx)
	f.restores.Add(1)
	f.logger.Info("restored state from snapshot", "applied_index", idx)
	if f.OnCommit != nil {
		f.OnCommit(nil, nil)
	}
	return nil
}

// Restores is how many snapshots this FSM restored since it was made.
func (f *FSM) Restores() uint64 { return f.restores.Load() }

// recoverStore makes the store whole before raft starts. raft does not
// restore on start (NoSnapshotRestoreOnStart): it takes the FSM as applied up
// to its latest snapshot and replays only the entries after it. So a store
// that holds less than that snapshot must be restored from it first:
//   - a restore that a crash cut off left the store partial;
//   - a store folder that was lost or replaced (an operator wiped a corrupt
//     store) holds nothing of what the log has since compacted.
//
// The store is compared with the applied index recorded in the snapshot,
// not with the snapshot's raft index: entries that never reach the FSM
// (raft's no-ops and barriers) may come after the last one it applied.
func (f *FSM) recoverStore(snaps raft.SnapshotStore, dir string) error {
	partial, err := f.store.RestoreIncomplete()
	if err != nil {
		return err
	}
	list, err := snaps.List()
	if err != nil {
		return err
	}
	if len(list) == 0 {
		if partial {
			return fmt.Errorf("cluster: the store was cut off mid-restore and raft holds no snapshot to restore it from")
		}
		return nil
	}
	latest := list[0]
	applied := f.applied.Load()
	if partial {
		f.logger.Warn("store restore was interrupted; restoring the latest snapshot again", "snapshot", latest.ID)
	} else {
		holds, err := snapshotApplied(f.store, snaps, dir, latest.ID)
		switch {
		case err != nil && applied == 0:
			// An empty store beside a snapshot lost its data, and cannot
			// get it back from this one.
			return fmt.Errorf("cluster: the store is empty and raft's latest snapshot cannot be read: %w", err)
		case err != nil:
			// The store may well be whole; the snapshot's own checksum is
			// verified when it is restored or sent to a follower.
			f.logger.Warn("raft's latest snapshot cannot be read; starting from the store as it is", "snapshot", latest.ID, "error", err)
			return nil
		case applied >= holds:
			return nil
		}
		f.logger.Warn("the store holds less than raft's latest snapshot (a lost or replaced store folder); restoring the snapshot",
			"applied_index", applied, "snapshot", latest.ID, "snapshot_applied_index", holds)
	}
	_, rc, err := snaps.Open(latest.ID)
	if err != nil {
		return fmt.Errorf("open snapshot %s: %w", latest.ID, err)
	}
	return f.restore(rc) // before raft starts: an error refuses the start
}

// snapshotApplied is the last index the FSM had applied when the snapshot
// was taken. The index is among the stream's first records, but raft's Open
// reads the whole file to check its CRC first (over a gigabyte at a million
// orders, at every start), so the state file is read directly where raft's
// file store keeps it; Open is the fallback. The CRC is still checked when
// the snapshot is restored (here or on a follower).
func snapshotApplied(state StateMachine, snaps raft.SnapshotStore, dir, id string) (uint64, error) {
	if f, err := os.Open(filepath.Join(dir, "snapshots", id, "state.bin")); err == nil {
		idx, err := state.SnapshotAppliedIndex(f)
		f.Close()
		if err == nil {
			return idx, nil
		}
	}
	_, rc, err := snaps.Open(id)
	if err != nil {
		return 0, fmt.Errorf("open snapshot %s: %w", id, err)
	}
	defer rc.Close()
	idx, err := state.SnapshotAppliedIndex(rc)
	if err != nil {
		return 0, fmt.Errorf("snapshot %s: %w", id, err)
	}
	return idx, nil
}

type fsmSnapshot struct {
	snap StateSnapshot
	pace *pacer
	lat  *metrics.PrometheusHistogram
	size *metrics.Gauge
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	counted := &countingWriter{w: sink}
	if err := s.snap.Write(s.pace.writer(counted)); err != nil {
		sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	s.lat.UpdateDuration(start)
	s.size.Set(float64(counted.n))
	return nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

func (s *fsmSnapshot) Release() { s.snap.Release() }
