package node_test

import (
	"bufio"
	"encoding/json"
	mathrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/transport/acquirer"
	"github.com/paygate/gateway/transport/acquirer/reconcile"
)

// Movements in a cluster, the authorisation timeout and declined
// movements, end to end: gatewayd processes and one acquirerd every node
// points at (docs/acquirer.md). Each node's in-process host would be a
// ledger of its own.

// startMovesCluster starts acquirerd and three nodes pointed at it.
func startMovesCluster(t *testing.T) (*nodetest.Acquirerd, *nodetest.Cluster, *nodetest.Node, *nodetest.Merchant) {
	t.Helper()
	acq := nodetest.StartAcquirerd(t)
	c := nodetest.StartCluster(t, 3, "--acquirer-addr", acq.Listen, "--acquirer-timeout", "500ms")
	leader := c.WaitLeader(nil, 10*time.Second)
	return acq, c, leader, leader.CreateMerchant(t, 10000)
}

// metric reads a sample's value from a node's /metrics page (0 when absent).
func metric(t *testing.T, n *nodetest.Node, sample string) float64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(n.Metrics(t)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", sample, err)
			}
			return f
		}
	}
	return 0
}

// waitMetric polls a node's sample until cond holds (30 s at most).
func waitMetric(t *testing.T, n *nodetest.Node, sample string, cond func(float64) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for v := metric(t, n, sample); !cond(v); v = metric(t, n, sample) {
		if time.Now().After(deadline) {
			t.Fatalf("%s of %s: %v", sample, n.ID, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// declinedUnanswered charges with acquirerd's faults set and waits for
// the order declined 6.02, its authorisation (or sale) unanswered in time;
// it returns the order id and the authorisation's RRN.
func declinedUnanswered(t *testing.T, acq *nodetest.Acquirerd, m *nodetest.Merchant, faults string, amount int64, delay int) (string, string) {
	t.Helper()
	acq.SetFaults(faults)
	id := newOrderID("unanswered")
	m.Post(t, "charge", chargeBody(id, acquirer.CardVisaApproved, amount, delay))
	st := m.WaitStatus(t, id, "declined", 60*time.Second)
	if st.Str("decline.code") != "6.02" {
		t.Fatalf("a charge without an answer in time (%s): %s", faults, st.Body)
	}
	op := "auth"
	if delay == 0 {
		op = "sale"
	}
	return id, acquirer.RRN(txnOf(t, st, op)["id"].(string))
}

// waitReversed polls acquirerd's ledger until it holds, for rrn, the
// approved kind (auth or sale) and its reversal, once each.
func waitReversed(t *testing.T, acq *nodetest.Acquirerd, rrn, kind string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		recs := ledger(t, acq, rrn)
		if recs[kind+" 00"] == 1 && recs["reversal 00"] == 1 && len(recs) == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ledger records of %s: %v, want the approved %s and its reversal, once each", rrn, recs, kind)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pendingMoves is how many movements a node is repeating.
const pendingMoves = "gateway_acquirer_movements_pending"

// The leader of three is SIGKILLed with a settle, a void and two refunds
// recorded and sent but unanswered (drop_answers 1.0): the new leader
// drives each from the log, and each completes once, shows once in the
// settlement report with its amount, and reconciles clean.
func TestClusterLeaderKilledWithMovementsPending(t *testing.T) {
	acq, c, leader, m := startMovesCluster(t)
	settled, settledRRN := authorize(t, m, 1100)
	voided, voidedRRN := authorize(t, m, 1200)
	sale := newOrderID("sale")
	m.Post(t, "charge", chargeBody(sale, acquirer.CardVisaApproved, 1300, 0))
	saleRRN := acquirer.RRN(txnOf(t, m.WaitStatus(t, sale, "settled", 20*time.Second), "sale")["id"].(string))

	acq.SetFaults(`{"drop_answers":1}`)
	if s := m.Post(t, "settle", map[string]any{"order_id": settled, "amount": 1000}); s.Str("status") != "authorized" ||
		txnOf(t, s, "settle")["status"] != "created" {
		t.Fatalf("settle without an answer: %s", s.Body)
	}
	if v := m.Post(t, "void", map[string]any{"order_id": voided}); v.Str("status") != "authorized" ||
		txnOf(t, v, "void")["status"] != "created" {
		t.Fatalf("void without an answer: %s", v.Body)
	}
	var refunds []string
	for _, amount := range []int64{300, 400} {
		r := m.Post(t, "refund", map[string]any{"order_id": sale, "amount": amount})
		tx := txnOf(t, r, "refund")
		if tx["status"] != "created" || r.Num("refunded_amount") != 0 {
			t.Fatalf("refund without an answer: %s", r.Body)
		}
		refunds = append(refunds, acquirer.RRN(tx["id"].(string)))
	}
	if n := metric(t, leader, pendingMoves); n != 4 {
		t.Fatalf("the leader repeats %v movements, want 4", n)
	}

	leader.Kill()
	next := c.WaitLeader(leader, 15*time.Second)
	acq.SetFaults(`{}`)
	mn := m.At(next)
	if st := mn.WaitStatus(t, settled, "settled", 30*time.Second); st.Num("settled_amount") != 1000 {
		t.Fatalf("settled: %s", st.Body)
	}
	mn.WaitStatus(t, voided, "voided", 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := postRetrying(t, mn, "status", map[string]any{"order_id": sale})
		if st.Num("refunded_amount") == 700 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refunds not completed: %s", st.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}

	rows := reportRows(acq)
	once(t, rows, settledRRN+" capture", 1000)
	once(t, rows, saleRRN+" sale", 1300)
	once(t, rows, refunds[0]+" refund", 300)
	once(t, rows, refunds[1]+" refund", 400)
	if len(rows) != 4 || len(rows[voidedRRN+" capture"]) != 0 {
		t.Fatalf("settlement report %v: want the capture, the sale and the two refunds", rows)
	}
	if recs := ledger(t, acq, voidedRRN); recs["reversal 00"] != 1 || recs["capture 00"] != 0 {
		t.Fatalf("the voided authorisation at the acquirer: %v, want one reversal", recs)
	}
	var res reconcile.Result
	if _, err := next.Admin("POST", "/admin/v1/reconcile", reportCSV(t, acq), &res); err != nil || !res.Clean() || res.Matched != 4 {
		t.Fatalf("reconcile: %+v %v", res, err)
	}
}

// A leader paused (SIGSTOP) with a movement pending and unanswered is
// deposed; when it runs again it stops repeating the movement: its
// pending-movements gauge, which counts the repeats' goroutines, falls to
// 0 while the acquirer still answers nothing (before the fix it repeated
// until an answer came). Its count of movement messages then stays still
// while the new leader's repeats complete the settle, once.
func TestDeposedLeaderStopsRepeatingMovements(t *testing.T) {
	acq, c, leader, m := startMovesCluster(t)
	id, rrn := authorize(t, m, 900)
	acq.SetFaults(`{"drop_answers":1}`)
	if s := m.Post(t, "settle", map[string]any{"order_id": id}); txnOf(t, s, "settle")["status"] != "created" {
		t.Fatalf("settle without an answer: %s", s.Body)
	}
	if n := metric(t, leader, pendingMoves); n != 1 {
		t.Fatalf("the leader repeats %v movements, want 1", n)
	}
	leader.Pause()
	next := c.WaitLeader(leader, 15*time.Second)
	leader.Resume()
	waitMetric(t, leader, pendingMoves, func(v float64) bool { return v == 0 })
	sent := metric(t, leader, `gateway_acquirer_movements_sent_total{mti="0221"}`)
	if metric(t, next, pendingMoves) != 1 {
		t.Fatalf("the new leader repeats %v movements, want 1", metric(t, next, pendingMoves))
	}
	acq.SetFaults(`{}`)
	m.At(next).WaitStatus(t, id, "settled", 30*time.Second)
	if now := metric(t, leader, `gateway_acquirer_movements_sent_total{mti="0221"}`); now != sent {
		t.Fatalf("the deposed leader sent %v repeats more", now-sent)
	}
	once(t, reportRows(acq), rrn+" capture", 900)
}

// An authorisation (0100) whose answers come after --acquirer-timeout
// (acquirerd's latency above it, and above all the attempts together: a
// late answer to one attempt that reaches a later one, same STAN and RRN,
// is its answer) is declined 6.02 and reversed: acquirerd approved it and
// then records its reversal. The late approvals, which arrive at the node
// as unmatched answers, change nothing.
func TestAuthorisationTimeoutIsReversedAndDeclined(t *testing.T) {
	acq, n, m := startMoves(t)
	id, rrn := declinedUnanswered(t, acq, m, `{"latency_ms":8000}`, 700, 24)
	// The late approvals arrive (the node counts them unmatched) ...
	waitMetric(t, n, "gateway_acquirer_unmatched_answers_total", func(v float64) bool { return v > 0 })
	// ... and the reversal, repeated until answered, is answered once
	// the answers come in time again.
	acq.SetFaults(`{}`)
	waitReversed(t, acq, rrn, "auth")
	waitMetric(t, n, pendingMoves, func(v float64) bool { return v == 0 })
	st := m.Post(t, "status", map[string]any{"order_id": id})
	if st.Str("status") != "declined" || st.Str("decline.code") != "6.02" || st.Get("moves") != nil {
		t.Fatalf("after the late approval: %s", st.Body)
	}
	// A settle of the declined order is refused, and nothing is captured.
	if s := m.Post(t, "settle", map[string]any{"order_id": id}); s.Status == 200 {
		t.Fatalf("settle of a declined order: %s", s.Body)
	}
	if rows := reportRows(acq); len(rows) != 0 {
		t.Fatalf("settlement report: %v", rows)
	}
}

// A capture and a refund the acquirer declines (the sandbox declines a
// movement of an amount ending in 9905: acquirer.MoveDeclineAmount) are
// fail transactions with their decline, the order unchanged, and each
// sends a notification. The order can be settled again with another
// amount, and refunded.
func TestDeclinedCaptureAndRefund(t *testing.T) {
	acq, _, m := startMoves(t)
	rcv := newReceiver(t)
	id := newOrderID("dec")
	body := chargeBody(id, acquirer.CardVisaApproved, 29905, 8760)
	body["callback_url"] = rcv.URL()
	m.Post(t, "charge", body)
	rrn := acquirer.RRN(txnOf(t, m.WaitStatus(t, id, "authorized", 20*time.Second), "auth")["id"].(string))
	notified := len(rcv.waitCalls(1, 10*time.Second))

	s := m.Post(t, "settle", map[string]any{"order_id": id, "amount": 19905})
	tx := txnOf(t, s, "settle")
	if s.Status != 200 || s.Str("status") != "authorized" || s.Num("settled_amount") != 0 || tx["status"] != "fail" ||
		s.Str("transaction.decline.code") != acquirer.CodeDoNotHonour {
		t.Fatalf("declined capture: %d %s", s.Status, s.Body)
	}
	c := rcv.waitCalls(notified+1, 10*time.Second)[notified]
	if !strings.Contains(string(c.body), tx["id"].(string)) || !strings.Contains(string(c.body), `"fail"`) {
		t.Fatalf("notification of the declined capture: %s", c.body)
	}
	notified++

	// Another settle is a capture of its own, not a repeat of the declined one.
	if s := m.Post(t, "settle", map[string]any{"order_id": id, "amount": 20000}); s.Str("status") != "settled" ||
		s.Num("settled_amount") != 20000 {
		t.Fatalf("settle after a declined capture: %s", s.Body)
	}
	notified = len(rcv.waitCalls(notified+1, 10*time.Second))

	r := m.Post(t, "refund", map[string]any{"order_id": id, "amount": 9905})
	rtx := txnOf(t, r, "refund")
	if r.Status != 200 || r.Str("status") != "settled" || r.Num("refunded_amount") != 0 || rtx["status"] != "fail" ||
		r.Str("transaction.decline.code") != acquirer.CodeDoNotHonour {
		t.Fatalf("declined refund: %d %s", r.Status, r.Body)
	}
	c = rcv.waitCalls(notified+1, 10*time.Second)[notified]
	var note map[string]any
	json.Unmarshal(c.body, &note)
	if !strings.Contains(string(c.body), rtx["id"].(string)) || note["refunded_amount"] != float64(0) {
		t.Fatalf("notification of the declined refund: %s", c.body)
	}
	if r := m.Post(t, "refund", map[string]any{"order_id": id, "amount": 500}); r.Num("refunded_amount") != 500 {
		t.Fatalf("refund after a declined one: %s", r.Body)
	}

	rows := reportRows(acq)
	once(t, rows, rrn+" capture", 20000)
	if len(rows) != 2 {
		t.Fatalf("settlement report %v: want the capture of 20000 and the refund of 500", rows)
	}
	if recs := ledger(t, acq, rrn); recs["capture 05"] != 1 || recs["capture 00"] != 1 {
		t.Fatalf("captures at the acquirer: %v", recs)
	}
}

// The property of actors' TestLedgersAgreeUnderRandomInterleavings, short,
// with real processes: a seeded random run of charges, settles, voids and
// refunds (partial, and declined by amount) against a gateway and
// acquirerd, with dropped, duplicated and late answers, acquirerd killed
// and restarted and the gateway SIGKILLed and restarted. Once everything
// is answered the settlement report reconciles clean with the gateway's
// ledger, and every order's settled and refunded amounts are the report's.
func TestLedgersAgreeUnderRandomFaultsRealProcesses(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MOVES_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (MOVES_SEED=%d repeats it)", seed, seed)
	rng := mathrand.New(mathrand.NewPCG(seed, seed))
	acq, n, m := startMoves(t)
	var ids []string
	amounts := map[string]int64{}
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
	post := func(op string, body map[string]any) { m.TryPost(op, body) } // answers vary with the faults
	for range 40 {
		switch p := rng.IntN(100); {
		case p < 25 || len(ids) == 0:
			id := newOrderID("rnd")
			ids = append(ids, id)
			amounts[id] = 1000 + rng.Int64N(40_000)
			post("charge", chargeBody(id, acquirer.CardVisaApproved, amounts[id], []int{0, 8760}[rng.IntN(2)]))
		case p < 45:
			id := ids[rng.IntN(len(ids))]
			post("settle", map[string]any{"order_id": id, "amount": amount(amounts[id])})
		case p < 55:
			post("void", map[string]any{"order_id": ids[rng.IntN(len(ids))]})
		case p < 70:
			id := ids[rng.IntN(len(ids))]
			post("refund", map[string]any{"order_id": id, "amount": amount(amounts[id] / 2)})
		case p < 85:
			acq.SetFaults([]string{`{}`, `{"drop_answers":1}`, `{"drop_answers":0.5}`, `{"duplicate_answers":1}`,
				`{"latency_ms":800}`}[rng.IntN(5)])
		case p < 92:
			acq.Restart() // the faults go with the process
		default:
			n.Kill()
			n.Restart()
		}
	}
	acq.SetFaults(`{}`)

	// Everything answered: no order processing, no transaction created.
	deadline := time.Now().Add(90 * time.Second)
	orders := map[string]*nodetest.Response{}
	for _, id := range ids {
		for {
			st := postRetrying(t, m, "status", map[string]any{"order_id": id})
			if st.Status == 404 || st.Status == 422 {
				break // the charge never got through
			}
			if st.Str("status") != "processing" && !strings.Contains(string(st.Body), `"status":"created"`) {
				orders[id] = st
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("seed %d: order %s not answered: %s", seed, id, st.Body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var res reconcile.Result
	if _, err := n.Admin("POST", "/admin/v1/reconcile", reportCSV(t, acq), &res); err != nil || !res.Clean() {
		t.Fatalf("seed %d: reconcile: %+v %v", seed, res, err)
	}
	rows := reportRows(acq)
	for id, st := range orders {
		txns, _ := st.Get("transactions").(map[string]any)
		var settled, refunded int64
		first := ""
		for _, v := range txns {
			tx := v.(map[string]any)
			rrn := acquirer.RRN(tx["id"].(string))
			switch op := tx["operation"]; {
			case op == "auth" || op == "sale":
				first = rrn
			case op == "refund" && tx["status"] == "success":
				refunded += int64(tx["amount"].(float64))
				once(t, rows, rrn+" refund", int64(tx["amount"].(float64)))
			}
		}
		for _, r := range append(rows[first+" capture"], rows[first+" sale"]...) {
			v, _ := strconv.ParseInt(strings.Fields(r)[0], 10, 64)
			settled += v
		}
		if settled != st.Num("settled_amount") || refunded != st.Num("refunded_amount") {
			t.Errorf("seed %d: order %s settled %d and refunded %d at the acquirer: %s", seed, id, settled, refunded, st.Body)
		}
	}
	t.Logf("%d orders, %d matched", len(orders), res.Matched)
}
