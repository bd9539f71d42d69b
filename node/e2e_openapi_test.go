package node_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/docs"
	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/tokenmaker"
	"github.com/paygate/gateway/transport/wallet/walleta"
	"github.com/paygate/gateway/transport/wallet/walletb"
)

// Every operation of docs/openapi.yaml, driven through a real node with
// valid requests (each held to the document's request schema) and with
// each kind of refusal a merchant can cause; every answer is held to the
// document (nodetest.AnswerCheck, set in TestMain), and at the end every
// operation must have answered 200 and every error status a merchant can
// provoke must have been seen: an operation added to the node and not to
// the document, or the reverse, fails here. The node serves the document
// itself.
func TestOpenAPIDocument(t *testing.T) {
	setDir, ds := walletSetDir(t)
	n := nodetest.Start(t, nodetest.Options{Args: walletFlags(setDir, ds)})
	m := n.CreateMerchant(t, 10000)

	// Served, unsigned, as compiled in.
	resp, err := http.Get(n.URL() + "/api/v3/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	served, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/yaml" || !bytes.Equal(served, docs.OpenAPI) {
		t.Errorf("GET /api/v3/openapi.yaml: %d %s, %d bytes (want %d)", resp.StatusCode, resp.Header.Get("Content-Type"), len(served), len(docs.OpenAPI))
	}
	if resp, err := http.Post(n.URL()+"/api/v3/openapi.yaml", "application/json", nil); err != nil || resp.StatusCode != 405 {
		t.Errorf("POST /api/v3/openapi.yaml: %v %v", resp, err)
	}

	// valid posts a request the node must accept, first held to the
	// document's request schema.
	valid := func(m *nodetest.Merchant, op string, body map[string]any, headers ...string) *nodetest.Response {
		t.Helper()
		data := mustJSON(t, body)
		if err := openAPI.CheckRequest(op, data, headers...); err != nil {
			t.Errorf("a request the node takes does not match docs/openapi.yaml: %v", err)
		}
		r := m.Post(t, op, data, headers...)
		if r.Status != 200 {
			t.Fatalf("%s: %d %s", op, r.Status, r.Body)
		}
		return r
	}

	// The payments: a card, then its token; the form; both wallets.
	card := newOrderID("oa-card")
	valid(m, "charge", chargeBody(card, "4111111111111111", 1000, 24))
	token := m.WaitStatus(t, card, "authorized", 10*time.Second).Str("payment_source.payment_token")
	tokenCharge := chargeBody(newOrderID("oa-token"), "", 700, 24)
	tokenCharge["payment_source"] = map[string]any{"type": "token", "payment_token": token, "card_cvv": "123"}
	valid(m, "charge", tokenCharge)
	valid(m, "init-payment", initBody(newOrderID("oa-form"), 1500, "EUR"))
	for _, v := range []walletVersion{{wallet.WalletA, walleta.VersionEC}, {wallet.WalletB, walletb.VersionECv1}} {
		id := newOrderID("oa-" + v.endpoint)
		valid(m, v.endpoint, walletBody(id, 900, v.source(t, ds, m.ID, tokenmaker.PaymentInput{PAN: "5555555555554444", Amount: 900, ExpMonth: "07", ExpYear: "2031"})))
		m.WaitStatus(t, id, "authorized", 10*time.Second)
	}

	// The operations on an order: settle part, refund part of that, void another.
	valid(m, "settle", map[string]any{"order_id": card, "amount": 600}, "Idempotency-Key", "oa-settle-1")
	valid(m, "refund", map[string]any{"order_id": card, "amount": 100, "refund_reason_code": "1001"})
	voided := newOrderID("oa-void")
	valid(m, "charge", chargeBody(voided, "4111111111111111", 500, 24))
	m.WaitStatus(t, voided, "authorized", 10*time.Second)
	valid(m, "void", map[string]any{"order_id": voided})
	valid(m, "status", map[string]any{"order_id": card})
	declined := newOrderID("oa-declined")
	valid(m, "charge", chargeBody(declined, "4000000000000002", 500, 24))
	m.WaitStatus(t, declined, "declined", 10*time.Second) // decline and risk in a status answer

	// The vendor client library's routes (contract section 15).
	auth := chargeBody(newOrderID("oa-auth"), "4111111111111111", 400, 0)
	delete(auth, "settle") // an auth never settles by itself
	valid(m, "auth", auth)
	recurring := chargeBody(newOrderID("oa-recurring"), "", 300, 24)
	delete(recurring, "payment_source")
	recurring["recurring_token"] = token
	valid(m, "recurring", recurring)
	resign := chargeBody(newOrderID("oa-resign"), "", 300, 24)
	delete(resign, "payment_source")
	resign["recurring_token"], resign["card_cvv"] = token, "123"
	valid(m, "resign", resign)
	for op, v := range map[string]walletVersion{"apple-pay": walletVersions[0], "google-pay": walletVersions[2]} {
		valid(m, op, walletBody(newOrderID("oa-"+op), 800, v.source(t, ds, m.ID, tokenmaker.PaymentInput{PAN: "4111111111111111", Amount: 800, ExpMonth: "07", ExpYear: "2031"})))
	}
	if r := valid(m, "arn-code", map[string]any{"order_id": card}); len(r.Get("arn_codes").([]any)) < 2 {
		t.Errorf("arn-code of an authorised, settled and refunded order: %s", r.Body) // auth, settle, refund
	}
	if r := valid(m, "list-orders", map[string]any{"limit": 2}); len(r.Get("orders").([]any)) != 2 {
		t.Errorf("list-orders of a merchant with orders: %s", r.Body)
	}

	// The refusals a merchant can cause, one of each status.
	m.Post(t, "charge", []byte(`[]`)) // 400 2.07
	wrong := *m
	wrong.SecretKey = "not-the-secret"
	wrong.Post(t, "status", map[string]any{"order_id": card})               // 401 1.01
	m.Post(t, "status", map[string]any{"order_id": "no-such-order"})        // 404 2.05
	m.Post(t, "settle", map[string]any{"order_id": voided, "amount": 500})  // 409 0.03
	m.Post(t, "charge", chargeBody(card, "4111111111111111", 999, 24))      // 409 5.06
	m.Post(t, "charge", []byte(`{"pad":"`+strings.Repeat("x", 1<<20)+`"}`)) // 413 2.01
	bad := chargeBody(newOrderID("oa-bad"), "4111111111111111", 1000, 24)
	bad["currency"] = "ABCD"
	m.Post(t, "charge", bad)                                                // 422 2.03
	m.Post(t, "refund", map[string]any{"order_id": card, "amount": 10_000}) // 422 2.02
	slow := n.CreateMerchant(t, 1)
	for i := 0; i < 50 && !openAPI.SawStatus("status", 429); i++ {
		slow.Post(t, "status", map[string]any{"order_id": "any"}) // 429 5.07 once the burst is spent
	}
	req, _ := http.NewRequest(http.MethodGet, n.URL()+"/api/v3/charge", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := openAPI.CheckAnswer("charge", nil, &nodetest.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}); err != nil || resp.StatusCode != 405 {
			t.Errorf("GET /api/v3/charge: %d %v", resp.StatusCode, err)
		}
	}

	for path := range openAPI.Doc().Paths.Map() {
		op := strings.TrimPrefix(path, "/")
		if op == "openapi.yaml" {
			continue
		}
		if !openAPI.SawStatus(op, 200) {
			t.Errorf("no 200 answer of POST %s was checked against the document", path)
		}
	}
	for _, status := range []int{400, 401, 404, 405, 409, 413, 422, 429} {
		if !openAPI.SawStatus("", status) {
			t.Errorf("no %d answer was checked against the document", status)
		}
	}
	t.Logf("checked: %v", openAPI.Seen())
}

// mustJSON marshals a request body.
func mustJSON(t *testing.T, body any) []byte {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
