package actors

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/persistence/persistencetest"
	"github.com/paygate/gateway/persistence/vault"
	"github.com/paygate/gateway/transport/acquirer"
)

type fixture struct {
	store    *persistence.Store
	proposer *persistencetest.Log
	acq      *testAcquirer
	reg      *Registry
	deps     *Deps
	stop     func() // stops the actors and closes the store; once
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	kek := make([]byte, 32)
	rand.Read(kek)
	v, err := vault.New(kek)
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureIn(t, t.TempDir(), v, time.Now)
}

// fixtureIDs numbers transactions and tokens across fixtures, so that a
// fixture restarted on the same store makes no id twice.
var fixtureIDs atomic.Int64

// newFixtureIn opens the store in dir: a test that stops a fixture and makes
// another on the same dir and vault sees what a restarted node sees.
func newFixtureIn(t *testing.T, dir string, v *vault.Vault, now func() time.Time) *fixture {
	t.Helper()
	return newFixtureWith(t, dir, v, now, newTestAcquirer(t, 0))
}

// newFixtureWith is newFixtureIn with the acquirer given.
func newFixtureWith(t *testing.T, dir string, v *vault.Vault, now func() time.Time, acq *testAcquirer) *fixture {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(dir, logger)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: store, proposer: persistencetest.NewLog(store), acq: acq}
	f.deps = &Deps{
		Proposer: f.proposer, Store: store, Acquirer: f.acq, Vault: v, Logger: logger,
		Now: now, NewID: func() string { return fmt.Sprintf("id-%06d", fixtureIDs.Add(1)) },
		SettleUnit: time.Millisecond, TokenTTL: time.Hour,
		ProposeTimeout: 5 * time.Second, AuthAttempts: 3,
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	f.reg = NewRegistry(system, NewOrderActorProducer(f.deps, func() *Registry { return f.reg }))
	f.stop = sync.OnceFunc(func() {
		f.reg.StopAll(true)
		system.Shutdown()
		// The store is closed last, as a node closes its store once raft has
		// stopped: an acquirer's answer still on its way then finds no log
		// to propose to.
		f.proposer.CloseStore()
	})
	t.Cleanup(f.stop)
	return f
}

