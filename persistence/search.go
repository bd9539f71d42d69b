package persistence

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/paygate/gateway/order"
)

// The back office's order search (contract 13) reads secondary indexes that
// the FSM writes in the same batch as the order, so every replica holds the
// same index keys and a snapshot carries them.
//
// Key layout (one key per order, index and scope; values are empty):
//
//	g/<kind><scope>\x00<value>\x00<^created ns BE><merchant>\x00<order_id>
//
// kind is one byte (searchKinds); scope is the merchant's id, or empty for
// the cross-merchant copy the admin search without merchant_id reads; value
// is the indexed field (empty for the time index; the amount as 8 bytes
// big-endian, so fixed-width). The inverted creation time makes a forward
// read newest first, and order_id breaks ties, so every key of one prefix
// has a total order that never changes while the order lives: that is what
// a cursor points into. A created_from/created_to range is a bound of the
// read, not a filter.
const prefixSearch = "g/"

// Index kinds.
const (
	searchByTime   byte = 't'
	searchByStatus byte = 's'
	searchByEmail  byte = 'e'
	searchByBIN    byte = 'b'
	searchByLast4  byte = 'l'
	searchByAmount byte = 'a'
)

// searchKinds lists every index kind, in the order putSearchIndexes writes.
var searchKinds = [...]byte{searchByTime, searchByStatus, searchByEmail, searchByBIN, searchByLast4, searchByAmount}

// SearchIndexVersion is the version of the g/ layout. A store whose
// a/search-index key holds a smaller version (or none: a store written
// before the indexes) rebuilds every g/ key from its orders when it opens
// or restores a snapshot (rebuildSearchIndex): one pass over the orders,
// deterministic, so every replica ends with the same keys.
const SearchIndexVersion = 1

var keySearchIndexVersion = []byte(prefixMeta + "search-index")

// searchValue is the order's value for an index kind; "" means the order is
// not in that index (no e-mail, no card).
func searchValue(o *order.Order, kind byte) string {
	switch kind {
	case searchByStatus:
		return string(o.Status)
	case searchByEmail:
		return strings.ToLower(o.CustomerEmail)
	case searchByBIN:
		return o.Source.BIN
	case searchByLast4:
		return last4(o.Source.Masked)
	case searchByAmount:
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(o.Amount))
		return string(v[:])
	}
	return ""
}

// last4 is the last four digits of a masked card number, or "".
func last4(masked string) string {
	if len(masked) < 4 {
		return ""
	}
	return masked[len(masked)-4:]
}

// searchPrefix is the head of an index's keys for one scope and value.
func searchPrefix(kind byte, scope, value string) []byte {
	k := make([]byte, 0, len(prefixSearch)+1+len(scope)+1+len(value)+1+8+48)
	k = append(k, prefixSearch...)
	k = append(k, kind)
	k = append(k, scope...)
	k = append(k, 0)
	k = append(k, value...)
	return append(k, 0)
}

// searchKey is an order's key in an index.
func searchKey(kind byte, scope, value string, o *order.Order) []byte {
	k := searchPrefix(kind, scope, value)
	k = binary.BigEndian.AppendUint64(k, ^uint64(o.CreatedAt))
	return appendRefKey(k, "", o.Merchant, o.ID)
}

// putSearchIndexes keeps the order's index keys in step with its change:
// each index whose value changed loses the old key and gains the new one,
// in the merchant's scope and the cross-merchant one.
func (b *Batch) putSearchIndexes(cur, next *order.Order) {
	for _, kind := range searchKinds {
		nv := searchValue(next, kind)
		if cur != nil {
			ov := searchValue(cur, kind)
			if ov == nv && cur.CreatedAt == next.CreatedAt {
				continue
			}
			if ov != "" || kind == searchByTime {
				b.indexWrite(searchKey(kind, cur.Merchant, ov, cur), false)
				b.indexWrite(searchKey(kind, "", ov, cur), false)
			}
		}
		if nv != "" || kind == searchByTime {
			b.indexWrite(searchKey(kind, next.Merchant, nv, next), true)
			b.indexWrite(searchKey(kind, "", nv, next), true)
		}
	}
}

