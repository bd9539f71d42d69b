// Package persistence is the gateway's state on disk: a Pebble database that
// the Raft FSM writes (one Pebble batch per Raft batch) and the rest of the
// node reads. See DESIGN.md for the key layout and the durability argument.
//
// It sits on the domain (order) and below everything else: it imports no
// actor, no HTTP and no edge (internal/depcheck). The webhook outbox is
// stored here (notify.go: its keys and indexes, applying the pure rule of
// transport/webhook/outbox); delivering it is transport/webhook's, which
// reads and proposes to this package.
package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
)

// Key prefixes. One byte each so scans are cheap and the layout is obvious.
const (
	prefixMeta     = "a/" // a/applied: last applied Raft index; a/pending: index the p/ keys are exact at
	prefixOrder    = "o/" // o/<merchant>\x00<order_id> → order, binary (command.AppendOrder; legacy: JSON)
	prefixMerchant = "m/" // m/<merchant_id> → Merchant JSON
	prefixCard     = "c/" // c/<card_id> → vault blob (PAN sealed, never a CVV)
	prefixToken    = "t/" // t/<payment_token> → TokenRecord (command.AppendTokenGrant)
	prefixIdem     = "k/" // k/<merchant>\x00<idempotency key> → IdemRecord JSON
	prefixIdemAge  = "i/" // i/<created ns BE><merchant>\x00<idempotency key> → "" (expiry of k/: retention.go)
	prefixSettle   = "s/" // s/<due ns BE><merchant>\x00<order_id> → "" (auto-settle schedule)
	prefixPending  = "p/" // p/<merchant>\x00<order_id> → "" (authorisation due at the acquirer, as of the last checkpoint: pending.go)
	prefixNotify   = "w/" // w/<notification id> → Notification without its body (notify_codec.go)
	prefixBody     = "b/" // b/<notification id> → the notification's body, written once
	prefixDue      = "q/" // q/<due ns BE><notification id> → endpoint (webhook queue; empty in older entries)
	prefixFinished = "x/" // x/<finished ns BE><notification id> → "" (delivered: retention)
	prefixReplay   = "r/" // r/<wallet replay key> → <merchant>\x00<order_id> (wallet token used)
	// g/: the back office's search indexes (search.go).
)

var keyApplied = []byte(prefixMeta + "applied")

// Pebble sizing: the block cache holds the working set of recent orders;
// the memtable absorbs write bursts between flushes. Pebble reserves each
// memtable's size in the block cache, and keeps the last flushed memtable
// for reuse with its reservation: once 128 MiB have been written since the
// start, the two reservations fill the cache, and while writes go on it
// holds no blocks (gateway_pebble_block_cache_bytes reads 0). Reads that
// miss the order cache then read their block from the file. Measured
// (docs/performance-history.md, series 19): a cache larger by the two memtables
// (~60 % hits under a mixed load over 1 M orders) left the node's CPU per
// request within noise and added 120-160 MB of RSS; 32 MiB memtables kept
// RSS but raised p99 in 8 of 9 pairs. Neither was kept; the one path that
// depended on cached blocks, the retention prunes, walks its keys with one
// iterator instead (Batch.present). A cache larger by the two memtables
// also left reads after a restart within noise and added ~230-350 MB.
//
// Since then (issue 36, searches deep in the history): the cache's size is
// what the node's --cache-size-mib asks for blocks, and the memtables'
// reservation (2 × memTableBytes) is added on top, so that the blocks get
// the room they are given. Pebble allocates blocks as they are read, so a
// small store never pays for a large cache.
const (
	// DefaultBlockCacheBytes is the block cache's room for blocks when the
	// node's --cache-size-mib is not set. A million card orders taken
	// through the API need ~1.46 GB once read (their tokens, vault entries
	// and index keys included), so this holds ~700,000 of them; a larger
	// store is given more by its operator (docs/operations.md, "Memory";
	// docs/performance.md, "Order search", sixth series). The cache takes
	// memory only as blocks are read.
	DefaultBlockCacheBytes = 1 << 30
	memTableBytes          = 64 << 20
	// DefaultHistoryCacheBytes is the order history cache's room when the
	// node's --history-cache-mib is not set: ~575 bytes an order (key,
	// stored order, header), so about 1.4 M orders. It is reserved outside
	// the Go heap and the kernel backs it as it fills, so a small store takes
	// little of it.
	DefaultHistoryCacheBytes = 768 << 20
	// orderCacheEntries bounds the decoded-order cache (~1-2 KiB each).
	orderCacheEntries = 100_000
	// walBytesPerSync has Pebble's WAL writer start writeback of what it
	// wrote every 512 KiB, in its own goroutine. The FSM commits with
	// NoSync (the Raft log is the durable copy), so without it a whole
	// memtable's WAL (up to 64 MiB) sat dirty until the memtable rotated,
	// and closing that WAL synced it inside the FSM's Commit: a 48 ms
	// stall of every write, seen in an execution trace.
	walBytesPerSync = 512 << 10
)

