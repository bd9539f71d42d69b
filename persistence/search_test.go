package persistence

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
)

// searchFixture is a store filled with random orders of three merchants,
// and the model: every order as the FSM last returned it.
type searchFixture struct {
	ts    *testStore
	rng   *rand.Rand
	model map[string]*order.Order // merchant \0 order_id
	idx   uint64
	n     int
}

var (
	searchMerchants = []string{"m_a", "m_b", "m_c"}
	searchEmails    = []string{"Ann@Example.com", "bob@example.com", "cy@example.org", ""}
	searchCards     = []struct{ bin, masked string }{
		{"411111", "411111******1111"}, {"555555", "555555******4444"},
		{"411111", "411111******0002"}, {"378282", "378282*****0005"},
	}
	searchAmounts  = []int64{100, 250, 999, 5000}
	searchStatuses = []order.Status{order.StatusProcessing, order.StatusAuthorized, order.StatusDeclined, order.StatusSettled}
)

func newSearchFixture(t *testing.T) *searchFixture {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	return &searchFixture{ts: newTestStore(t), rng: rand.New(rand.NewPCG(uint64(seed), 7)),
		model: map[string]*order.Order{}}
}

// add creates n orders, a random part of them then authorised, declined or
// settled; creation times repeat (ties sort by merchant and order_id).
func (f *searchFixture) add(n int, baseTime int64) {
	for range n {
		f.n++
		m := searchMerchants[f.rng.IntN(len(searchMerchants))]
		id := fmt.Sprintf("ord-%d-%05d", f.rng.IntN(3), f.n)
		card := searchCards[f.rng.IntN(len(searchCards))]
		at := baseTime + int64(f.rng.IntN(200))*int64(time.Second)
		cmds := []*command.Cmd{{Order: &order.Command{
			Kind: order.KindCreate, Time: at, Merchant: m, OrderID: id, TxnID: "t-" + id, RequestHash: "h-" + id,
			Create: &order.CreateData{Amount: searchAmounts[f.rng.IntN(len(searchAmounts))], Currency: "USD",
				ProcessingMID: "mid", SettleDelayHours: 24, CustomerEmail: searchEmails[f.rng.IntN(len(searchEmails))],
				Source: order.PaymentSource{Type: "card", BIN: card.bin, Masked: card.masked}},
		}}}
		switch f.rng.IntN(4) {
		case 1, 3:
			cmds = append(cmds, &command.Cmd{Order: &order.Command{Kind: order.KindAuthOutcome, Time: at + 1, Merchant: m,
				OrderID: id, TxnID: "t-" + id, Outcome: &order.OutcomeData{Approved: true, AuthCode: "1"}}})
		case 2:
			cmds = append(cmds, &command.Cmd{Order: &order.Command{Kind: order.KindAuthOutcome, Time: at + 1, Merchant: m,
				OrderID: id, TxnID: "t-" + id, Outcome: &order.OutcomeData{DeclineCode: "3.08", DeclineMessage: "no"}}})
		}
		f.idx++
		f.record(f.ts.apply(f.idx, cmds...))
		if len(cmds) == 2 && cmds[1].Order.Outcome.Approved && f.rng.IntN(2) == 0 {
			o := f.model[m+"\x00"+id]
			f.idx++
			f.record(f.ts.apply(f.idx, &command.Cmd{Order: &order.Command{Kind: order.KindSettle, Time: at + 2,
				Merchant: m, OrderID: id, TxnID: "s-" + id, Amount: o.Amount}}))
		}
	}
}

func (f *searchFixture) record(res []Result) {
	for _, r := range res {
		if r.Order != nil {
			f.model[r.Order.Merchant+"\x00"+r.Order.ID] = r.Order
		}
	}
}

// expected is the model's answer: every matching order, newest first, ties
// by merchant and order_id.
func (f *searchFixture) expected(flt SearchFilter) []string {
	var out []*order.Order
	for _, o := range f.model {
		if flt.matches(o) {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b *order.Order) int {
		if a.CreatedAt != b.CreatedAt {
			return int(b.CreatedAt - a.CreatedAt)
		}
		return strings.Compare(a.Merchant+"\x00"+a.ID, b.Merchant+"\x00"+b.ID)
	})
	return refsOf(out)
}

