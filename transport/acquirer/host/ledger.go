package host

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Record is one ledger entry: a money movement the host decided (or an
// authorisation it declined), written before its answer leaves. It holds
// no card number and no CVV.
type Record struct {
	Time     int64  `json:"time"` // host's clock, Unix ns
	Date     string `json:"date"` // its UTC day, YYYY-MM-DD: the settlement day
	Kind     string `json:"kind"` // KindAuth, KindSale, KindCapture, KindReversal, KindRefund
	MTI      string `json:"mti"`
	MID      string `json:"mid"`
	RRN      string `json:"rrn"`
	STAN     string `json:"stan"`
	Sent     string `json:"sent"` // field 7 of the request, MMDDhhmmss
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"` // ISO 4217 numeric, as on the wire
	Response string `json:"response"` // field 39 answered
	AuthCode string `json:"auth_code,omitempty"`
	ARN      string `json:"arn,omitempty"`
	AVS      string `json:"avs,omitempty"`
	CVV      string `json:"cvv,omitempty"`
	// Original names the authorisation or sale a capture or reversal
	// applies to (its key), "" when the host did not find it.
	Original string `json:"original,omitempty"`
}

// Ledger record kinds.
const (
	KindAuth     = "auth"
	KindSale     = "sale"
	KindCapture  = "capture"
	KindReversal = "reversal"
	KindRefund   = "refund"
)

// movesMoney reports whether the record is a movement of money, which the
// ledger fsyncs before its answer leaves; an authorisation only reserves.
func (r *Record) movesMoney() bool { return r.Kind != KindAuth }

// approved reports whether the record moved money (or reserved it).
func (r *Record) approved() bool { return r.Response == "00" }

// ledger is the host's append-only record, one file per UTC day
// (ledger-YYYY-MM-DD.jsonl, one JSON record per line). Append returns once
// the record is written to the file, and, for a money movement, fsynced;
// concurrent movements share one fsync (group commit), so the host is not
// limited to one movement per disk flush.
//
// No goroutine of its own (issue 35: each hand-off cost the in-process
// link CPU): an appender writes its record itself, under mu (one write(2)
// of a line). A movement then needs its fsync: the first to find none
// under way leads a round that fsyncs every file written since the last
// one, outside mu, so authorisations keep being written meanwhile; the
// movements written during it wait for it and one of them leads the next.
// An authorisation never waits for an fsync.
//
// Durability (docs/acquirer.md, "The ledger"): a record is always in the
// file before its answer leaves, so a host process that crashes or is
// killed still answers a repeat with its first answer after a restart (the
// kernel holds the write). Only a movement of money (sale, capture,
// reversal, refund) waits for the fsync: an authorisation moves nothing,
// and an fsync each was most of the in-process host's CPU (issue 35). Its
// record reaches the disk with the next movement's fsync, or syncLag
// later, whichever comes first; only a power loss inside that window can
// lose it, and then the repeat is decided again from the same message to
// the same answer (the decision is a function of the message), while a
// capture of it is refused as of an authorisation that lapsed.
type ledger struct {
	dir string
	lag *time.Timer // fsyncs authorisations' records syncLag after their write
	// syncFile fsyncs a file of movements and authorisations:
	// (*os.File).Sync but in tests (Config.syncFile).
	syncFile func(*os.File) error

	mu      sync.Mutex
	closed  bool
	lagSet  bool                // lag is armed
	files   map[string]*os.File // by date
	dirty   map[*os.File]uint64 // written since their last fsync: the last write's number
	written uint64              // lines written so far (their numbers: 1, 2, …)
	round   *syncRound          // the fsync under way, nil if none
	// syncedUpTo is the last ended round's upTo: every write numbered up
	// to it has had its fsync (rounds run one at a time, each over every
	// file written before it began).
	syncedUpTo uint64
	failures   []*syncRound // the last rounds that failed, for their waiters
}

// syncRound is one group fsync: it covers the writes numbered up to upTo.
type syncRound struct {
	upTo  uint64
	files map[*os.File]uint64 // synced, with the last write each covered
	errs  map[*os.File]error  // the files whose fsync failed
	done  chan struct{}       // closed when it ends
}

// failuresKept bounds the failed rounds remembered: a waiter looks for
// its round right after it ends, so a few are plenty.
const failuresKept = 16

// syncLag bounds how long an authorisation's record waits for its fsync.
const syncLag = 200 * time.Millisecond

const ledgerPrefix, ledgerSuffix = "ledger-", ".jsonl"

func openLedger(dir string) (*ledger, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	l := &ledger{dir: dir, files: map[string]*os.File{}, dirty: map[*os.File]uint64{}, syncFile: (*os.File).Sync}
	l.lag = time.AfterFunc(time.Hour, l.lagRanOut)
	l.lag.Stop()
	return l, nil
}

func (l *ledger) path(date string) string {
	return filepath.Join(l.dir, ledgerPrefix+date+ledgerSuffix)
}

var errLedgerClosed = errors.New("acquirer host: ledger closed")

// lines keeps encoded records' buffers for the next Append.
var lines = sync.Pool{New: func() any { return new([]byte) }}

// Append writes r to its file, and for a movement of money (r.movesMoney)
// fsyncs it, before it returns.
func (l *ledger) Append(r *Record) error {
	buf := lines.Get().(*[]byte)
	*buf = append(r.appendJSON((*buf)[:0]), '\n')
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		lines.Put(buf)
		return errLedgerClosed
	}
	f, err := l.file(r.Date)
	if err == nil {
		_, err = f.Write(*buf)
	}
	lines.Put(buf)
	if err != nil {
		l.mu.Unlock()
		return err
	}
	l.written++
	mine := l.written
	l.dirty[f] = mine
	if !r.movesMoney() {
		if !l.lagSet {
			l.lagSet = true
			l.lag.Reset(syncLag)
		}
		l.mu.Unlock()
		return nil
	}
	err = l.syncThrough(f, mine)
	l.mu.Unlock()
	return err
}

