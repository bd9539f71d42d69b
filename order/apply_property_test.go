package order_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/paygate/gateway/order"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the randomised order tests (0: from the clock)")

// testSeed returns the seed to use and prints it so a failure can be replayed
// with -seed.
func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed=%d (replay: go test ./order/ -run %s -seed=%d)", seed, t.Name(), seed)
	return seed
}

// contractMoves is contract section 4 as data: from status (empty: no order)
// and command kind to the statuses the order may move to. Staying in the same
// status is listed where the contract allows it (a partial refund).
var contractMoves = map[order.Status]map[order.Kind][]order.Status{
	"": {order.KindCreate: {order.StatusProcessing}, order.KindInitPayment: {order.StatusCreated}},
	order.StatusCreated: {
		order.KindFormSubmit: {order.StatusProcessing},
		order.KindExpire:     {order.StatusExpired},
	},
	order.StatusProcessing: {
		order.KindAuthOutcome:      {order.StatusAuthorized, order.StatusDeclined, order.StatusSettled},
		order.KindThreeDSChallenge: {order.StatusProcessing},
		order.KindThreeDSResult:    {order.StatusProcessing, order.StatusDeclined},
		order.KindNonSecure:        {order.StatusProcessing},
	},
	order.StatusAuthorized: {
		order.KindSettle: {order.StatusSettled},
		order.KindVoid:   {order.StatusVoided},
	},
	order.StatusSettled: {order.KindRefund: {order.StatusSettled, order.StatusRefunded}},
}

// gen produces commands that are plausible for the current order: mostly
// valid, with amounts at and around every boundary, stale answers, replays
// and conflicts mixed in.
type gen struct {
	rng  *rand.Rand
	now  int64
	next int // transaction id counter
}

func (g *gen) pick(xs ...int64) int64 { return xs[g.rng.IntN(len(xs))] }

func (g *gen) command(cur *order.Order) *order.Command {
	g.now += fxSecond
	g.next++
	id := fmt.Sprintf("t%d", g.next)
	cmd := &order.Command{Time: g.now, Merchant: "m1", OrderID: "o1", TxnID: id, ARN: "arn-" + id}
	if g.formCommand(cur, cmd) {
		return cmd
	}
	var amount, settled, left int64 = 1, 0, 0
	if cur != nil {
		amount, settled, left = cur.Amount, cur.SettledAmount, cur.SettledAmount-cur.RefundedAmount
	}
	switch r := g.rng.IntN(100); {
	case cur == nil && r < 90, r < 5:
		cmd.Kind, cmd.ARN = order.KindCreate, ""
		cmd.RequestHash = []string{"h1", "h1", "h2"}[g.rng.IntN(3)]
		cmd.Create = &order.CreateData{Amount: 1 + g.rng.Int64N(5000), Currency: "USD",
			ProcessingMID: "mid1", SettleDelayHours: g.pick(0, 24, 72),
			Source: order.PaymentSource{Type: "card", Billing: &order.Address{City: "X"}}}
		if g.rng.IntN(3) == 0 {
			cmd.Create.ThreeDS = &order.ThreeDS{ECI: "05"}
		}
	case r < 30:
		cmd.Kind = order.KindAuthOutcome
		cmd.TxnID = "t1"
		if cur != nil && cur.Pending != nil && g.rng.IntN(10) > 0 {
			cmd.TxnID = cur.Pending.TxnID
		}
		ok := g.rng.IntN(3) > 0
		cmd.Outcome = &order.OutcomeData{Approved: ok, AuthCode: "A" + id, AVSCheck: "Y",
			RiskDecision: "accept", PaymentToken: "tok-" + id, TokenExpiresAt: g.now + 1e12,
			AutoSettleAt: g.now + g.pick(0, 3600*fxSecond)}
		if !ok {
			cmd.Outcome.DeclineCode, cmd.Outcome.DeclineMessage = "3.02", "insufficient funds"
		}
	case r < 50:
		cmd.Kind = order.KindSettle
		cmd.Amount = g.pick(-1, 0, 1, amount, amount+1, 1+g.rng.Int64N(amount))
	case r < 58:
		cmd.Kind, cmd.Auto = order.KindSettle, true
		cmd.Amount = g.pick(0, 1)
	case r < 68:
		cmd.Kind = order.KindVoid
	default:
		cmd.Kind = order.KindRefund
		cmd.RefundReasonCode = []string{"", "1234"}[g.rng.IntN(2)]
		cmd.Amount = g.pick(-1, 0, 1, left, left+1, settled, 1+g.rng.Int64N(max(left, 1)))
	}
	return cmd
}

