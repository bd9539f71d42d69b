package node_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
)

var orderSeq atomic.Int64

func newOrderID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), orderSeq.Add(1))
}

// chargeBody is a valid charge with the given card; mutate the map for variants.
func chargeBody(orderID, card string, amount int64, delayHours int) map[string]any {
	cvv := "123"
	if strings.HasPrefix(card, "34") || strings.HasPrefix(card, "37") {
		cvv = "1234"
	}
	return map[string]any{
		"order_id": orderID, "amount": amount, "currency": "USD",
		"order_description": "e2e order", "processing_mid": "mid-1",
		"dynamic_descriptor": "SHOP*E2E",
		"settle":             map[string]any{"delay_hours": delayHours},
		"customer":           map[string]any{"user_id": "u1", "email": "u1@example.com", "ip_address": "203.0.113.7"},
		"payment_source": map[string]any{
			"type": "card", "card_number": card, "card_holder_name": "Jane Doe",
			"card_exp_month": "12", "card_exp_year": "2035", "card_cvv": cvv,
		},
	}
}

func expectError(t *testing.T, r *nodetest.Response, status int, code, attr string) {
	t.Helper()
	if r.Status != status || r.ErrorCode() != code || (attr != "" && !r.HasMessage(attr)) {
		t.Fatalf("want %d %s on %q, got %d %s", status, code, attr, r.Status, r.Body)
	}
}

// messages returns error.messages[attr] of an error answer (attributes are
// dotted paths themselves, so Get cannot reach them).
func messages(r *nodetest.Response, attr string) []any {
	all, _ := r.Get("error.messages").(map[string]any)
	msgs, _ := all[attr].([]any)
	return msgs
}

// tokenOf charges card with a billing address in city and returns the
// payment token of the authorised order.
func tokenOf(t *testing.T, m *nodetest.Merchant, card, city string) string {
	t.Helper()
	id := newOrderID("tok-src")
	body := chargeBody(id, card, 100, 24)
	body["payment_source"].(map[string]any)["billing_address"] = map[string]any{"line1": "1 Main St", "city": city, "country": "US"}
	if r := m.Post(t, "charge", body); r.Status != 200 {
		t.Fatalf("charge: %s", r.Body)
	}
	tok := m.WaitStatus(t, id, "authorized", 5*time.Second).Str("payment_source.payment_token")
	if tok == "" {
		t.Fatalf("no payment token for %s", card)
	}
	return tok
}

// tokenCharge is a valid token charge; source members are added to its
// payment_source.
func tokenCharge(orderID, token string, source map[string]any) map[string]any {
	body := chargeBody(orderID, "", 250, 24)
	ps := map[string]any{"type": "token", "payment_token": token}
	for k, v := range source {
		ps[k] = v
	}
	body["payment_source"] = ps
	return body
}

