package node_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/transport/acquirer"
	"github.com/paygate/gateway/transport/acquirer/reconcile"
)

// Processing MIDs and routing (contract 12, docs/acquirer.md "MIDs").

type midView struct {
	MID          string   `json:"mid"`
	MerchantID   string   `json:"merchant_id"`
	AcquirerAddr string   `json:"acquirer_addr"`
	Currencies   []string `json:"currencies"`
	RegisteredAt string   `json:"registered_at"`
}

func midBody(mid, merchant, addr string, currencies ...string) string {
	b, _ := json.Marshal(map[string]any{"mid": mid, "merchant_id": merchant, "acquirer_addr": addr, "currencies": currencies})
	return string(b)
}

// registerMID registers a MID and fails the test on anything but 200.
func registerMID(t *testing.T, n *nodetest.Node, mid, merchant, addr string, currencies ...string) midView {
	t.Helper()
	var v midView
	if _, err := n.Admin("POST", "/admin/v1/mids", midBody(mid, merchant, addr, currencies...), &v); err != nil {
		t.Fatalf("register %s: %v", mid, err)
	}
	return v
}

// The admin API validates a registration field by field, registers it
// once, answers a repeat with the record, refuses another registration of
// the MID, lists by merchant, and audits each call.
func TestMIDsAdminAPI(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 100)
	other := n.CreateMerchant(t, 100)

	for _, tc := range []struct {
		name, body string
		status     int
		code, attr string
	}{
		{"not JSON", `mid=1`, 400, "2.07", "body"},
		{"unknown member", `{"mid":"A1","merchant_id":"` + m.ID + `","acquirer_addr":"h:1","currencies":["USD"],"host":"x"}`, 400, "2.07", "body"},
		{"mid missing", midBody("", m.ID, "acq.example:8583", "USD"), 422, "2.01", "mid"},
		{"mid too long for field 42", midBody("MID-0123456789AB", m.ID, "acq.example:8583", "USD"), 422, "2.01", "mid"},
		{"mid with a space", midBody("MID 1", m.ID, "acq.example:8583", "USD"), 422, "2.01", "mid"},
		{"merchant_id missing", midBody("MID1", "", "acq.example:8583", "USD"), 422, "2.01", "merchant_id"},
		{"merchant unknown", midBody("MID1", "mer_nobody", "acq.example:8583", "USD"), 422, "2.01", "merchant_id"},
		{"acquirer_addr missing", midBody("MID1", m.ID, "", "USD"), 422, "2.01", "acquirer_addr"},
		{"acquirer_addr without port", midBody("MID1", m.ID, "acq.example", "USD"), 422, "2.01", "acquirer_addr"},
		{"acquirer_addr port 0", midBody("MID1", m.ID, "acq.example:0", "USD"), 422, "2.01", "acquirer_addr"},
		{"acquirer_addr port too large", midBody("MID1", m.ID, "acq.example:70000", "USD"), 422, "2.01", "acquirer_addr"},
		{"acquirer_addr host with a quote", midBody("MID1", m.ID, `acq"x:8583`, "USD"), 422, "2.01", "acquirer_addr"},
		{"currencies missing", midBody("MID1", m.ID, "acq.example:8583"), 422, "2.01", "currencies"},
		{"currency not ISO 4217", midBody("MID1", m.ID, "acq.example:8583", "USD", "XYZ"), 422, "2.03", "currencies"},
		{"currency twice", midBody("MID1", m.ID, "acq.example:8583", "USD", "usd"), 422, "2.01", "currencies"},
		{"several fields: 2.01", midBody("MID1", m.ID, "nope", "XYZ"), 422, "2.01", "acquirer_addr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectAdminError(t, n, "/admin/v1/mids", tc.body, tc.status, tc.code, tc.attr)
		})
	}
	var list struct {
		MIDs []midView `json:"mids"`
	}
	if _, err := n.Admin("GET", "/admin/v1/mids", "", &list); err != nil || len(list.MIDs) != 0 {
		t.Fatalf("after the refusals: %+v %v", list, err)
	}

	a := registerMID(t, n, "MIDA", m.ID, "acq-a.example:8583", "usd", "EUR")
	if a.MID != "MIDA" || a.MerchantID != m.ID || a.AcquirerAddr != "acq-a.example:8583" ||
		fmt.Sprint(a.Currencies) != "[EUR USD]" || a.RegisteredAt == "" {
		t.Fatalf("registered: %+v", a)
	}
	if again := registerMID(t, n, "MIDA", m.ID, "acq-a.example:8583", "EUR", "USD"); again.RegisteredAt != a.RegisteredAt {
		t.Fatalf("the same registration again: %+v, first %+v", again, a)
	}
	expectAdminError(t, n, "/admin/v1/mids", midBody("MIDA", m.ID, "acq-b.example:8583", "EUR", "USD"), 409, "5.06", "mid")
	expectAdminError(t, n, "/admin/v1/mids", midBody("MIDA", other.ID, "acq-a.example:8583", "EUR", "USD"), 409, "5.06", "mid")
	registerMID(t, n, "MIDB", other.ID, "[::1]:8583", "GBP")

	if _, err := n.Admin("GET", "/admin/v1/mids", "", &list); err != nil || len(list.MIDs) != 2 ||
		list.MIDs[0].MID != "MIDA" || list.MIDs[1].MID != "MIDB" || list.MIDs[1].AcquirerAddr != "[::1]:8583" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := n.Admin("GET", "/admin/v1/mids?merchant_id="+other.ID, "", &list); err != nil || len(list.MIDs) != 1 || list.MIDs[0].MID != "MIDB" {
		t.Fatalf("list of one merchant: %+v %v", list, err)
	}
	if code, err := n.Admin("DELETE", "/admin/v1/mids", "", nil); code != 405 {
		t.Fatalf("DELETE: %d %v", code, err)
	}

	var audit struct {
		Records []struct {
			Action, Target, Result string
		} `json:"records"`
	}
	if _, err := n.Admin("GET", "/admin/v1/audit?limit=1000", "", &audit); err != nil {
		t.Fatal(err)
	}
	results := map[string][]string{}
	for _, r := range audit.Records {
		if r.Action == "POST /admin/v1/mids" {
			results[r.Target] = append(results[r.Target], r.Result)
		}
	}
	if got := results["mid:MIDA"]; len(got) != 4 || got[0] != "200" || got[2] != "409 5.06" {
		t.Fatalf("audit of MIDA's registrations: %v (all %v)", got, results)
	}
}