// Store is the Pebble database. Reads are safe from any goroutine; writes
// happen only through Batch, from the Raft FSM's single goroutine.
type Store struct {
	db     *pebble.DB
	orders *orderCache
	// history holds the stored encoding of as many orders as its bytes
	// allow, for searches and status reads deep in the history (history.go).
	history *historyCache
	// fsm is state only the FSM's goroutine touches (apply.go).
	fsm fsmScratch
	// known filters order keys for the FSM's reads (known.go); replaced
	// whole by Restore. loading tracks its background fill, which closing
	// stops.
	known atomic.Pointer[knownOrders]
	// pending is the set of authorisations due at the acquirer (pending.go).
	pending pendingAuths
	// timed are where scans of the schedules start (timed.go).
	timed [timedIndexes]timedFloor
	// mids is the registered processing MIDs (mids.go).
	mids    atomic.Pointer[midIndex]
	loading sync.WaitGroup
	closing atomic.Bool
	metrics storeMetrics // metrics.go
	logger  *slog.Logger
}

// Open opens or creates the store in dir.
func Open(dir string, logger *slog.Logger) (*Store, error) {
	return OpenFS(vfs.Default, dir, logger)
}

// OpenFS opens or creates the store in dir on fs. A node's is the
// operating system's (Open); tests pass pebble's in-memory, crashable or
// failing filesystems (vfs.NewCrashableMem, vfs/errorfs) to show that a
// failed write or fsync stops the node and loses nothing acknowledged.
func OpenFS(fs vfs.FS, dir string, logger *slog.Logger) (*Store, error) {
	return OpenWith(fs, dir, logger, Options{})
}

// OpenSized is Open with the caches sized by opt.
func OpenSized(dir string, logger *slog.Logger, opt Options) (*Store, error) {
	return OpenWith(vfs.Default, dir, logger, opt)
}

// Options size the store's caches; zero fields take the defaults.
type Options struct {
	// BlockCacheBytes is the room Pebble's block cache gives to blocks
	// (DefaultBlockCacheBytes when 0); the memtables' reservation comes on
	// top of it.
	BlockCacheBytes int64
	// HistoryCacheBytes is the room of the order history cache (history.go):
	// DefaultHistoryCacheBytes when 0, none when negative.
	HistoryCacheBytes int64
}

// OpenWith is OpenFS with the caches sized by opt (the node's flags).
func OpenWith(fs vfs.FS, dir string, logger *slog.Logger, opt Options) (*Store, error) {
	if opt.BlockCacheBytes <= 0 {
		opt.BlockCacheBytes = DefaultBlockCacheBytes
	}
	cache := pebble.NewCache(opt.BlockCacheBytes + 2*memTableBytes)
	defer cache.Unref() // the DB holds its own reference
	opts := &pebble.Options{
		FS:                 fs,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{logger},
		Cache:              cache,
		MemTableSize:       memTableBytes,
		WALBytesPerSync:    walBytesPerSync,
		EventListener:      writeStallListener(logger),
	}
	// Bloom filters on every level: most point reads on the write path are
	// for orders that do not exist yet (a new order_id), and without a
	// filter each of them reads a block of every level.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open pebble: %w", err)
	}
	if opt.HistoryCacheBytes == 0 {
		opt.HistoryCacheBytes = DefaultHistoryCacheBytes
	}
	s := &Store{db: db, orders: newOrderCache(orderCacheEntries), history: newHistoryCache(opt.HistoryCacheBytes), logger: logger}
	s.pending.every = pendingCheckpointEvery
	if err := s.pending.load(s); err != nil {
		db.Close()
		return nil, fmt.Errorf("load pending authorisations: %w", err)
	}
	if err := s.ensureSearchIndex(); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.loadMIDs(); err != nil {
		db.Close()
		return nil, err
	}
	s.loadKnownOrders()
	s.registerMetrics()
	return s, nil
}