func TestCardLifecycle(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 10000)

	t.Run("a charge for a subscription product gets its subscription_id", func(t *testing.T) {
		id := newOrderID("sub")
		body := chargeBody(id, "4111111111111111", 1020, 24)
		body["subscription_product_id"] = "123e4567-e89b-12d3-a456-426614174000"
		r := m.Post(t, "charge", body)
		sub := r.Str("subscription_id")
		if r.Status != 200 || !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(sub) {
			t.Fatalf("charge: %s", r.Body)
		}
		if again := m.Post(t, "charge", body); again.Status != 200 || again.Str("subscription_id") != sub {
			t.Fatalf("a repeat answers the same subscription: %s", again.Body)
		}
		if st := m.WaitStatus(t, id, "authorized", 5*time.Second); st.Str("subscription_id") != sub {
			t.Fatalf("status: %s", st.Body)
		}
		if r := m.Post(t, "charge", chargeBody(newOrderID("nosub"), "4111111111111111", 1020, 24)); r.Get("subscription_id") != nil {
			t.Fatalf("no product, no subscription: %s", r.Body)
		}
	})

	t.Run("charge settle refund", func(t *testing.T) {
		id := newOrderID("life")
		r := m.Post(t, "charge", chargeBody(id, "4111111111111111", 1020, 24))
		if r.Status != 200 || r.Str("status") != "processing" || r.Str("transaction.operation") != "auth" ||
			r.Str("transaction.status") != "created" || r.Str("payment_source.masked_card_number") != "411111******1111" {
			t.Fatalf("charge: %d %s", r.Status, r.Body)
		}
		st := m.WaitStatus(t, id, "authorized", 5*time.Second)
		if st.Str("avs_check") != "Y" || st.Str("cvv_check") != "M" || st.Str("descriptor") != "SHOP*E2E" ||
			st.Str("payment_source.payment_token") == "" || st.Str("payment_source.card_brand") != "visa" {
			t.Fatalf("authorized order: %s", st.Body)
		}
		r = m.Post(t, "settle", map[string]any{"order_id": id, "amount": 600})
		if r.Status != 200 || r.Str("status") != "settled" || r.Num("settled_amount") != 600 || r.Str("transaction.operation") != "settle" {
			t.Fatalf("settle: %s", r.Body)
		}
		expectError(t, m.Post(t, "settle", map[string]any{"order_id": id, "amount": 600}), 409, "0.03", "status")
		expectError(t, m.Post(t, "refund", map[string]any{"order_id": id, "amount": 601}), 422, "2.02", "amount")
		r = m.Post(t, "refund", map[string]any{"order_id": id, "amount": 100})
		if r.Status != 200 || r.Str("status") != "settled" || r.Num("refunded_amount") != 100 || r.Str("transaction.operation") != "refund" {
			t.Fatalf("partial refund: %s", r.Body)
		}
		r = m.Post(t, "refund", map[string]any{"order_id": id, "amount": 500})
		if r.Status != 200 || r.Str("status") != "refunded" || r.Num("refunded_amount") != 600 {
			t.Fatalf("final refund: %s", r.Body)
		}
		expectError(t, m.Post(t, "refund", map[string]any{"order_id": id, "amount": 1}), 409, "0.03", "status")
		st = m.Post(t, "status", map[string]any{"order_id": id})
		if txns, _ := st.Get("transactions").(map[string]any); len(txns) != 4 {
			t.Fatalf("want 4 transactions (auth, settle, 2 refunds): %s", st.Body)
		}
	})

	t.Run("void", func(t *testing.T) {
		id := newOrderID("void")
		m.Post(t, "charge", chargeBody(id, "5555555555554444", 500, 24))
		m.WaitStatus(t, id, "authorized", 5*time.Second)
		r := m.Post(t, "void", map[string]any{"order_id": id})
		if r.Status != 200 || r.Str("status") != "voided" || r.Str("transaction.operation") != "void" || r.Num("transaction.amount") != 500 {
			t.Fatalf("void: %s", r.Body)
		}
		expectError(t, m.Post(t, "settle", map[string]any{"order_id": id, "amount": 500}), 409, "0.03", "status")
		expectError(t, m.Post(t, "void", map[string]any{"order_id": id}), 409, "0.03", "status")
	})

	t.Run("void of another amount than the order's", func(t *testing.T) {
		id := newOrderID("void-amt")
		m.Post(t, "charge", chargeBody(id, "4111111111111111", 1000, 24))
		m.WaitStatus(t, id, "authorized", 5*time.Second)
		for _, amount := range []int64{5, 999, 1001} {
			r := m.Post(t, "void", map[string]any{"order_id": id, "amount": amount})
			expectError(t, r, 422, "2.02", "amount")
			if msgs := messages(r, "amount"); len(msgs) != 1 || msgs[0] != "amount should be 1000 for the void operation: only the full order amount can be voided" {
				t.Fatalf("void of %d: %s", amount, r.Body)
			}
		}
		expectError(t, m.Post(t, "void", map[string]any{"order_id": id, "amount": 0}), 422, "2.01", "amount")
		if st := m.Post(t, "status", map[string]any{"order_id": id}); st.Str("status") != "authorized" || len(st.Get("transactions").(map[string]any)) != 1 {
			t.Fatalf("a refused void must change nothing: %s", st.Body)
		}
		r := m.Post(t, "void", map[string]any{"order_id": id, "amount": 1000})
		if r.Status != 200 || r.Str("status") != "voided" || r.Num("transaction.amount") != 1000 {
			t.Fatalf("void of the full amount: %s", r.Body)
		}
		// Voided: the status refusal comes first, as for settle and refund.
		expectError(t, m.Post(t, "void", map[string]any{"order_id": id, "amount": 5}), 409, "0.03", "status")
	})

	t.Run("sale when delay is zero", func(t *testing.T) {
		id := newOrderID("sale")
		r := m.Post(t, "charge", chargeBody(id, "378282246310005", 700, 0))
		if r.Str("transaction.operation") != "sale" {
			t.Fatalf("want a sale transaction: %s", r.Body)
		}
		st := m.WaitStatus(t, id, "settled", 5*time.Second)
		if st.Num("settled_amount") != 700 {
			t.Fatalf("sale settles the amount: %s", st.Body)
		}
	})

	t.Run("token payment", func(t *testing.T) {
		id := newOrderID("tok-src")
		m.Post(t, "charge", chargeBody(id, "4111111111111111", 100, 24))
		tok := m.WaitStatus(t, id, "authorized", 5*time.Second).Str("payment_source.payment_token")
		id2 := newOrderID("tok-use")
		body := chargeBody(id2, "", 250, 24)
		body["payment_source"] = map[string]any{"type": "token", "payment_token": tok}
		r := m.Post(t, "charge", body)
		if r.Status != 200 || r.Str("payment_source.type") != "token" {
			t.Fatalf("token charge: %s", r.Body)
		}
		st := m.WaitStatus(t, id2, "authorized", 5*time.Second)
		if st.Str("payment_source.masked_card_number") != "411111******1111" {
			t.Fatalf("token order shows the card: %s", st.Body)
		}
		body["order_id"] = newOrderID("tok-bad")
		body["payment_source"] = map[string]any{"type": "token", "payment_token": "tok_doesnotexist"}
		expectError(t, m.Post(t, "charge", body), 422, "7.01", "payment_source.payment_token")
	})
}

