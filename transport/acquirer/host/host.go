// Package host is the sandbox acquirer host (contract sections 7 and 12):
// an ISO 8583 server that decides authorisations and sales by the test
// cards, keeps a durable ledger of what it authorised, captured, reversed
// and refunded, answers a repeated message with its first answer, and
// serves the daily settlement report and runtime faults over HTTP.
//
// It runs as its own process (cmd/acquirerd) for operators and load
// testers, and in-process on a loopback port inside a node started without
// --acquirer-addr. It is the sandbox, not a test double: the gateway speaks
// to it exactly as to a real acquirer host (docs/acquirer.md).
//
// Repeats: a message is identified by its kind (authorisation, financial,
// advice, reversal), its card acceptor id (field 42) and its RRN (field
// 37), and an advice or reversal also by its STAN and transmission time
// (fields 11 and 7: see key). The first one is decided and written to the ledger before its
// answer leaves (fsynced too when it moves money: see ledger); every later one, concurrent or after a restart, gets
// the same answer (with its own STAN and transmission time echoed) and
// moves nothing. The repeat index holds the last repeatWindowMax messages
// (loaded from the last two days' ledger files at start); the ledger files
// themselves keep everything.
//
// Card data: the card number and CVV are read to decide and then dropped;
// the ledger and the logs never hold them.
package host

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paygate/gateway/transport/acquirer/iso8583"
)

// Config configures a host.
type Config struct {
	DataDir string // the ledger's directory
	Logger  *slog.Logger
	Now     func() time.Time // default time.Now
	// CaptureUnknownOriginals approves a capture whose authorisation this
	// host never saw, as long as its amount is positive. A node's
	// in-process host sets it: in a cluster without a shared acquirerd
	// each node has its own host, and a new leader captures what its
	// predecessor's host authorised (docs/acquirer.md). acquirerd never
	// does.
	CaptureUnknownOriginals bool

	// syncFile, when set, fsyncs a ledger file instead of (*os.File).Sync:
	// the tests hold a round with it.
	syncFile func(*os.File) error
}

// Faults are the runtime faults of POST /faults. Probabilities are 0..1.
type Faults struct {
	LatencyMS        int64   `json:"latency_ms"`
	DropAnswers      float64 `json:"drop_answers"`      // decide and record, but send no answer
	DuplicateAnswers float64 `json:"duplicate_answers"` // send the answer twice
	Down             bool    `json:"down"`              // close every connection and refuse new ones
}

// Host is a running sandbox acquirer host. Its methods are safe for
// concurrent use.
type Host struct {
	cfg    Config
	ledger *ledger

	faults atomic.Pointer[Faults]
	day    atomic.Pointer[day] // the last record's date (handle.go)
	// lastRefusal (Unix ns) rate-limits the refused-handshake log line
	// (tls.go).
	lastRefusal atomic.Int64

	mu       sync.Mutex
	window   *window             // the repeat index and the originals (window.go)
	inflight map[string]struct{} // keys being decided: their repeats wait on decided
	decided  *sync.Cond          // on mu: broadcast when a key leaves inflight
	// advised (on mu) is broadcast when an original's capture or reversal
	// leaves it (flagAdvising), for the next one of the same original.
	advised *sync.Cond
	total   int // authorisations and sales decided since start
	conns   map[net.Conn]struct{}
	lns     []net.Listener
	closed  bool
}

// repeatWindowMax bounds the repeat index: a gateway repeats a message for
// minutes, not weeks, and the host's memory stays flat under load tests.
const repeatWindowMax = 200_000

