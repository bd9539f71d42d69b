package actors

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mathrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/persistencetest"
	"github.com/paygate/gateway/persistence/vault"
	"github.com/paygate/gateway/transport/acquirer"
	"github.com/paygate/gateway/transport/acquirer/host"
	"github.com/paygate/gateway/transport/acquirer/link"
)

// sandboxHost is the sandbox acquirer host on a fixed loopback address, as
// acquirerd runs it (captures of unknown authorisations refused), which a
// test restarts, takes down and faults, and whose ledger it reads.
type sandboxHost struct {
	t    *testing.T
	dir  string
	addr string
	mu   sync.Mutex
	h    *host.Host
}

func newSandboxHost(t *testing.T) *sandboxHost {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &sandboxHost{t: t, dir: t.TempDir(), addr: ln.Addr().String()}
	s.open(ln)
	t.Cleanup(func() { s.host().Close() })
	return s
}

func (s *sandboxHost) open(ln net.Listener) {
	s.t.Helper()
	h, err := host.Open(host.Config{DataDir: s.dir})
	if err != nil {
		s.t.Fatal(err)
	}
	go h.Serve(ln)
	s.mu.Lock()
	s.h = h
	s.mu.Unlock()
}

func (s *sandboxHost) host() *host.Host {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.h
}

// restart closes the host, as a crash would (answers not yet written are
// lost), and opens it again on the same address and ledger.
func (s *sandboxHost) restart() {
	s.t.Helper()
	s.host().Close()
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; {
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("listen again on %s: %v", s.addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.open(ln)
}

// link connects a node's acquirer to the host.
func (s *sandboxHost) link(timeout time.Duration) (*testAcquirer, func()) {
	c := link.Dial(link.Config{Addr: s.addr, Timeout: timeout})
	return &testAcquirer{Acquirer: link.NewAcquirer(c), host: s.host()}, func() { c.Close() }
}

// records reads the host's ledger files: every decision it made.
func (s *sandboxHost) records() []host.Record {
	s.t.Helper()
	files, err := filepath.Glob(filepath.Join(s.dir, "ledger-*.jsonl"))
	if err != nil {
		s.t.Fatal(err)
	}
	var out []host.Record
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			s.t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r host.Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				s.t.Fatalf("ledger line %q: %v", sc.Text(), err)
			}
			out = append(out, r)
		}
		f.Close()
	}
	return out
}

// countingAcquirer counts the movement messages an acquirer sent.
type countingAcquirer struct {
	Acquirer
	mu    sync.Mutex
	moves int
}

func (c *countingAcquirer) Move(ctx context.Context, req acquirer.MoveRequest) (acquirer.MoveResult, error) {
	c.mu.Lock()
	c.moves++
	c.mu.Unlock()
	return c.Acquirer.Move(ctx, req)
}

func (c *countingAcquirer) sent() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.moves
}