// writeStallListener reports Pebble's write stalls: while flushes or L0
// compactions lag behind, Pebble holds every commit, so the FSM, and with it
// every proposal, waits. They show as latency spikes; the metrics say when.
func writeStallListener(logger *slog.Logger) *pebble.EventListener {
	stalls := metrics.GetOrCreateCounter(`gateway_pebble_write_stalls_total`)
	// A Prometheus histogram shows its buckets before the first stall, so
	// dashboards and alerts find the metric on a healthy node too.
	stalled := metrics.GetOrCreatePrometheusHistogram(`gateway_pebble_write_stall_seconds`)
	var began atomic.Int64
	return &pebble.EventListener{
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			stalls.Inc()
			began.Store(time.Now().UnixNano())
			logger.Warn("pebble write stall", "reason", info.Reason)
		},
		WriteStallEnd: func() {
			if t := began.Swap(0); t != 0 {
				stalled.Update(time.Since(time.Unix(0, t)).Seconds())
			}
		},
	}
}

// Close checkpoints the pending-authorisation set, so that a restart
// rechecks nothing, and closes the database. The FSM must have stopped.
func (s *Store) Close() error {
	if err := s.writePendingCheckpoint(pebble.Sync); err != nil {
		s.logger.Warn("checkpoint pending authorisations at close", "error", err)
	}
	return s.closeDB()
}

// closeDB stops the background fill of the order filter and closes Pebble.
func (s *Store) closeDB() error {
	s.closing.Store(true)
	s.loading.Wait()
	s.unregisterMetrics()
	return errors.Join(s.db.Close(), s.history.close())
}

// AppliedIndex is the last Raft index whose effects are in the store.
func (s *Store) AppliedIndex() (uint64, error) {
	v, err := get(s.db, keyApplied)
	if err != nil || v == nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(v), nil
}

// reader is what Store and Batch share for reads.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

// get returns a copy of the value, or nil when the key is absent.
func get(r reader, key []byte) ([]byte, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out, nil
}

func getJSON[T any](r reader, key []byte) (*T, error) {
	v, err := get(r, key)
	if err != nil || v == nil {
		return nil, err
	}
	var out T
	if err := json.Unmarshal(v, &out); err != nil {
		return nil, fmt.Errorf("decode %q: %w", key[:2], err)
	}
	return &out, nil
}

func orderKey(merchant, id string) []byte { return refKey(prefixOrder, merchant, id) }

// refKey is prefix merchant \0 id, allocated once at its size.
func refKey(prefix, merchant, id string) []byte {
	return appendRefKey(make([]byte, 0, len(prefix)+len(merchant)+1+len(id)), prefix, merchant, id)
}

func appendRefKey(dst []byte, prefix, merchant, id string) []byte {
	dst = append(dst, prefix...)
	dst = append(dst, merchant...)
	dst = append(dst, 0)
	return append(dst, id...)
}

// timedRefKey is timedKey(prefix, due, refKey("", merchant, id)) in one
// allocation.
func timedRefKey(prefix string, due int64, merchant, id string) []byte {
	k := appendTimed(make([]byte, 0, len(prefix)+8+len(merchant)+1+len(id)), prefix, due)
	return appendRefKey(k, "", merchant, id)
}

func timedKey(prefix string, due int64, rest []byte) []byte {
	return append(appendTimed(make([]byte, 0, len(prefix)+8+len(rest)), prefix, due), rest...)
}

