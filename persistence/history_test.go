package persistence

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"slices"
	"testing"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
)

// encodedOrder is a stored order value whose amount tells versions apart.
func encodedOrder(t testing.TB, id string, amount int64) []byte {
	t.Helper()
	return command.AppendOrder(nil, &order.Order{ID: id, Merchant: "m1", Amount: amount, Currency: "USD", Status: "authorized"})
}

func historyAmount(c *historyCache, key string) int64 {
	if o := c.get([]byte(key)); o != nil {
		return o.Amount
	}
	return -1
}

// The smallest cache: one chunk a shard.
func smallHistory() *historyCache { return newHistoryCache(historyShards * historyChunkBytes) }

// fillHistory puts orders (as the FSM would) until every shard's ring has
// gone round twice, and returns how many it put, named fill-0, fill-1, ….
func fillHistory(t testing.TB, c *historyCache) int {
	n := 0
	for {
		lapped := true
		for i := range c.shards {
			lapped = lapped && c.shards[i].head >= 2*c.shards[i].size
		}
		if lapped {
			return n
		}
		k := fmt.Sprintf("o/m1\x00fill-%d", n)
		c.put(k, encodedOrder(t, k, int64(n)))
		n++
	}
}

func TestHistoryCacheKeepsTheLatestPutAndForgetsWhatTheRingOverwrote(t *testing.T) {
	c := smallHistory()
	c.put("o/m1\x00a", encodedOrder(t, "a", 100))
	c.put("o/m1\x00a", encodedOrder(t, "a", 200))
	if got := historyAmount(c, "o/m1\x00a"); got != 200 {
		t.Fatalf("after two puts: amount %d, want 200", got)
	}
	if historyAmount(c, "o/m1\x00b") != -1 {
		t.Fatal("a key never put is found")
	}
	// Fill every shard's ring several times over: "a" is overwritten and
	// must miss, not decode what now lies at its old place.
	n := fillHistory(t, c)
	if got := historyAmount(c, "o/m1\x00a"); got != -1 {
		t.Fatalf("an overwritten entry answered amount %d", got)
	}
	// The newest puts are all there, and each index holds no more entries
	// than its ring can (the sweep at each lap).
	for i := n - 50; i < n; i++ {
		k := fmt.Sprintf("o/m1\x00fill-%d", i)
		if got := historyAmount(c, k); got != int64(i) {
			t.Fatalf("%q: amount %d, want %d", k, got, i)
		}
	}
	for i := range c.shards {
		s := &c.shards[i]
		if len(s.index) > 2*int(s.size)/historyHeader {
			t.Fatalf("shard %d indexes %d entries for a ring of %d bytes", i, len(s.index), s.size)
		}
	}
}

func TestHistoryCacheDoesNotKeepAnEntryLargerThanAChunk(t *testing.T) {
	c := smallHistory()
	c.put("o/m1\x00a", encodedOrder(t, "a", 1))
	c.put("o/m1\x00a", bytes.Repeat([]byte{1}, historyChunkBytes)) // a later version too large to keep
	if got := historyAmount(c, "o/m1\x00a"); got != -1 {
		t.Fatalf("the older version (amount %d) is still answered", got)
	}
}

// The warm-up reads a snapshot taken after beginWarm; it must never put
// back a version older than one the FSM wrote since, even once the FSM's
// entry has left the ring, nor insert anything after a clear (a restore).
func TestHistoryCacheWarmUpNeverInsertsAnOlderVersion(t *testing.T) {
	c := smallHistory()
	gen := c.beginWarm()
	c.put("o/m1\x00a", encodedOrder(t, "a", 2)) // the FSM, after the snapshot
	if !c.warm(gen, []byte("o/m1\x00a"), encodedOrder(t, "a", 1)) {
		t.Fatal("the warm-up stopped on a cached key")
	}
	if got := historyAmount(c, "o/m1\x00a"); got != 2 {
		t.Fatalf("amount %d after the warm-up saw the snapshot's version, want the FSM's 2", got)
	}
	// The FSM's latest version of b is not cached (too large), so b is
	// absent; the snapshot's older version must still not be inserted.
	c.put("o/m1\x00b", encodedOrder(t, "b", 2))
	c.put("o/m1\x00b", bytes.Repeat([]byte{1}, historyChunkBytes))
	c.warm(gen, []byte("o/m1\x00b"), encodedOrder(t, "b", 1))
	if got := historyAmount(c, "o/m1\x00b"); got != -1 {
		t.Fatalf("the warm-up put back an older version of b (amount %d)", got)
	}
	c.endWarm(gen)
	if c.warm(gen, []byte("o/m1\x00c"), encodedOrder(t, "c", 1)) || historyAmount(c, "o/m1\x00c") != -1 {
		t.Fatal("a warm-up inserted after it ended")
	}

	// A restore clears the cache and starts a warm-up of its own state,
	// while the warm-up of the state before may still be reading.
	old := c.beginWarm()
	c.clear()
	gen = c.beginWarm()
	if c.warm(old, []byte("o/m1\x00d"), encodedOrder(t, "d", 1)) || historyAmount(c, "o/m1\x00d") != -1 {
		t.Fatal("a warm-up of the state before a restore inserted into the cache after it")
	}
	if !c.warm(gen, []byte("o/m1\x00d"), encodedOrder(t, "d", 2)) || historyAmount(c, "o/m1\x00d") != 2 {
		t.Fatal("the restore's own warm-up inserted nothing")
	}
}