func refsOf(os []*order.Order) []string {
	out := make([]string, 0, len(os))
	for _, o := range os {
		out = append(out, o.Merchant+"/"+o.ID)
	}
	return out
}

// all pages through a search with the given page size.
func all(t *testing.T, s *Store, flt SearchFilter, limit int) []string {
	t.Helper()
	flt.Limit = limit
	var got []string
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatal("the search does not end")
		}
		page, err := s.SearchOrders(flt)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Orders) > limit {
			t.Fatalf("page of %d over limit %d", len(page.Orders), limit)
		}
		got = append(got, refsOf(page.Orders)...)
		if page.NextCursor == "" {
			return got
		}
		flt.Cursor = page.NextCursor
	}
}

// randomFilter sets each condition with some probability; "only" forces
// one of them (an index for each filter alone).
func (f *searchFixture) randomFilter(only int) SearchFilter {
	var flt SearchFilter
	pick := func(i int) bool { return only == i || (only < 0 && f.rng.IntN(3) == 0) }
	if pick(0) {
		flt.Merchant = searchMerchants[f.rng.IntN(len(searchMerchants))]
	}
	if pick(1) {
		flt.Status = searchStatuses[f.rng.IntN(len(searchStatuses))]
	}
	if pick(2) {
		flt.CreatedFrom = 1e18 + int64(f.rng.IntN(200))*int64(time.Second)
	}
	if pick(3) {
		flt.CreatedTo = 1e18 + int64(f.rng.IntN(200))*int64(time.Second)
	}
	if pick(4) {
		flt.Email = strings.ToUpper(searchEmails[f.rng.IntN(len(searchEmails)-1)])
	}
	if pick(5) {
		flt.Last4 = last4(searchCards[f.rng.IntN(len(searchCards))].masked)
	}
	if pick(6) {
		flt.BIN = searchCards[f.rng.IntN(len(searchCards))].bin
	}
	if pick(7) {
		flt.OrderIDPrefix = fmt.Sprintf("ord-%d", f.rng.IntN(3))
	}
	if pick(8) {
		a := searchAmounts[f.rng.IntN(len(searchAmounts))]
		flt.AmountMin = &a
	}
	if pick(9) {
		a := searchAmounts[f.rng.IntN(len(searchAmounts))]
		flt.AmountMax = &a
	}
	if pick(10) { // an exact amount: the amount index
		a := searchAmounts[f.rng.IntN(len(searchAmounts))]
		flt.AmountMin, flt.AmountMax = &a, &a
	}
	return flt
}

func TestSearchMatchesTheModel(t *testing.T) {
	f := newSearchFixture(t)
	f.add(600, 1e18)
	check := func(flt SearchFilter) {
		t.Helper()
		want := f.expected(flt)
		got := all(t, f.ts.Store, flt, 1+f.rng.IntN(40))
		if !slices.Equal(got, want) {
			t.Fatalf("filter %+v:\n got %d %v\nwant %d %v", flt, len(got), got, len(want), want)
		}
	}
	for only := range 11 { // every filter alone, several values
		for range 8 {
			check(f.randomFilter(only))
		}
	}
	for range 300 { // combined
		check(f.randomFilter(-1))
	}
	check(SearchFilter{}) // no filter: everything
	// The indexes follow the orders across a reopen (the order cache
	// empties) too.
	f.ts.reopen()
	for range 50 {
		check(f.randomFilter(-1))
	}
}

// A filter the chosen index does not cover reads at most the budget per
// page: pages may come back short, and the search still ends with every
// match exactly once.
func TestSearchReadBudgetPagesThroughSparseMatches(t *testing.T) {
	f := newSearchFixture(t)
	f.add(300, 1e18)
	flt := SearchFilter{OrderIDPrefix: "ord-1-0000"} // a few orders, no index
	want := f.expected(flt)
	var got []string
	for flt.Limit = 5; ; {
		page, err := f.ts.searchWithBudget(flt, 7)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, refsOf(page.Orders)...)
		if page.NextCursor == "" {
			break
		}
		flt.Cursor = page.NextCursor
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
}

// searchWithBudget runs a search with a smaller read budget.
func (ts *testStore) searchWithBudget(f SearchFilter, budget int) (SearchPage, error) {
	old := searchReadBudget
	searchReadBudget = budget
	defer func() { searchReadBudget = old }()
	return ts.SearchOrders(f)
}