// A token charge is a charge like a card one (interface 4.3): its card_cvv
// goes to the acquirer, checked against the token's card once the token
// resolves, and its billing_address is the order's.
func TestTokenChargeUsesItsRequest(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 10000)
	visa := tokenOf(t, m, "4111111111111111", "Springfield")
	amex := tokenOf(t, m, "378282246310005", "Shelbyville")

	t.Run("card_cvv reaches the acquirer", func(t *testing.T) {
		for _, c := range []struct{ token, cvv string }{{visa, "123"}, {amex, "1234"}} {
			id := newOrderID("tok-cvv")
			if r := m.Post(t, "charge", tokenCharge(id, c.token, map[string]any{"card_cvv": c.cvv})); r.Status != 200 {
				t.Fatalf("token charge with card_cvv %s: %s", c.cvv, r.Body)
			}
			if st := m.WaitStatus(t, id, "authorized", 5*time.Second); st.Str("cvv_check") != "M" {
				t.Fatalf("cvv_check %q, want the sandbox's M for a given CVV: %s", st.Str("cvv_check"), st.Body)
			}
		}
		id := newOrderID("tok-nocvv")
		m.Post(t, "charge", tokenCharge(id, visa, nil))
		if st := m.WaitStatus(t, id, "authorized", 5*time.Second); st.Str("cvv_check") != "P" {
			t.Fatalf("without card_cvv cvv_check %q, want P: %s", st.Str("cvv_check"), st.Body)
		}
	})

	t.Run("card_cvv must fit the token's card", func(t *testing.T) {
		for _, c := range []struct{ token, cvv, msg string }{
			{visa, "1234", "payment_source.card_cvv should have exactly 3 digits"},
			{amex, "123", "payment_source.card_cvv should have exactly 4 digits for an American Express card"},
		} {
			id := newOrderID("tok-badcvv")
			r := m.Post(t, "charge", tokenCharge(id, c.token, map[string]any{"card_cvv": c.cvv}))
			expectError(t, r, 422, "2.06", "payment_source.card_cvv")
			if msgs := messages(r, "payment_source.card_cvv"); len(msgs) != 1 || msgs[0] != c.msg {
				t.Fatalf("want the card charge's message %q: %s", c.msg, r.Body)
			}
			expectError(t, m.Post(t, "status", map[string]any{"order_id": id}), 404, "2.05", "order_id")
		}
	})

	t.Run("billing_address of the request, else of the token", func(t *testing.T) {
		id := newOrderID("tok-bill")
		m.Post(t, "charge", tokenCharge(id, visa, map[string]any{
			"billing_address": map[string]any{"line1": "742 Evergreen Terrace", "city": "Capital City", "country": "US"}}))
		st := m.WaitStatus(t, id, "authorized", 5*time.Second)
		if st.Str("payment_source.billing_address.city") != "Capital City" ||
			st.Str("payment_source.billing_address.line1") != "742 Evergreen Terrace" ||
			st.Str("payment_source.masked_card_number") != "411111******1111" {
			t.Fatalf("want the request's billing_address on the token's card: %s", st.Body)
		}
		id = newOrderID("tok-bill")
		m.Post(t, "charge", tokenCharge(id, visa, nil))
		if st := m.WaitStatus(t, id, "authorized", 5*time.Second); st.Str("payment_source.billing_address.city") != "Springfield" {
			t.Fatalf("without one, want the token's billing_address: %s", st.Body)
		}
	})
}