// appendTimed appends a schedule key's head: its prefix and the due time,
// big-endian so that keys sort by it.
func appendTimed(dst []byte, prefix string, due int64) []byte {
	dst = append(dst, prefix...)
	return binary.BigEndian.AppendUint64(dst, uint64(due))
}

// GetOrder returns the order, or nil when it does not exist.
func (s *Store) GetOrder(merchant, id string) (*order.Order, error) {
	key := orderKey(merchant, id)
	if o := s.cachedOrder(key); o != nil {
		return o, nil
	}
	s.metrics.fromPebble.Inc()
	return readOrder(s.db, key)
}

// cachedOrder returns the order at key from the caches in front of Pebble,
// the recent orders first, then the history (counting the read as served
// from the cache), or nil when neither holds it.
func (s *Store) cachedOrder(key []byte) *order.Order {
	o := s.orders.get(key)
	if o == nil {
		o = s.history.get(key)
	}
	if o != nil {
		s.metrics.fromCache.Inc()
	}
	return o
}

// readOrder reads and decodes a stored order, or returns nil when absent.
func readOrder(r reader, key []byte) (*order.Order, error) {
	return readDecoded(r, key, decodeOrderValue)
}

// readDecoded reads the value at key and decodes it in place, or returns
// nil when absent. decode must copy what it keeps: v is Pebble's buffer,
// valid only until the read is closed (the binary codecs and JSON do).
func readDecoded[T any](r reader, key []byte, decode func(v []byte) (*T, error)) (*T, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return decode(v)
}

// decodeOrderValue decodes a stored order value: the binary encoding
// (command.AppendOrder, whose version byte is never '{') or, in data dirs
// written before it, JSON. Old JSON values are rewritten in binary the
// next time their order changes.
func decodeOrderValue(v []byte) (*order.Order, error) {
	if len(v) > 0 && v[0] == '{' {
		var o order.Order
		if err := json.Unmarshal(v, &o); err != nil {
			return nil, fmt.Errorf("decode legacy JSON order: %w", err)
		}
		return &o, nil
	}
	return command.DecodeOrder(v)
}

// OrderStatusJSON returns the order's status view (every transaction), or
// nil when the order does not exist. A cached order version is rendered
// once and the bytes are shared by every later read of that version:
// callers must not modify them.
func (s *Store) OrderStatusJSON(merchant, id string) ([]byte, error) {
	render := func(o *order.Order) []byte { return order.NewView(o, order.WithAllTxns, "").Marshal() }
	key := orderKey(merchant, id)
	if e := s.orders.entry(key); e != nil {
		if v := e.statusJSON.Load(); v != nil {
			s.metrics.fromCache.Inc()
			return *v, nil
		}
		if o := e.order(); o != nil {
			s.metrics.fromCache.Inc()
			v := render(o)
			e.statusJSON.Store(&v)
			return v, nil
		}
	}
	if o := s.history.get(key); o != nil {
		s.metrics.fromCache.Inc()
		return render(o), nil
	}
	s.metrics.fromPebble.Inc()
	o, err := readOrder(s.db, key)
	if o == nil || err != nil {
		return nil, err
	}
	return render(o), nil
}

// CachedOrder returns the order only if it is in the cache: a cheap check
// that never reads Pebble.
func (s *Store) CachedOrder(merchant, id string) *order.Order {
	// The key is built on the stack (the lookup keeps nothing): this runs
	// on every request an order actor starts.
	var buf [128]byte
	return s.orders.get(appendRefKey(buf[:0], prefixOrder, merchant, id))
}

// OrderRef names an order.
type OrderRef struct {
	Merchant string
	OrderID  string
}

func splitRef(b []byte) OrderRef {
	for i, c := range b {
		if c == 0 {
			return OrderRef{Merchant: string(b[:i]), OrderID: string(b[i+1:])}
		}
	}
	return OrderRef{OrderID: string(b)}
}

// DueSettlements lists up to limit orders whose auto-settle time is <= now,
// after cursor (nil: from the first), and the cursor to list the next ones.
func (s *Store) DueSettlements(now int64, after ScheduleCursor, limit int) ([]OrderRef, ScheduleCursor, error) {
	return s.dueRefs(settleIndex, now, after, limit)
}

