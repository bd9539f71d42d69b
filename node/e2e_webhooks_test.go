package node_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/transport/signature"
)

// receiver is a merchant's notification endpoint on loopback. Each call
// takes the next scripted answer; past the script it answers ok.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	calls  []call
	script []func(w http.ResponseWriter)
	hang   chan struct{}
}

type call struct {
	at        time.Time
	merchant  string
	signature string
	body      []byte
}

func newReceiver(t *testing.T, script ...func(w http.ResponseWriter)) *receiver {
	r := &receiver{t: t, script: script}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.calls = append(r.calls, call{at: time.Now(), merchant: req.Header.Get("merchant"), signature: req.Header.Get("signature"), body: body})
	i := len(r.calls) - 1
	var answer func(http.ResponseWriter)
	if i < len(r.script) {
		answer = r.script[i]
	}
	hang := r.hang
	r.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-req.Context().Done():
		}
		return
	}
	if answer == nil {
		answer = ok
	}
	answer(w)
}

func (r *receiver) URL() string { return r.srv.URL + "/hook" }

func (r *receiver) Calls() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

func (r *receiver) waitCalls(n int, timeout time.Duration) []call {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if c := r.Calls(); len(c) >= n {
			return c
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.t.Fatalf("receiver got %d calls, want %d", len(r.Calls()), n)
	return nil
}

func ok(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"status":"ok"}`))
}
func fail500(w http.ResponseWriter) { w.WriteHeader(500) }
func notOK(w http.ResponseWriter)   { w.Write([]byte(`{"status":"received"}`)) }

func chargeWithCallback(m *nodetest.Merchant, t *testing.T, url string) string {
	t.Helper()
	id := newOrderID("hook")
	body := chargeBody(id, "4111111111111111", 1200, 24)
	body["callback_url"] = url
	if r := m.Post(t, "charge", body); r.Status != 200 {
		t.Fatalf("charge: %s", r.Body)
	}
	return id
}

// waitDeliveryStates waits until the operator's view lists the order's
// notifications in the given states, and returns it.
func waitDeliveryStates(t *testing.T, n *nodetest.Node, merchant, orderID string, states ...string) []map[string]any {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d := listDeliveries(t, n, merchant, orderID)
		got := make([]string, len(d))
		for i := range d {
			got[i], _ = d[i]["state"].(string)
		}
		if slices.Equal(got, states) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries of %s in states %v, want %v: %v", orderID, got, states, d)
		}
	}
}

func listDeliveries(t *testing.T, n *nodetest.Node, merchant, orderID string) []map[string]any {
	t.Helper()
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/admin/v1/webhooks?merchant_id=%s&order_id=%s", n.URL(), merchant, orderID), nil)
	req.Header.Set("Authorization", "Bearer "+nodetest.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Deliveries []map[string]any `json:"deliveries"`
	}
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(data, &out) != nil {
		t.Fatalf("list deliveries: %d %s", resp.StatusCode, data)
	}
	return out.Deliveries
}

func TestWebhookDeliveredSigned(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 10000)
	rcv := newReceiver(t)
	id := chargeWithCallback(m, t, rcv.URL())
	c := rcv.waitCalls(1, 5*time.Second)[0]
	if c.merchant != m.WebhookPK {
		t.Fatalf("merchant header %q, want the webhook public key", c.merchant)
	}
	if !signature.Verify(m.WebhookPK, m.WebhookSK, c.body, []byte(c.signature)) {
		t.Fatal("notification signature does not verify with the webhook key pair")
	}
	var body map[string]any
	json.Unmarshal(c.body, &body)
	if body["order_id"] != id || body["status"] != "authorized" || body["transactions"] == nil || body["payment_source"] == nil {
		t.Fatalf("notification body: %s", c.body)
	}
	if strings.Contains(string(c.body), "4111111111111111") {
		t.Fatal("notification carries the card number")
	}
	// A status change later (settle) sends a second one.
	m.Post(t, "settle", map[string]any{"order_id": id, "amount": 1200})
	c2 := rcv.waitCalls(2, 5*time.Second)[1]
	if !strings.Contains(string(c2.body), `"status":"settled"`) {
		t.Fatalf("second notification: %s", c2.body)
	}
	// Once both are recorded delivered (final: nothing schedules them
	// again), they were sent once each.
	waitDeliveryStates(t, n, m.ID, id, "delivered", "delivered")
	if got := len(rcv.Calls()); got != 2 {
		t.Fatalf("delivered notifications are not sent again: %d calls", got)
	}
}

// Three failures (500, not-ok body, 500) then success, at the configured
// offsets from the first attempt.
func TestWebhookRetriesOnSchedule(t *testing.T) {
	delays := []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 1200 * time.Millisecond, 2400 * time.Millisecond}
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--webhook-retry-delays", "300ms,600ms,1200ms,2400ms"}})
	m := n.CreateMerchant(t, 10000)
	rcv := newReceiver(t, fail500, notOK, fail500)
	id := chargeWithCallback(m, t, rcv.URL())
	calls := rcv.waitCalls(4, 10*time.Second)
	first := calls[0].at
	for i := 1; i < 4; i++ {
		off := calls[i].at.Sub(first)
		if off < delays[i-1]-20*time.Millisecond || off > delays[i-1]+700*time.Millisecond {
			t.Errorf("attempt %d at +%s, want about +%s", i+1, off, delays[i-1])
		}
	}
	d := waitDeliveryStates(t, n, m.ID, id, "delivered")
	attempts := d[0]["attempts"].([]any)
	if len(attempts) != 4 {
		t.Fatalf("want 4 attempts recorded: %v", attempts)
	}
	a0 := attempts[0].(map[string]any)
	if a0["http_code"] != float64(500) || a0["error"] == "" {
		t.Fatalf("first attempt record: %v", a0)
	}
	if a1 := attempts[1].(map[string]any); !strings.Contains(fmt.Sprint(a1["error"]), "status") {
		t.Fatalf("a 200 without status ok is a failed attempt: %v", a1)
	}
}

// After the last retry the delivery is failed and visible; redeliver sends it again.
func TestWebhookFailsThenRedeliver(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--webhook-retry-delays", "100ms,200ms"}})
	m := n.CreateMerchant(t, 10000)
	rcv := newReceiver(t, fail500, fail500, fail500)
	id := chargeWithCallback(m, t, rcv.URL())
	rcv.waitCalls(3, 5*time.Second)
	var d []map[string]any
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if d = listDeliveries(t, n, m.ID, id); len(d) == 1 && d[0]["state"] == "failed" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d[0]["state"] != "failed" || len(d[0]["attempts"].([]any)) != 3 {
		t.Fatalf("want failed after 3 attempts: %v", d)
	}
	// Failed is final: nothing schedules it again, and its three attempts
	// are the receiver's three calls.
	if len(rcv.Calls()) != 3 {
		t.Fatalf("a failed delivery is not retried: %d calls", len(rcv.Calls()))
	}
	req, _ := http.NewRequest("POST", n.URL()+"/admin/v1/webhooks/"+d[0]["id"].(string)+"/redeliver", nil)
	req.Header.Set("Authorization", "Bearer "+nodetest.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("redeliver: %v %v", err, resp)
	}
	resp.Body.Close()
	calls := rcv.waitCalls(4, 5*time.Second)
	// Retries and the redelivery read the body back from the store: each
	// is the first attempt's body, byte for byte, signed.
	for i, c := range calls {
		if !bytes.Equal(c.body, calls[0].body) || !signature.Verify(m.WebhookPK, m.WebhookSK, c.body, []byte(c.signature)) {
			t.Fatalf("attempt %d: body %q (signature ok: %t), the first attempt's: %q", i+1, c.body,
				signature.Verify(m.WebhookPK, m.WebhookSK, c.body, []byte(c.signature)), calls[0].body)
		}
	}
	if !strings.Contains(string(calls[0].body), `"order_id":"`+id+`"`) {
		t.Fatalf("notification body: %s", calls[0].body)
	}
	// Delivered, it has had exactly the three failed attempts and the
	// redelivery: the failed state was never retried on its own.
	d = waitDeliveryStates(t, n, m.ID, id, "delivered")
	if attempts, _ := d[0]["attempts"].([]any); len(attempts) != 4 || len(rcv.Calls()) != 4 {
		t.Fatalf("%d attempts recorded and %d calls, want 4 of each: %v", len(attempts), len(rcv.Calls()), d)
	}
}

// SIGKILL while a retry is pending: after restart the notification still
// arrives, on the remaining schedule (not restarted from the beginning).
func TestWebhookSurvivesKill(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--webhook-retry-delays", "2s,4s"}})
	m := n.CreateMerchant(t, 10000)
	rcv := newReceiver(t, fail500)
	id := chargeWithCallback(m, t, rcv.URL())
	first := rcv.waitCalls(1, 5*time.Second)[0].at
	// Kill once the failed attempt and its retry time are committed: a kill
	// before that loses the result, and the restarted node rightly makes
	// the first attempt again at once (at least once), which is not what
	// this test is about.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if d := listDeliveries(t, n, m.ID, id); len(d) == 1 {
			if attempts, _ := d[0]["attempts"].([]any); len(attempts) == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the first attempt's result was not committed")
		}
	}
	n.Kill()
	n.Restart()
	c := rcv.waitCalls(2, 10*time.Second)
	off := c[1].at.Sub(first)
	if off < 2*time.Second-20*time.Millisecond || off > 3500*time.Millisecond {
		t.Fatalf("retry after restart at +%s, want about +2s from the first attempt", off)
	}
	waitDeliveryStates(t, n, m.ID, id, "delivered")
	if len(rcv.Calls()) != 2 {
		t.Fatalf("delivered notification sent again: %d calls", len(rcv.Calls()))
	}
}

// A hanging endpoint of merchant A does not hold up merchant B.
func TestWebhookSlowEndpointDoesNotStarveOthers(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	a := n.CreateMerchant(t, 10000)
	b := n.CreateMerchant(t, 10000)
	hung := newReceiver(t)
	hung.hang = make(chan struct{})
	defer close(hung.hang)
	fast := newReceiver(t)
	for range 40 { // more than one endpoint's concurrency
		chargeWithCallback(a, t, hung.URL())
	}
	hung.waitCalls(1, 5*time.Second)
	// Held up behind A's hanging deliveries, B's would wait for their 10 s
	// response timeout (webhook.DefaultResponseTimeout): well past 3 s.
	chargeWithCallback(b, t, fast.URL())
	fast.waitCalls(1, 3*time.Second)
}

// Request-time SSRF refusal on a node that does not allow private callbacks;
// nothing is committed, so nothing can ever be sent, and a canary on
// loopback has seen no connection.
func TestCallbackURLRefusedWithoutPrivateCallbacks(t *testing.T) {
	canary, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer canary.Close()
	accepted := make(chan string, 64) // remote address of each connection
	go func() {
		for {
			c, err := canary.Accept()
			if err != nil {
				return
			}
			accepted <- c.RemoteAddr().String()
			c.Close()
		}
	}()
	port := canary.Addr().(*net.TCPAddr).Port
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--allow-private-callbacks=false"}})
	m := n.CreateMerchant(t, 10000)
	for _, u := range []string{
		fmt.Sprintf("http://127.0.0.1:%d/", port), fmt.Sprintf("http://[::1]:%d/", port),
		fmt.Sprintf("http://2130706433:%d/", port), fmt.Sprintf("http://localhost:%d/", port),
		"http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/", "ftp://example.com/",
	} {
		body := chargeBody(newOrderID("ssrf"), "4111111111111111", 100, 24)
		body["callback_url"] = u
		r := m.Post(t, "charge", body)
		if r.Status != 422 || !r.HasMessage("callback_url") {
			t.Errorf("callback_url %s: %d %s", u, r.Status, r.Body)
		}
	}
	// The refusal is one of the request's violations: listed with the others
	// in one 422 2.01 (contract section 3), on every order-creating request.
	for _, c := range []struct {
		op   string
		body map[string]any
	}{
		{"charge", chargeBody(newOrderID("ssrf-all"), "4111111111111111", 100, 24)},
		{"init-payment", initBody(newOrderID("ssrf-all"), 100, "USD")},
		{"walletb-pay", walletBody(newOrderID("ssrf-all"), 100, map[string]any{
			"type": "walletb-pay", "protocolVersion": "ECv1", "signature": "sig", "signedMessage": "msg"})},
	} {
		for _, u := range []string{fmt.Sprintf("http://127.0.0.1:%d/", port), "https://user:pw@shop.example/cb"} {
			c.body["callback_url"] = u
			delete(c.body, "order_description")
			c.body["customer"].(map[string]any)["email"] = "not an address"
			r := m.Post(t, c.op, c.body)
			expectError(t, r, 422, "2.01", "callback_url")
			for _, a := range []string{"order_description", "customer.email"} {
				if !r.HasMessage(a) {
					t.Errorf("%s with callback_url %s: %s not listed with callback_url: %s", c.op, u, a, r.Body)
				}
			}
			if msgs := messages(r, "callback_url"); len(msgs) != 1 || !strings.HasPrefix(msgs[0].(string), "callback_url must not") {
				t.Errorf("%s with callback_url %s: want the guard's one message: %s", c.op, u, r.Body)
			}
		}
	}
	// The outbox holds nothing of the merchant's: no notification is due
	// anywhere, now or later.
	if d := listDeliveries(t, n, m.ID, ""); len(d) != 0 {
		t.Fatalf("refused requests left %d notifications: %v", len(d), d)
	}
	// And none was sent meanwhile: the canary accepts connections in the
	// order they came (its accept queue), so every one made before a
	// sentinel of ours is accepted before it.
	sentinel, err := net.Dial("tcp", canary.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer sentinel.Close()
	for {
		select {
		case peer := <-accepted:
			if peer == sentinel.LocalAddr().String() {
				return
			}
			t.Fatalf("canary got a connection from %s", peer)
		case <-time.After(5 * time.Second):
			t.Fatal("the canary never accepted its sentinel")
		}
	}
}

// With --webhook-retention, a delivered notification leaves the operator's
// listing once the retention has passed, not before; one still being
// retried stays.
func TestWebhookRetentionPrunesFinished(t *testing.T) {
	const retention = 1500 * time.Millisecond
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--webhook-retention", retention.String(), "--webhook-retry-delays", "1h"}})
	m := n.CreateMerchant(t, 10000)
	up := newReceiver(t)
	down := newReceiver(t, fail500)
	charged := time.Now() // the notification finishes after this
	delivered := chargeWithCallback(m, t, up.URL())
	retried := chargeWithCallback(m, t, down.URL())
	up.waitCalls(1, 5*time.Second)
	down.waitCalls(1, 5*time.Second)
	stateOf := func(orderID string) string {
		d := listDeliveries(t, n, m.ID, orderID)
		if len(d) == 0 {
			return "pruned"
		}
		return d[0]["state"].(string)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s := stateOf(delivered)
		if s == "delivered" {
			if d := listDeliveries(t, n, m.ID, delivered); len(d) == 1 && d[0]["finished_at"] == nil {
				t.Fatalf("a delivered notification's listing has no finished_at: %v", d[0])
			}
			break
		}
		if s == "pruned" || time.Now().After(deadline) {
			t.Fatalf("not seen delivered: %s", s)
		}
	}
	// Read at once, well within the retention counted from any time the
	// delivery can have finished: it must still be there.
	s := stateOf(delivered)
	if within := time.Since(charged) < retention; within && s != "delivered" {
		t.Fatalf("%v after the charge, within the retention of %v: %s", time.Since(charged), retention, s)
	}
	for deadline := time.Now().Add(10 * time.Second); stateOf(delivered) != "pruned"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("delivered notification still listed %v after the charge, retention %v", time.Since(charged), retention)
		}
	}
	if s := stateOf(retried); s != "pending" {
		t.Fatalf("notification awaiting its retry: %s, want pending", s)
	}
	resp, err := http.Get(n.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(metrics), "\ngateway_webhook_pruned_total 1\n") {
		t.Fatalf("gateway_webhook_pruned_total is not 1:\n%s", metrics)
	}
}

// A failed delivery stays visible to the admin API (contract section 6)
// while retention removes a delivered one finished at the same time.
func TestWebhookFailedDeliveryOutlivesRetention(t *testing.T) {
	const retention = time.Second
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--webhook-retention", retention.String(), "--webhook-retry-delays", "50ms"}})
	m := n.CreateMerchant(t, 10000)
	up := newReceiver(t)
	down := newReceiver(t, fail500, fail500)
	delivered := chargeWithCallback(m, t, up.URL())
	failed := chargeWithCallback(m, t, down.URL()) // both attempts answered 500
	state := func(orderID string) string {
		if d := listDeliveries(t, n, m.ID, orderID); len(d) > 0 {
			return d[0]["state"].(string)
		}
		return "pruned"
	}
	for deadline := time.Now().Add(10 * time.Second); state(failed) != "failed"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never failed: %s", state(failed))
		}
	}
	// The delivered one goes once its retention has passed: the pass runs.
	for deadline := time.Now().Add(10 * time.Second); state(delivered) != "pruned"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("delivered notification never pruned: %s", state(delivered))
		}
	}
	// A pass that prunes a notification delivered after the failed one had
	// failed had the failed one past its retention too, and kept it.
	later := chargeWithCallback(m, t, up.URL())
	waitDeliveryStates(t, n, m.ID, later, "delivered")
	for deadline := time.Now().Add(10 * time.Second); state(later) != "pruned"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the later delivered notification never pruned: %s", state(later))
		}
	}
	if s := state(failed); s != "failed" {
		t.Fatalf("failed delivery after a retention pass past it: %s, want failed", s)
	}
}

// A merchant's endpoint that hangs under more notifications than the leader
// hands one endpoint (1,024) holds the rest in the outbox, not in memory:
// the node reports the endpoint in gateway_webhook_endpoints_full, other
// endpoints are served meanwhile, and once the endpoint answers again every
// notification reaches it and the gauge goes back to 0.
func TestWebhookHangingEndpointBacklogWaitsInTheOutbox(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--webhook-retry-delays", "200ms,400ms,800ms,1600ms,3200ms"}})
	a := n.CreateMerchant(t, 100000)
	b := n.CreateMerchant(t, 10000)
	hung := newReceiver(t)
	release := make(chan struct{})
	hung.hang = release
	fast := newReceiver(t)
	const backlog = 1100
	orders := make(chan string, backlog)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < backlog; i += 8 {
				id := newOrderID("hang")
				body := chargeBody(id, "4111111111111111", 1200, 24)
				body["callback_url"] = hung.URL()
				if r, err := a.TryPost("charge", body); err != nil || r.Status != 200 {
					t.Errorf("charge: %v %+v", err, r)
					return
				}
				orders <- id
			}
		}()
	}
	wg.Wait()
	close(orders)
	if t.Failed() {
		t.FailNow()
	}

	full := func() string {
		resp, err := http.Get(n.URL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, "gateway_webhook_endpoints_full "); ok {
				return v
			}
		}
		t.Fatalf("no gateway_webhook_endpoints_full on /metrics")
		return ""
	}
	waitFull := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); full() != want; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("gateway_webhook_endpoints_full %s, want %s", full(), want)
			}
		}
	}
	waitFull("1")
	chargeWithCallback(b, t, fast.URL())
	fast.waitCalls(1, 3*time.Second)

	hung.mu.Lock()
	hung.hang = nil // answer from now on
	hung.mu.Unlock()
	close(release) // the requests under way end unanswered, and are retried
	want := map[string]bool{}
	for id := range orders {
		want[id] = true
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got := map[string]bool{}
		for _, c := range hung.Calls() {
			var body struct {
				OrderID string `json:"order_id"`
			}
			if json.Unmarshal(c.body, &body) == nil && want[body.OrderID] {
				got[body.OrderID] = true
			}
		}
		if len(got) == backlog {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d orders' notifications reached the endpoint", len(got), backlog)
		}
	}
	waitFull("0")
}