// waitFor polls cond for up to timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A leader that loses leadership with a movement pending stops repeating
// it: the registry's StopAll (what a node does when it stops leading) ends
// the repeat's goroutine, whose end is the event waited for, not a quiet
// spell. The next term drives the movement from the log and it completes
// once.
func TestDeposedLeaderStopsRepeatingAMovement(t *testing.T) {
	f := newFixture(t)
	h := newSandboxHost(t)
	acq, closeLink := h.link(100 * time.Millisecond)
	t.Cleanup(closeLink)
	counting := &countingAcquirer{Acquirer: acq}
	f.deps.Acquirer = counting
	f.create(t, "m1", "dep", "h", 24*365)
	o := f.waitStatus(t, "m1", "dep", order.StatusAuthorized)
	base := movesPending.Load()

	h.host().SetFaults(host.Faults{DropAnswers: 1})
	r, err := f.reg.Request(Key{"m1", "dep"}, &Operation{Kind: order.KindSettle, Merchant: "m1", OrderID: "dep", Amount: 400}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rep := r.(*Reply); rep.Order == nil || rep.Order.Status != order.StatusAuthorized || len(rep.Order.Moves) != 1 {
		t.Fatalf("settle without an answer: %+v", rep)
	}
	waitFor(t, 10*time.Second, "the movement repeated", func() bool { return counting.sent() >= 3 })
	if movesPending.Load() != base+1 {
		t.Fatalf("movements pending: %d, want %d", movesPending.Load(), base+1)
	}

	f.reg.StopAll(false) // leadership lost
	waitFor(t, 5*time.Second, "the repeat's goroutine ended", func() bool { return movesPending.Load() == base })
	stopped := counting.sent()

	// The new term (a scheduler's resume pass) drives it once the acquirer
	// answers again, and it completes once.
	h.host().SetFaults(host.Faults{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	s := &Scheduler{Store: f.store, Registry: f.reg, Logger: f.deps.Logger, Now: time.Now, Poll: time.Second}
	go func() { defer close(done); s.Run(ctx) }()
	settled := f.waitStatus(t, "m1", "dep", order.StatusSettled)
	if settled.SettledAmount != 400 || counting.sent() <= stopped {
		t.Fatalf("after the new term: settled %d, %d messages (%d when the old term ended)", settled.SettledAmount, counting.sent(), stopped)
	}
	captures := 0
	for _, rec := range h.records() {
		if rec.Kind == host.KindCapture && rec.RRN == acquirer.RRN(o.Txns[0].ID) {
			captures++
		}
	}
	if captures != 1 {
		t.Fatalf("%d capture records at the host, want 1", captures)
	}
}

// guardedReader is a node's store as its actors see it, which a restart
// closes: a read of the database after the close fails instead of reaching
// a closed one, and the close waits for the reads under way. (What else
// the actors read of the store, in memory, passes through.)
type guardedReader struct {
	mu     sync.RWMutex
	closed bool
	*persistence.Store
}

var errClosed = errors.New("store closed")

func (g *guardedReader) GetOrder(merchant, id string) (*order.Order, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return nil, errClosed
	}
	return g.Store.GetOrder(merchant, id)
}

func (g *guardedReader) CachedOrder(merchant, id string) *order.Order {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return nil
	}
	return g.Store.CachedOrder(merchant, id)
}

func (g *guardedReader) Token(token string) (*persistence.TokenRecord, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return nil, errClosed
	}
	return g.Store.Token(token)
}

func (g *guardedReader) Card(cardID string) ([]byte, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return nil, errClosed
	}
	return g.Store.Card(cardID)
}

func (g *guardedReader) Idempotency(merchant, key string) (*persistence.IdemRecord, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return nil, errClosed
	}
	return g.Store.Idempotency(merchant, key)
}

func (g *guardedReader) PendingAuths() ([]persistence.OrderRef, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return nil, errClosed
	}
	return g.Store.PendingAuths()
}

func (g *guardedReader) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// gateway is one run of a node over a data directory: its store, log,
// actors, scheduler and link to the sandbox host. A restart stops it and
// starts another on the same directory.
type gateway struct {
	t        *testing.T
	store    *persistence.Store
	reader   *guardedReader
	log      *persistencetest.Log
	reg      *Registry
	system   *actor.ActorSystem
	deps     *Deps
	closeAcq func()
	cancel   context.CancelFunc
	done     chan struct{}
	requests sync.WaitGroup
}

var gatewayIDs struct {
	sync.Mutex
	n int
}

func startGateway(t *testing.T, dir string, v *vault.Vault, h *sandboxHost) *gateway {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(dir, logger)
	if err != nil {
		t.Fatal(err)
	}
	acq, closeAcq := h.link(150 * time.Millisecond)
	g := &gateway{t: t, store: store, reader: &guardedReader{Store: store}, log: persistencetest.NewLog(store), closeAcq: closeAcq}
	g.deps = &Deps{
		Proposer: g.log, Store: g.reader, Acquirer: acq, Vault: v, Logger: logger, Now: time.Now,
		NewID: func() string {
			gatewayIDs.Lock()
			defer gatewayIDs.Unlock()
			gatewayIDs.n++
			return fmt.Sprintf("pid-%07d", gatewayIDs.n)
		},
		SettleUnit: time.Millisecond, TokenTTL: time.Hour, ProposeTimeout: 5 * time.Second, AuthAttempts: 2,
	}
	g.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	g.reg = NewRegistry(g.system, NewOrderActorProducer(g.deps, func() *Registry { return g.reg }))
	g.lead()
	return g
}

