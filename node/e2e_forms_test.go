package node_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
)

// The hosted form and 3-D Secure through HTTP, as a merchant's server and a
// customer's browser (without the browser: the page's own JSON calls and
// the issuer page's form post) see them. The browser tests are in
// e2e_browser_test.go.

// initBody is a valid init-payment; mutate the map for variants.
func initBody(orderID string, amount int64, currency string) map[string]any {
	return map[string]any{
		"order_id": orderID, "amount": amount, "currency": currency,
		"order_description": "Blue running shoes", "processing_mid": "mid-1",
		"settle":   map[string]any{"delay_hours": 24},
		"customer": map[string]any{"user_id": "u1", "email": "u1@example.com", "ip_address": "203.0.113.7"},
	}
}

// initForm calls init-payment and returns the form URL.
func initForm(t *testing.T, m *nodetest.Merchant, body map[string]any) string {
	t.Helper()
	r := m.Post(t, "init-payment", body)
	if r.Status != 200 || r.Str("status") != "created" || r.Str("payment_form.form_url") == "" {
		t.Fatalf("init-payment: %d %s", r.Status, r.Body)
	}
	return r.Str("payment_form.form_url")
}

// httpDo sends a request and returns status, headers and body.
func httpDo(t *testing.T, method, u, contentType, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	client := &http.Client{Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data
}

func jsonMap(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, data)
	}
	return m
}

// payForm posts a card the way the form page does.
func payForm(t *testing.T, formURL string, card map[string]any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(card)
	status, _, data := httpDo(t, "POST", formURL+"/pay", "application/json", string(b))
	return status, jsonMap(t, data)
}

func formCard(pan string) map[string]any {
	return map[string]any{"card_number": pan, "card_holder_name": "Jane Doe", "card_exp_month": "12",
		"card_exp_year": "2035", "card_cvv": "123"}
}

// answerChallenge posts the issuer page's choice and follows the redirect to
// the result page.
func answerChallenge(t *testing.T, redirectURL, outcome string) {
	t.Helper()
	status, h, _ := httpDo(t, "POST", redirectURL, "application/x-www-form-urlencoded", "outcome="+outcome)
	// The Location is relative: behind a proxy that ends TLS, an absolute
	// one built from the request would be http://.
	if loc := h.Get("Location"); status != http.StatusSeeOther || !strings.HasPrefix(loc, "/api/v3/3ds/") || !strings.HasSuffix(loc, "/result") {
		t.Fatalf("issuer answer: %d %v", status, h)
	}
}

