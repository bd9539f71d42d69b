package node_test

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/order"
)

// A history of concurrent charge, settle, refund, void and status calls on
// a few orders, sent to all three nodes across a leader kill and restart,
// checked per order for linearizability with porcupine. The model is the
// order state machine itself (order.Apply); the authorisation outcome is an
// internal step that may happen at any point while an order is processing.
// A call whose result is unknown (timeout, 5xx, 503 after it was sent) may
// or may not have taken effect, at any time from its call on.
func TestClusterLinearizable(t *testing.T) {
	c := nodetest.StartCluster(t, 3)
	leader := c.WaitLeader(nil, 10*time.Second)
	m := leader.CreateMerchant(t, 100000)
	m.HTTPClient = clusterClient()
	m.HTTPClient.Timeout = 3 * time.Second

	const nOrders, clients = 10, 8
	ids := make([]string, nOrders)
	for i := range ids {
		ids[i] = newOrderID(fmt.Sprintf("lin%d", i))
	}
	seed := time.Now().UnixNano() % 1_000_000
	t.Logf("seed %d", seed)

	var mu sync.Mutex
	var history []porcupine.Operation
	epoch := time.Now()
	now := func() int64 { return int64(time.Since(epoch)) }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for cl := 0; cl < clients; cl++ {
		wg.Add(1)
		go func(cl int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed + int64(cl)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				oi := rng.Intn(nOrders)
				in := linInput{Order: oi}
				var body map[string]any
				switch p := rng.Intn(100); {
				case p < 35:
					in.Op = "status"
					body = map[string]any{"order_id": ids[oi]}
				case p < 50:
					in.Op = "charge"
					body = chargeBody(ids[oi], "4111111111111111", linAmount, 24)
				case p < 70:
					in.Op, in.Amount = "settle", []int64{400, 1000, 1200}[rng.Intn(3)]
					body = map[string]any{"order_id": ids[oi], "amount": in.Amount}
				case p < 90:
					in.Op, in.Amount = "refund", []int64{100, 300, 800}[rng.Intn(3)]
					body = map[string]any{"order_id": ids[oi], "amount": in.Amount}
				default:
					in.Op = "void"
					body = map[string]any{"order_id": ids[oi]}
				}
				var n *nodetest.Node
				for n == nil || !n.Alive() {
					n = c.Nodes[rng.Intn(len(c.Nodes))]
				}
				call := now()
				r, err := m.At(n).TryPost(in.Op, body)
				ret := now()
				out := linOutput{}
				switch {
				case err != nil || r.Status >= 500:
					out.Unknown = true
					ret = 1 << 62 // may take effect at any time from its call on
				case r.Status == 200:
					out.HTTP, out.Status = 200, r.Str("status")
					out.Settled, out.Refunded = r.Num("settled_amount"), r.Num("refunded_amount")
				default:
					out.HTTP, out.Code = r.Status, r.ErrorCode()
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: cl, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
				pause := time.Duration(rng.Intn(20)) * time.Millisecond
				if out.Unknown {
					pause += 100 * time.Millisecond // as Retry-After asks, if less
				}
				time.Sleep(pause)
			}
		}(cl)
	}

	time.Sleep(1500 * time.Millisecond)
	old := c.Leader()
	old.Kill()
	t.Logf("killed leader %s", old.ID)
	c.WaitLeader(old, 10*time.Second)
	time.Sleep(1500 * time.Millisecond)
	old.Restart()
	time.Sleep(1000 * time.Millisecond)
	close(stop)
	wg.Wait()

	unknown := 0
	for _, op := range history {
		if op.Output.(linOutput).Unknown {
			unknown++
		}
	}
	t.Logf("%d operations on %d orders, %d with unknown outcome", len(history), nOrders, unknown)
	res, info := porcupine.CheckOperationsVerbose(linModel(), history, 60*time.Second)
	switch res {
	case porcupine.Ok:
	case porcupine.Unknown:
		t.Fatal("linearizability check timed out")
	default:
		path := filepath.Join(t.TempDir(), "history.html")
		if f, err := os.Create(path); err == nil {
			porcupine.Visualize(linModel(), info, f)
			f.Close()
		}
		sort.Slice(history, func(i, j int) bool { return history[i].Call < history[j].Call })
		for _, op := range history {
			t.Logf("%+v %d..%d → %+v", op.Input, op.Call/1e6, op.Return/1e6, op.Output)
		}
		t.Fatalf("history is not linearizable (visualisation: %s)", path)
	}
}

// linAmount is every order's amount in the history test.
const linAmount = 1000

type linInput struct {
	Order  int
	Op     string
	Amount int64
}

type linOutput struct {
	Unknown           bool
	HTTP              int
	Code              string // error code when HTTP != 200
	Status            string
	Settled, Refunded int64
}

// linState is one order as the merchant can observe it.
type linState struct {
	Exists            bool
	Status            order.Status
	Settled, Refunded int64
}