// Orders written between pages neither repeat nor hide an order that
// matched throughout: new orders are newer than the cursor's position.
func TestSearchPaginationWithConcurrentWrites(t *testing.T) {
	f := newSearchFixture(t)
	f.add(300, 1e18)
	for _, flt := range []SearchFilter{{}, {Merchant: "m_b"}, {Status: order.StatusAuthorized}, {Merchant: "m_a", BIN: "411111"}} {
		before := f.expected(flt)
		flt.Limit = 7
		var got []string
		seen := map[string]bool{}
		for {
			page, err := f.ts.SearchOrders(flt)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range refsOf(page.Orders) {
				if seen[r] {
					t.Fatalf("%+v: %s twice", flt, r)
				}
				seen[r] = true
				got = append(got, r)
			}
			if page.NextCursor == "" {
				break
			}
			flt.Cursor = page.NextCursor
			// Later orders, between the pages: newer than every order
			// before them (the leader's clock), so newer than the cursor.
			f.add(3, 2e18+int64(f.n)*1e12)
		}
		if !slices.Equal(got, before) {
			var extra []string
			for _, r := range got {
				if !slices.Contains(before, r) {
					extra = append(extra, r)
				}
			}
			t.Fatalf("%+v: got %d, want the %d that existed before; extra %v", flt, len(got), len(before), extra)
		}
	}
}

// A merchant's search never shows another merchant's order, whatever the
// cursor: one of another merchant's searches, or one crafted to point
// into another merchant's keys.
func TestSearchMerchantScopeHoldsAgainstCraftedCursors(t *testing.T) {
	f := newSearchFixture(t)
	f.add(200, 1e18)
	other, err := f.ts.SearchOrders(SearchFilter{Merchant: "m_b", Limit: 2})
	if err != nil || other.NextCursor == "" {
		t.Fatalf("m_b's first page: %v", err)
	}
	if _, err := f.ts.SearchOrders(SearchFilter{Merchant: "m_a", Cursor: other.NextCursor}); err != ErrBadCursor {
		t.Fatalf("another merchant's cursor: %v, want ErrBadCursor", err)
	}
	admin, _ := f.ts.SearchOrders(SearchFilter{Limit: 2})
	if _, err := f.ts.SearchOrders(SearchFilter{Merchant: "m_a", Cursor: admin.NextCursor}); err != ErrBadCursor {
		t.Fatalf("the cross-merchant search's cursor: %v, want ErrBadCursor", err)
	}
	// Crafted: m_a's scope, positioned at m_b's keys, and garbage.
	crafted := []string{
		encodeCursor("m_a", append(make([]byte, 8), "m_b\x00ord-0-00001"...)),
		encodeCursor("m_a", []byte("\xff\xff\xff\xff\xff\xff\xff\xffm_b\x00")),
		encodeCursor("m_a", []byte("\x00\x00\x00\x00\x00\x00\x00\x00m_c\x00\xff")),
		"!!!", "", "AQ",
	}
	for _, c := range crafted {
		for _, flt := range []SearchFilter{{Merchant: "m_a", Cursor: c}, {Merchant: "m_a", Status: order.StatusSettled, Cursor: c}} {
			flt.Limit = 1000
			page, err := f.ts.SearchOrders(flt)
			if err != nil {
				continue
			}
			for _, o := range page.Orders {
				if o.Merchant != "m_a" {
					t.Fatalf("cursor %q showed %s's order %s", c, o.Merchant, o.ID)
				}
			}
		}
	}
}

