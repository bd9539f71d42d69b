package node_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/order/card"
)

// Browser tests of the back office at /dashboard/ (contract 13), in
// Chromium against a real gatewayd: operators of each role sign in through
// the form, find an order by the customer's e-mail and by the card's last
// 4, open it and resend a notification; a support operator who forges a
// refund form is refused by the server; no page holds a full card number.
// Operators are made through the admin API (POST /admin/v1/operators).
//
// UPDATE_SCREENSHOTS=1 writes the screenshots of docs/back-office.md.

const dashPassword = "a long operator passphrase 42"

// addOperator makes an operator through the admin API.
func addOperator(t *testing.T, n *nodetest.Node, email, role string) {
	t.Helper()
	body := fmt.Sprintf(`{"email":%q,"role":%q,"password":%q}`, email, role, dashPassword)
	if status, err := n.Admin("POST", "/admin/v1/operators", body, nil); err != nil {
		t.Fatalf("add operator %s: %d %v", email, status, err)
	}
}

// signInDashboard signs email in through the sign-in form.
func signInDashboard(tb *tab, base, email string) {
	tb.t.Helper()
	tb.do(
		chromedp.Navigate(base+"/dashboard/"),
		chromedp.WaitVisible(chromedp.ID("password")),
	)
	tb.waitURL(base + "/dashboard/sign-in")
	tb.do(
		chromedp.SendKeys(chromedp.ID("email"), email),
		chromedp.SendKeys(chromedp.ID("password"), dashPassword),
		chromedp.Click(chromedp.ID("sign-in")),
	)
	tb.waitURL(base + "/dashboard/orders")
	tb.do(chromedp.WaitVisible(chromedp.ID("orders")))
}

// signOutDashboard signs out with the header's button; the dashboard then
// sends the browser to the sign-in page, also when asked for a page.
func signOutDashboard(tb *tab, base string) {
	tb.t.Helper()
	tb.do(chromedp.Click(chromedp.CSS(`form.who button`)))
	tb.waitURL(base + "/dashboard/sign-in")
	tb.do(chromedp.Navigate(base + "/dashboard/orders"))
	tb.waitURL(base + "/dashboard/sign-in")
}

// search fills one filter of the orders page and submits it.
func searchOrders(tb *tab, base, field, value string) {
	tb.t.Helper()
	tb.do(
		chromedp.Navigate(base+"/dashboard/orders"),
		chromedp.WaitVisible(chromedp.ID("f-"+field)),
		chromedp.SendKeys(chromedp.ID("f-"+field), value),
		chromedp.Click(chromedp.ID("search")),
	)
	tb.waitURL(base + "/dashboard/orders?")
	tb.do(chromedp.WaitVisible(chromedp.ID("orders")))
}

// pageHTML is the current document's markup.
func pageHTML(tb *tab) string { return eval[string](tb, "document.documentElement.outerHTML") }

// noFullPAN fails when the page's markup holds a card number standing
// alone (card.FindPAN), or any of the test's card numbers.
func noFullPAN(tb *tab, where string, cards ...string) {
	tb.t.Helper()
	html := pageHTML(tb)
	if pan := card.FindPAN(html); pan != "" {
		tb.t.Errorf("%s: the page holds a card number %s", where, pan)
	}
	for _, c := range cards {
		if strings.Contains(html, c) {
			tb.t.Errorf("%s: the page holds the card number %s", where, c)
		}
	}
}