// lead starts the leader's schedules: the resume pass (every pending
// authorisation and movement driven again) and the settlements.
func (g *gateway) lead() {
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel, g.done = cancel, make(chan struct{})
	s := &Scheduler{Store: &scheduleReader{g.reader, g.store}, Registry: g.reg, Logger: g.deps.Logger, Now: time.Now,
		Poll: 5 * time.Millisecond, ResumePoll: 50 * time.Millisecond, Proposer: g.log}
	done := g.done
	go func() { defer close(done); s.Run(ctx) }()
}

// scheduleReader lists pending authorisations through the guard; the
// other schedules read the store (the scheduler stops before it closes).
type scheduleReader struct {
	g *guardedReader
	*persistence.Store
}

func (s *scheduleReader) PendingAuths() ([]persistence.OrderRef, error) { return s.g.PendingAuths() }

// unlead is leadership lost: the schedules stop, then every actor with
// them (node.setLeading).
func (g *gateway) unlead() {
	g.cancel()
	<-g.done
	g.reg.StopAll(false)
}

// stop is the node stopping (or killed): requests under way end first,
// then nothing reads the store any more.
func (g *gateway) stop() {
	g.requests.Wait()
	g.cancel()
	<-g.done
	g.reg.StopAll(true)
	g.reader.close()
	g.system.Shutdown()
	g.log.CloseStore()
	g.closeAcq()
}

// send puts msg to the order's actor on a goroutine of its own: the
// merchant's requests interleave with each other and with the faults.
func (g *gateway) send(id string, msg any) {
	g.requests.Go(func() { g.reg.Request(Key{"m1", id}, msg, 10*time.Second) })
}

// The gateway's ledger equals the acquirer's: random interleavings of
// charges (sale, authorisation, automatic settle), settles (full,
// partial, declined), voids and refunds (partial, declined) with dropped,
// duplicated and late answers, the acquirer down or restarted, the gateway
// restarted and leadership lost, leave, once everything is answered, every
// order's settled, voided and refunded amounts equal to what the acquirer
// captured, reversed and refunded, and nothing moved twice. The seed is in
// the subtest's name; MOVES_SEED=n repeats one.
func TestLedgersAgreeUnderRandomInterleavings(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MOVES_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	runs := 4
	if testing.Short() || os.Getenv("MOVES_SEED") != "" {
		runs = 1
	}
	for i := range runs {
		s := seed + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			interleave(t, s, 120)
			if t.Failed() {
				t.Logf("repeat with MOVES_SEED=%d go test -run 'TestLedgersAgreeUnderRandomInterleavings' ./actors/", s)
			}
		})
	}
}