// syncThrough returns once write number n (to f) is fsynced: by the round
// under way if it covers n, else by the next one, which it leads if no one
// else does. It returns the error of the round that covered n for f. The
// caller holds l.mu; it is held again on return.
func (l *ledger) syncThrough(f *os.File, n uint64) error {
	for {
		if l.syncedUpTo >= n {
			// A round covered n (every round fsyncs every file written
			// before it began), possibly while this one waited for mu.
			return l.failed(f, n)
		}
		if r := l.round; r != nil {
			l.mu.Unlock()
			<-r.done
			l.mu.Lock()
			continue
		}
		l.syncRound()
	}
}

// failed is the error of the failed round that covered write n to f, nil
// when none did.
func (l *ledger) failed(f *os.File, n uint64) error {
	for _, r := range l.failures {
		if last, ok := r.files[f]; ok && last >= n && r.errs[f] != nil {
			return r.errs[f]
		}
	}
	return nil
}

// syncRound fsyncs every file written since its last fsync, outside l.mu,
// and returns the round (its errs: the files whose fsync failed). The
// caller holds l.mu and no round is under way; l.mu is held again on
// return.
func (l *ledger) syncRound() *syncRound {
	r := &syncRound{upTo: l.written, files: l.dirty, done: make(chan struct{})}
	l.dirty = make(map[*os.File]uint64, len(r.files))
	l.round = r
	if l.lagSet {
		l.lagSet = false
		l.lag.Stop() // this round covers what the lag waited for
	}
	l.mu.Unlock()
	for f := range r.files {
		if err := l.syncFile(f); err != nil {
			if r.errs == nil {
				r.errs = map[*os.File]error{}
			}
			r.errs[f] = err
		}
	}
	l.mu.Lock()
	l.round = nil
	l.syncedUpTo = r.upTo
	if r.errs != nil {
		l.failures = append(l.failures, r)
		if len(l.failures) > failuresKept {
			l.failures = l.failures[1:]
		}
	}
	close(r.done)
	return r
}

// lagRanOut fsyncs the authorisations written since the last fsync.
func (l *ledger) lagRanOut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lagSet = false
	if l.closed || len(l.dirty) == 0 {
		return // Close fsyncs
	}
	if l.round != nil {
		// Let the round end, then fsync what it did not cover.
		l.lagSet = true
		l.lag.Reset(syncLag / 4)
		return
	}
	l.syncRound() // no one to tell of a failure: those were answered when written
}

func (l *ledger) file(date string) (*os.File, error) {
	if f, ok := l.files[date]; ok {
		return f, nil
	}
	f, err := os.OpenFile(l.path(date), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	// An old day is done with; keep the descriptors few. Not while a
	// round fsyncs: it may hold one of them.
	if len(l.files) >= 4 && l.round == nil {
		for d, old := range l.files {
			if d < date {
				old.Sync() // it may hold authorisations waiting for their lag
				old.Close()
				delete(l.dirty, old)
				delete(l.files, d)
			}
		}
	}
	l.files[date] = f
	return f, nil
}

// Close refuses new appends, waits for the fsync under way, fsyncs what
// is left and closes the files. Nothing is written after it returns, so a
// host opened on the same directory next (a restart) reads every record
// the closed one wrote.
func (l *ledger) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for l.round != nil {
		r := l.round
		l.mu.Unlock()
		<-r.done
		l.mu.Lock()
	}
	l.lag.Stop()
	l.lagSet = false
	for f := range l.dirty {
		f.Sync()
	}
	clear(l.dirty)
	for d, f := range l.files {
		f.Close()
		delete(l.files, d)
	}
}

// days lists the dates that have a ledger file, oldest first.
func (l *ledger) days() ([]string, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ledgerPrefix) && strings.HasSuffix(name, ledgerSuffix) {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(name, ledgerPrefix), ledgerSuffix))
		}
	}
	sort.Strings(out)
	return out, nil
}

// read calls fn for every record of date's file, in order. A torn last line
// (a crash in the middle of a write, never acknowledged) is skipped; a bad
// line elsewhere is an error.
func (l *ledger) read(date string, fn func(*Record)) error {
	f, err := os.Open(l.path(date))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var bad error
	for sc.Scan() {
		if bad != nil {
			return bad // the bad line was not the last
		}
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			bad = fmt.Errorf("acquirer host: ledger %s: %w", date, err)
			continue
		}
		fn(&r)
	}
	return sc.Err()
}
