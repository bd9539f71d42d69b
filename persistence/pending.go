package persistence

import (
	"encoding/binary"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// pendingAuths is the set of authorisations due at the acquirer: the orders
// a new leader, or a restarted one, must send again (actors.Scheduler).
//
// It lives in memory and reaches Pebble (the p/ keys) in checkpoints: about
// once a second with a batch, at each Raft snapshot and at close. Written
// with every change instead, an authorisation cost two writes (set at its
// acceptance, deleted at the acquirer's answer a few milliseconds later), a
// third of a charge's memtable inserts, and tombstones for the compactions
// (docs/performance-history.md, series 12). A checkpoint writes only what changed
// since the last, so an authorisation answered in between costs nothing.
//
// Why the set is exact after a restart: a checkpoint writes the p/ keys and
// the index they are exact at (a/pending) in one batch. Raft hands the FSM
// every entry after its latest snapshot again; the FSM skips the ones the
// store has applied, but names the orders of those after a/pending
// (Recheck), and each is put in or out of the set by its state in the
// store. An order not named has not changed since a/pending, so its p/ key
// is right. See DESIGN.md, "The pending-authorisation set".
//
// One lock guards it all: the scheduler reads the set while the FSM changes
// it, and nothing here is hot (a lock per batch).
type pendingAuths struct {
	mu  sync.Mutex
	due map[string]OrderRef // order key → the order
	// persisted is what the p/ keys hold, by order key like due.
	persisted map[string]OrderRef
	// exactAt is the Raft index the set is known exact at: every change up
	// to it is in due. Only Batch.Commit moves it (a replay's Recheck does
	// not, which is conservative: a checkpoint then claims less than it
	// holds, and the next restart rechecks a little more).
	exactAt        uint64
	lastCheckpoint time.Time
	// every is how often a batch carries a checkpoint
	// (pendingCheckpointEvery; tests lengthen it).
	every time.Duration
}

// pendingCheckpointEvery is how often a batch carries the set's changes to
// the p/ keys: a restart rechecks the orders of at most this much log.
const pendingCheckpointEvery = time.Second

var keyPendingAt = []byte(prefixMeta + "pending")

// pendingChange is a batch's change to the set for one order.
type pendingChange struct {
	ref OrderRef
	due bool
}

// load replaces the set with what the p/ keys hold: at open, and after a
// snapshot restore.
//
// A store without a/pending is new, or was written by a version that kept
// the p/ keys exact at every batch: the set is exact at its applied index
// (0 for a new store). That is written down at once, synced: were it left
// to the first checkpoint, a process killed within its first second would
// leave a store whose applied index had moved on while its p/ keys had
// not, and the next opening would take them as exact at that index. A
// movement recorded in that second would never be sent (found by
// TestLedgersAgreeUnderRandomFaultsRealProcesses).
func (p *pendingAuths) load(s *Store) error {
	recorded, err := p.loadKeys(s)
	if err != nil || recorded {
		return err
	}
	return s.writePendingCheckpoint(pebble.Sync)
}

// loadKeys reads the set and the index it is exact at, and reports whether
// the store recorded that index (a/pending).
func (p *pendingAuths) loadKeys(s *Store) (recorded bool, err error) {
	due := map[string]OrderRef{}
	persisted := map[string]OrderRef{}
	err = s.scan([]byte(prefixPending), prefixEnd(prefixPending), func(k, _ []byte) bool {
		ref := splitRef(k[len(prefixPending):])
		key := string(orderKey(ref.Merchant, ref.OrderID))
		due[key] = ref
		persisted[key] = ref
		return true
	})
	if err != nil {
		return false, err
	}
	at, err := get(s.db, keyPendingAt)
	if err != nil {
		return false, err
	}
	recorded = at != nil
	if !recorded {
		if at, err = get(s.db, keyApplied); err != nil {
			return false, err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.due, p.persisted, p.exactAt = due, persisted, 0
	if len(at) == 8 {
		p.exactAt = binary.BigEndian.Uint64(at)
	}
	p.lastCheckpoint = time.Now()
	return recorded, nil
}

// apply puts the orders of changes in the set (due) or takes them out.
func (p *pendingAuths) apply(changes map[string]pendingChange) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.applyLocked(changes)
}

// committed applies a committed batch's changes: the set is then exact at
// its index.
func (p *pendingAuths) committed(changes map[string]pendingChange, appliedIndex uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.applyLocked(changes)
	p.exactAt = appliedIndex
}

func (p *pendingAuths) applyLocked(changes map[string]pendingChange) {
	for key, c := range changes {
		if c.due {
			p.due[key] = c.ref
		} else {
			delete(p.due, key)
		}
	}
}

// checkpoint adds to w the p/ keys that changed since the last checkpoint
// and a/pending, the index they are exact at. Once w is committed, the
// caller calls the returned function.
func (p *pendingAuths) checkpoint(w *pebble.Batch) (committed func(), err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	add := map[string]OrderRef{}
	for k, ref := range p.due {
		if _, ok := p.persisted[k]; !ok {
			add[k] = ref
		}
	}
	gone := map[string]OrderRef{}
	for k, ref := range p.persisted {
		if _, ok := p.due[k]; !ok {
			gone[k] = ref
		}
	}
	for _, ref := range add {
		if err := w.Set(refKey(prefixPending, ref.Merchant, ref.OrderID), nil, nil); err != nil {
			return nil, err
		}
	}
	for _, ref := range gone {
		if err := w.Delete(refKey(prefixPending, ref.Merchant, ref.OrderID), nil); err != nil {
			return nil, err
		}
	}
	var at [8]byte
	binary.BigEndian.PutUint64(at[:], p.exactAt)
	if err := w.Set(keyPendingAt, at[:], nil); err != nil {
		return nil, err
	}
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for k, ref := range add {
			p.persisted[k] = ref
		}
		for k := range gone {
			delete(p.persisted, k)
		}
		p.lastCheckpoint = time.Now()
	}, nil
}

// checkpointDue reports whether the next batch should carry a checkpoint.
func (p *pendingAuths) checkpointDue() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Since(p.lastCheckpoint) >= p.every
}