// The indexes are part of the replicated state: a store restored from a
// snapshot, and one that rebuilds them from its orders (a store written
// before them), hold exactly the keys the FSM wrote.
func TestSearchIndexRebuiltIdenticallyAfterRestoreAndBackfill(t *testing.T) {
	f := newSearchFixture(t)
	f.add(300, 1e18)
	want, n, err := f.ts.SearchIndexDigest()
	if err != nil || n == 0 {
		t.Fatalf("digest: %d keys, %v", n, err)
	}
	replica := newTestStore(t)
	restoreFrom(t, replica.Store, f.ts.Store)
	if got, _, _ := replica.SearchIndexDigest(); got != want {
		t.Fatal("the restored replica's index differs")
	}
	// Backfill: drop the indexes and the version key, as in a store
	// written before them; opening rebuilds the same keys.
	b := f.ts.db.NewBatch()
	if err := b.DeleteRange([]byte(prefixSearch), prefixEnd(prefixSearch), nil); err != nil {
		t.Fatal(err)
	}
	b.Delete(keySearchIndexVersion, nil)
	if err := b.Commit(nil); err != nil {
		t.Fatal(err)
	}
	if got, n, _ := f.ts.SearchIndexDigest(); n != 0 {
		t.Fatalf("dropped index still has %d keys (%s)", n, got)
	}
	f.ts.reopen()
	if got, _, _ := f.ts.SearchIndexDigest(); got != want {
		t.Fatal("the backfilled index differs from the one the FSM wrote")
	}
	// A restore of a snapshot without indexes (an older node's) builds
	// them too.
	b = f.ts.db.NewBatch()
	b.DeleteRange([]byte(prefixSearch), prefixEnd(prefixSearch), nil)
	b.Delete(keySearchIndexVersion, nil)
	if err := b.Commit(nil); err != nil {
		t.Fatal(err)
	}
	restoreFrom(t, replica.Store, f.ts.Store)
	if got, _, _ := replica.SearchIndexDigest(); got != want {
		t.Fatal("a restore of an index-less snapshot did not rebuild the index")
	}
}

// A reopened store warms its search indexes' blocks in the background
// (warmSearchIndex), as its scan of the orders warms theirs: once that is
// done, searches read no block from the files. Without the warm-up every
// index block a search reads is a miss.
// waitTableStatsLoaded waits for Pebble's background collection of the
// tables' statistics after an open: it reads the tables' property blocks
// through the block cache, and a miss of its own would be counted against
// the searches.
func waitTableStatsLoaded(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := s.db.Metrics()
		if m.Table.InitialStatsCollectionComplete && m.Table.PendingStatsCollectionCount == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("pebble did not finish loading the tables' statistics in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSearchReadsNoBlockFromTheFilesAfterTheWarmUp(t *testing.T) {
	f := newSearchFixture(t)
	f.add(2000, 1e18)
	if err := f.ts.db.Flush(); err != nil { // into sstables, not the WAL
		t.Fatal(err)
	}
	f.ts.reopen()
	f.ts.loading.Wait()
	waitTableStatsLoaded(t, f.ts.Store)
	before := f.ts.db.Metrics().BlockCache.Misses
	found := 0
	for range 200 {
		flt := f.randomFilter(-1)
		flt.Limit = 20
		page, err := f.ts.SearchOrders(flt)
		if err != nil {
			t.Fatal(err)
		}
		found += len(page.Orders)
	}
	if found == 0 {
		t.Fatal("the searches found no order: they read nothing worth checking")
	}
	if misses := f.ts.db.Metrics().BlockCache.Misses - before; misses != 0 {
		t.Errorf("200 searches after the warm-up read %d blocks from the files, want 0", misses)
	}
}

// choose's shortcuts (the time index is not counted, nor a lone other
// candidate; no candidate is counted past the fewest keys seen so far) pick
// the index that counting every candidate up to searchProbe picks, for
// random filters over a store where some indexes hold more than
// searchProbe keys.
func TestChooseShortcutsPickWhatFullCountingPicks(t *testing.T) {
	f := newSearchFixture(t)
	f.add(1500, 1e18)
	fullCount := func(cands []plan) plan {
		best, bestN := cands[len(cands)-1], searchProbe+1
		for _, c := range cands {
			n := 0
			if err := f.ts.scan(c.lo, c.hi, func(_, _ []byte) bool { n++; return n < searchProbe }); err != nil {
				t.Fatal(err)
			}
			if n < bestN {
				best, bestN = c, n
			}
			if n == 0 {
				break
			}
		}
		return best
	}
	several := 0
	for range 500 {
		flt := f.randomFilter(-1)
		cands := candidates(&flt)
		if len(cands) > 1 {
			several++
		}
		got, err := f.ts.choose(cands)
		if err != nil {
			t.Fatal(err)
		}
		if want := fullCount(cands); !bytes.Equal(got.lo, want.lo) || !bytes.Equal(got.hi, want.hi) {
			t.Fatalf("%+v: chose the index from %q, counting all of them chooses %q", flt, got.lo, want.lo)
		}
	}
	if several < 100 {
		t.Fatalf("only %d of 500 filters had more than one candidate index", several)
	}
}