// Every test card of contract section 7 gives its outcome.
func TestSandboxCards(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 10000)
	cases := []struct {
		card, status, decline, cvv, risk string
	}{
		{"4111111111111111", "authorized", "", "M", "accept"},
		{"5555555555554444", "authorized", "", "M", "accept"},
		{"378282246310005", "authorized", "", "M", "accept"},
		{"4242424242424242", "authorized", "", "M", "accept"},
		{"4000000000000002", "declined", "3.08", "", ""},
		{"4000000000009995", "declined", "3.02", "", ""},
		{"4000000000000069", "declined", "2.09", "", ""},
		{"4000000000000127", "declined", "2.06", "N", ""},
		{"4000000000000119", "declined", "6.02", "", ""},
		{"4100000000000019", "declined", "4.01", "", "decline"},
	}
	for _, c := range cases {
		t.Run(c.card, func(t *testing.T) {
			id := newOrderID("card")
			if r := m.Post(t, "charge", chargeBody(id, c.card, 1000, 24)); r.Status != 200 {
				t.Fatalf("charge: %s", r.Body)
			}
			st := m.WaitStatus(t, id, c.status, 5*time.Second)
			if st.Str("decline.code") != c.decline {
				t.Errorf("decline.code = %q, want %q (%s)", st.Str("decline.code"), c.decline, st.Body)
			}
			if c.decline != "" && st.Str("decline.message") == "" {
				t.Errorf("declined without a message: %s", st.Body)
			}
			if c.cvv != "" && st.Str("cvv_check") != c.cvv {
				t.Errorf("cvv_check = %q, want %q", st.Str("cvv_check"), c.cvv)
			}
			if c.risk != "" && st.Str("risk.decision") != c.risk {
				t.Errorf("risk.decision = %q, want %q", st.Str("risk.decision"), c.risk)
			}
			auth := onlyTxn(t, st)
			want := map[string]string{"authorized": "success", "declined": "fail"}[c.status]
			if auth["status"] != want || (c.status == "authorized") != (auth["auth_code"] != nil) {
				t.Errorf("auth transaction %v, want status %s", auth, want)
			}
		})
	}
}

func onlyTxn(t *testing.T, r *nodetest.Response) map[string]any {
	t.Helper()
	txns, _ := r.Get("transactions").(map[string]any)
	if len(txns) != 1 {
		t.Fatalf("want exactly one transaction: %s", r.Body)
	}
	for _, v := range txns {
		return v.(map[string]any)
	}
	return nil
}