// A merchant with two MIDs on two acquirer hosts: each order's
// authorisation and every later movement (settle, automatic settle, void,
// refund) reach its MID's host, with the MID in field 42; an order outside
// the merchant's MIDs or currencies (a charge, a hosted form) is refused
// and leaves nothing; a
// merchant without MIDs keeps the node's default acquirer, whatever
// processing_mid it names.
func TestMIDsRouteToTheirAcquirers(t *testing.T) {
	def, hostA, hostB := nodetest.StartAcquirerd(t), nodetest.StartAcquirerd(t), nodetest.StartAcquirerd(t)
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--acquirer-addr", def.Listen,
		"--acquirer-timeout", "2s", "--settle-delay-unit", "10ms"}})
	m := n.CreateMerchant(t, 10000)
	plain := n.CreateMerchant(t, 10000)
	registerMID(t, n, "MIDA", m.ID, hostA.Listen, "USD")
	registerMID(t, n, "MIDB", m.ID, hostB.Listen, "USD", "EUR")

	charge := func(m *nodetest.Merchant, mid, cur string, amount int64, delay int) (string, *nodetest.Response) {
		id := newOrderID("mid")
		body := chargeBody(id, acquirer.CardVisaApproved, amount, delay)
		body["processing_mid"], body["currency"] = mid, cur
		return id, m.Post(t, "charge", body)
	}
	rrnOf := func(m *nodetest.Merchant, id, status, op string) string {
		t.Helper()
		return acquirer.RRN(txnOf(t, m.WaitStatus(t, id, status, 20*time.Second), op)["id"].(string))
	}

	// Refused: nothing recorded, the order does not exist.
	for _, tc := range []struct{ mid, cur, code, attr string }{
		{"mid-1", "USD", "2.01", "processing_mid"},
		{"MIDA", "EUR", "2.03", "currency"},
	} {
		id, r := charge(m, tc.mid, tc.cur, 100, 8760)
		expectError(t, r, 422, tc.code, tc.attr)
		form := newOrderID("midform")
		body := initBody(form, 100, tc.cur)
		body["processing_mid"] = tc.mid
		expectError(t, m.Post(t, "init-payment", body), 422, tc.code, tc.attr)
		for _, o := range []string{id, form} {
			if st := m.Post(t, "status", map[string]any{"order_id": o}); st.Status != 404 {
				t.Fatalf("after a refused %s/%s payment: %d %s", tc.mid, tc.cur, st.Status, st.Body)
			}
		}
	}
	form := newOrderID("midform")
	body := initBody(form, 100, "EUR")
	body["processing_mid"] = "MIDB"
	initForm(t, m, body) // a registered MID and currency: the form is made

	// MIDA: an authorisation settled by hand, one settled automatically.
	settled, _ := charge(m, "MIDA", "USD", 1000, 8760)
	settledRRN := rrnOf(m, settled, "authorized", "auth")
	if s := m.Post(t, "settle", map[string]any{"order_id": settled, "amount": 600}); s.Str("status") != "settled" {
		t.Fatalf("settle: %s", s.Body)
	}
	auto, _ := charge(m, "MIDA", "USD", 300, 1)
	autoRRN := rrnOf(m, auto, "settled", "auth")
	// MIDB: a sale refunded in part (EUR), an authorisation voided.
	sale, _ := charge(m, "MIDB", "EUR", 900, 0)
	saleRRN := rrnOf(m, sale, "settled", "sale")
	r := m.Post(t, "refund", map[string]any{"order_id": sale, "amount": 250})
	refund := txnOf(t, r, "refund")
	if refund["status"] != "success" {
		t.Fatalf("refund: %s", r.Body)
	}
	voided, _ := charge(m, "MIDB", "USD", 700, 8760)
	rrnOf(m, voided, "authorized", "auth")
	if v := m.Post(t, "void", map[string]any{"order_id": voided}); v.Str("status") != "voided" {
		t.Fatalf("void: %s", v.Body)
	}
	// No MIDs: the default, even for another merchant's MID.
	dflt, _ := charge(plain, "MIDA", "USD", 400, 8760)
	dfltRRN := rrnOf(plain, dflt, "authorized", "auth")
	if s := plain.Post(t, "settle", map[string]any{"order_id": dflt}); s.Str("status") != "settled" {
		t.Fatalf("settle without MIDs: %s", s.Body)
	}

	today := time.Now().UTC().Format(time.DateOnly)
	rows := func(h *nodetest.Acquirerd) []string {
		var out []string
		for _, r := range h.Report(today)[1:] {
			out = append(out, strings.Join([]string{strings.TrimSpace(r[1]), r[2], r[4], r[5], r[6]}, " "))
		}
		return out
	}
	want := map[string][]string{
		"MIDA host": {"MIDA " + settledRRN + " capture 600 USD", "MIDA " + autoRRN + " capture 300 USD"},
		"MIDB host": {"MIDB " + saleRRN + " sale 900 EUR", "MIDB " + acquirer.RRN(refund["id"].(string)) + " refund 250 EUR"},
		"default":   {"MIDA " + dfltRRN + " capture 400 USD"},
	}
	hosts := map[string]*nodetest.Acquirerd{"MIDA host": hostA, "MIDB host": hostB, "default": def}
	for name, h := range hosts {
		var got []string
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if got = rows(h); fmt.Sprint(sorted(got)) == fmt.Sprint(sorted(want[name])) || time.Now().After(deadline) {
				break
			}
		}
		if fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(want[name])) {
			t.Errorf("%s's settlement report: %v, want %v", name, got, want[name])
		}
	}
	// Each host's report reconciles clean against the orders routed to it;
	// against every order, the other hosts' movements are missing from it.
	for name, q := range map[string]string{"MIDA host": hostA.Listen, "MIDB host": hostB.Listen, "default": "default"} {
		var res reconcile.Result
		if _, err := n.Admin("POST", "/admin/v1/reconcile?acquirer_addr="+q, reportCSV(t, hosts[name]), &res); err != nil ||
			!res.Clean() || res.Matched != len(want[name]) {
			t.Errorf("reconcile %s's report against its orders: %+v %v", name, res, err)
		}
	}
	var all reconcile.Result
	if _, err := n.Admin("POST", "/admin/v1/reconcile", reportCSV(t, hostA), &all); err != nil || all.Clean() ||
		all.Matched != 2 || len(all.MissingAtAcquirer) != 3 {
		t.Errorf("reconcile MIDA's report against every order: %+v %v", all, err)
	}
	// The void's reversal went to MIDB's host: its ledger has it, no other.
	voidRRN := acquirer.RRN(txnOf(t, m.Post(t, "status", map[string]any{"order_id": voided}), "auth")["id"].(string))
	for name, h := range hosts {
		if got := ledger(t, h, voidRRN)["reversal 00"]; (name == "MIDB host") != (got == 1) {
			t.Errorf("%s's ledger holds the void's reversal %d times", name, got)
		}
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// A three-node cluster whose leader is killed with captures of a MID's
// orders pending (recorded, sent, answers dropped): the new leader sends
// them again to that MID's host, not to its default acquirer, and each
// completes once there.
func TestMIDMovementsResumeOnTheirHostUnderANewLeader(t *testing.T) {
	def, hostA := nodetest.StartAcquirerd(t), nodetest.StartAcquirerd(t)
	c := nodetest.StartCluster(t, 3, "--acquirer-addr", def.Listen, "--acquirer-timeout", "500ms")
	leader := c.WaitLeader(nil, 30*time.Second)
	m := leader.CreateMerchant(t, 10000)
	registerMID(t, leader, "MIDA", m.ID, hostA.Listen, "USD")
	ids, rrns := make([]string, 4), make([]string, 4)
	for i := range ids {
		ids[i] = newOrderID("midha")
		body := chargeBody(ids[i], acquirer.CardVisaApproved, int64(500+i), 8760)
		body["processing_mid"] = "MIDA"
		m.Post(t, "charge", body)
		rrns[i] = acquirer.RRN(txnOf(t, m.WaitStatus(t, ids[i], "authorized", 20*time.Second), "auth")["id"].(string))
	}
	settleUnanswered(t, hostA, m, ids)
	leader.Kill()
	hostA.SetFaults(`{}`)
	next := c.WaitLeader(leader, 30*time.Second)
	mm := m.At(next)
	for _, id := range ids {
		mm.WaitStatus(t, id, "settled", 30*time.Second)
	}
	rows := reportRows(hostA)
	for i, rrn := range rrns {
		once(t, rows, rrn+" capture", int64(500+i))
	}
	if len(rows) != len(ids) {
		t.Fatalf("MIDA's host's report: %v", rows)
	}
	if d := reportRows(def); len(d) != 0 {
		t.Fatalf("the default acquirer's report: %v", d)
	}
}
