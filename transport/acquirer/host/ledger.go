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
// concurrent appends share one write and one fsync (group commit), so the
// host is not limited to one movement per disk flush.
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
	dir    string
	reqs   chan *appendReq
	done   chan struct{}
	exited chan struct{} // closed when the writer has returned
	once   sync.Once

	files map[string]*os.File // the writer goroutine's alone
	dirty map[*os.File]bool   // written since their last fsync; the writer's alone
}

// syncLag bounds how long an authorisation's record waits for its fsync.
const syncLag = 200 * time.Millisecond

type appendReq struct {
	line    []byte
	date    string
	durable bool // fsync before answering
	err     chan error
}

const ledgerPrefix, ledgerSuffix = "ledger-", ".jsonl"

func openLedger(dir string) (*ledger, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	l := &ledger{dir: dir, reqs: make(chan *appendReq, 1024), done: make(chan struct{}), exited: make(chan struct{}), files: map[string]*os.File{},
		dirty: map[*os.File]bool{}}
	go l.writer()
	return l, nil
}

func (l *ledger) path(date string) string {
	return filepath.Join(l.dir, ledgerPrefix+date+ledgerSuffix)
}

var errLedgerClosed = errors.New("acquirer host: ledger closed")

// appendReqs keeps answered requests, with their line buffer and answer
// channel, for the next Append: a record per message, two allocations
// fewer each.
var appendReqs = sync.Pool{New: func() any { return &appendReq{err: make(chan error, 1)} }}

// Append writes r to its file, and for a movement of money (r.movesMoney)
// fsyncs it, before it returns.
func (l *ledger) Append(r *Record) error {
	req := appendReqs.Get().(*appendReq)
	req.line = append(r.appendJSON(req.line[:0]), '\n')
	req.date, req.durable = r.Date, r.movesMoney()
	select {
	case l.reqs <- req:
	case <-l.done:
		appendReqs.Put(req) // the writer never saw it
		return errLedgerClosed
	}
	select {
	case err := <-req.err:
		appendReqs.Put(req) // answered: the writer is done with it
		return err
	case <-l.done:
		return errLedgerClosed // the writer may still answer it: not reused
	}
}

// writer writes every queued record in one go, fsyncs the files touched
// when one of the records moves money (else within syncLag), then answers
// the batch.
func (l *ledger) writer() {
	defer close(l.exited)
	var batch []*appendReq
	lag := time.NewTimer(syncLag)
	lag.Stop()
	for {
		select {
		case r := <-l.reqs:
			batch = append(batch[:0], r)
		case <-lag.C:
			l.syncDirty()
			continue
		case <-l.done:
			l.syncDirty()
			for _, f := range l.files {
				f.Close()
			}
			return
		}
	drain:
		for len(batch) < 4096 {
			select {
			case r := <-l.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		durable := false
		touched := map[*os.File]error{}
		for _, r := range batch {
			durable = durable || r.durable
			f, err := l.file(r.date)
			if err == nil {
				_, err = f.Write(r.line)
			}
			if err != nil {
				touched[f] = err
			} else if _, seen := touched[f]; !seen {
				touched[f] = nil
			}
		}
		wasClean := len(l.dirty) == 0
		for f, err := range touched {
			if f != nil && err == nil {
				l.dirty[f] = true
			}
		}
		if durable {
			// One fsync per file covers every earlier write to it, the
			// authorisations waiting for their lag too.
			for f := range l.dirty {
				if err := f.Sync(); err != nil && touched[f] == nil {
					if _, ok := touched[f]; ok {
						touched[f] = err
					}
				}
				delete(l.dirty, f)
			}
		} else if wasClean && len(l.dirty) > 0 {
			lag.Reset(syncLag)
		}
		for _, r := range batch {
			f, err := l.file(r.date)
			if err == nil {
				err = touched[f]
			}
			r.err <- err
		}
	}
}

// syncDirty fsyncs what was written since the last fsync. A failure has
// no one to tell: those authorisations were answered when written.
func (l *ledger) syncDirty() {
	for f := range l.dirty {
		f.Sync()
		delete(l.dirty, f)
	}
}

func (l *ledger) file(date string) (*os.File, error) {
	if f, ok := l.files[date]; ok {
		return f, nil
	}
	f, err := os.OpenFile(l.path(date), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if len(l.files) >= 4 { // an old day is done with; keep the descriptors few
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

// Close stops the ledger's writer and closes its files. It returns once
// the writer has stopped: nothing is written after it, so a
// host opened on the same directory next (a restart) reads every record
// the closed one wrote.
func (l *ledger) Close() {
	l.once.Do(func() { close(l.done) })
	<-l.exited
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