// indexWrite sets (or deletes) an index key in the Pebble batch only: no
// command reads g/ keys while applying, so they skip the batch's read
// overlay (b.written) and its map insert, a dozen per new order.
func (b *Batch) indexWrite(key []byte, set bool) {
	var err error
	if set {
		err = b.b.Set(key, nil, nil)
	} else {
		err = b.b.Delete(key, nil)
	}
	if err != nil {
		panic(fmt.Sprintf("persistence: write search index: %v", err))
	}
}

// ensureSearchIndex rebuilds the indexes when the store's version is older
// than SearchIndexVersion. It runs before the FSM applies anything (Open,
// end of Restore), so nothing writes orders meanwhile.
func (s *Store) ensureSearchIndex() error {
	v, err := get(s.db, keySearchIndexVersion)
	if err != nil {
		return err
	}
	if len(v) == 8 && binary.BigEndian.Uint64(v) >= SearchIndexVersion {
		return nil
	}
	n, err := s.rebuildSearchIndex()
	if err != nil {
		return fmt.Errorf("rebuild search index: %w", err)
	}
	s.logger.Info("search index built", "orders", n, "version", SearchIndexVersion)
	return nil
}

// rebuildSearchIndex drops every g/ key and writes the keys of every stored
// order, then the version key, in batches of bounded size.
func (s *Store) rebuildSearchIndex() (int, error) {
	batch := s.db.NewBatch()
	defer func() { batch.Close() }()
	if err := batch.DeleteRange([]byte(prefixSearch), prefixEnd(prefixSearch), nil); err != nil {
		return 0, err
	}
	n := 0
	var werr error // a write's error (EachOrder reports a read's)
	err := s.EachOrder(func(o *order.Order) bool {
		n++
		for _, kind := range searchKinds {
			val := searchValue(o, kind)
			if val == "" && kind != searchByTime {
				continue
			}
			for _, scope := range [2]string{o.Merchant, ""} {
				if werr = batch.Set(searchKey(kind, scope, val, o), nil, nil); werr != nil {
					return false
				}
			}
		}
		if batch.Len() >= snapshotBatchBytesMax {
			if werr = batch.Commit(pebble.NoSync); werr != nil {
				return false
			}
			batch.Close()
			batch = s.db.NewBatch()
		}
		return true
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		return n, err
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], SearchIndexVersion)
	if err := batch.Set(keySearchIndexVersion, v[:], nil); err != nil {
		return n, err
	}
	return n, batch.Commit(pebble.Sync)
}

// warmSearchIndex reads every search index key once, after Open's scan of
// the orders (loadKnownOrders), so that Pebble's block cache holds the index
// blocks a search reads as it already holds the orders' blocks. The cache
// is empty after a restart, and a back-office search deep in the history
// would otherwise read an index block or two from the files: at a million
// orders about one miss a search, which put the restarted node's search p99
// at ~1.9x the 10,000-order store's against ~1.6x warmed
// (docs/performance.md, "Order search"). As a database loads its buffer
// pool at start, it runs in the background and is bounded by the cache
// (--cache-size-mib): blocks that do not fit are evicted like any other.
func (s *Store) warmSearchIndex() {
	err := s.scan([]byte(prefixSearch), prefixEnd(prefixSearch), func(_, _ []byte) bool { return !s.closing.Load() })
	if err != nil && !s.closing.Load() {
		s.logger.Warn("warm the search indexes' blocks; searches read them from the files", "error", err)
	}
}