// NextSettlement returns the earliest scheduled auto-settle time, or 0.
func (s *Store) NextSettlement() (int64, error) { return s.firstTimed(settleIndex) }

func prefixEnd(prefix string) []byte {
	b := []byte(prefix)
	b[len(b)-1]++
	return b
}

// scan calls fn for each key in [lo, hi) until fn returns false.
func (s *Store) scan(lo, hi []byte, fn func(k, v []byte) bool) error {
	return scanIn(s.db, lo, hi, fn)
}

// iterReader is what both the database and a snapshot of it offer.
type iterReader interface {
	reader
	NewIter(*pebble.IterOptions) (*pebble.Iterator, error)
}

// scanIn is scan over r: the live database, or a snapshot when what is
// read in the scan and after it must be of one moment.
func scanIn(r iterReader, lo, hi []byte, fn func(k, v []byte) bool) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		if !fn(it.Key(), it.Value()) {
			break
		}
	}
	return it.Close()
}

// Card returns the sealed card blob, or nil.
func (s *Store) Card(cardID string) ([]byte, error) {
	return get(s.db, append([]byte(prefixCard), cardID...))
}

// TokenRecord is a payment token: which merchant may use which card. It is
// stored in the order codec's binary form (command.AppendTokenGrant); records
// written before it are JSON and still read.
type TokenRecord = order.TokenGrant

// Token returns the token record, or nil.
func (s *Store) Token(token string) (*TokenRecord, error) {
	return readDecoded(s.db, append([]byte(prefixToken), token...), decodeTokenValue)
}

// decodeTokenValue decodes a stored token record, binary or legacy JSON.
func decodeTokenValue(v []byte) (*TokenRecord, error) {
	if len(v) > 0 && v[0] == '{' { // legacy JSON; the binary form starts with its version byte
		var rec TokenRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return nil, fmt.Errorf("decode legacy JSON token: %w", err)
		}
		return &rec, nil
	}
	return command.DecodeTokenGrant(v)
}

// IdemRecord is the first answer to a request with an Idempotency-Key.
type IdemRecord struct {
	RequestHash string `json:"h"`
	CreatedAt   int64  `json:"t"`
	Status      int    `json:"s"` // HTTP status of the first answer
	Response    []byte `json:"r"` // body of the first answer
	// Reject is set instead of Response when the first answer was the
	// state machine's refusal (409 0.03, 422 2.02, 404 2.05): a repeat is
	// refused the same way even once the order would allow it (contract
	// section 5, "returns the first answer again").
	Reject *order.Rejection `json:"x,omitempty"`
}

// Idempotency returns the record for a merchant's key, or nil.
func (s *Store) Idempotency(merchant, key string) (*IdemRecord, error) {
	return getJSON[IdemRecord](s.db, refKey(prefixIdem, merchant, key))
}

// Merchants lists every merchant.
func (s *Store) Merchants() ([]command.Merchant, error) {
	return scanJSON[command.Merchant](s, prefixMerchant)
}

// scanJSON decodes every value under prefix, in key order.
func scanJSON[T any](s *Store, prefix string) ([]T, error) {
	var out []T
	var derr error
	err := s.scan([]byte(prefix), prefixEnd(prefix), func(_, v []byte) bool {
		var x T
		if derr = json.Unmarshal(v, &x); derr != nil {
			return false
		}
		out = append(out, x)
		return true
	})
	if err == nil {
		err = derr
	}
	return out, err
}

// pebbleLogger routes Pebble's logging to slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
	panic(fmt.Sprintf(format, args...))
}

// EachOrder calls fn with every stored order until it returns false: a
// full scan, for operator tasks (reconciliation) and rebuilding the search
// index, never a request's path.
func (s *Store) EachOrder(fn func(*order.Order) bool) error {
	var derr error
	err := s.scan([]byte(prefixOrder), prefixEnd(prefixOrder), func(_, v []byte) bool {
		o, err := decodeOrderValue(v)
		if err != nil {
			derr = err
			return false
		}
		return fn(o)
	})
	if err != nil {
		return err
	}
	return derr
}
