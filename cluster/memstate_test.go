package cluster

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"

	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

// memState is a StateMachine in memory: the pure order state machine over
// maps, with no Pebble, no outbox and no idempotency records. The Raft
// plumbing (the proposer, the FSM's decoding, skipping and replay,
// snapshots, restores, recovery at start) runs over it exactly as over the
// store; a restarted node gets a new, empty one, as if its store folder had
// been lost.
type memState struct {
	mu      sync.Mutex
	applied uint64
	orders  map[string]*order.Order
	members map[string]command.Member
}

func newMemState() *memState {
	return &memState{orders: map[string]*order.Order{}, members: map[string]command.Member{}}
}

func memKey(merchant, id string) string { return merchant + "\x00" + id }

func (s *memState) getOrder(merchant, id string) *order.Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.orders[memKey(merchant, id)]
}

func (s *memState) AppliedIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied, nil
}

func (s *memState) PendingExactAt() uint64               { idx, _ := s.AppliedIndex(); return idx }
func (s *memState) Recheck([]persistence.OrderRef) error { return nil }
func (s *memState) SyncForSnapshot() error               { return nil }
func (s *memState) RestoreIncomplete() (bool, error)     { return false, nil }
func (s *memState) Begin() Batch                         { return &memBatch{s: s, orders: map[string]*order.Order{}} }
func (s *memState) Member(id string) (*command.Member, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.members[id]; ok {
		return &m, nil
	}
	return nil, nil
}

func (s *memState) Members() ([]command.Member, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.SortedFunc(maps.Values(s.members), func(a, b command.Member) int {
		return cmp.Compare(a.NodeID, b.NodeID)
	}), nil
}

// memImage is a memState's snapshot stream: its whole state as JSON, the
// orders in their binary codec.
type memImage struct {
	Applied uint64                    `json:"applied"`
	Orders  map[string][]byte         `json:"orders"`
	Members map[string]command.Member `json:"members"`
}

func (s *memState) image() *memImage {
	s.mu.Lock()
	defer s.mu.Unlock()
	img := &memImage{Applied: s.applied, Orders: map[string][]byte{}, Members: maps.Clone(s.members)}
	for k, o := range s.orders {
		img.Orders[k] = command.AppendOrder(nil, o)
	}
	return img
}

func (s *memState) NewSnapshot() StateSnapshot { return s.image() }

func (m *memImage) Write(w io.Writer) error { return json.MarshalWrite(w, m, json.Deterministic(true)) }
func (m *memImage) Release()                {}

func (s *memState) Restore(r io.Reader) error {
	var img memImage
	if err := json.UnmarshalRead(r, &img); err != nil {
		return err
	}
	orders := map[string]*order.Order{}
	for k, b := range img.Orders {
		o, err := command.DecodeOrder(b)
		if err != nil {
			return err
		}
		orders[k] = o
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied, s.orders, s.members = img.Applied, orders, img.Members
	if s.members == nil {
		s.members = map[string]command.Member{}
	}
	return nil
}

func (s *memState) SnapshotAppliedIndex(r io.Reader) (uint64, error) {
	var img memImage
	if err := json.UnmarshalRead(r, &img); err != nil {
		return 0, err
	}
	return img.Applied, nil
}

func (s *memState) Digest() (string, uint64, error) {
	img := s.image()
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(img.Orders)) {
		fmt.Fprintf(h, "%q %x\n", k, img.Orders[k])
	}
	for _, k := range slices.Sorted(maps.Keys(img.Members)) {
		fmt.Fprintf(h, "%+v\n", img.Members[k])
	}
	return hex.EncodeToString(h.Sum(nil)), img.Applied, nil
}

// memBatch collects a raft batch's orders and members; Commit publishes
// them with the applied index at once.
type memBatch struct {
	s       *memState
	orders  map[string]*order.Order
	members []command.Member
}

func (b *memBatch) Apply(c *command.Cmd) persistence.Result {
	switch {
	case c.Order != nil:
		k := memKey(c.Order.Merchant, c.Order.OrderID)
		cur, ok := b.orders[k]
		if !ok {
			cur = b.s.getOrder(c.Order.Merchant, c.Order.OrderID)
		}
		next, out := order.Apply(cur, c.Order)
		if !out.Changed() {
			return persistence.Result{Order: cur, Outcome: out}
		}
		b.orders[k] = next
		return persistence.Result{Order: next, Outcome: out}
	case c.Member != nil:
		if c.Member.NodeID == "" {
			return persistence.Result{Err: fmt.Errorf("member record without node_id")}
		}
		b.members = append(b.members, *c.Member)
	}
	return persistence.Result{}
}

func (b *memBatch) Commit(appliedIndex uint64) error {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	maps.Copy(b.s.orders, b.orders)
	for _, m := range b.members {
		if m.Removed {
			delete(b.s.members, m.NodeID)
		} else {
			b.s.members[m.NodeID] = m
		}
	}
	b.s.applied = appliedIndex
	return nil
}

func (b *memBatch) Created() []*outbox.Notification { return nil }
func (b *memBatch) Close()                          {}