func cloneCommand(c *order.Command) *order.Command {
	d := *c
	if c.Create != nil {
		cd := *c.Create
		cd.Source.Billing = ptrClone(c.Create.Source.Billing)
		cd.ThreeDS = ptrClone(c.Create.ThreeDS)
		d.Create = &cd
	}
	if c.Outcome != nil {
		d.Outcome = ptrClone(c.Outcome)
	}
	d.Form, d.Challenge = ptrClone(c.Form), ptrClone(c.Challenge)
	if c.Submit != nil {
		sd := *c.Submit
		sd.Source.Billing = ptrClone(c.Submit.Source.Billing)
		d.Submit = &sd
	}
	if c.ThreeDSResult != nil {
		r := *c.ThreeDSResult
		r.Result = ptrClone(c.ThreeDSResult.Result)
		d.ThreeDSResult = &r
	}
	return &d
}

func ptrClone[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// stepBytes is everything observable about one step, for the determinism check.
func stepBytes(t *testing.T, next *order.Order, out order.Outcome) []byte {
	b, err := json.Marshal(struct {
		Order   *order.Order
		Outcome order.Outcome
	}{next, out})
	if err != nil {
		t.Fatal(err)
	}
	if next != nil {
		b = append(b, order.NewView(next, order.WithAllTxns, "").Marshal()...)
		b = append(b, order.NewView(next, order.WithTxn, out.TxnID).Marshal()...)
	}
	return b
}

// TestApplyProperties applies seeded random command sequences from no order
// and checks the invariants of contract section 4 after every step, then
// applies each sequence again and requires the same bytes at every step.
func TestApplyProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 0x9e3779b97f4a7c15))
	const runs, steps = 300, 40
	accepted, reached := map[order.Kind]int{}, map[order.Status]int{}
	for run := range runs {
		g := &gen{rng: rng, now: fxEpoch}
		var cur *order.Order
		var cmds []*order.Command
		var trace [][]byte
		for step := range steps {
			cmd := g.command(cur)
			where := fmt.Sprintf("run %d step %d %s", run, step, describe(cmd))
			cmdBefore, curBefore := cloneCommand(cmd), cur.Clone()
			next, out := order.Apply(cur, cmd)
			if !reflect.DeepEqual(cur, curBefore) {
				t.Fatalf("%s: Apply mutated its input order", where)
			}
			if !reflect.DeepEqual(cmd, cmdBefore) {
				t.Fatalf("%s: Apply mutated its command", where)
			}
			checkStep(t, where, cur, cmd, next, out)
			cmds = append(cmds, cmdBefore)
			trace = append(trace, stepBytes(t, next, out))
			if out.Changed() {
				accepted[cmd.Kind]++
				reached[next.Status]++
				checkNoAliasing(t, where, cur, cmd, next)
			}
			cur = next
		}
		// The same commands again, from no order: the same bytes at every step.
		cur = nil
		for step, cmd := range cmds {
			next, out := order.Apply(cur, cmd)
			if b := stepBytes(t, next, out); !bytes.Equal(b, trace[step]) {
				t.Fatalf("run %d step %d: replay differs:\nfirst  %s\nsecond %s", run, step, trace[step], b)
			}
			cur = next
		}
	}
	t.Logf("accepted commands by kind: %v; statuses reached: %v", accepted, reached)
	for _, s := range []order.Status{order.StatusCreated, order.StatusExpired, order.StatusProcessing,
		order.StatusAuthorized, order.StatusDeclined, order.StatusSettled, order.StatusVoided, order.StatusRefunded} {
		if reached[s] == 0 {
			t.Errorf("the generator never reached status %s", s)
		}
	}
	for _, k := range []order.Kind{order.KindCreate, order.KindAuthOutcome, order.KindSettle,
		order.KindVoid, order.KindRefund} {
		if accepted[k] < 20 {
			t.Errorf("only %d accepted %s commands: the generator does not reach it", accepted[k], k)
		}
	}
	for _, k := range []order.Kind{order.KindInitPayment, order.KindFormSubmit, order.KindExpire,
		order.KindThreeDSChallenge, order.KindThreeDSResult, order.KindNonSecure} {
		if accepted[k] < 10 {
			t.Errorf("only %d accepted %s commands: the generator does not reach it", accepted[k], k)
		}
	}
}

// checkStep checks one step against the contract and the Apply godoc.
func checkStep(t *testing.T, where string, cur *order.Order, cmd *order.Command, next *order.Order, out order.Outcome) {
	t.Helper()
	if !out.Changed() {
		if next != cur {
			t.Fatalf("%s: refused or replayed, but returned a new order", where)
		}
		if out.StatusChanged || out.Created {
			t.Fatalf("%s: refused or replayed, but reports a change: %+v", where, out)
		}
		return
	}
	if next == nil || next == cur {
		t.Fatalf("%s: a change must return a new order", where)
	}
	var from order.Status
	var wantVersion uint64 = 1
	if cur != nil {
		from, wantVersion = cur.Status, cur.Version+1
	}
	if next.Version != wantVersion {
		t.Fatalf("%s: version %d, want %d", where, next.Version, wantVersion)
	}
	if next.UpdatedAt != cmd.Time {
		t.Fatalf("%s: updated_at %d, want the command's time %d", where, next.UpdatedAt, cmd.Time)
	}
	if !contains(contractMoves[from][cmd.Kind], next.Status) {
		t.Fatalf("%s: %q -> %q is not in contract section 4", where, from, next.Status)
	}
	if out.Created != (cur == nil) || out.StatusChanged != (cur != nil && cur.Status != next.Status) {
		t.Fatalf("%s: outcome %+v for %q -> %q", where, out, from, next.Status)
	}
	if out.TxnID != cmd.TxnID {
		t.Fatalf("%s: outcome names txn %q, want %q", where, out.TxnID, cmd.TxnID)
	}
	checkOrder(t, where, next)
	wantTxns := 0
	if cur != nil {
		wantTxns = len(cur.Txns)
	}
	if createsTxn(cmd.Kind) {
		wantTxns++
	}
	if len(next.Txns) != wantTxns {
		t.Fatalf("%s: %d transactions, want %d", where, len(next.Txns), wantTxns)
	}
}