func TestInitPayment(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 10000)

	t.Run("answer and replay", func(t *testing.T) {
		id := newOrderID("init")
		body := initBody(id, 1020, "USD")
		body["subscription_product_id"] = "123e4567-e89b-12d3-a456-426614174000"
		body["payment_form"] = map[string]any{"language": "DE"}
		r := m.Post(t, "init-payment", body)
		formURL := r.Str("payment_form.form_url")
		token := strings.TrimPrefix(formURL, n.URL()+"/api/v3/purchase/")
		if r.Status != 200 || r.Str("order_id") != id || r.Num("amount") != 1020 || r.Str("currency") != "USD" ||
			!regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`).MatchString(token) {
			t.Fatalf("init-payment answer: %s", r.Body)
		}
		if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(r.Str("subscription_id")) {
			t.Fatalf("subscription_id is not a uuid: %s", r.Body)
		}
		again := m.Post(t, "init-payment", body)
		if again.Status != 200 || again.Str("payment_form.form_url") != formURL || again.Str("subscription_id") != r.Str("subscription_id") {
			t.Fatalf("the same request must answer the same form: %s", again.Body)
		}
		body["amount"] = 1021
		expectError(t, m.Post(t, "init-payment", body), 409, "5.06", "order_id")
		// The same order_id through charge is another request.
		expectError(t, m.Post(t, "charge", chargeBody(id, "4111111111111111", 1020, 24)), 409, "5.06", "order_id")
		st := m.Post(t, "status", map[string]any{"order_id": id})
		// transactions is always there in a status answer (interface 4.8): {} before the first.
		if txns, ok := st.Get("transactions").(map[string]any); !ok || st.Str("status") != "created" || len(txns) != 0 || st.Get("payment_source") != nil {
			t.Fatalf("created order: %s", st.Body)
		}
		expectError(t, m.Post(t, "settle", map[string]any{"order_id": id, "amount": 1}), 409, "0.03", "status")
		expectError(t, m.Post(t, "void", map[string]any{"order_id": id}), 409, "0.03", "status")
	})

	t.Run("no subscription without a product", func(t *testing.T) {
		id := newOrderID("init")
		r := m.Post(t, "init-payment", initBody(id, 100, "EUR"))
		if r.Status != 200 || r.Get("subscription_id") != nil {
			t.Fatalf("%s", r.Body)
		}
		// website is not among the fields absent when they do not apply
		// (interface 2.1): "" like descriptor.
		st := m.Post(t, "status", map[string]any{"order_id": id})
		if w, ok := st.Get("website").(string); !ok || w != "" {
			t.Fatalf("an order without a website: %s", st.Body)
		}
	})

	t.Run("validation", func(t *testing.T) {
		b := initBody(newOrderID("init"), 100, "ABCD")
		expectError(t, m.Post(t, "init-payment", b), 422, "2.03", "currency")
		b = initBody(newOrderID("init"), 100, "EUR")
		b["payment_form"] = map[string]any{"language": "deu"}
		expectError(t, m.Post(t, "init-payment", b), 422, "2.01", "payment_form.language")
		b = initBody(newOrderID("init"), 100, "EUR")
		delete(b, "customer")
		expectError(t, m.Post(t, "init-payment", b), 422, "2.01", "customer")
		b = initBody(newOrderID("init"), 100, "EUR")
		b["success_url"] = "not a url"
		expectError(t, m.Post(t, "init-payment", b), 422, "2.01", "success_url")
		bad := *m
		bad.SecretKey = "sk_wrong"
		expectError(t, bad.Post(t, "init-payment", initBody(newOrderID("init"), 100, "EUR")), 401, "1.01", "signature")
	})
}

func TestFormPaymentHTTP(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 10000)
	hooks := newReceiver(t)

	id := newOrderID("form")
	body := initBody(id, 1020, "EUR")
	body["callback_url"] = hooks.URL()
	body["success_url"] = "https://shop.example/ok?cart=7"
	body["website"] = "https://shop.example"
	body["payment_form"] = map[string]any{"language": "fr"}
	formURL := initForm(t, m, body)

	status, h, page := httpDo(t, "GET", formURL, "", "")
	csp := h.Get("Content-Security-Policy")
	if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(string(page), `<html lang="fr">`) ||
		!strings.Contains(string(page), "10,20\u00a0EUR") || !strings.Contains(string(page), "Blue running shoes") {
		t.Fatalf("form page: %d %v\n%s", status, h, page)
	}
	if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'self' https://shop.example") ||
		h.Get("X-Frame-Options") != "" || h.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("page headers: %v", h)
	}
	for _, ac := range []string{"cc-number", "cc-exp-month", "cc-exp-year", "cc-csc", "cc-name"} {
		if !strings.Contains(string(page), `autocomplete="`+ac+`"`) {
			t.Errorf("no input with autocomplete %s", ac)
		}
	}
	if strings.Contains(string(page), "<script>") || strings.Contains(string(page), " style=") {
		t.Error("inline script or style on the page")
	}

	// The charge's validation, attribute for attribute; empty inputs are absent fields.
	st, ans := payForm(t, formURL, map[string]any{"card_number": "4111111111111112", "card_holder_name": "",
		"card_exp_month": "13", "card_exp_year": "2035", "card_cvv": "12"})
	msgs, _ := ans["error"].(map[string]any)["messages"].(map[string]any)
	if st != 422 || msgs["payment_source.card_number"] == nil || msgs["payment_source.card_holder_name"] == nil ||
		msgs["payment_source.card_exp_month"] == nil || msgs["payment_source.card_cvv"] == nil {
		t.Fatalf("validation: %d %v", st, ans)
	}
	if !strings.Contains(msgs["payment_source.card_holder_name"].([]any)[0].(string), "is required") {
		t.Errorf("an empty input must count as absent: %v", msgs)
	}
	if st, _, _ := httpDo(t, "POST", formURL+"/pay", "text/plain", `{"card_number":"4111111111111111"}`); st != 400 {
		t.Errorf("a non-JSON content type must be refused (no cross-site simple posts): %d", st)
	}
	if st, _, _ := httpDo(t, "GET", formURL+"/pay", "", ""); st != 405 {
		t.Errorf("GET pay: %d", st)
	}

	st, ans = payForm(t, formURL, formCard("4111111111111111"))
	if st != 200 || ans["status"] != "processing" || ans["payment_token"] != nil {
		t.Fatalf("pay: %d %v", st, ans)
	}
	final := waitPage(t, formURL+"/status")
	if final["status"] != "authorized" || final["return_url"] != "https://shop.example/ok?cart=7&order_id="+url.QueryEscape(id)+"&status=authorized" {
		t.Fatalf("final page status: %v", final)
	}
	o := m.Post(t, "status", map[string]any{"order_id": id})
	if o.Str("payment_source.masked_card_number") != "411111******1111" || o.Str("cvv_check") != "M" ||
		o.Str("payment_source.payment_token") == "" {
		t.Fatalf("merchant view after a form payment: %s", o.Body)
	}
	// The token pays once.
	st, ans = payForm(t, formURL, formCard("4111111111111111"))
	if st != 409 || ans["error"].(map[string]any)["code"] != "0.03" {
		t.Fatalf("second payment: %d %v", st, ans)
	}
	_, _, page = httpDo(t, "GET", formURL, "", "")
	if strings.Contains(string(page), `id="pg-form"`) {
		t.Fatal("a used form still offers the card inputs")
	}
	// Notifications: processing (the form submit), then authorized.
	calls := hooks.waitCalls(2, 10*time.Second)
	var statuses []string
	for _, c := range calls {
		statuses = append(statuses, jsonMap(t, c.body)["status"].(string))
	}
	if strings.Join(statuses, ",") != "processing,authorized" {
		t.Fatalf("notifications: %v", statuses)
	}

	t.Run("unknown token", func(t *testing.T) {
		st, h, page := httpDo(t, "GET", n.URL()+"/api/v3/purchase/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "", "")
		if st != 404 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(string(page), `lang="en"`) {
			t.Fatalf("unknown form page: %d %v", st, h)
		}
		st, h, _ = httpDo(t, "GET", n.URL()+"/api/v3/purchase/nope/status", "", "")
		if st != 404 || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Fatalf("unknown form call: %d %v", st, h)
		}
		st, _, _ = httpDo(t, "GET", n.URL()+"/api/v3/3ds/nope", "", "")
		if st != 404 {
			t.Fatalf("unknown challenge: %d", st)
		}
	})
	t.Run("assets", func(t *testing.T) {
		for path, ct := range map[string]string{"form.js": "text/javascript", "form.css": "text/css"} {
			st, h, _ := httpDo(t, "GET", n.URL()+"/api/v3/form-assets/"+path, "", "")
			if st != 200 || !strings.HasPrefix(h.Get("Content-Type"), ct) {
				t.Errorf("%s: %d %v", path, st, h)
			}
		}
	})
}

// waitPage polls one of the pages' status calls until the outcome.
func waitPage(t *testing.T, statusURL string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, data := httpDo(t, "GET", statusURL, "", "")
		s := jsonMap(t, data)
		if s["final"] == true {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("no outcome: %v", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An unpaid form expires after --form-ttl, with a notification; it cannot
// be paid. An unanswered 3-D Secure challenge ends the same way (5.01).
func TestFormExpiryHTTP(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--form-ttl", "1500ms"}})
	m := n.CreateMerchant(t, 10000)
	hooks := newReceiver(t)

	id := newOrderID("exp")
	body := initBody(id, 500, "JPY")
	body["callback_url"] = hooks.URL()
	formURL := initForm(t, m, body)
	charge := chargeBody(newOrderID("abandoned"), "4000000000003220", 900, 24)
	if r := m.Post(t, "charge", charge); r.Str("transaction.status") != "verify" {
		t.Fatalf("challenge: %s", r.Body)
	}
	st := m.WaitStatus(t, id, "expired", 10*time.Second)
	if txns, _ := st.Get("transactions").(map[string]any); len(txns) != 0 {
		t.Fatalf("expired order: %s", st.Body)
	}
	calls := hooks.waitCalls(1, 10*time.Second)
	if got := jsonMap(t, calls[0].body)["status"]; got != "expired" {
		t.Fatalf("expiry notification: %v", got)
	}
	status, ans := payForm(t, formURL, formCard("4111111111111111"))
	if status != 409 {
		t.Fatalf("pay an expired form: %d %v", status, ans)
	}
	_, _, page := httpDo(t, "GET", formURL, "", "")
	if !strings.Contains(string(page), `id="pg-expired"`) || strings.Contains(string(page), `id="pg-form"`) {
		t.Fatalf("expired page:\n%s", page)
	}
	ab := m.WaitStatus(t, charge["order_id"].(string), "declined", 10*time.Second)
	if ab.Str("decline.code") != "5.01" || ab.Str("three_ds.authentication_result") != "U" {
		t.Fatalf("abandoned challenge: %s", ab.Body)
	}
}

// rehost points a gateway URL at another node (a customer behind a load
// balancer may reach any of them).
func rehost(t *testing.T, raw string, n *nodetest.Node) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = n.HTTPAddr
	return u.String()
}

// A form paid through a follower, and a 3-D Secure challenge that outlives
// its leader: the new leader leaves it to the customer (it is not due at the
// acquirer) and sends it once the customer answered, on any node.
func TestFormAndThreeDSAcrossLeaders(t *testing.T) {
	c := nodetest.StartCluster(t, 3)
	leader := c.WaitLeader(nil, 10*time.Second)
	m := leader.CreateMerchant(t, 10000)
	follower := c.Other(leader)

	id := newOrderID("cl-form")
	formURL := rehost(t, initForm(t, m.At(follower), initBody(id, 1020, "EUR")), follower)
	// The follower may apply the init a moment after the leader answered.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if st, _, _ := httpDo(t, "GET", formURL, "", ""); st == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the follower never served the form")
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, ans := payForm(t, formURL, formCard("4000000000003220"))
	if st != 200 || ans["redirect_url"] == nil {
		t.Fatalf("pay through a follower: %d %v", st, ans)
	}
	redirect := ans["redirect_url"].(string)

	const resumed = "resumed pending authorisations"
	before := map[*nodetest.Node]int{}
	for _, n := range c.Nodes {
		before[n] = strings.Count(n.Logs(), resumed)
	}
	leader.Kill()
	next := c.WaitLeader(leader, 15*time.Second)
	// The new leader's resume has run (it logs each pass it makes on
	// taking over), and left the challenge alone.
	for deadline := time.Now().Add(10 * time.Second); strings.Count(next.Logs(), resumed) == before[next]; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the new leader never resumed pending authorisations")
		}
	}
	o := m.At(next).Post(t, "status", map[string]any{"order_id": id})
	if o.Str("status") != "processing" || onlyTxn(t, o)["status"] != "verify" {
		t.Fatalf("after the failover, the challenge must wait for the customer: %s", o.Body)
	}
	// The customer answers on whichever node serves them: here the follower.
	other := c.Other(leader, next)
	answerChallenge(t, rehost(t, redirect, other), "success")
	done := m.At(next).WaitStatus(t, id, "authorized", 15*time.Second)
	if done.Str("three_ds.authentication_result") != "Y" {
		t.Fatalf("authorised after the failover: %s", done.Body)
	}
}

// TestFormPostsHaveTheirOwnRateLimit: anyone holding a form's address can
// post to it. Those posts are limited at the merchant's rate, but in a
// bucket of their own: they cannot use up the merchant's signed API calls.
func TestFormPostsHaveTheirOwnRateLimit(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 5) // burst 10
	const forms = 14
	var urls []string
	for i := range forms {
		if i >= 8 {
			time.Sleep(250 * time.Millisecond) // the merchant's own limit, for the init calls
		}
		urls = append(urls, initForm(t, m, initBody(newOrderID("formlimit"), 1020, "EUR")))
	}
	time.Sleep(2 * time.Second) // the merchant's API bucket full again
	card, _ := json.Marshal(formCard("4111111111111111"))
	var limited atomic.Int64
	var wg sync.WaitGroup
	for _, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(u+"/pay", "application/json", bytes.NewReader(card))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode == 429 {
				limited.Add(1)
			}
		}()
	}
	wg.Wait()
	if limited.Load() == 0 {
		t.Fatalf("%d cards at once on the merchant's forms, none refused: the pages have no rate limit", forms)
	}
	for i := range 5 {
		if r := m.Post(t, "status", map[string]any{"order_id": "none-" + strconv.Itoa(i)}); r.Status == 429 {
			t.Fatalf("merchant's status call %d after the forms' posts: %d %s", i, r.Status, r.Body)
		}
	}
}

// Posts to a form that can no longer be paid are answered from its state
// and use up none of the merchant's page rate limit: anyone holding the
// address of their own finished checkout could otherwise keep every other
// customer of the merchant from paying.
func TestFinishedFormPostsUseNoRateLimit(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 5) // burst 10
	finished := initForm(t, m, initBody(newOrderID("formdone"), 1020, "EUR"))
	victim := initForm(t, m, initBody(newOrderID("formvictim"), 1020, "EUR"))
	if st, body := payForm(t, finished, formCard("4000000000000002")); st != 200 {
		t.Fatalf("payment: %d %v", st, body)
	}
	if s := waitPage(t, finished+"/status"); s["status"] != "declined" {
		t.Fatalf("payment with a declined card: %v", s)
	}
	card, _ := json.Marshal(formCard("4111111111111111"))
	for i := range 60 {
		body, want := `{}`, 422 // refused before anything else
		if i%2 == 1 {
			body, want = string(card), 409 // the form is closed
		}
		if st, _, data := httpDo(t, "POST", finished+"/pay", "application/json", body); st != want {
			t.Fatalf("post %d to a declined form: %d %s, want %d", i, st, data, want)
		}
	}
	if st, body := payForm(t, victim, formCard("4111111111111111")); st != 200 {
		t.Fatalf("another customer's payment after the posts: %d %v", st, body)
	}
	if s := waitPage(t, victim+"/status"); s["status"] != "authorized" {
		t.Fatalf("another customer's payment after the posts: %v", s)
	}
}