func interleave(t *testing.T, seed uint64, steps int) {
	rng := mathrand.New(mathrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	kek := make([]byte, 32)
	rand.Read(kek)
	v, err := vault.New(kek)
	if err != nil {
		t.Fatal(err)
	}
	h := newSandboxHost(t)
	dir := t.TempDir()
	g := startGateway(t, dir, v, h)
	defer func() { g.stop() }()
	var ids []string
	amounts := map[string]int64{}
	pick := func() string { return ids[rng.IntN(len(ids))] }
	// amount is a random amount up to most, sometimes the whole and
	// sometimes one the sandbox declines (acquirer.MoveDeclineAmount).
	amount := func(most int64) int64 {
		switch p := rng.IntN(10); {
		case p < 3:
			return most
		case p < 5 && most >= acquirer.MoveDeclineAmount:
			return acquirer.MoveDeclineAmount
		default:
			return 1 + rng.Int64N(most)
		}
	}
	for range steps {
		switch p := rng.IntN(100); {
		case p < 25 || len(ids) == 0:
			id := fmt.Sprintf("o%d", len(ids))
			ids = append(ids, id)
			amounts[id] = 1000 + rng.Int64N(40_000)
			delay := []int64{0, 30, order.SettleManually, 24 * 365}[rng.IntN(4)]
			g.send(id, &Create{Merchant: "m1", OrderID: id, RequestHash: id,
				Data: order.CreateData{Amount: amounts[id], Currency: "USD", ProcessingMID: "mid", SettleDelayHours: delay},
				Card: &vault.Card{PAN: acquirer.CardVisaApproved, ExpMonth: "12", ExpYear: "2035", HolderName: "A B"}, CVV: "123"})
		case p < 42:
			id := pick()
			g.send(id, &Operation{Kind: order.KindSettle, Merchant: "m1", OrderID: id, Amount: amount(amounts[id])})
		case p < 50:
			id := pick()
			g.send(id, &Operation{Kind: order.KindVoid, Merchant: "m1", OrderID: id})
		case p < 65:
			id := pick()
			g.send(id, &Operation{Kind: order.KindRefund, Merchant: "m1", OrderID: id, Amount: amount(amounts[id] / 2)})
		case p < 73:
			f := host.Faults{}
			switch rng.IntN(5) {
			case 0:
				f.DropAnswers = []float64{0.5, 1}[rng.IntN(2)]
			case 1:
				f.DuplicateAnswers = 1
			case 2:
				f.LatencyMS = []int64{40, 400}[rng.IntN(2)] // the second beyond the link's timeout
			case 3:
				f.Down = true
			}
			h.host().SetFaults(f)
		case p < 80:
			h.restart()
		case p < 90:
			g.stop()
			g = startGateway(t, dir, v, h)
		default:
			g.unlead()
			g.lead()
		}
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
	}
	g.requests.Wait()
	h.host().SetFaults(host.Faults{})

	// Everything answered: no authorisation or movement pending.
	answered := func() bool {
		for _, id := range ids {
			o, err := g.store.GetOrder("m1", id)
			if err != nil {
				t.Fatal(err)
			}
			if o != nil && (o.Pending != nil || len(o.Moves) > 0 || o.Status == order.StatusProcessing) {
				return false
			}
		}
		return true
	}
	waitFor(t, 60*time.Second, "every authorisation and movement answered", answered)
	// The schedules may start an automatic settle after that (its delay
	// ran out since). Compared while such a capture was on its way, an
	// order read as authorised (its move pending) against a capture the
	// acquirer had made, about once in a hundred seeds. Stopped, the
	// schedules start nothing more; once every actor has retired (its
	// mailbox empty, no answer awaited), what they started is answered.
	g.cancel()
	<-g.done
	waitFor(t, 60*time.Second, "every actor retired, all answered", func() bool { return g.reg.Live() == 0 && answered() })
	var orders []*order.Order
	for _, id := range ids {
		if o, _ := g.store.GetOrder("m1", id); o != nil {
			orders = append(orders, o)
		}
	}
	records := h.records()
	for _, problem := range compareLedgers(orders, records) {
		t.Error(problem)
	}
	statuses, kinds := map[order.Status]int{}, map[string]int{}
	for _, o := range orders {
		statuses[o.Status]++
	}
	for _, r := range records {
		kinds[r.Kind+" "+r.Response]++
	}
	t.Logf("%d orders %v; acquirer ledger %v", len(orders), statuses, kinds)
}

// compareLedgers checks the gateway's orders against the acquirer's
// records and returns what does not match.
func compareLedgers(orders []*order.Order, records []host.Record) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	byRRN := map[string][]host.Record{}
	seen := map[string]bool{}
	for _, r := range records {
		// A message decided twice (the same kind and RRN, and for an
		// advice the same STAN and field 7) moved its money twice.
		k := r.Kind + "|" + r.RRN
		if r.Kind == host.KindCapture || r.Kind == host.KindReversal {
			k += "|" + r.STAN + r.Sent
		}
		if seen[k] {
			bad("the acquirer decided %s twice", k)
		}
		seen[k] = true
		byRRN[r.RRN] = append(byRRN[r.RRN], r)
	}
	known := map[string]bool{}
	for _, o := range orders {
		authRRN := acquirer.RRN(o.Txns[0].ID)
		known[authRRN] = true
		sale := o.Txns[0].Operation == order.OpSale
		var authorised, reversed bool
		var captured int64
		for _, r := range byRRN[authRRN] {
			switch {
			case (r.Kind == host.KindAuth || r.Kind == host.KindSale) && r.Response == acquirer.RespApproved:
				authorised = true
			case r.Kind == host.KindReversal && r.Response == acquirer.RespApproved:
				reversed = true
			case r.Kind == host.KindCapture && r.Response == acquirer.RespApproved:
				captured += r.Amount
			}
		}
		where := fmt.Sprintf("order %s (%s, amount %d, settled %d, refunded %d)", o.ID, o.Status, o.Amount, o.SettledAmount, o.RefundedAmount)
		switch o.Status {
		case order.StatusAuthorized:
			if !authorised || reversed || captured != 0 {
				bad("%s: at the acquirer authorised %t, reversed %t, captured %d", where, authorised, reversed, captured)
			}
		case order.StatusDeclined:
			if captured != 0 || authorised && !reversed {
				bad("%s: declined, but at the acquirer authorised %t, reversed %t, captured %d", where, authorised, reversed, captured)
			}
		case order.StatusVoided:
			if !reversed || captured != 0 {
				bad("%s: voided, but at the acquirer reversed %t, captured %d", where, reversed, captured)
			}
		case order.StatusSettled, order.StatusRefunded:
			switch {
			case reversed || !authorised:
				bad("%s: at the acquirer authorised %t, reversed %t", where, authorised, reversed)
			case sale && (o.SettledAmount != o.Amount || captured != 0):
				bad("%s: a sale, captured %d at the acquirer", where, captured)
			case !sale && captured != o.SettledAmount:
				bad("%s: captured %d at the acquirer", where, captured)
			}
		default:
			bad("%s: unexpected status", where)
		}
		var refunded, settled int64
		for _, tx := range o.Txns {
			switch tx.Operation {
			case order.OpSettle:
				if tx.Status == order.TxnSuccess {
					settled += tx.Amount
				}
			case order.OpRefund:
				rrn := acquirer.RRN(tx.ID)
				known[rrn] = true
				var approved, declined int
				for _, r := range byRRN[rrn] {
					switch {
					case r.Kind != host.KindRefund:
						bad("%s: a %s record with refund %s's RRN", where, r.Kind, tx.ID)
					case r.Response == acquirer.RespApproved && r.Amount == tx.Amount:
						approved++
					case r.Response != acquirer.RespApproved:
						declined++
					default:
						bad("%s: refund %s of %d refunded %d at the acquirer", where, tx.ID, tx.Amount, r.Amount)
					}
				}
				switch tx.Status {
				case order.TxnSuccess:
					refunded += tx.Amount
					if approved != 1 {
						bad("%s: refund %s success, %d approved at the acquirer", where, tx.ID, approved)
					}
				case order.TxnFail:
					if approved != 0 || declined != 1 {
						bad("%s: refund %s fail, %d approved and %d declined at the acquirer", where, tx.ID, approved, declined)
					}
				default:
					bad("%s: refund %s %s once everything is answered", where, tx.ID, tx.Status)
				}
			}
		}
		if refunded != o.RefundedAmount || !sale && settled != o.SettledAmount {
			bad("%s: transactions refunded %d and settled %d", where, refunded, settled)
		}
	}
	for _, r := range records {
		if !known[r.RRN] && r.Response == acquirer.RespApproved {
			bad("the acquirer has an approved %s of %d (RRN %s) the gateway does not know", r.Kind, r.Amount, r.RRN)
		}
	}
	return problems
}