// checkOrder checks what must hold of every order Apply returns.
func checkOrder(t *testing.T, where string, o *order.Order) {
	t.Helper()
	if !(0 <= o.RefundedAmount && o.RefundedAmount <= o.SettledAmount && o.SettledAmount <= o.Amount) {
		t.Fatalf("%s: want 0 <= refunded %d <= settled %d <= amount %d",
			where, o.RefundedAmount, o.SettledAmount, o.Amount)
	}
	if (o.Status == order.StatusRefunded) != (o.RefundedAmount == o.SettledAmount && o.SettledAmount > 0) {
		t.Fatalf("%s: status %s with settled %d refunded %d", where, o.Status, o.SettledAmount, o.RefundedAmount)
	}
	if (o.Pending != nil) != (o.Status == order.StatusProcessing) {
		t.Fatalf("%s: pending %v in status %s", where, o.Pending, o.Status)
	}
	if o.Pending != nil && (o.Pending.Challenge != "") != (o.Txns[0].Status == order.TxnVerify) {
		t.Fatalf("%s: challenge %q with the payment's transaction in %s", where, o.Pending.Challenge, o.Txns[0].Status)
	}
	if (o.Status == order.StatusCreated || o.Status == order.StatusExpired) != (len(o.Txns) == 0) {
		t.Fatalf("%s: %d transactions in status %s", where, len(o.Txns), o.Status)
	}
	if (o.Decline != nil) != (o.Status == order.StatusDeclined) {
		t.Fatalf("%s: decline %v in status %s", where, o.Decline, o.Status)
	}
	if o.AutoSettleAt != 0 && o.Status != order.StatusAuthorized {
		t.Fatalf("%s: auto-settle still scheduled in status %s", where, o.Status)
	}
	// The amounts are the sum of the successful money movements.
	var settled, refunded int64
	ids := map[string]bool{}
	for i, x := range o.Txns {
		if ids[x.ID] {
			t.Fatalf("%s: transaction id %s twice", where, x.ID)
		}
		ids[x.ID] = true
		if (i == 0) != (x.Operation == order.OpAuth || x.Operation == order.OpSale) {
			t.Fatalf("%s: transaction %d is %s", where, i, x.Operation)
		}
		switch {
		case x.Operation == order.OpSale && x.Status == order.TxnSuccess, x.Operation == order.OpSettle:
			settled += x.Amount
		case x.Operation == order.OpRefund:
			refunded += x.Amount
		}
	}
	if settled != o.SettledAmount || refunded != o.RefundedAmount {
		t.Fatalf("%s: transactions settle %d and refund %d, order says %d and %d",
			where, settled, refunded, o.SettledAmount, o.RefundedAmount)
	}
}

// checkNoAliasing scribbles over every part of next reachable through a
// pointer or slice and requires that neither the input order nor the command
// notices; next is restored from a deep copy afterwards.
func checkNoAliasing(t *testing.T, where string, cur *order.Order, cmd *order.Command, next *order.Order) {
	t.Helper()
	keep, curBefore, cmdBefore := next.Clone(), cur.Clone(), cloneCommand(cmd)
	for i := range next.Txns {
		next.Txns[i].Status, next.Txns[i].Amount = "scribbled", -1
	}
	for _, p := range []*order.ThreeDS{next.ThreeDS, pendingThreeDS(next)} {
		if p != nil {
			p.ECI = "scribbled"
		}
	}
	if next.Decline != nil {
		next.Decline.Code = "scribbled"
	}
	if next.Source.Billing != nil {
		next.Source.Billing.City = "scribbled"
	}
	if !reflect.DeepEqual(cur, curBefore) || !reflect.DeepEqual(cmd, cmdBefore) {
		t.Fatalf("%s: the new order shares memory with the input order or the command", where)
	}
	*next = *keep
}

func pendingThreeDS(o *order.Order) *order.ThreeDS {
	if o.Pending == nil {
		return nil
	}
	return o.Pending.ThreeDS
}

func contains(xs []order.Status, s order.Status) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