func (f *fixture) create(t *testing.T, merchant, id, hash string, delay int64) *Reply {
	t.Helper()
	msg := &Create{
		Merchant: merchant, OrderID: id, RequestHash: hash,
		Data: order.CreateData{Amount: 1000, Currency: "USD", ProcessingMID: "mid", SettleDelayHours: delay},
		Card: f.card(),
		CVV:  "123",
	}
	r, err := f.reg.Request(Key{merchant, id}, msg, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return r.(*Reply)
}

func (f *fixture) card() *vault.Card {
	return &vault.Card{PAN: "4111111111111111", ExpMonth: "12", ExpYear: "2035", HolderName: "A B"}
}

func (f *fixture) waitStatus(t *testing.T, merchant, id string, want order.Status) *order.Order {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		o, err := f.store.GetOrder(merchant, id)
		if err != nil {
			t.Fatal(err)
		}
		if o != nil && o.Status == want {
			return o
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("order %s never reached %s", id, want)
	return nil
}

// An auth (order.SettleManually) is authorised like a charge, with a token,
// but its approval schedules no automatic settle: nothing is due for it.
func TestAuthSchedulesNoSettle(t *testing.T) {
	f := newFixture(t)
	if r := f.create(t, "m1", "auth1", "h1", order.SettleManually); r.Err != nil || r.Reject != nil ||
		r.Order.Txns[0].Operation != order.OpAuth {
		t.Fatalf("create: %+v", r)
	}
	o := f.waitStatus(t, "m1", "auth1", order.StatusAuthorized)
	if o.AutoSettleAt != 0 || o.Source.PaymentToken == "" {
		t.Fatalf("authorised auth: auto_settle_at %d, token %q", o.AutoSettleAt, o.Source.PaymentToken)
	}
}

func TestCreateAuthorisesAndIssuesToken(t *testing.T) {
	f := newFixture(t)
	r := f.create(t, "m1", "o1", "h1", 24)
	if r.Err != nil || r.Reject != nil || r.Order.Status != order.StatusProcessing {
		t.Fatalf("create: %+v", r)
	}
	o := f.waitStatus(t, "m1", "o1", order.StatusAuthorized)
	if o.Source.PaymentToken == "" || o.Pending != nil || o.AutoSettleAt == 0 {
		t.Fatalf("authorised order: %+v", o)
	}
	if tok, _ := f.store.Token(o.Source.PaymentToken); tok == nil || tok.Merchant != "m1" {
		t.Fatalf("token record: %+v", tok)
	}
	if got := f.acq.Authorizations(o.Txns[0].ID); got != 1 {
		t.Fatalf("authorisations = %d, want 1", got)
	}
}

// A token charge repeated with the same body answers its order (contract
// section 5) even once the token has expired and the order is no longer in
// the decoded-order cache, as after a restart: the order is found before the
// token is resolved.
func TestRepeatedTokenChargeAfterTheTokenExpired(t *testing.T) {
	dir := t.TempDir()
	kek := make([]byte, 32)
	rand.Read(kek)
	v, err := vault.New(kek)
	if err != nil {
		t.Fatal(err)
	}
	var later atomic.Int64 // how far the clock is moved on
	now := func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
	f := newFixtureIn(t, dir, v, now)
	f.create(t, "m1", "card-order", "h-card", 24)
	tok := f.waitStatus(t, "m1", "card-order", order.StatusAuthorized).Source.PaymentToken
	charge := &Create{Merchant: "m1", OrderID: "tok-order", RequestHash: "h-tok", Token: tok,
		Data: order.CreateData{Amount: 500, Currency: "USD", ProcessingMID: "mid", SettleDelayHours: 24}}
	if r, err := f.reg.Request(Key{"m1", "tok-order"}, charge, 5*time.Second); err != nil || r.(*Reply).Err != nil || r.(*Reply).Reject != nil {
		t.Fatalf("token charge: %v %+v", err, r)
	}
	first := f.waitStatus(t, "m1", "tok-order", order.StatusAuthorized)
	f.stop()

	later.Store(int64(2 * f.deps.TokenTTL)) // the token has expired
	g := newFixtureIn(t, dir, v, now)       // and the order cache is empty
	if g.store.CachedOrder("m1", "tok-order") != nil {
		t.Fatal("a reopened store should not have the order cached")
	}
	r, err := g.reg.Request(Key{"m1", "tok-order"}, charge, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rep := r.(*Reply)
	if rep.Err != nil || rep.Reject != nil || rep.Order == nil || rep.Order.Status != order.StatusAuthorized || rep.TxnID != first.Txns[0].ID {
		t.Fatalf("repeated token charge: want the authorised order, got err %v, reject %+v, order %+v", rep.Err, rep.Reject, rep.Order)
	}
	if n := g.acq.Authorizations(first.Txns[0].ID); n != 0 {
		t.Fatalf("the repeat asked the acquirer %d times", n)
	}
	// A different body for the same order_id is still a conflict, not a token error.
	other := *charge
	other.RequestHash = "h-other"
	r, _ = g.reg.Request(Key{"m1", "tok-order"}, &other, 5*time.Second)
	if rep := r.(*Reply); rep.Reject == nil || rep.Reject.Kind != order.RejectConflict {
		t.Fatalf("different body: want a conflict, got err %v, reject %+v", rep.Err, rep.Reject)
	}
}

// recordingProposer keeps the encoding of every order command it proposes:
// what the replicated log would hold.
type recordingProposer struct {
	*persistencetest.Log
	mu   sync.Mutex
	logs [][]byte
}

func (p *recordingProposer) Propose(ctx context.Context, cmd *command.Cmd) (persistence.Result, error) {
	if cmd.Order != nil {
		p.mu.Lock()
		p.logs = append(p.logs, command.AppendCommand(nil, cmd.Order))
		p.mu.Unlock()
	}
	return p.Log.Propose(ctx, cmd)
}

func (p *recordingProposer) proposed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.logs)
}

// A token charge's CVV goes to the acquirer (cvv_check M) and into no
// command (contract section 8: never stored, the replicated log included).
// One that does not fit the token's card is refused 2.06 before anything is
// proposed.
func TestTokenChargeCVVReachesOnlyTheAcquirer(t *testing.T) {
	f := newFixture(t)
	rec := &recordingProposer{Log: f.proposer}
	f.deps.Proposer = rec
	f.create(t, "m1", "card-order", "h-card", 24)
	tok := f.waitStatus(t, "m1", "card-order", order.StatusAuthorized).Source.PaymentToken
	charge := func(id, cvv string) *Reply {
		msg := &Create{Merchant: "m1", OrderID: id, RequestHash: "h-" + id, Token: tok, CVV: cvv,
			Data: order.CreateData{Amount: 500, Currency: "USD", ProcessingMID: "mid", SettleDelayHours: 24}}
		r, err := f.reg.Request(Key{"m1", id}, msg, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return r.(*Reply)
	}

	proposed := rec.proposed()
	if r := charge("tok-4", "7391"); r.Err != nil || r.Reject == nil || r.Reject.Kind != order.RejectCVV ||
		r.Reject.Attribute != "payment_source.card_cvv" {
		t.Fatalf("4-digit CVV on a Visa token: want RejectCVV on payment_source.card_cvv, got %+v", r)
	}
	if rec.proposed() != proposed {
		t.Fatal("a refused token charge proposed a command")
	}

	if r := charge("tok-3", "739"); r.Err != nil || r.Reject != nil {
		t.Fatalf("token charge: %+v", r)
	}
	if o := f.waitStatus(t, "m1", "tok-3", order.StatusAuthorized); o.CVVCheck != acquirer.CVVMatch {
		t.Fatalf("cvv_check %q, want %q: the CVV did not reach the acquirer", o.CVVCheck, acquirer.CVVMatch)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, b := range rec.logs {
		if bytes.Contains(b, []byte("739")) {
			t.Fatalf("a proposed command carries the CVV: %q", b)
		}
	}
}

// Concurrent identical creates are serialised by the actor: one order, one
// proposal of a create, one authorisation.
func TestConcurrentIdenticalCreatesChargeOnce(t *testing.T) {
	f := newFixture(t)
	var wg sync.WaitGroup
	txns := make([]string, 40)
	for i := range txns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := f.create(t, "m1", "same", "h", 24)
			if r.Err != nil || r.Reject != nil {
				t.Errorf("create %d: %+v", i, r)
				return
			}
			txns[i] = r.TxnID
		}()
	}
	wg.Wait()
	for _, id := range txns {
		if id != txns[0] {
			t.Fatalf("different transactions: %v", txns)
		}
	}
	f.waitStatus(t, "m1", "same", order.StatusAuthorized)
	if n := f.acq.Total(); n != 1 {
		t.Fatalf("acquirer authorisations = %d, want 1", n)
	}
	if r := f.create(t, "m1", "same", "other-hash", 24); r.Reject == nil || r.Reject.Kind != order.RejectConflict {
		t.Fatalf("a different request with the same order_id: %+v", r)
	}
}

// An actor waiting for the acquirer's answer stays for it; once it has
// nothing left to do it retires at once, without a timer.
func TestActorStaysForItsAnswerThenRetires(t *testing.T) {
	f := newFixture(t)
	f.deps.Acquirer = newTestAcquirer(t, 200*time.Millisecond)
	if r := f.create(t, "m1", "slow", "h", 24); r.Order.Status != order.StatusProcessing {
		t.Fatalf("create: %+v", r)
	}
	if n := f.reg.Live(); n != 1 {
		t.Fatalf("%d actors live while the acquirer answers, want 1", n)
	}
	f.waitStatus(t, "m1", "slow", order.StatusAuthorized)
	waitNoActors(t, f.reg)
	// A request that fails the state machine leaves nothing behind either.
	f.reg.Request(Key{"m1", "slow"}, &Operation{Kind: order.KindRefund, Merchant: "m1", OrderID: "slow", Amount: 1}, 5*time.Second)
	waitNoActors(t, f.reg)
}

func waitNoActors(t *testing.T, reg *Registry) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for reg.Live() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := reg.Live(); n != 0 {
		t.Fatalf("%d actors still live with nothing to do", n)
	}
}

