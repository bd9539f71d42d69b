package node_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/transport/acquirer"
	"github.com/paygate/gateway/transport/acquirer/reconcile"
)

// Exactly-once movements against an acquirerd process: settle, void,
// refund and automatic settlement each reach the host once, answered or
// not, whatever fails in between (docs/acquirer.md).

// startMoves starts acquirerd and a node pointed at it.
func startMoves(t *testing.T, args ...string) (*nodetest.Acquirerd, *nodetest.Node, *nodetest.Merchant) {
	t.Helper()
	acq := nodetest.StartAcquirerd(t)
	args = append([]string{"--acquirer-addr", acq.Listen, "--acquirer-timeout", "500ms"}, args...)
	n := nodetest.Start(t, nodetest.Options{Args: args})
	return acq, n, n.CreateMerchant(t, 10000)
}

// txnOf returns the order's one transaction of operation op: the
// operation's own in an operation's answer ("transaction"), else from the
// order's map.
func txnOf(t *testing.T, r *nodetest.Response, op string) map[string]any {
	t.Helper()
	if tx, ok := r.Get("transaction").(map[string]any); ok {
		if tx["operation"] != op {
			t.Fatalf("want a %s transaction: %s", op, r.Body)
		}
		return tx
	}
	var found map[string]any
	txns, _ := r.Get("transactions").(map[string]any)
	for _, v := range txns {
		if tx := v.(map[string]any); tx["operation"] == op {
			if found != nil {
				t.Fatalf("two %s transactions: %s", op, r.Body)
			}
			found = tx
		}
	}
	if found == nil {
		t.Fatalf("no %s transaction: %s", op, r.Body)
	}
	return found
}

// authorize charges amount with the longest settle delay and waits for the
// approval; it returns the order id and its authorisation's RRN.
func authorize(t *testing.T, m *nodetest.Merchant, amount int64) (string, string) {
	t.Helper()
	id := newOrderID("mv")
	m.Post(t, "charge", chargeBody(id, acquirer.CardVisaApproved, amount, 8760))
	st := m.WaitStatus(t, id, "authorized", 20*time.Second)
	return id, acquirer.RRN(txnOf(t, st, "auth")["id"].(string))
}

// reportRows is today's settlement report by RRN and type: the amounts
// of each, in report order.
func reportRows(acq *nodetest.Acquirerd) map[string][]string {
	rows := map[string][]string{}
	for _, r := range acq.Report(time.Now().UTC().Format(time.DateOnly))[1:] {
		rows[r[2]+" "+r[4]] = append(rows[r[2]+" "+r[4]], r[5]+" "+r[6])
	}
	return rows
}