// list returns the set, sorted by order key.
func (p *pendingAuths) list() []OrderRef {
	p.mu.Lock()
	keys := make([]string, 0, len(p.due))
	for k := range p.due {
		keys = append(keys, k)
	}
	refs := make([]OrderRef, len(keys))
	slices.Sort(keys)
	for i, k := range keys {
		refs[i] = p.due[k]
	}
	p.mu.Unlock()
	return refs
}

// PendingAuths lists every order whose authorisation is due at the
// acquirer, sorted by merchant and order id.
func (s *Store) PendingAuths() ([]OrderRef, error) {
	return s.pending.list(), nil
}

// PendingExactAt is the Raft index up to which the pending-authorisation set
// holds every change. The FSM hands the orders of the entries after it that
// it skips to Recheck.
func (s *Store) PendingExactAt() uint64 {
	s.pending.mu.Lock()
	defer s.pending.mu.Unlock()
	return s.pending.exactAt
}

// Recheck puts each order in the pending-authorisation set or takes it out,
// by its state in the store. The FSM calls it with the orders of the log
// entries it skipped because the store had already applied them (a replay
// after a restart): their changes to the set were made in memory only, by
// the process that applied them. Call it from the FSM's goroutine, before
// the batch it is part of commits.
func (s *Store) Recheck(refs []OrderRef) error {
	changes := make(map[string]pendingChange, len(refs))
	for _, ref := range refs {
		key := string(orderKey(ref.Merchant, ref.OrderID))
		if _, seen := changes[key]; seen {
			continue
		}
		o, err := s.GetOrder(ref.Merchant, ref.OrderID)
		if err != nil {
			return err
		}
		changes[key] = pendingChange{ref: ref, due: o.AcquirerDue()}
	}
	s.pending.apply(changes)
	return nil
}

// writePendingCheckpoint writes a checkpoint of the pending set in a batch
// of its own, with the given sync policy.
func (s *Store) writePendingCheckpoint(opts *pebble.WriteOptions) error {
	b := s.db.NewBatch()
	defer b.Close()
	committed, err := s.pending.checkpoint(b)
	if err != nil {
		return err
	}
	if err := b.Commit(opts); err != nil {
		return err
	}
	committed()
	return nil
}

// SyncForSnapshot checkpoints the pending-authorisation set and makes every
// committed write durable. The FSM calls it before each Raft snapshot
// (between batches, on its goroutine): once raft compacts its log up to the
// snapshot, the store is the only copy of those entries' effects, and the
// snapshot carries the set to the followers that restore it.
func (s *Store) SyncForSnapshot() error {
	return s.writePendingCheckpoint(pebble.Sync)
}