// linModel runs the order state machine on the observable state.
func linModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[int][]porcupine.Operation{}
			for _, op := range h {
				k := op.Input.(linInput).Order
				by[k] = append(by[k], op)
			}
			out := make([][]porcupine.Operation, 0, len(by))
			for _, ops := range by {
				out = append(out, ops)
			}
			return out
		},
		Init: func() []any { return []any{linState{}} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(linState), input.(linInput), output.(linOutput)
			// The authorisation outcome may land before this call.
			cands := []linState{s}
			if s.Status == order.StatusProcessing {
				cands = append(cands, linState{Exists: true, Status: order.StatusAuthorized})
			}
			var next []any
			for _, cur := range cands {
				after, want := linApply(cur, in)
				switch {
				case out.Unknown:
					next = append(next, cur, after) // applied or not
				case want == out:
					next = append(next, after)
				}
			}
			return next
		},
		DescribeOperation: func(input, output any) string {
			return fmt.Sprintf("%+v → %+v", input, output)
		},
	}
	return nm.ToModel()
}

// linApply is what the gateway must answer to in on cur, and the state after.
func linApply(cur linState, in linInput) (linState, linOutput) {
	view := func(s linState) linOutput {
		return linOutput{HTTP: 200, Status: string(s.Status), Settled: s.Settled, Refunded: s.Refunded}
	}
	if in.Op == "status" {
		if !cur.Exists {
			return cur, linOutput{HTTP: 404, Code: "2.05"}
		}
		return cur, view(cur)
	}
	var o *order.Order
	if cur.Exists {
		o = &order.Order{Merchant: "m", ID: "o", Amount: linAmount, Currency: "USD", Status: cur.Status,
			SettledAmount: cur.Settled, RefundedAmount: cur.Refunded, RequestHash: "charge",
			Txns: []order.Transaction{{ID: "auth", Operation: order.OpAuth}}}
		if cur.Status == order.StatusProcessing {
			o.Pending = &order.PendingAuth{TxnID: "auth"}
		}
	}
	cmd := &order.Command{Merchant: "m", OrderID: "o", TxnID: "t", Amount: in.Amount, RequestHash: "charge"}
	switch in.Op {
	case "charge":
		cmd.Kind = order.KindCreate
		cmd.Create = &order.CreateData{Amount: linAmount, Currency: "USD", SettleDelayHours: 24}
	case "settle":
		cmd.Kind = order.KindSettle
	case "refund":
		cmd.Kind = order.KindRefund
	case "void":
		cmd.Kind = order.KindVoid
	}
	next, out := order.Apply(o, cmd)
	if r := out.Reject; r != nil {
		code := map[order.RejectKind]linOutput{
			order.RejectIllegalStatus: {HTTP: 409, Code: "0.03"}, order.RejectAmount: {HTTP: 422, Code: "2.02"},
			order.RejectNotFound: {HTTP: 404, Code: "2.05"}, order.RejectConflict: {HTTP: 409, Code: "5.06"},
		}[r.Kind]
		return cur, code
	}
	after := linState{Exists: true, Status: next.Status, Settled: next.SettledAmount, Refunded: next.RefundedAmount}
	return after, view(after)
}

// The model refuses what no order could show: a status older than a
// settle that finished before it, and a refund of more than was settled.
func TestLinearizabilityModel(t *testing.T) {
	op := func(call, ret int64, in linInput, out linOutput) porcupine.Operation {
		return porcupine.Operation{Input: in, Call: call, Output: out, Return: ret}
	}
	charged := linOutput{HTTP: 200, Status: "processing"}
	settled := linOutput{HTTP: 200, Status: "settled", Settled: 1000}
	ok := []porcupine.Operation{
		op(0, 1, linInput{Op: "charge"}, charged),
		op(2, 3, linInput{Op: "settle", Amount: 1000}, settled), // authorised in between
		op(2, 5, linInput{Op: "status"}, linOutput{HTTP: 200, Status: "authorized"}),
		op(6, 7, linInput{Op: "refund", Amount: 300}, linOutput{Unknown: true}),
		op(8, 9, linInput{Op: "status"}, linOutput{HTTP: 200, Status: "settled", Settled: 1000, Refunded: 300}),
	}
	if !porcupine.CheckOperations(linModel(), ok) {
		t.Fatal("a linearizable history was refused")
	}
	stale := append(append([]porcupine.Operation(nil), ok[:2]...),
		op(4, 5, linInput{Op: "status"}, linOutput{HTTP: 200, Status: "authorized"}))
	if porcupine.CheckOperations(linModel(), stale) {
		t.Fatal("a stale read was accepted")
	}
	over := append(append([]porcupine.Operation(nil), ok[:2]...),
		op(4, 5, linInput{Op: "refund", Amount: 1200}, linOutput{HTTP: 200, Status: "refunded", Settled: 1000, Refunded: 1200}))
	if porcupine.CheckOperations(linModel(), over) {
		t.Fatal("a refund above the settled amount was accepted")
	}
}