// waitReport polls the settlement report until cond holds.
func waitReport(t *testing.T, acq *nodetest.Acquirerd, what string, cond func(map[string][]string) bool) map[string][]string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows := reportRows(acq)
		if cond(rows) {
			return rows
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: settlement report %v", what, rows)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// once checks that the report holds key exactly once, with amount (USD).
func once(t *testing.T, rows map[string][]string, key string, amount int64) {
	t.Helper()
	if got := rows[key]; len(got) != 1 || got[0] != strconv.FormatInt(amount, 10)+" USD" {
		t.Fatalf("%s in the settlement report: %v, want once with %d USD (report %v)", key, got, amount, rows)
	}
}

func TestEachMovementReachesTheAcquirerOnce(t *testing.T) {
	acq, n, m := startMoves(t, "--settle-delay-unit", "10ms")

	settled, settledRRN := authorize(t, m, 1000)
	s := m.Post(t, "settle", map[string]any{"order_id": settled, "amount": 600})
	if s.Str("status") != "settled" || txnOf(t, s, "settle")["status"] != "success" || txnOf(t, s, "settle")["arn"] == nil {
		t.Fatalf("settle: %s", s.Body)
	}
	voided, voidedRRN := authorize(t, m, 700)
	if v := m.Post(t, "void", map[string]any{"order_id": voided}); v.Str("status") != "voided" {
		t.Fatalf("void: %s", v.Body)
	}
	sale := newOrderID("sale")
	m.Post(t, "charge", chargeBody(sale, acquirer.CardVisaApproved, 900, 0))
	st := m.WaitStatus(t, sale, "settled", 20*time.Second)
	saleRRN := acquirer.RRN(txnOf(t, st, "sale")["id"].(string))
	r := m.Post(t, "refund", map[string]any{"order_id": sale, "amount": 250})
	refund := txnOf(t, r, "refund")
	if refund["status"] != "success" || r.Num("refunded_amount") != 250 {
		t.Fatalf("refund: %s", r.Body)
	}
	auto := newOrderID("auto")
	m.Post(t, "charge", chargeBody(auto, acquirer.CardVisaApproved, 300, 1)) // 1 "hour" of 10 ms
	autoTxn := txnOf(t, m.WaitStatus(t, auto, "settled", 30*time.Second), "auth")

	rows := reportRows(acq)
	once(t, rows, settledRRN+" capture", 600)
	once(t, rows, saleRRN+" sale", 900)
	once(t, rows, acquirer.RRN(refund["id"].(string))+" refund", 250)
	once(t, rows, acquirer.RRN(autoTxn["id"].(string))+" capture", 300)
	if len(rows[voidedRRN+" capture"]) != 0 || len(rows) != 4 {
		t.Fatalf("settlement report %v: want exactly the capture, sale, refund and automatic capture", rows)
	}

	// Reconciliation: the report as it came is clean; tampered (an amount,
	// a row dropped, a row added) each difference is named.
	csvReport := reportCSV(t, acq)
	var res reconcile.Result
	if _, err := n.Admin("POST", "/admin/v1/reconcile", csvReport, &res); err != nil || !res.Clean() || res.Matched != 4 {
		t.Fatalf("reconcile the report as it came: %+v %v", res, err)
	}
	lines := strings.Split(strings.TrimSpace(csvReport), "\n")
	var tampered []string
	for _, l := range lines {
		switch {
		case strings.Contains(l, ","+saleRRN+","):
			l = strings.Replace(l, ",900,", ",990,", 1) // amount changed
		case strings.Contains(l, ",capture,300,"):
			continue // dropped
		}
		tampered = append(tampered, l)
	}
	tampered = append(tampered, strings.Replace(lines[1], lines[1][strings.Index(lines[1], ",")+1:], "mid-1,AAAABBBBCCCC,,refund,5,USD", 1))
	res = reconcile.Result{}
	if _, err := n.Admin("POST", "/admin/v1/reconcile", strings.Join(tampered, "\n")+"\n", &res); err != nil {
		t.Fatal(err)
	}
	if res.Clean() || res.Matched != 2 || len(res.Mismatches) != 1 || res.Mismatches[0].Gateway.Amount != 900 ||
		len(res.MissingAtAcquirer) != 1 || res.MissingAtAcquirer[0].Amount != 300 || res.MissingAtAcquirer[0].OrderID != auto ||
		len(res.MissingAtGateway) != 1 || res.MissingAtGateway[0].RRN != "AAAABBBBCCCC" {
		t.Fatalf("tampered report: %+v", res)
	}
}

// reportCSV is today's settlement report as acquirerd serves it.
func reportCSV(t *testing.T, acq *nodetest.Acquirerd) string {
	t.Helper()
	var b strings.Builder
	w := csv.NewWriter(&b)
	w.WriteAll(acq.Report(time.Now().UTC().Format(time.DateOnly)))
	return b.String()
}

// drop_answers 1.0: the settle answers at once with its transaction
// created and the order still authorised; when the fault ends the repeat
// (0221) gets the host's first answer and the order settles, once.
func TestSettleWithoutAnswerCompletesOnceWhenTheFaultEnds(t *testing.T) {
	acq, _, m := startMoves(t)
	id, rrn := authorize(t, m, 1000)
	acq.SetFaults(`{"drop_answers":1}`)
	s := m.Post(t, "settle", map[string]any{"order_id": id, "amount": 400})
	if s.Status != 200 || s.Str("status") != "authorized" || txnOf(t, s, "settle")["status"] != "created" {
		t.Fatalf("settle without an answer: %d %s", s.Status, s.Body)
	}
	// While it waits, another settle or a void is refused.
	expectError(t, m.Post(t, "void", map[string]any{"order_id": id}), 409, "0.03", "status")
	acq.SetFaults(`{}`)
	st := m.WaitStatus(t, id, "settled", 30*time.Second)
	if tx := txnOf(t, st, "settle"); tx["status"] != "success" || st.Num("settled_amount") != 400 {
		t.Fatalf("settled: %s", st.Body)
	}
	once(t, reportRows(acq), rrn+" capture", 400)
}

// duplicate_answers 1.0: every answer comes twice; nothing moves twice.
func TestDuplicateAnswersMoveNothingTwice(t *testing.T) {
	acq, _, m := startMoves(t)
	acq.SetFaults(`{"duplicate_answers":1}`)
	id, rrn := authorize(t, m, 1000)
	if s := m.Post(t, "settle", map[string]any{"order_id": id}); s.Str("status") != "settled" {
		t.Fatalf("settle: %s", s.Body)
	}
	var refunds []string
	for range 2 {
		r := m.Post(t, "refund", map[string]any{"order_id": id, "amount": 300})
		if tx := txnOf(t, r, "refund"); tx["status"] != "success" {
			t.Fatalf("refund: %s", r.Body)
		} else {
			refunds = append(refunds, acquirer.RRN(tx["id"].(string)))
		}
	}
	st := m.Post(t, "status", map[string]any{"order_id": id})
	if st.Num("refunded_amount") != 600 {
		t.Fatalf("after two refunds of 300: %s", st.Body)
	}
	rows := reportRows(acq)
	once(t, rows, rrn+" capture", 1000)
	for _, r := range refunds {
		once(t, rows, r+" refund", 300)
	}
	if len(rows) != 3 {
		t.Fatalf("settlement report %v", rows)
	}
}

// A process killed with captures pending, then restarted: each completes
// once. acquirerd is killed before the settles (the captures wait for it);
// the gateway is SIGKILLed after them, with the captures recorded and sent
// and their answers dropped.
func TestKilledWithCapturesPending(t *testing.T) {
	for _, c := range []struct {
		name   string
		orders int
		amount int64 // of the first order; the next ones 1 more each
		// pend settles the orders and leaves their captures pending;
		// resume lets them complete.
		pend   func(t *testing.T, acq *nodetest.Acquirerd, m *nodetest.Merchant, ids []string)
		resume func(acq *nodetest.Acquirerd, n *nodetest.Node)
	}{
		{"acquirerd", 10, 100, func(t *testing.T, acq *nodetest.Acquirerd, m *nodetest.Merchant, ids []string) {
			acq.Kill()
			settlePending(t, m, ids)
		}, func(acq *nodetest.Acquirerd, _ *nodetest.Node) { acq.Restart() }},
		{"gateway", 5, 200, settleUnanswered,
			func(acq *nodetest.Acquirerd, n *nodetest.Node) { n.Kill(); acq.SetFaults(`{}`); n.Restart() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			acq, n, m := startMoves(t)
			ids, rrns := make([]string, c.orders), make([]string, c.orders)
			for i := range ids {
				ids[i], rrns[i] = authorize(t, m, c.amount+int64(i))
			}
			c.pend(t, acq, m, ids)
			c.resume(acq, n)
			for _, id := range ids {
				m.WaitStatus(t, id, "settled", 30*time.Second)
			}
			rows := reportRows(acq)
			for i, rrn := range rrns {
				once(t, rows, rrn+" capture", c.amount+int64(i))
			}
		})
	}
}

// settleUnanswered settles each order while acq drops its answers: each
// settle answers with the order still authorized and its capture pending.
func settleUnanswered(t *testing.T, acq *nodetest.Acquirerd, m *nodetest.Merchant, ids []string) {
	t.Helper()
	acq.SetFaults(`{"drop_answers":1}`)
	settlePending(t, m, ids)
}

// settlePending settles the orders at once, while the acquirer does not
// answer: each settle waits out the acquirer timeout, then answers 200 with
// the order still authorized and its capture pending. (One after the
// other, the waits added up, and the repeats' backoff grew with them.)
func settlePending(t *testing.T, m *nodetest.Merchant, ids []string) {
	t.Helper()
	type answer struct {
		r   *nodetest.Response
		err error
	}
	answers := make([]chan answer, len(ids))
	for i, id := range ids {
		answers[i] = make(chan answer, 1)
		go func() {
			r, err := m.TryPost("settle", map[string]any{"order_id": id})
			answers[i] <- answer{r, err}
		}()
	}
	for i, c := range answers {
		a := <-c
		if a.err != nil {
			t.Fatalf("settle %s: %v", ids[i], a.err)
		}
		if a.r.Status != 200 || a.r.Str("status") != "authorized" {
			t.Fatalf("settle %s without an answer from the acquirer: %d %s", ids[i], a.r.Status, a.r.Body)
		}
	}
}

// A sale whose answer never comes is declined 6.02 and reversed: the host
// decided and recorded it, and the reversal (recorded once, answered once
// the fault ends) takes it out of the report. A late approval changes
// nothing.
func TestUnansweredSaleIsReversedAndDeclined(t *testing.T) {
	acq, _, m := startMoves(t)
	id, rrn := declinedUnanswered(t, acq, m, `{"drop_answers":1}`, 800, 0)
	acq.SetFaults(`{}`)
	waitReversed(t, acq, rrn, "sale")
	if rows := reportRows(acq); len(rows[rrn+" sale"]) != 0 {
		t.Fatalf("a reversed sale in the settlement report: %v", rows)
	}
	if st := m.Post(t, "status", map[string]any{"order_id": id}); st.Str("status") != "declined" {
		t.Fatalf("after the reversal: %s", st.Body)
	}
}

// ledger counts acquirerd's ledger records of rrn by kind and response.
func ledger(t *testing.T, acq *nodetest.Acquirerd, rrn string) map[string]int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(acq.DataDir, "ledger-*.jsonl"))
	n := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			var r struct{ Kind, RRN, Response string }
			if json.Unmarshal(line, &r) == nil && r.RRN == rrn {
				n[r.Kind+" "+r.Response]++
			}
		}
	}
	return n
}