func TestBrowserDashboard(t *testing.T) {
	b := newBrowser(t)
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--webhook-retry-delays", "100ms,200ms"}})
	for _, role := range []string{"support", "finance", "admin"} {
		addOperator(t, n, role+"@ops.example", role)
	}
	m := n.CreateMerchant(t, 10000)
	base := n.URL()

	// The merchant's endpoint is down: every notification fails, and the
	// failed ones are what an operator resends.
	var hits atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(503)
	}))
	t.Cleanup(hook.Close)

	const card, otherCard = "4111111111111111", "5555555555554444"
	// Ids without long runs of digits: no page may hold one (noFullPAN).
	const email, id, other = "jane.dash@example.com", "dash-order-a", "dash-order-b"
	body := chargeBody(id, card, 1200, 0) // a sale: settled once approved
	body["callback_url"] = hook.URL + "/hook"
	body["customer"] = map[string]any{"user_id": "u1", "email": email, "ip_address": "203.0.113.7"}
	if r := m.Post(t, "charge", body); r.Status != 200 {
		t.Fatalf("charge: %s", r.Body)
	}
	m.WaitStatus(t, id, "settled", 10*time.Second)
	if r := m.Post(t, "charge", chargeBody(other, otherCard, 990, 24)); r.Status != 200 {
		t.Fatalf("charge: %s", r.Body)
	}
	// The settled order's notifications use up their retries.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		failed := 0
		for _, d := range listDeliveries(t, n, m.ID, id) {
			if d["state"] == "failed" {
				failed++
			}
		}
		if failed > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no notification of %s failed: %v", id, listDeliveries(t, n, m.ID, id))
		}
	}

	orderPage := base + "/dashboard/orders/" + m.ID + "/" + id

	for _, role := range []string{"support", "finance", "admin"} {
		t.Run(role, func(t *testing.T) {
			tb := b.tab(t, chromedp.WithNewBrowserContext()) // cookies of its own
			tb.do(chromedp.EmulateViewport(1280, 900))
			signInDashboard(tb, base, role+"@ops.example")

			// Found by the customer's e-mail, and only that order.
			searchOrders(tb, base, "email", email)
			html := pageHTML(tb)
			if !strings.Contains(html, ">"+id+"</a>") || strings.Contains(html, other) {
				t.Fatalf("search by e-mail: order %s listed %v, %s listed %v", id, strings.Contains(html, id), other, strings.Contains(html, other))
			}
			if role == "admin" {
				tb.screenshot("dashboard-orders.png")
			}
			noFullPAN(tb, "orders by e-mail", card, otherCard)
			// Found by the card's last 4: this order, not the other card's.
			searchOrders(tb, base, "card_last4", "1111")
			html = pageHTML(tb)
			if !strings.Contains(html, ">"+id+"</a>") || strings.Contains(html, other) {
				t.Fatalf("search by last 4: order %s listed %v, %s listed %v", id, strings.Contains(html, id), other, strings.Contains(html, other))
			}

			// Open it from the table.
			tb.do(chromedp.Click(`//table[@id="orders"]//a[text()="` + id + `"]`))
			tb.waitURL(orderPage)
			tb.do(chromedp.WaitVisible(chromedp.ID("card")))
			if c := tb.text("card"); !strings.Contains(c, "411111******1111") {
				t.Fatalf("card shown as %q", c)
			}
			noFullPAN(tb, "order page", card)
			tb.noCSPViolations()
			if role == "admin" {
				tb.screenshot("dashboard-order.png")
			}

			// Resend a notification: the endpoint is asked again.
			before := hits.Load()
			tb.do(chromedp.Click(chromedp.CSS(`button.resend`)))
			tb.waitURL(orderPage + "?done=resent")
			tb.do(chromedp.WaitVisible(chromedp.ID("done")))
			for deadline := time.Now().Add(10 * time.Second); hits.Load() == before; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the resent notification never reached the endpoint")
				}
			}

			if role != "admin" {
				// No refund form is shown; one forged with the page's own
				// CSRF token is refused by the server, and no money moves.
				if strings.Contains(pageHTML(tb), "/refund") {
					t.Fatalf("%s is offered a refund form", role)
				}
				tb.do(chromedp.Evaluate[chromedp.Void](`(function () {
  var f = document.createElement("form");
  f.method = "post";
  f.action = location.pathname + "/refund";
  var add = function (k, v) { var i = document.createElement("input"); i.type = "hidden"; i.name = k; i.value = v; f.appendChild(i); };
  add("csrf", document.querySelector("input[name=csrf]").value);
  add("amount", "1.00");
  add("key", "forged");
  document.body.appendChild(f);
  f.submit();
})()`))
				tb.waitURL(orderPage + "/refund")
				tb.do(chromedp.WaitVisible(chromedp.ID("error")))
				if msg := tb.text("error"); !strings.Contains(msg, "may not") {
					t.Fatalf("forged refund answered %q", msg)
				}
				if o := m.Post(t, "status", map[string]any{"order_id": id}); o.Num("refunded_amount") != 0 {
					t.Fatalf("a forged refund by %s moved money: %s", role, o.Body)
				}
				signOutDashboard(tb, base)
				return
			}

			// The admin refunds 1.00 of it through the form.
			tb.do(
				chromedp.SendKeys(chromedp.ID("refund-amount"), "1.00"),
				chromedp.Click(chromedp.ID("refund")),
			)
			tb.waitURL(orderPage + "?done=refund")
			tb.do(chromedp.WaitVisible(chromedp.ID("done")))
			if o := m.Post(t, "status", map[string]any{"order_id": id}); o.Num("refunded_amount") != 100 {
				t.Fatalf("after the admin's refund of 1.00: %s", o.Body)
			}
			if r := tb.text("refunded"); r != "1.00 USD" {
				t.Fatalf("refunded shown as %q", r)
			}

			for _, p := range []struct{ path, shot string }{
				{"/dashboard/notifications", "dashboard-notifications.png"},
				{"/dashboard/merchants", "dashboard-merchants.png"},
				{"/dashboard/mids", ""},
				{"/dashboard/cluster", "dashboard-cluster.png"},
				{"/dashboard/audit", "dashboard-audit.png"},
			} {
				tb.do(chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS(`main`)))
				if got := eval[string](tb, "document.querySelector('h1').textContent"); got == "" || strings.Contains(got, "Not") {
					t.Fatalf("%s: heading %q", p.path, got)
				}
				noFullPAN(tb, p.path, card, otherCard)
				if p.path == "/dashboard/notifications" && !strings.Contains(pageHTML(tb), ">"+id+"</a>") {
					t.Errorf("the failed notifications page does not list %s's", id)
				}
				tb.noCSPViolations()
				if p.shot != "" {
					tb.screenshot(p.shot)
				}
			}
			// The audit log names the operator for each action.
			audit := pageHTML(tb)
			for _, want := range []string{"admin@ops.example", "support@ops.example", "POST /dashboard/orders/" + m.ID + "/" + id + "/refund"} {
				if !strings.Contains(audit, want) {
					t.Errorf("the audit page lacks %q", want)
				}
			}
			signOutDashboard(tb, base)
		})
	}

	t.Run("sign-in page", func(t *testing.T) {
		tb := b.tab(t)
		tb.do(chromedp.EmulateViewport(1280, 720), chromedp.Navigate(base+"/dashboard/sign-in"), chromedp.WaitVisible(chromedp.ID("password")))
		tb.noCSPViolations()
		tb.screenshot("dashboard-sign-in.png")
	})
}