func TestHistoryCacheWarmUpStopsWhenTheRingIsFull(t *testing.T) {
	c := smallHistory()
	gen := c.beginWarm()
	c.put("o/m1\x00fsm", encodedOrder(t, "fsm", 7))
	warmed := 0
	for i := 0; ; i++ {
		k := fmt.Sprintf("o/m1\x00w-%d", i)
		if !c.warm(gen, []byte(k), encodedOrder(t, k, int64(i))) {
			break
		}
		warmed++
		if i > historyShards*historyChunkBytes {
			t.Fatal("the warm-up never reported the ring full")
		}
	}
	c.endWarm(gen)
	// Nothing the warm-up or the FSM put was pushed out by the warm-up.
	if historyAmount(c, "o/m1\x00fsm") != 7 {
		t.Fatal("the warm-up pushed the FSM's entry out")
	}
	if historyAmount(c, "o/m1\x00w-0") != 0 {
		t.Fatal("the warm-up pushed its own first entry out")
	}
	if warmed < historyShards*historyChunkBytes/200 {
		t.Fatalf("only %d entries warmed", warmed)
	}
}

func TestNoHistoryCache(t *testing.T) {
	for _, size := range []int64{-1, 0, historyChunkBytes} {
		c := newHistoryCache(size)
		if c != nil {
			t.Fatalf("size %d: a cache of %d bytes a shard", size, c.shards[0].size)
		}
		c.put("o/m1\x00a", encodedOrder(t, "a", 1)) // a nil cache takes and answers nothing
		if c.get([]byte("o/m1\x00a")) != nil || c.warm(c.beginWarm(), []byte("k"), nil) {
			t.Fatal("a nil cache answered")
		}
		c.endWarm(0)
		c.clear()
	}
}

// After a restart the warm-up fills the history cache from a snapshot while
// the FSM goes on writing: every order it then holds must be the version
// Pebble holds, and reads of old orders must come from it.
func TestHistoryCacheMatchesPebbleAfterAWarmUpDuringWrites(t *testing.T) {
	ts := newTestStore(t)
	const n = 6000
	var idx uint64
	for lo := 0; lo < n; lo += 200 {
		var cmds []*command.Cmd
		for i := lo; i < lo+200; i++ {
			cmds = append(cmds, createCmd(fmt.Sprintf("h-%05d", i), "x"))
		}
		idx++
		ts.apply(idx, cmds...)
	}
	check := func(s *Store, what string) {
		t.Helper()
		s.loading.Wait()
		cached := 0
		for i := range n {
			key := orderKey("m1", fmt.Sprintf("h-%05d", i))
			want, err := readOrder(s.db, key)
			if err != nil || want == nil {
				t.Fatalf("%s: order %d in Pebble: %v %v", what, i, want, err)
			}
			got := s.history.get(key)
			if got == nil {
				continue
			}
			cached++
			if got.Status != want.Status || len(got.Txns) != len(want.Txns) {
				t.Fatalf("%s: order %d cached as %s with %d transactions, Pebble has %s with %d",
					what, i, got.Status, len(got.Txns), want.Status, len(want.Txns))
			}
		}
		if cached != n {
			t.Fatalf("%s: %d of %d orders in the history cache", what, cached, n)
		}
	}
	// Restart, and authorise every other order while the warm-up reads.
	ts.reopen()
	for lo := 0; lo < n; lo += 100 {
		var cmds []*command.Cmd
		for i := lo; i < lo+100; i += 2 {
			id := fmt.Sprintf("h-%05d", i)
			cmds = append(cmds, &command.Cmd{Order: &order.Command{Kind: order.KindAuthOutcome, Time: 2, Merchant: "m1",
				OrderID: id, TxnID: "t-" + id, Outcome: &order.OutcomeData{Approved: true, AuthCode: "1"}}})
		}
		idx++
		ts.apply(idx, cmds...)
	}
	check(ts.Store, "after a restart")
	if o, err := ts.GetOrder("m1", "h-00000"); err != nil || o == nil || o.Status != order.StatusAuthorized {
		t.Fatalf("GetOrder: %+v %v", o, err)
	}

	// A follower installing a snapshot: its cache is of the restored state.
	follower := newTestStore(t)
	for i := range 50 {
		id := fmt.Sprintf("h-%05d", i) // the follower's own, older versions of some orders
		follower.apply(uint64(i+1), createCmd(id, "x"))
	}
	follower.loading.Wait()
	restoreFrom(t, follower.Store, ts.Store)
	check(follower.Store, "after a restore")
}