// SearchIndexDigest hashes every g/ key: two replicas at the same applied
// index hold the same digest, and so does a store restored from a snapshot
// of another (the tests compare them).
func (s *Store) SearchIndexDigest() (string, int, error) {
	h := sha256.New()
	n := 0
	var lenBuf [binary.MaxVarintLen64]byte
	err := s.scan([]byte(prefixSearch), prefixEnd(prefixSearch), func(k, _ []byte) bool {
		h.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(k)))])
		h.Write(k)
		n++
		return true
	})
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// SearchFilter is an order search (contract 13). Zero fields do not filter.
type SearchFilter struct {
	// Merchant scopes the search; "" searches every merchant (the admin
	// API only: a merchant's list-orders always sets it).
	Merchant string
	Status   order.Status
	// CreatedFrom (inclusive) and CreatedTo (exclusive), Unix ns; 0: open.
	CreatedFrom, CreatedTo int64
	Email                  string // exact, case-insensitive
	Last4                  string
	BIN                    string
	OrderIDPrefix          string
	// AmountMin and AmountMax bound the amount (inclusive) when set.
	AmountMin, AmountMax *int64
	Limit                int
	// Cursor is a previous page's NextCursor ("" for the first page).
	Cursor string
}

// SearchPage is one page of a search: the orders, newest first, and the
// cursor of the next page ("" when the search is done).
type SearchPage struct {
	Orders     []*order.Order
	NextCursor string
}

// Search limits.
const (
	SearchLimitMax     = 1000
	SearchLimitDefault = 100
	// searchProbe is how many keys the choice of index counts, at most, in
	// each candidate's range: the smallest count is read.
	searchProbe = 256
)

var (
	// searchReadBudget bounds the index keys one page reads. A page that
	// spends it before filling returns what it found and a cursor that
	// resumes after the last key read, so a filter the chosen index does
	// not cover costs pages, never an unbounded read.
	// (A variable for the tests.)
	searchReadBudget = 20_000
)

// ErrBadCursor is returned for a cursor that does not decode or belongs
// to another scope (another merchant's search).
var ErrBadCursor = errors.New("cursor is not valid for this search")

// cursorVersion is a cursor's first byte.
const cursorVersion byte = 1