// Open loads the ledger's last two days into the repeat index and returns
// a host ready to Serve.
func Open(cfg Config) (*Host, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("acquirer host: a data directory is required (the ledger lives there)")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	l, err := openLedger(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if cfg.syncFile != nil {
		l.syncFile = cfg.syncFile
	}
	h := &Host{cfg: cfg, ledger: l, window: newWindow(repeatWindowMax),
		inflight: map[string]struct{}{}, conns: map[net.Conn]struct{}{}}
	h.decided = sync.NewCond(&h.mu)
	h.advised = sync.NewCond(&h.mu)
	h.faults.Store(&Faults{})
	days, err := l.days()
	if err != nil {
		l.Close()
		return nil, err
	}
	if len(days) > 2 {
		days = days[len(days)-2:]
	}
	for _, d := range days {
		if err := l.read(d, h.remember); err != nil {
			l.Close()
			return nil, err
		}
	}
	return h, nil
}

// remember puts a decided record into the repeat index and, for an
// approved authorisation or sale, the originals; a capture or reversal
// updates its original. The caller holds h.mu (or is Open).
func (h *Host) remember(r *Record) { h.rememberAs(r, r.repeatKey()) }

// rememberAs is remember with r's key already made.
func (h *Host) rememberAs(r *Record, k string) {
	h.window.put(k, r)
	switch {
	case r.Kind == KindCapture && r.approved() && r.Original != "":
		if o, ok := h.window.originalByKey(r.Original); ok {
			h.window.captured(o, r.Amount)
		}
	case r.Kind == KindReversal && r.Original != "":
		if o, ok := h.window.originalByKey(r.Original); ok {
			h.window.reversed(o)
		}
	}
}

// key identifies a message for repeats: its class, MID and RRN, and for a
// capture or reversal also its STAN and transmission time (fields 11 and 7:
// sent is both). A sale and a refund are both financial (0200); their RRNs
// differ. An advice carries its authorisation's RRN, so the RRN alone would
// make a second capture of one authorisation (after the first was
// declined) a repeat of the first; STAN and field 7 are the identity ISO
// 8583 gives a message, and the gateway's are the movement's own, written
// in its log and the same in every repeat from any node (the link never
// gives a movement another STAN). One concatenation: the key is made per
// message, and an authorisation's leaves stan and sent out.
func key(kind, mid, rrn, stan, sent string) string {
	var b strings.Builder
	b.Grow(len(kind) + len(mid) + len(rrn) + len(stan) + len(sent) + 3)
	appendKey(&b, kind, mid, rrn, stan, sent)
	return b.String()
}

// appendKey writes key's bytes to b.
func appendKey(b *strings.Builder, kind, mid, rrn, stan, sent string) {
	class := kind
	if kind == KindRefund {
		class = KindSale
	}
	b.WriteString(class)
	b.WriteByte('|')
	b.WriteString(mid)
	b.WriteByte('|')
	b.WriteString(rrn)
	if kind == KindCapture || kind == KindReversal {
		b.WriteByte('|')
		b.WriteString(stan)
		b.WriteString(sent)
	}
}

func origKey(mid, stan, sent string) string { return mid + "|" + stan + "|" + sent }

// repeatKey is r's key for repeats (key).
func (r *Record) repeatKey() string { return key(r.Kind, r.MID, r.RRN, r.STAN, r.Sent) }

// originalKey is r's identity as an original: its MID, STAN and field 7.
func (r *Record) originalKey() string { return origKey(r.MID, r.STAN, r.Sent) }

// SetFaults replaces the runtime faults. Down closes every open connection.
func (h *Host) SetFaults(f Faults) {
	h.faults.Store(&f)
	if f.Down {
		h.mu.Lock()
		for c := range h.conns {
			c.Close()
		}
		h.mu.Unlock()
	}
}

// Faults returns the runtime faults in force.
func (h *Host) Faults() Faults { return *h.faults.Load() }

// Authorizations reports how many authorisations or sales the host decided
// for rrn within its repeat window: 0 or 1, however often it was sent.
func (h *Host) Authorizations(rrn string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	h.window.each(func(r *Record) {
		if r.RRN == rrn && (r.Kind == KindAuth || r.Kind == KindSale) {
			n++
		}
	})
	return n
}

// Total reports how many authorisations and sales the host decided since
// it started (repeats not counted).
func (h *Host) Total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

// Serve accepts ISO 8583 connections on ln until Close.
func (h *Host) Serve(ln net.Listener) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		ln.Close()
		return net.ErrClosed
	}
	h.lns = append(h.lns, ln)
	h.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			if h.isClosed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		go h.ServeConn(c)
	}
}

