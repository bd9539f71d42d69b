package persistence

import (
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// pendingAuths is the set of authorisations due at the acquirer: the orders
// a new leader, or a restarted one, must send again (actors.Scheduler).
//
// It lives in memory and reaches Pebble (the p/ keys) only when a Raft
// snapshot is taken. Written with every change instead, an authorisation
// cost two writes (set at acceptance, deleted at the acquirer's answer a
// few milliseconds later), a third of a charge's memtable inserts and
// tombstones for the compactions (docs/performance.md, series 12).
//
// Why the set is still exact after a restart: the p/ keys hold the set as
// of the latest snapshot taken (written and synced before the snapshot is
// captured, so the snapshot carries them too), and raft hands the FSM every
// entry after its latest snapshot again. The entries the store already
// applied are skipped, but the FSM still names their orders (Recheck), and
// each of those is put in or out of the set by its state in the store. An
// order not named changed nothing since that snapshot, so its p/ key is
// still right. See DESIGN.md, "The pending-authorisation set".
type pendingAuths struct {
	mu  sync.Mutex
	due map[string]OrderRef // order key → the order
	// persisted is the order keys the p/ keys hold. Only the FSM's goroutine
	// uses it (it writes them, in persist).
	persisted map[string]struct{}
}

// load replaces the set with what the p/ keys hold: at open, and after a
// snapshot restore.
func (p *pendingAuths) load(s *Store) error {
	due := map[string]OrderRef{}
	persisted := map[string]struct{}{}
	err := s.scan([]byte(prefixPending), prefixEnd(prefixPending), func(k, _ []byte) bool {
		ref := splitRef(k[len(prefixPending):])
		key := string(orderKey(ref.Merchant, ref.OrderID))
		due[key] = ref
		persisted[key] = struct{}{}
		return true
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.due = due
	p.mu.Unlock()
	p.persisted = persisted
	return nil
}

// update puts the orders of changes in the set (true) or takes them out.
func (p *pendingAuths) update(changes map[string]pendingChange) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, c := range changes {
		if c.due {
			p.due[key] = c.ref
		} else {
			delete(p.due, key)
		}
	}
}

// pendingChange is a batch's change to the set for one order.
type pendingChange struct {
	ref OrderRef
	due bool
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

// persist writes the set to the p/ keys (only what changed since the last
// time) in one batch, unsynced: the caller syncs.
func (p *pendingAuths) persist(db *pebble.DB) error {
	p.mu.Lock()
	add := map[string]OrderRef{}
	for k, ref := range p.due {
		if _, ok := p.persisted[k]; !ok {
			add[k] = ref
		}
	}
	var gone []string
	for k := range p.persisted {
		if _, ok := p.due[k]; !ok {
			gone = append(gone, k)
		}
	}
	p.mu.Unlock()
	if len(add) == 0 && len(gone) == 0 {
		return nil
	}
	b := db.NewBatch()
	defer b.Close()
	for _, ref := range add {
		if err := b.Set(refKey(prefixPending, ref.Merchant, ref.OrderID), nil, nil); err != nil {
			return err
		}
	}
	for _, k := range gone {
		ref := splitRef([]byte(strings.TrimPrefix(k, prefixOrder)))
		if err := b.Delete(refKey(prefixPending, ref.Merchant, ref.OrderID), nil); err != nil {
			return err
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	for k := range add {
		p.persisted[k] = struct{}{}
	}
	for _, k := range gone {
		delete(p.persisted, k)
	}
	return nil
}

// PendingAuths lists every order whose authorisation is due at the
// acquirer, sorted by merchant and order id.
func (s *Store) PendingAuths() ([]OrderRef, error) {
	return s.pending.list(), nil
}

// Recheck puts each order in the pending-authorisation set or takes it out,
// by its state in the store. The FSM calls it with the orders of the log
// entries it skipped because the store had already applied them (a replay
// after a restart): their changes to the set were made in memory only, by
// the process that applied them.
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
		changes[key] = pendingChange{ref: ref, due: o != nil && o.Pending.Due()}
	}
	s.pending.update(changes)
	return nil
}

// SyncForSnapshot writes the pending-authorisation set as it stands and
// makes every committed write durable. The FSM calls it before each Raft
// snapshot (between batches, on its goroutine): once raft compacts its log
// up to the snapshot, the store is the only copy of those entries' effects.
func (s *Store) SyncForSnapshot() error {
	if err := s.pending.persist(s.db); err != nil {
		return err
	}
	return s.db.LogData(nil, pebble.Sync)
}