// TestDashboardOnAFollower: an operator who reaches a follower signs in
// (a session token planted before is ended, not adopted) and acts there; the follower relays each write, cookies and redirect
// included, to the leader, which checks the session and the CSRF token
// again and audits the action with the client's address.
func TestDashboardOnAFollower(t *testing.T) {
	c := nodetest.StartCluster(t, 3)
	leader := c.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	f := c.Other(leader)
	addOperator(t, leader, "support@ops.example", "support")
	m := leader.CreateMerchant(t, 10000)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	t.Cleanup(hook.Close)
	const id = "follower-order"
	body := chargeBody(id, "4111111111111111", 700, 24)
	body["callback_url"] = hook.URL + "/hook"
	if r := m.Post(t, "charge", body); r.Status != 200 {
		t.Fatalf("charge: %s", r.Body)
	}
	m.WaitStatus(t, id, "authorized", 10*time.Second)

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(f.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	post := func(path string, form url.Values) *http.Response {
		t.Helper()
		resp, err := client.PostForm(f.URL()+path, form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	hidden := func(page, name string) string {
		t.Helper()
		m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no %s field in %s", name, page)
		}
		return m[1]
	}

	// Session fixation: a session token planted in the browser before
	// sign-in (here a real one, of the attacker's own session) is ended by
	// the sign-in and never becomes the operator's.
	var planted struct {
		Token string `json:"token"`
	}
	if _, err := leader.Admin("POST", "/admin/v1/sessions",
		fmt.Sprintf(`{"email":"support@ops.example","password":%q}`, dashPassword), &planted); err != nil || planted.Token == "" {
		t.Fatalf("a session to plant: %v", err)
	}
	fURL, _ := url.Parse(f.URL() + "/dashboard/")
	jar.SetCookies(fURL, []*http.Cookie{{Name: "pg_session", Value: planted.Token, Path: "/dashboard/"}})

	_, page := get("/dashboard/sign-in")
	resp := post("/dashboard/sign-in", url.Values{"csrf": {hidden(page, "csrf")}, "email": {"support@ops.example"}, "password": {dashPassword}})
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/dashboard/orders" {
		t.Fatalf("sign-in on a follower: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "pg_session" {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("the leader's session cookie, relayed: %+v", session)
	}
	if session.Value == planted.Token {
		t.Fatal("the sign-in kept the session token planted before it")
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		req, _ := http.NewRequest("GET", leader.URL()+"/admin/v1/orders?limit=1", nil)
		req.Header.Set("Authorization", "Bearer "+planted.Token)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the planted session still works after the sign-in: %d", r.StatusCode)
		}
	}
	// The follower serves the order page from its own applied state.
	orderPath := "/dashboard/orders/" + m.ID + "/" + id
	var status int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if status, page = get(orderPath); status == 200 && strings.Contains(page, "button") && strings.Contains(page, "/resend") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("order page on the follower: %d %s", status, page)
		}
	}
	notification := regexp.MustCompile(`/dashboard/notifications/([^/]+)/resend`).FindStringSubmatch(page)[1]
	resp = post("/dashboard/notifications/"+notification+"/resend", url.Values{"csrf": {hidden(page, "csrf")}, "back": {orderPath}})
	if resp.StatusCode != 303 || resp.Header.Get("Location") != orderPath+"?done=resent" {
		t.Fatalf("resend on a follower: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Without the token the leader refuses it, relayed as is.
	if resp = post("/dashboard/notifications/"+notification+"/resend", url.Values{"back": {orderPath}}); resp.StatusCode != 403 {
		t.Fatalf("resend without the CSRF token on a follower: %d", resp.StatusCode)
	}
	var audit struct {
		Records []struct {
			Actor, Action, Target, Result string
			SourceIP                      string `json:"source_ip"`
		} `json:"records"`
	}
	if _, err := leader.Admin("GET", "/admin/v1/audit?limit=1000", "", &audit); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range audit.Records {
		if r.Actor == "support@ops.example" && r.Target == "notification:"+notification && r.Result == "200" && r.SourceIP == "127.0.0.1" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no audit record of the resend by support@ops.example: %+v", audit.Records)
	}
}