// ServeConn serves one connection until it ends: one a listener accepted,
// or an in-memory one (link.Pipe) from a node that runs the host
// in-process. A host that is down or closed closes it at once.
func (h *Host) ServeConn(c net.Conn) {
	h.mu.Lock()
	if h.closed || h.Faults().Down {
		h.mu.Unlock()
		c.Close()
		return
	}
	h.conns[c] = struct{}{}
	h.mu.Unlock()
	h.serveConn(c)
}

func (h *Host) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// Close stops the listeners and connections and closes the ledger. An
// answer not yet written is lost, as in a crash; its record, if written,
// makes the repeat get it.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closed = true
	for _, ln := range h.lns {
		ln.Close()
	}
	for c := range h.conns {
		c.Close()
	}
	h.mu.Unlock()
	h.ledger.Close()
	return nil
}

// serveConn reads requests and answers them. An authorisation or echo is
// answered on the reader's goroutine (inline), as nothing makes it wait:
// its ledger record is written, never fsynced, before its answer. A
// message that may wait (a movement's fsync, any message under a latency
// fault) is answered on its own goroutine, so it does not hold the ones
// behind it, and concurrent movements share their fsyncs. A goroutine per
// request and its wake-ups were a large part of the in-process link's CPU
// (issue 35, docs/acquirer.md "What the link costs").
func (h *Host) serveConn(c net.Conn) {
	defer func() {
		h.mu.Lock()
		delete(h.conns, c)
		h.mu.Unlock()
		c.Close()
	}()
	if !h.handshake(c) { // tls.go
		return
	}
	w := iso8583.NewFrameWriter(c)
	r := iso8583.NewFrameReader(c)
	inflight := make(chan struct{}, answersInFlightMax)
	// A malformed message has nothing to answer to (no STAN to match).
	malformed := func(err error) { h.cfg.Logger.Warn("acquirer host: malformed message", "error", err) }
	for {
		req := messages.Get().(*iso8583.Message)
		if err := r.NextInto(req, malformed); err != nil {
			messages.Put(req)
			return
		}
		if h.answersInline(req) {
			h.answer(w, req)
			messages.Put(req)
			continue
		}
		inflight <- struct{}{} // at the bound, stop reading: the sender waits
		go func() {
			defer func() { <-inflight }()
			h.answer(w, req)
			messages.Put(req)
		}()
	}
}

// messages keeps requests and answers for reuse: a request is done with
// once answered (its record keeps none of its strings: recordFields), an
// answer once sent. Two allocations fewer a message.
var messages = sync.Pool{New: func() any { return new(iso8583.Message) }}

// answersInline reports whether req is answered on the connection's reader
// goroutine: an authorisation (0100) or network management message (0800),
// with no latency fault in force. Everything else may wait for an fsync.
func (h *Host) answersInline(req *iso8583.Message) bool {
	return (req.MTI == "0100" || req.MTI == "0800") && h.Faults().LatencyMS <= 0
}

// answersInFlightMax bounds the requests one connection may have waiting
// for their answers (under a latency fault, say).
const answersInFlightMax = 10_000

func (h *Host) answer(w *iso8583.FrameWriter, req *iso8583.Message) {
	resp := h.handle(req)
	if resp == nil {
		return
	}
	f := h.Faults()
	if f.LatencyMS > 0 {
		time.Sleep(time.Duration(f.LatencyMS) * time.Millisecond)
	}
	defer messages.Put(resp) // Send packs it before it returns
	if f.Down || f.DropAnswers > 0 && rand.Float64() < f.DropAnswers {
		return
	}
	if err := w.Send(resp); err != nil {
		h.cfg.Logger.Warn("acquirer host: answer not sent", "mti", resp.MTI, "error", err)
		return
	}
	if f.DuplicateAnswers > 0 && rand.Float64() < f.DuplicateAnswers {
		w.Send(resp)
	}
}