// A cursor is base64url(version, uvarint len(scope), scope, index key
// suffix): the position after which the next page starts. The scope binds
// it to its merchant; the position alone could never reach another
// merchant's keys, since every read stays inside the scope's prefix.
func encodeCursor(scope string, position []byte) string {
	b := []byte{cursorVersion}
	b = binary.AppendUvarint(b, uint64(len(scope)))
	b = append(b, scope...)
	b = append(b, position...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(c, scope string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 2 || b[0] != cursorVersion {
		return nil, ErrBadCursor
	}
	n, w := binary.Uvarint(b[1:])
	if w <= 0 || uint64(len(b)-1-w) < n {
		return nil, ErrBadCursor
	}
	rest := b[1+w:]
	if string(rest[:n]) != scope {
		return nil, ErrBadCursor
	}
	pos := rest[n:]
	if len(pos) < 8+2 { // time, then merchant \0 order_id
		return nil, ErrBadCursor
	}
	return pos, nil
}

// plan is the index a search reads: its prefix and the bounds of the read.
type plan struct {
	prefix []byte
	lo, hi []byte
}

func newPlan(kind byte, scope, value string, f *SearchFilter) plan {
	p := plan{prefix: searchPrefix(kind, scope, value)}
	p.lo, p.hi = p.prefix, prefixEnd(string(p.prefix))
	if f.CreatedTo != 0 { // newest first: created_to is the lower key bound
		p.lo = binary.BigEndian.AppendUint64(bytes.Clone(p.prefix), ^uint64(f.CreatedTo-1))
	}
	if f.CreatedFrom != 0 {
		p.hi = binary.BigEndian.AppendUint64(bytes.Clone(p.prefix), ^uint64(f.CreatedFrom)+1)
		if ^uint64(f.CreatedFrom) == ^uint64(0) { // created_from at the epoch's start
			p.hi = prefixEnd(string(p.prefix))
		}
	}
	return p
}

// candidates are the indexes that cover one of the filter's equality
// conditions; the time index covers every search.
func candidates(f *SearchFilter) []plan {
	scope := f.Merchant
	var out []plan
	add := func(kind byte, value string) { out = append(out, newPlan(kind, scope, value, f)) }
	if f.Email != "" {
		add(searchByEmail, strings.ToLower(f.Email))
	}
	if f.Last4 != "" {
		add(searchByLast4, f.Last4)
	}
	if f.BIN != "" {
		add(searchByBIN, f.BIN)
	}
	if f.Status != "" {
		add(searchByStatus, string(f.Status))
	}
	if f.AmountMin != nil && f.AmountMax != nil && *f.AmountMin == *f.AmountMax {
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(*f.AmountMin))
		add(searchByAmount, string(v[:]))
	}
	add(searchByTime, "")
	return out
}

// choose returns the candidate with the fewest keys, counting at most
// searchProbe in each. The time index (always the last candidate) is never
// counted: it holds a key for every order of the scope, so within the same
// time bounds it has at least as many keys as any other candidate and
// could only tie, and a tie goes to the earlier candidate. So a filter with
// one equality condition (a customer's e-mail) reads its index without
// counting anything. Nor is a candidate counted past the fewest keys seen
// so far, which it could then no longer beat. Each count is a seek through
// every level and a run of keys; the choice is the same as counting them
// all (TestChooseShortcutsPickWhatFullCountingPicks).
func (s *Store) choose(cands []plan) (plan, error) {
	byValue := cands[:len(cands)-1]
	switch len(byValue) {
	case 0:
		return cands[len(cands)-1], nil
	case 1:
		return byValue[0], nil
	}
	best, bestN := byValue[0], searchProbe+1
	for _, c := range byValue {
		n, limit := 0, min(searchProbe, bestN)
		if err := s.scan(c.lo, c.hi, func(_, _ []byte) bool { n++; return n < limit }); err != nil {
			return plan{}, err
		}
		if n < bestN {
			best, bestN = c, n
		}
		if n == 0 {
			break
		}
	}
	return best, nil
}

// SearchOrders answers one page of a search: it reads the most selective
// index the filter allows, from the cursor's position, and checks every
// other condition on the orders it fetches.
func (s *Store) SearchOrders(f SearchFilter) (SearchPage, error) {
	if f.Limit <= 0 {
		f.Limit = SearchLimitDefault
	}
	f.Limit = min(f.Limit, SearchLimitMax)
	var after []byte
	if f.Cursor != "" {
		var err error
		if after, err = decodeCursor(f.Cursor, f.Merchant); err != nil {
			return SearchPage{}, err
		}
	}
	p, err := s.choose(candidates(&f))
	if err != nil {
		return SearchPage{}, err
	}
	lo := p.lo
	if after != nil {
		// Strictly after the cursor's key: the key with a zero byte added
		// is the smallest one greater than it.
		from := append(append(bytes.Clone(p.prefix), after...), 0)
		if bytes.Compare(from, lo) > 0 {
			lo = from
		}
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: p.hi})
	if err != nil {
		return SearchPage{}, err
	}
	var page SearchPage
	var last []byte // the suffix of the last key read
	read := 0
	refs := make([]OrderRef, 0, f.Limit)
	valid := it.First()
	for valid && len(page.Orders) < f.Limit && read < searchReadBudget {
		// The keys of as many orders as the page has room for: each adds
		// at most one, so the page never overfills, and they are then read
		// together (readOrders).
		refs = refs[:0]
		for ; valid && len(refs) < f.Limit-len(page.Orders) && read < searchReadBudget; valid = it.Next() {
			read++
			suffix := it.Key()[len(p.prefix):]
			last = append(last[:0], suffix...)
			if ref := splitRef(suffix[8:]); strings.HasPrefix(ref.OrderID, f.OrderIDPrefix) {
				refs = append(refs, ref)
			}
		}
		orders, err := s.readOrders(refs)
		if err != nil {
			it.Close()
			return SearchPage{}, err
		}
		for _, o := range orders {
			if o != nil && f.matches(o) {
				page.Orders = append(page.Orders, o)
			}
		}
	}
	// The loop stopped on a full page or the read budget with keys left:
	// the next page starts after the last key read.
	if valid {
		page.NextCursor = encodeCursor(f.Merchant, last)
	}
	if err := it.Close(); err != nil {
		return SearchPage{}, err
	}
	return page, nil
}