// The comparison finds what it is there to find: a capture decided twice,
// an amount that differs, a refund the gateway does not know.
func TestCompareLedgersFindsDifferences(t *testing.T) {
	o := &order.Order{ID: "o1", Status: order.StatusSettled, Amount: 1000, SettledAmount: 600,
		Txns: []order.Transaction{{ID: "a1", Operation: order.OpAuth, Status: order.TxnSuccess, Amount: 1000},
			{ID: "s1", Operation: order.OpSettle, Status: order.TxnSuccess, Amount: 600}}}
	auth := host.Record{Kind: host.KindAuth, RRN: acquirer.RRN("a1"), Amount: 1000, Response: "00"}
	capture := host.Record{Kind: host.KindCapture, RRN: acquirer.RRN("a1"), Sent: "1128103000", Amount: 600, Response: "00"}
	if p := compareLedgers([]*order.Order{o}, []host.Record{auth, capture}); len(p) != 0 {
		t.Fatalf("equal ledgers: %v", p)
	}
	for name, recs := range map[string][]host.Record{
		"decided twice":  {auth, capture, capture},
		"amount":         {auth, {Kind: host.KindCapture, RRN: capture.RRN, Sent: capture.Sent, Amount: 700, Response: "00"}},
		"not captured":   {auth},
		"unknown refund": {auth, capture, {Kind: host.KindRefund, RRN: "ZZZZZZZZZZZZ", Amount: 5, Response: "00"}},
	} {
		if p := compareLedgers([]*order.Order{o}, recs); len(p) == 0 {
			t.Errorf("%s: no difference found", name)
		}
	}
}
