package persistence

import (
	"hash/maphash"
	"strconv"
	"testing"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
)

// No key added is ever reported absent, across the growth into several
// filters, and keys never added are mostly reported absent.
func TestKnownOrdersHasNoFalseNegatives(t *testing.T) {
	k := &knownOrders{seed: maphash.MakeSeed(), filters: []*bloomFilter{newBloomFilter(1000)}}
	if !k.mayContain([]byte("o/m\x00never-added")) {
		t.Fatal("a filter still being filled must answer maybe")
	}
	k.complete.Store(true)
	const n = 10_000 // 1000 + 2000 + 4000 + 8000: four filters
	for i := range n {
		k.add([]byte("o/m\x00in-" + strconv.Itoa(i)))
	}
	if len(k.filters) != 4 {
		t.Fatalf("%d filters for %d keys from a capacity of 1000, want 4", len(k.filters), n)
	}
	for i := range n {
		if !k.mayContain([]byte("o/m\x00in-" + strconv.Itoa(i))) {
			t.Fatalf("key %d added but reported absent", i)
		}
	}
	falsePositives := 0
	for i := range n {
		if k.mayContain([]byte("o/m\x00out-" + strconv.Itoa(i))) {
			falsePositives++
		}
	}
	// About 1 % per filter; four filters.
	if rate := float64(falsePositives) / n; rate > 0.06 {
		t.Fatalf("false positive rate %.3f", rate)
	}
	var unset *knownOrders
	if !unset.mayContain([]byte("o/m\x00x")) {
		t.Fatal("a nil filter (restore in progress) must answer maybe")
	}
}

// waitKnownOrders waits for the background fill of the store's filter.
func waitKnownOrders(t *testing.T, s *testStore) {
	t.Helper()
	s.loading.Wait()
	if k := s.known.Load(); k == nil || !k.complete.Load() {
		t.Fatal("filter of order keys not complete")
	}
}

// assertAllExist applies a create with another body for each order: every
// one must be refused as a conflict, never created over the stored order.
func assertAllExist(t *testing.T, s *testStore, idx uint64, ids []string) {
	t.Helper()
	cmds := make([]*command.Cmd, len(ids))
	for i, id := range ids {
		cmds[i] = createCmd(id, "other-body")
	}
	for i, r := range s.apply(idx, cmds...) {
		if r.Outcome.Reject == nil || r.Outcome.Reject.Kind != order.RejectConflict {
			t.Fatalf("order %s: %+v, want a conflict with the stored order", ids[i], r.Outcome)
		}
	}
}

// The FSM skips Pebble for order ids the filter has never seen, so the
// filter must know every stored order: in the batch that created it,
// after the store is reopened (and the cache is empty), and after the
// state is replaced by a snapshot; and orders created while the filter is
// still being filled in the background are not missed.
func TestExistingOrdersStayKnownAcrossReopenAndRestore(t *testing.T) {
	s := newTestStore(t)
	var ids []string
	for i := range 300 {
		ids = append(ids, "o-"+strconv.Itoa(i))
	}
	// Same batch: the second create of o-0 sees the first.
	res := s.apply(1, createCmd("o-0", "body"), createCmd("o-0", "other-body"))
	if !res[0].Outcome.Created || res[1].Outcome.Reject == nil {
		t.Fatalf("same batch: %+v then %+v", res[0].Outcome, res[1].Outcome)
	}
	for i, id := range ids[1:] {
		s.apply(uint64(2+i), createCmd(id, "body"))
	}
	assertAllExist(t, s, 400, ids)

	s.reopen()
	waitKnownOrders(t, s)
	assertAllExist(t, s, 401, ids)

	// Orders created while the fill is still running (the filter was
	// published before its scan) are known once it completes.
	s.reopen()
	s.apply(402, createCmd("during-fill", "body"))
	waitKnownOrders(t, s)
	s.reopen()
	s.apply(403, createCmd("during-fill-2", "body"))
	waitKnownOrders(t, s)
	s.orders.clear()
	assertAllExist(t, s, 404, []string{"during-fill", "during-fill-2"})
	ids = append(ids, "during-fill", "during-fill-2")

	// Restore another store's state: its orders become known, and orders
	// of the replaced state are gone.
	other := newTestStore(t)
	other.apply(1, createCmd("from-snapshot", "body"))
	restoreFrom(t, s.Store, other.Store)
	waitKnownOrders(t, s)
	assertAllExist(t, s, 405, []string{"from-snapshot"})
	if r := s.apply(406, createCmd("o-1", "body"))[0]; !r.Outcome.Created {
		t.Fatalf("an order of the replaced state: %+v, want created anew", r.Outcome)
	}
}