// readOrders returns the orders of refs, in their order (nil for one that
// does not exist). A search's orders are spread over the history, mostly
// outside the order cache: the history cache's entries of the page are
// read ahead together (historyCache.prefetch), and the rest from Pebble in key order
// (readSorted), split between the processors when there are enough of
// them. Readers never fill the order cache (cache.go), so a search does not
// push the write path's orders out of it.
func (s *Store) readOrders(refs []OrderRef) ([]*order.Order, error) {
	out := make([]*order.Order, len(refs))
	keys := make([][]byte, len(refs))
	for i, r := range refs {
		keys[i] = orderKey(r.Merchant, r.OrderID)
	}
	s.history.prefetch(keys)
	var misses []orderMiss
	for i, key := range keys {
		if o := s.cachedOrder(key); o != nil {
			out[i] = o
			continue
		}
		misses = append(misses, orderMiss{key, i})
	}
	if len(misses) == 0 {
		return out, nil
	}
	s.metrics.fromPebble.Add(len(misses))
	slices.SortFunc(misses, func(a, b orderMiss) int { return bytes.Compare(a.key, b.key) })
	// A page's orders deep in a large store are each a seek through every
	// level, in blocks spread over the block cache: on a back office's
	// mostly idle node, the page's reads are split between the processors.
	parts := min(runtime.GOMAXPROCS(0), len(misses)/minOrdersPerReader)
	if parts <= 1 {
		return out, s.readSorted(misses, out)
	}
	share := func(p int) []orderMiss { return misses[p*len(misses)/parts : (p+1)*len(misses)/parts] }
	// The calling goroutine reads the first share itself: one wake-up
	// fewer to wait for.
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := 1; p < parts; p++ {
		wg.Go(func() { errs[p] = s.readSorted(share(p), out) })
	}
	errs[0] = s.readSorted(share(0), out)
	wg.Wait()
	return out, errors.Join(errs...)
}

// minOrdersPerReader is the fewest order reads worth a goroutine of their
// own in readOrders.
const minOrdersPerReader = 8

// orderMiss is an order readOrders reads from Pebble: its key, and its
// place in the answer.
type orderMiss struct {
	key []byte
	at  int
}

// readSorted reads the orders of misses (sorted by key) with one iterator,
// in key order, so that orders sharing a block read it once and each seek
// goes on from the last, into out.
func (s *Store) readSorted(misses []orderMiss, out []*order.Order) error {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: misses[0].key,
		UpperBound: append(bytes.Clone(misses[len(misses)-1].key), 0),
	})
	if err != nil {
		return err
	}
	for _, m := range misses {
		if !it.SeekGE(m.key) || !bytes.Equal(it.Key(), m.key) {
			continue
		}
		v, err := it.ValueAndErr()
		if err == nil {
			out[m.at], err = decodeOrderValue(v)
		}
		if err != nil {
			it.Close()
			return err
		}
	}
	return it.Close()
}

// matches checks every condition on the order as it now stands (the index
// read chose it by one of them, possibly for a version since changed).
func (f *SearchFilter) matches(o *order.Order) bool {
	switch {
	case f.Merchant != "" && o.Merchant != f.Merchant,
		f.Status != "" && o.Status != f.Status,
		f.CreatedFrom != 0 && o.CreatedAt < f.CreatedFrom,
		f.CreatedTo != 0 && o.CreatedAt >= f.CreatedTo,
		f.Email != "" && !strings.EqualFold(o.CustomerEmail, f.Email),
		f.Last4 != "" && last4(o.Source.Masked) != f.Last4,
		f.BIN != "" && o.Source.BIN != f.BIN,
		!strings.HasPrefix(o.ID, f.OrderIDPrefix),
		f.AmountMin != nil && o.Amount < *f.AmountMin,
		f.AmountMax != nil && o.Amount > *f.AmountMax:
		return false
	}
	return true
}