// Close returns the rings' memory (outside the Go heap on Linux): a get
// after it finds nothing and a put stores nothing, rather than touch
// memory that is gone.
func TestHistoryCacheAfterCloseKeepsNothing(t *testing.T) {
	c := smallHistory()
	c.put("o/m1\x00a", encodedOrder(t, "a", 7))
	if got := historyAmount(c, "o/m1\x00a"); got != 7 {
		t.Fatalf("before close: amount %d, want 7", got)
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	if got := historyAmount(c, "o/m1\x00a"); got != -1 {
		t.Fatalf("after close: amount %d is still answered", got)
	}
	c.put("o/m1\x00b", encodedOrder(t, "b", 8))
	if got := historyAmount(c, "o/m1\x00b"); got != -1 {
		t.Fatalf("a put after close stored amount %d", got)
	}
	if gen := c.beginWarm(); c.warm(gen, []byte("o/m1\x00c"), encodedOrder(t, "c", 9)) {
		t.Fatal("a warm-up after close asks for more")
	}
}

// prefetch only reads: over keys present, overwritten and never put,
// entries at a chunk's very end (less than prefetchEntryBytes left in it)
// and more keys than it reads ahead, the gets after it answer as before;
// with the FSM putting at the same time, the race detector checks its
// locking.
func TestHistoryCachePrefetchReadsWithoutChangingAnything(t *testing.T) {
	c := smallHistory()
	n := fillHistory(t, c)
	var keys [][]byte
	for i := n - 3*searchPrefetchMax; i < n; i++ {
		keys = append(keys, fmt.Appendf(nil, "o/m1\x00fill-%d", i))
	}
	keys = append(keys, []byte("o/m1\x00fill-0"), []byte("o/m1\x00never"))
	atChunkEnd := 0
	for _, k := range keys {
		h := maphash.Bytes(c.seed, k)
		s := c.shardOf(h)
		if pos, ok := s.live(h); ok && len(s.at(pos)) < prefetchEntryBytes {
			atChunkEnd++
		}
	}
	if atChunkEnd == 0 {
		t.Fatal("no key's entry ends its chunk: the case is not covered")
	}
	amounts := func() []int64 {
		a := make([]int64, len(keys))
		for i, k := range keys {
			a[i] = historyAmount(c, string(k))
		}
		return a
	}
	before := amounts()
	if before[0] == -1 || before[len(keys)-2] != -1 || before[len(keys)-1] != -1 {
		t.Fatalf("the keys are not what the test means: %d, %d, %d", before[0], before[len(keys)-2], before[len(keys)-1])
	}
	c.prefetch(keys)
	c.prefetch(keys[:1])                // one key: nothing to overlap
	(*historyCache)(nil).prefetch(keys) // no cache
	if after := amounts(); !slices.Equal(after, before) {
		t.Fatalf("gets changed after prefetch:\n%v\n%v", before, after)
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			k := fmt.Sprintf("o/m1\x00other-%d", i)
			c.put(k, encodedOrder(t, k, int64(i)))
		}
	}()
	for range 50 {
		c.prefetch(keys)
	}
	<-done
}