// Quiet actors retire; messages sent while they retire are never lost.
func TestQuietActorsRetireWithoutLosingMessages(t *testing.T) {
	f := newFixture(t)
	for i := range 20 {
		f.create(t, "m1", fmt.Sprintf("o%d", i), "h", 24)
	}
	for i := range 20 {
		f.waitStatus(t, "m1", fmt.Sprintf("o%d", i), order.StatusAuthorized)
	}
	waitNoActors(t, f.reg)
	// Hammer: requests race with retirement; every one must be answered.
	var wg sync.WaitGroup
	var answered atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				id := fmt.Sprintf("o%d", (g*50+i)%20)
				r, err := f.reg.Request(Key{"m1", id}, &Operation{Kind: order.KindVoid, Merchant: "m1", OrderID: id}, 5*time.Second)
				if err != nil {
					t.Errorf("request lost: %v", err)
					return
				}
				if _, ok := r.(*Reply); ok {
					answered.Add(1)
				}
				time.Sleep(time.Duration(i%3) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if answered.Load() != 400 {
		t.Fatalf("answered %d of 400", answered.Load())
	}
	// Each order was voided exactly once; the rest were refused.
	for i := range 20 {
		o, _ := f.store.GetOrder("m1", fmt.Sprintf("o%d", i))
		if o.Status != order.StatusVoided || len(o.Txns) != 2 {
			t.Fatalf("order %d: %s with %d transactions", i, o.Status, len(o.Txns))
		}
	}
}

func TestSchedulerSettlesAndResumes(t *testing.T) {
	f := newFixture(t)
	f.create(t, "m1", "auto", "h", 5) // 5 ms with SettleUnit = 1 ms
	f.waitStatus(t, "m1", "auto", order.StatusAuthorized)
	// A pending authorisation as a crash would leave it: proposed, never answered.
	cmd := &order.Command{Kind: order.KindCreate, Time: time.Now().UnixNano(), Merchant: "m1", OrderID: "left",
		TxnID: "txn-left", RequestHash: "h", Create: &order.CreateData{Amount: 50, Currency: "USD", ProcessingMID: "mid", SettleDelayHours: 24}}
	o, _ := f.store.GetOrder("m1", "auto")
	cmd.Create.Source = o.Source // reuse the sealed card of "auto"
	if _, err := f.proposer.Propose(context.Background(), &command.Cmd{Order: cmd}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	// Stop the scheduler before the fixture closes the store under it.
	t.Cleanup(func() { cancel(); <-done })
	s := &Scheduler{Store: f.store, Registry: f.reg, Logger: f.deps.Logger, Now: time.Now, Poll: 2 * time.Millisecond}
	go func() { defer close(done); s.Run(ctx) }()
	settled := f.waitStatus(t, "m1", "auto", order.StatusSettled)
	if settled.SettledAmount != 1000 || len(settled.Txns) != 2 {
		t.Fatalf("auto-settle: %+v", settled)
	}
	f.waitStatus(t, "m1", "left", order.StatusAuthorized)
	if n := f.acq.Authorizations("txn-left"); n != 1 {
		t.Fatalf("resumed authorisation made %d authorisations", n)
	}
}

// gatedProposer holds every proposal until its gate lets it through.
type gatedProposer struct {
	next Proposer
	gate chan struct{}
}

func (g *gatedProposer) Propose(ctx context.Context, cmd *command.Cmd) (persistence.Result, error) {
	<-g.gate
	return g.next.Propose(ctx, cmd)
}

// A request's caller runs an idle actor itself (registry.go), but once its
// own message is answered it leaves whatever queued up behind it to another
// goroutine: here the requests behind it cannot finish before it has
// returned, so a caller that went on serving the queue would never return.
func TestRequestCallerDoesNotServeTheQueueBehindIt(t *testing.T) {
	f := newFixture(t)
	f.create(t, "m1", "busy", "h", 24)
	f.waitStatus(t, "m1", "busy", order.StatusAuthorized)
	waitNoActors(t, f.reg)
	gate := make(chan struct{})
	f.deps.Proposer = &gatedProposer{next: f.proposer, gate: gate}

	op := func(kind order.Kind, key string) *Operation {
		return &Operation{Kind: kind, Merchant: "m1", OrderID: "busy", Amount: 100, IdempotencyKey: key, RequestHash: key}
	}
	first := make(chan any, 1)
	go func() {
		r, err := f.reg.Request(Key{"m1", "busy"}, op(order.KindSettle, "a"), 10*time.Second)
		if err != nil {
			r = err
		}
		first <- r
	}()
	waitSent(t, f.reg, Key{"m1", "busy"}, 1)
	// Queue two refunds behind the settle, which waits at the gate; each
	// of them will wait there too until the end.
	var wg sync.WaitGroup
	for _, k := range []string{"b", "c"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.reg.Request(Key{"m1", "busy"}, op(order.KindRefund, k), 10*time.Second)
		}()
	}
	waitSent(t, f.reg, Key{"m1", "busy"}, 3)
	gate <- struct{}{} // the first request's two proposals only: the settle
	gate <- struct{}{} // recorded, then the acquirer's answer
	select {
	case r := <-first:
		if rep, ok := r.(*Reply); !ok || rep.Err != nil {
			t.Fatalf("first request: %#v", r)
		}
	case <-time.After(5 * time.Second):
		close(gate)
		t.Fatal("the first caller did not return while requests queued behind it waited")
	}
	close(gate)
	wg.Wait()
}

// waitSent waits until the key's live actor has been sent n messages.
func waitSent(t *testing.T, r *Registry, k Key, n uint64) {
	t.Helper()
	sent := func() uint64 {
		s := r.shard(k)
		s.mu.Lock()
		defer s.mu.Unlock()
		if e := s.m[k]; e != nil {
			return e.sent
		}
		return 0
	}
	deadline := time.Now().Add(5 * time.Second)
	for sent() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d messages sent to %v, want %d", sent(), k, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// settleFails fails the settlements of some orders, as a leadership change
// in the middle of a proposal would.
type settleFails struct {
	next   Proposer
	orders map[string]bool
}

func (p *settleFails) Propose(ctx context.Context, cmd *command.Cmd) (persistence.Result, error) {
	if cmd.Order != nil && cmd.Order.Kind == order.KindSettle && p.orders[cmd.Order.OrderID] {
		return persistence.Result{}, errors.New("not the leader")
	}
	return p.next.Propose(ctx, cmd)
}

// One pass of the scheduler settles everything due, however many pages
// that takes, and ends although entries it lists do not settle: the pass
// moves past them (the next poll tries them again) instead of listing them
// again and again.
func TestSchedulerWorksThroughTheBacklog(t *testing.T) {
	f := newFixture(t)
	stuck := []string{"stuck-1", "stuck-2"} // first in the schedule: a page's worth
	for _, id := range stuck {
		f.create(t, "m1", id, "h", 1) // 1 ms with SettleUnit = 1 ms
		time.Sleep(time.Millisecond)
	}
	const orders = 21
	for i := range orders {
		f.create(t, "m1", fmt.Sprintf("due-%02d", i), "h", 1)
	}
	for _, id := range stuck {
		f.waitStatus(t, "m1", id, order.StatusAuthorized)
	}
	for i := range orders {
		f.waitStatus(t, "m1", fmt.Sprintf("due-%02d", i), order.StatusAuthorized)
	}
	time.Sleep(5 * time.Millisecond) // past the delays
	f.deps.Proposer = &settleFails{next: f.proposer, orders: map[string]bool{stuck[0]: true, stuck[1]: true}}
	s := &Scheduler{Store: f.store, Registry: f.reg, Logger: f.deps.Logger, Now: time.Now, PageSize: len(stuck)}
	counted := autoSettlements.Get()
	passed := make(chan struct{})
	go func() { defer close(passed); s.settleDue(context.Background()) }()
	select {
	case <-passed:
	case <-time.After(10 * time.Second):
		t.Fatal("the pass did not end")
	}
	for i := range orders {
		id := fmt.Sprintf("due-%02d", i)
		if o, _ := f.store.GetOrder("m1", id); o.Status != order.StatusSettled {
			t.Fatalf("%s after one pass: %s", id, o.Status)
		}
	}
	for _, id := range stuck {
		if o, _ := f.store.GetOrder("m1", id); o.Status != order.StatusAuthorized {
			t.Fatalf("%s, whose settlement failed: %s", id, o.Status)
		}
	}
	if n := autoSettlements.Get() - counted; n != orders {
		t.Fatalf("gateway_auto_settlements_total went up by %d, want %d", n, orders)
	}
}

// outcomeFails fails the first acquirer outcome proposed to it, as a
// commit lost to a full queue or a storage error would, and passes the rest.
type outcomeFails struct {
	next   Proposer
	failed atomic.Bool
}

func (p *outcomeFails) Propose(ctx context.Context, cmd *command.Cmd) (persistence.Result, error) {
	if cmd.Order != nil && cmd.Order.Kind == order.KindAuthOutcome && p.failed.CompareAndSwap(false, true) {
		return persistence.Result{}, errors.New("not committed")
	}
	return p.next.Propose(ctx, cmd)
}

// An authorisation whose outcome failed to commit is taken on again by the
// scheduler while the same node leads: it does not stay processing until a
// leader change. The acquirer is asked with the same reference.
func TestSchedulerResumesAnOutcomeThatFailedToCommit(t *testing.T) {
	f := newFixture(t)
	fails := &outcomeFails{next: f.proposer}
	f.deps.Proposer = fails
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	s := &Scheduler{Store: f.store, Registry: f.reg, Logger: f.deps.Logger, Now: time.Now, Poll: time.Second,
		ResumePoll: 20 * time.Millisecond, Proposer: fails}
	go func() { defer close(done); s.Run(ctx) }()
	r := f.create(t, "m1", "stuck", "h-stuck", 24)
	if r.Err != nil || r.Reject != nil {
		t.Fatalf("charge: %+v", r)
	}
	o := f.waitStatus(t, "m1", "stuck", order.StatusAuthorized)
	if !fails.failed.Load() {
		t.Fatal("the first outcome was not the failed one")
	}
	if n := f.acq.Authorizations(o.Txns[0].ID); n != 1 {
		t.Fatalf("%d authorisations for the reference", n)
	}
}