func TestValidationAndErrors(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 10000)

	t.Run("every violation at once", func(t *testing.T) {
		body := chargeBody(newOrderID("bad"), "4111111111111111", 100, 24)
		body["currency"] = "ABCD"
		delete(body, "order_description")
		body["customer"] = map[string]any{"user_id": "u1", "email": "u1@example.com"}
		r := m.Post(t, "charge", body)
		expectError(t, r, 422, "2.01", "currency")
		for _, a := range []string{"order_description", "customer.ip_address"} {
			if !r.HasMessage(a) {
				t.Errorf("missing %s in %s", a, r.Body)
			}
		}
	})
	t.Run("a value of the wrong type hides no other violation", func(t *testing.T) {
		body := chargeBody(newOrderID("bad"), "4111111111111111", 100, 24)
		body["amount"] = "100"
		body["customer"] = "jane"
		delete(body, "processing_mid")
		r := m.Post(t, "charge", body)
		expectError(t, r, 422, "2.01", "amount")
		for _, a := range []string{"customer", "processing_mid"} {
			if !r.HasMessage(a) {
				t.Errorf("missing %s in %s", a, r.Body)
			}
		}
		if msgs, _ := r.Get("error.messages.customer").([]any); len(msgs) != 1 || msgs[0] != "customer should be an object" {
			t.Errorf("customer: want only its type error, got %v", msgs)
		}
	})
	cardCases := []struct {
		name, field, value, code, attr string
	}{
		{"currency", "currency", "ABCD", "2.03", "currency"},
		{"luhn", "card_number", "4111111111111112", "2.08", "payment_source.card_number"},
		{"expiry", "card_exp_year", "2020", "2.09", "payment_source.card_exp_year"},
		{"cvv", "card_cvv", "12", "2.06", "payment_source.card_cvv"},
	}
	for _, c := range cardCases {
		t.Run(c.name, func(t *testing.T) {
			body := chargeBody(newOrderID("bad"), "4111111111111111", 100, 24)
			if c.field == "currency" {
				body["currency"] = c.value
			} else {
				body["payment_source"].(map[string]any)[c.field] = c.value
			}
			expectError(t, m.Post(t, "charge", body), 422, c.code, "")
		})
	}
	t.Run("nothing half-applied", func(t *testing.T) {
		id := newOrderID("bad")
		body := chargeBody(id, "4111111111111112", 100, 24)
		expectError(t, m.Post(t, "charge", body), 422, "2.08", "payment_source.card_number")
		expectError(t, m.Post(t, "status", map[string]any{"order_id": id}), 404, "2.05", "order_id")
	})
	t.Run("body", func(t *testing.T) {
		expectError(t, m.Post(t, "charge", ""), 400, "2.07", "body")
		expectError(t, m.Post(t, "charge", "[1,2]"), 400, "2.07", "body")
		expectError(t, m.Post(t, "charge", `{"order_id":"a","order_id":"b"}`), 400, "2.07", "body")
		expectError(t, m.Post(t, "settle", `{"order_id":"a","amount":"ten"}`), 422, "2.01", "amount")
		big := `{"order_id":"` + strings.Repeat("x", 1<<20) + `"}`
		expectError(t, m.Post(t, "status", big), 413, "2.01", "body")
	})
	t.Run("auth", func(t *testing.T) {
		bad := *m
		bad.SecretKey = "sk_wrong"
		expectError(t, bad.Post(t, "status", map[string]any{"order_id": "x"}), 401, "1.01", "signature")
		bad = *m
		bad.PublicKey = "pk_unknown"
		expectError(t, bad.Post(t, "status", map[string]any{"order_id": "x"}), 401, "1.01", "merchant")
		req, _ := http.NewRequest("POST", n.URL()+"/api/v3/status", strings.NewReader(`{}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 401 {
			t.Fatalf("no headers: %v %v", err, resp)
		}
		resp.Body.Close()
	})
	t.Run("paths and methods answer JSON", func(t *testing.T) {
		for _, c := range []struct {
			method, path string
			status       int
		}{{"POST", "/api/v3/nope", 404}, {"GET", "/api/v3/charge", 405}, {"POST", "/api/v1/nope", 404}} {
			req, _ := http.NewRequest(c.method, n.URL()+c.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"))
			}
		}
	})
	t.Run("v1 alias", func(t *testing.T) {
		id := newOrderID("v1")
		m.Post(t, "charge", chargeBody(id, "4111111111111111", 100, 24))
		v1 := *m
		v1.BaseURL = n.URL() + "/api/v1/../v1" // same handler under /api/v1
		v1.BaseURL = n.URL()
		r, err := v1.TryPost("../v1/status", map[string]any{"order_id": id})
		if err != nil || r.Status != 200 || r.Str("order_id") != id {
			t.Fatalf("v1 status: %v %v", err, r)
		}
	})
	t.Run("rate limit", func(t *testing.T) {
		slow := n.CreateMerchant(t, 1)
		limited := 0
		for i := 0; i < 10; i++ {
			r := slow.Post(t, "status", map[string]any{"order_id": "x"})
			if r.Status == 429 {
				limited++
				if r.ErrorCode() != "5.07" || r.Header.Get("Retry-After") == "" {
					t.Fatalf("429 without 5.07 and Retry-After: %v %s", r.Header, r.Body)
				}
			}
		}
		if limited == 0 {
			t.Fatal("10 requests at 1 rps were never limited")
		}
	})
}

// authorizedCharge charges amount with a new order id (prefix) and waits
// for its authorisation, to be settled within a day.
func authorizedCharge(t *testing.T, m *nodetest.Merchant, prefix string, amount int64) string {
	t.Helper()
	id := newOrderID(prefix)
	if r := m.Post(t, "charge", chargeBody(id, "4111111111111111", amount, 24)); r.Status != 200 {
		t.Fatalf("charge: %s", r.Body)
	}
	m.WaitStatus(t, id, "authorized", 5*time.Second)
	return id
}

func TestIdempotencyAndIsolation(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	a := n.CreateMerchant(t, 10000)
	b := n.CreateMerchant(t, 10000)

	t.Run("50 concurrent identical charges make one order and one authorisation", func(t *testing.T) {
		id := newOrderID("idem")
		body := chargeBody(id, "4111111111111111", 990, 24)
		var wg sync.WaitGroup
		txnIDs := make([]string, 50)
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := a.Post(t, "charge", body)
				if r.Status != 200 {
					t.Errorf("charge %d: %s", i, r.Body)
					return
				}
				txnIDs[i] = r.Str("transaction.id")
			}()
		}
		wg.Wait()
		for _, x := range txnIDs {
			if x != txnIDs[0] || x == "" {
				t.Fatalf("different transactions for one order: %v", txnIDs)
			}
		}
		st := a.WaitStatus(t, id, "authorized", 5*time.Second)
		onlyTxn(t, st)
		changed := chargeBody(id, "4111111111111111", 991, 24)
		expectError(t, a.Post(t, "charge", changed), 409, "5.06", "order_id")
	})

	t.Run("Idempotency-Key on refund", func(t *testing.T) {
		id := newOrderID("idk")
		a.Post(t, "charge", chargeBody(id, "4111111111111111", 1000, 0))
		a.WaitStatus(t, id, "settled", 5*time.Second)
		refund := map[string]any{"order_id": id, "amount": 100}
		r1 := a.Post(t, "refund", refund, "Idempotency-Key", "k-1")
		r2 := a.Post(t, "refund", refund, "Idempotency-Key", "k-1")
		if r1.Status != 200 || string(r1.Body) != string(r2.Body) {
			t.Fatalf("same key, same body must replay the first answer:\n%s\n%s", r1.Body, r2.Body)
		}
		expectError(t, a.Post(t, "refund", map[string]any{"order_id": id, "amount": 200}, "Idempotency-Key", "k-1"), 409, "5.06", "idempotency-key")
		// Keys are text of at most 255 characters; nothing is refunded for a refused one.
		expectError(t, a.Post(t, "refund", refund, "Idempotency-Key", "k-\xff\xfe"), 422, "2.01", "idempotency-key")
		expectError(t, a.Post(t, "refund", refund, "Idempotency-Key", strings.Repeat("é", 256)), 422, "2.01", "idempotency-key")
		if r := a.Post(t, "refund", refund, "Idempotency-Key", strings.Repeat("é", 255)); r.Status != 200 || r.Num("refunded_amount") != 200 {
			t.Fatalf("a key of 255 characters: %s", r.Body)
		}
		r3 := a.Post(t, "refund", refund)
		if r3.Status != 200 || r3.Num("refunded_amount") != 300 {
			t.Fatalf("without a key a repeated refund is a new refund: %s", r3.Body)
		}
		// The same key at another merchant is another key.
		other := newOrderID("idk-b")
		b.Post(t, "charge", chargeBody(other, "4111111111111111", 1000, 0))
		b.WaitStatus(t, other, "settled", 5*time.Second)
		if r := b.Post(t, "refund", map[string]any{"order_id": other, "amount": 100}, "Idempotency-Key", "k-1"); r.Status != 200 {
			t.Fatalf("keys are scoped to the merchant: %s", r.Body)
		}
	})

	t.Run("an Idempotency-Key whose first answer was a refusal repeats the refusal", func(t *testing.T) {
		id := authorizedCharge(t, a, "idk-rej", 1000)
		refund := map[string]any{"order_id": id, "amount": 400}
		expectError(t, a.Post(t, "refund", refund, "Idempotency-Key", "rk-1"), 409, "0.03", "status")
		if r := a.Post(t, "settle", map[string]any{"order_id": id, "amount": 1000}); r.Status != 200 {
			t.Fatalf("settle: %s", r.Body)
		}
		// The order would take the refund now; the key's first answer stands.
		expectError(t, a.Post(t, "refund", refund, "Idempotency-Key", "rk-1"), 409, "0.03", "status")
		expectError(t, a.Post(t, "refund", map[string]any{"order_id": id, "amount": 401}, "Idempotency-Key", "rk-1"), 409, "5.06", "idempotency-key")
		if st := a.Post(t, "status", map[string]any{"order_id": id}); st.Num("refunded_amount") != 0 {
			t.Fatalf("nothing may be refunded under the refused key: %s", st.Body)
		}
		// An amount refusal the same way; another key is another request.
		expectError(t, a.Post(t, "refund", map[string]any{"order_id": id, "amount": 1001}, "Idempotency-Key", "rk-2"), 422, "2.02", "amount")
		expectError(t, a.Post(t, "refund", map[string]any{"order_id": id, "amount": 1001}, "Idempotency-Key", "rk-2"), 422, "2.02", "amount")
		if r := a.Post(t, "refund", refund, "Idempotency-Key", "rk-3"); r.Status != 200 || r.Num("refunded_amount") != 400 {
			t.Fatalf("refund under a new key: %s", r.Body)
		}
	})

	t.Run("a void refused for its amount under an Idempotency-Key is replayed", func(t *testing.T) {
		id := authorizedCharge(t, a, "idk-void", 1000)
		part := map[string]any{"order_id": id, "amount": 5}
		expectError(t, a.Post(t, "void", part, "Idempotency-Key", "vk-1"), 422, "2.02", "amount")
		expectError(t, a.Post(t, "void", part, "Idempotency-Key", "vk-1"), 422, "2.02", "amount")
		// The full amount is another request: not under the refused key.
		full := map[string]any{"order_id": id, "amount": 1000}
		expectError(t, a.Post(t, "void", full, "Idempotency-Key", "vk-1"), 409, "5.06", "idempotency-key")
		if st := a.Post(t, "status", map[string]any{"order_id": id}); st.Str("status") != "authorized" {
			t.Fatalf("nothing may be voided under the refused key: %s", st.Body)
		}
		r1 := a.Post(t, "void", full, "Idempotency-Key", "vk-2")
		r2 := a.Post(t, "void", full, "Idempotency-Key", "vk-2")
		if r1.Status != 200 || r1.Str("status") != "voided" || string(r1.Body) != string(r2.Body) {
			t.Fatalf("a keyed void of the full amount, repeated:\n%s\n%s", r1.Body, r2.Body)
		}
	})

	t.Run("an Idempotency-Key used for a settle is not a refund's", func(t *testing.T) {
		// Settle and refund bodies can be the same bytes; the operation is part
		// of the request, so the refund is another request under the same key.
		id := authorizedCharge(t, a, "idk-op", 1000)
		body := map[string]any{"order_id": id, "amount": 1000}
		if r := a.Post(t, "settle", body, "Idempotency-Key", "op-key"); r.Status != 200 || r.Str("status") != "settled" {
			t.Fatalf("settle: %s", r.Body)
		}
		expectError(t, a.Post(t, "refund", body, "Idempotency-Key", "op-key"), 409, "5.06", "idempotency-key")
		if st := a.Post(t, "status", map[string]any{"order_id": id}); st.Num("refunded_amount") != 0 || st.Str("status") != "settled" {
			t.Fatalf("a refused refund must change nothing: %s", st.Body)
		}
		if r := a.Post(t, "refund", body, "Idempotency-Key", "op-key-2"); r.Status != 200 || r.Str("status") != "refunded" {
			t.Fatalf("refund under its own key: %s", r.Body)
		}
	})

	t.Run("merchant B cannot see or use merchant A's order and token", func(t *testing.T) {
		id := newOrderID("iso")
		a.Post(t, "charge", chargeBody(id, "4111111111111111", 100, 24))
		tok := a.WaitStatus(t, id, "authorized", 5*time.Second).Str("payment_source.payment_token")
		expectError(t, b.Post(t, "status", map[string]any{"order_id": id}), 404, "2.05", "order_id")
		expectError(t, b.Post(t, "settle", map[string]any{"order_id": id, "amount": 100}), 404, "2.05", "order_id")
		body := chargeBody(newOrderID("iso-b"), "", 100, 24)
		body["payment_source"] = map[string]any{"type": "token", "payment_token": tok}
		expectError(t, b.Post(t, "charge", body), 422, "7.01", "payment_source.payment_token")
	})
}
