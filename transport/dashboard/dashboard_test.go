package dashboard

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/order/card"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/transport/operator"
)

func TestUnsignedRequestsGoToSignIn(t *testing.T) {
	h := newHarness(t)
	res := h.do("GET", "/dashboard/orders?email=jane%40example.com", nil, nil)
	if res.status != fasthttp.StatusSeeOther || !strings.HasPrefix(res.header["Location"], "/dashboard/sign-in?next=") {
		t.Fatalf("GET without a session: %d Location %q", res.status, res.header["Location"])
	}
	res = h.do("GET", "/dashboard/orders", map[string]string{sessionCookie: "made-up"}, nil)
	if res.status != fasthttp.StatusSeeOther {
		t.Fatalf("GET with a token never issued: %d, want a redirect to sign in", res.status)
	}
	res = h.do("POST", "/dashboard/orders/mer_a/order-1/refund", map[string]string{sessionCookie: "made-up"},
		map[string]string{"csrf": "x", "amount": "1.00", "key": "k"})
	if res.status != fasthttp.StatusForbidden || len(h.be.moves) != 0 {
		t.Fatalf("POST without a session: %d, moves %v", res.status, h.be.moves)
	}
}

func TestSignInCSRF(t *testing.T) {
	h := newHarness(t)
	page := h.do("GET", "/dashboard/sign-in", nil, nil)
	csrf := hiddenValue(t, page.body, "csrf")
	cookie := string(page.cookies[signInCookie].Value())
	for name, tc := range map[string]struct{ form, cookie string }{
		"missing":            {"", cookie},
		"wrong":              {csrf + "x", cookie},
		"no cookie":          {csrf, ""},
		"another form's one": {hiddenValue(t, h.do("GET", "/dashboard/sign-in", nil, nil).body, "csrf"), cookie},
	} {
		jar := map[string]string{}
		if tc.cookie != "" {
			jar[signInCookie] = tc.cookie
		}
		before := h.auth.signIns
		res := h.do("POST", "/dashboard/sign-in", jar, map[string]string{"csrf": tc.form, "email": "admin@ops.example", "password": testPassword})
		if res.status != fasthttp.StatusForbidden || res.cookies[sessionCookie] != nil || h.auth.signIns != before {
			t.Errorf("%s CSRF token: status %d, session cookie %v, sign-ins tried %d", name, res.status, res.cookies[sessionCookie], h.auth.signIns-before)
		}
	}
	res := h.do("POST", "/dashboard/sign-in", map[string]string{signInCookie: cookie},
		map[string]string{"csrf": csrf, "email": "admin@ops.example", "password": "wrong"})
	if res.status != fasthttp.StatusUnauthorized || res.cookies[sessionCookie] != nil {
		t.Errorf("wrong password: %d, cookie %v", res.status, res.cookies[sessionCookie])
	}
	res = h.do("POST", "/dashboard/sign-in", map[string]string{signInCookie: cookie},
		map[string]string{"csrf": csrf, "email": "limited@ops.example", "password": testPassword})
	if res.status != fasthttp.StatusTooManyRequests || res.header["Retry-After"] == "" || res.cookies[sessionCookie] != nil ||
		!strings.Contains(res.body, "Too many attempts") {
		t.Errorf("rate-limited sign-in: %d, Retry-After %q", res.status, res.header["Retry-After"])
	}
}

func TestSignInRefusesSessionFixation(t *testing.T) {
	h := newHarness(t)
	// A token planted in the browser, never issued, is not adopted.
	planted := "attacker-chosen-token"
	token, _ := h.signIn("support@ops.example", map[string]string{sessionCookie: planted})
	if token == planted {
		t.Fatal("sign-in kept the token the browser held")
	}
	// A real session held before signing in (someone else's, on a shared
	// machine, or the attacker's own planted one) is ended, and the new
	// sign-in gets a token of its own.
	before, _ := h.signIn("admin@ops.example", nil)
	after, _ := h.signIn("support@ops.example", map[string]string{sessionCookie: before})
	if after == before {
		t.Fatal("sign-in reused the previous session's token")
	}
	if _, ok := h.auth.Session(before, time.Now()); ok {
		t.Fatal("the session held before sign-in still works")
	}
	if s, ok := h.auth.Session(after, time.Now()); !ok || s.Email != "support@ops.example" {
		t.Fatalf("new session: %+v %v", s, ok)
	}
}

func TestSessionCookieAttributes(t *testing.T) {
	for _, secure := range []bool{false, true} {
		h := newHarness(t)
		h.be.secure = secure
		page := h.do("GET", "/dashboard/sign-in", nil, nil)
		res := h.do("POST", "/dashboard/sign-in", map[string]string{signInCookie: string(page.cookies[signInCookie].Value())},
			map[string]string{"csrf": hiddenValue(t, page.body, "csrf"), "email": "admin@ops.example", "password": testPassword})
		c := res.cookies[sessionCookie]
		if c == nil {
			t.Fatalf("no session cookie: %d %s", res.status, res.body)
		}
		if !c.HTTPOnly() || c.SameSite() != fasthttp.CookieSameSiteStrictMode || c.Secure() != secure || string(c.Path()) != Prefix {
			t.Errorf("TLS %v: cookie %s", secure, c.String())
		}
	}
}

func TestPostsNeedTheSessionsCSRFToken(t *testing.T) {
	h := newHarness(t)
	token, csrf := h.signIn("admin@ops.example", nil)
	jar := map[string]string{sessionCookie: token}
	_, otherCSRF := h.signIn("finance@ops.example", nil)
	posts := map[string]map[string]string{
		"/dashboard/orders/mer_a/order-1/refund": {"amount": "1.00", "key": "k1"},
		"/dashboard/notifications/n1/resend":     {"back": "/dashboard/notifications"},
		"/dashboard/merchants":                   {"name": "Evil"},
		"/dashboard/sign-out":                    {},
	}
	for path, form := range posts {
		for name, value := range map[string]string{"missing": "", "wrong": csrf + "0", "another session's": otherCSRF} {
			f := map[string]string{}
			for k, v := range form {
				f[k] = v
			}
			if value != "" {
				f["csrf"] = value
			}
			if res := h.do("POST", path, jar, f); res.status != fasthttp.StatusForbidden {
				t.Errorf("POST %s with the %s token: %d", path, name, res.status)
			}
		}
	}
	if len(h.be.moves) != 0 || len(h.be.resent) != 0 || len(h.be.merchants) != 1 {
		t.Fatalf("a refused post acted: moves %v resent %v merchants %v", h.be.moves, h.be.resent, h.be.merchants)
	}
	if _, ok := h.auth.Session(token, time.Now()); !ok {
		t.Fatal("a sign-out without the token ended the session")
	}
	recs := h.be.audited()
	if len(recs) != 12 || recs[0].Actor != "admin@ops.example" || recs[0].Result != "403 csrf" {
		t.Fatalf("refusals audited: %+v", recs)
	}
}

// TestRoleLimitsHoldOnTheServer posts, with valid sessions and tokens,
// what each role's pages do not offer: the server refuses it, audits the
// refusal, and changes nothing.
func TestRoleLimitsHoldOnTheServer(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		role   operator.Role
		path   string
		form   map[string]string
		status int
	}{
		{operator.Support, "/dashboard/orders/mer_a/order-1/refund", map[string]string{"amount": "1.00", "key": "s"}, fasthttp.StatusForbidden},
		{operator.Finance, "/dashboard/orders/mer_a/order-1/refund", map[string]string{"amount": "1.00", "key": "f"}, fasthttp.StatusForbidden},
		{operator.Support, "/dashboard/orders/mer_a/order-1/void", map[string]string{"key": "v"}, fasthttp.StatusForbidden},
		{operator.Finance, "/dashboard/merchants", map[string]string{"name": "Evil"}, fasthttp.StatusForbidden},
		{operator.Support, "/dashboard/notifications/n1/resend", map[string]string{"back": "/dashboard/notifications"}, fasthttp.StatusSeeOther},
		{operator.Admin, "/dashboard/orders/mer_a/order-1/refund", map[string]string{"amount": "1.50", "key": "a"}, fasthttp.StatusSeeOther},
	} {
		email := string(tc.role) + "@ops.example"
		token, csrf := h.signIn(email, nil)
		tc.form["csrf"] = csrf
		n := len(h.be.audited())
		res := h.do("POST", tc.path, map[string]string{sessionCookie: token}, tc.form)
		if res.status != tc.status {
			t.Errorf("%s POST %s: %d, want %d", tc.role, tc.path, res.status, tc.status)
		}
		recs := h.be.audited()[n:]
		if len(recs) != 1 || recs[0].Actor != email || recs[0].Action != "POST "+tc.path {
			t.Errorf("%s POST %s audited as %+v", tc.role, tc.path, recs)
			continue
		}
		if want := map[int]string{403: "403 forbidden", 303: "200"}[tc.status]; recs[0].Result != want {
			t.Errorf("%s POST %s: result %q, want %q", tc.role, tc.path, recs[0].Result, want)
		}
	}
	// Only the admin's refund moved money, in minor units, with the form's key.
	if len(h.be.moves) != 1 || h.be.moves[0].Kind != order.KindRefund || h.be.moves[0].Amount != 150 ||
		h.be.moves[0].IdempotencyKey != "dashboard-a" {
		t.Fatalf("moves: %+v", h.be.moves)
	}
	if len(h.be.merchants) != 1 || len(h.be.resent) != 1 {
		t.Fatalf("merchants %v resent %v", h.be.merchants, h.be.resent)
	}
	// The page a support operator sees has no money form to begin with.
	token, _ := h.signIn("support@ops.example", nil)
	page := h.do("GET", "/dashboard/orders/mer_a/order-1", map[string]string{sessionCookie: token}, nil)
	if page.status != 200 || strings.Contains(page.body, "/refund") || !strings.Contains(page.body, "/resend") {
		t.Fatalf("support's order page: %d, refund form shown %v", page.status, strings.Contains(page.body, "/refund"))
	}
}

// foreignResource matches an attribute that names another origin.
var foreignResource = regexp.MustCompile(`(src|href|action)="(https?:)?//`)

func TestEveryPageRendersForEachRole(t *testing.T) {
	h := newHarness(t)
	h.be.Audit(persistence.AuditRecord{Actor: "admin-token", Action: "POST /admin/v1/merchants", Target: "merchant:mer_a", SourceIP: "127.0.0.1", Result: "200"})
	pages := []string{"/dashboard/orders", "/dashboard/orders?email=jane%40example.com", "/dashboard/orders?card_last4=4242",
		"/dashboard/orders/mer_a/order-1", "/dashboard/notifications", "/dashboard/merchants", "/dashboard/mids",
		"/dashboard/cluster", "/dashboard/audit"}
	for _, role := range operator.Roles {
		token, _ := h.signIn(string(role)+"@ops.example", nil)
		for _, p := range pages {
			res := h.do("GET", p, map[string]string{sessionCookie: token}, nil)
			want := 200
			switch {
			case p == "/dashboard/merchants" && !role.Can(operator.ManageMerchants),
				p == "/dashboard/mids" && !role.Can(operator.ManageMIDs),
				p == "/dashboard/cluster" && !role.Can(operator.ManageCluster):
				want = 403
			}
			if res.status != want {
				t.Errorf("%s GET %s: %d, want %d: %s", role, p, res.status, want, res.body)
			}
			if csp := res.header["Content-Security-Policy"]; !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("%s: CSP %q", p, csp)
			}
			if pan := card.FindPAN(res.body); pan != "" {
				t.Errorf("%s GET %s holds a card number %s", role, p, pan)
			}
			if m := foreignResource.FindString(res.body); m != "" {
				t.Errorf("%s loads or links another origin: %s", p, m)
			}
		}
	}
	token, _ := h.signIn("admin@ops.example", nil)
	body := h.do("GET", "/dashboard/orders/mer_a/order-1", map[string]string{sessionCookie: token}, nil).body
	for _, want := range []string{"1,234.56 EUR", "424242******4242", `<time datetime="2026-11-28T04:00:00Z">2026-11-28 04:00:00 UTC</time>`,
		"HTTP 500", "/dashboard/orders/mer_a/order-1/refund", `class="badge good">settled`} {
		if !strings.Contains(body, want) {
			t.Errorf("order page lacks %q", want)
		}
	}
	cl := h.do("GET", "/dashboard/cluster", map[string]string{sessionCookie: token}, nil).body
	if !strings.Contains(cl, `<span class="badge good">5</span>`) { // node2 applied 35 of the leader's 40
		t.Errorf("cluster page lacks node2's lag of 5:\n%s", cl)
	}
}

func TestParseAmount(t *testing.T) {
	for _, tc := range []struct {
		in, cur string
		want    int64
		ok      bool
	}{
		{"12.50", "EUR", 1250, true}, {"12.5", "EUR", 1250, true}, {"12", "EUR", 1200, true}, {"", "EUR", 0, true},
		{".5", "EUR", 50, true}, {"1500", "JPY", 1500, true}, {"1.5", "JPY", 0, false}, {"1.234", "KWD", 1234, true},
		{"1.234", "EUR", 0, false}, {"-1", "EUR", 0, false}, {"1e3", "EUR", 0, false}, {"12.", "EUR", 0, false},
		{"99999999999999999999", "EUR", 0, false}, {"1,000", "EUR", 0, false},
	} {
		got, err := parseAmount(tc.in, tc.cur)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseAmount(%q, %s) = %d, %v; want %d, ok %v", tc.in, tc.cur, got, err, tc.want, tc.ok)
		}
	}
}

func TestMoney(t *testing.T) {
	for _, tc := range []struct {
		amount int64
		cur    string
		want   string
	}{
		{123456, "EUR", "1,234.56 EUR"}, {5, "USD", "0.05 USD"}, {1500, "JPY", "1,500 JPY"}, {1234567, "KWD", "1,234.567 KWD"},
		{0, "EUR", "0.00 EUR"}, {100000000, "EUR", "1,000,000.00 EUR"},
	} {
		if got := money(tc.amount, tc.cur); got != tc.want {
			t.Errorf("money(%d, %s) = %q, want %q", tc.amount, tc.cur, got, tc.want)
		}
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/dashboard/orders?email=a": "/dashboard/orders?email=a", "https://evil.example/": "", "//evil.example/": "",
		"/dashboard/\\evil": "", "/admin/v1/orders": "",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMIDsPage(t *testing.T) {
	h := newHarness(t)
	token, _ := h.signIn("admin@ops.example", nil)
	if body := h.do("GET", "/dashboard/mids", map[string]string{sessionCookie: token}, nil).body; !strings.Contains(body, "no MID registry to show") {
		t.Errorf("a backend without MIDs: the page does not say so")
	}
	h.d = New(Config{Backend: midBackend{h.be}, Auth: h.auth})
	body := h.do("GET", "/dashboard/mids", map[string]string{sessionCookie: token}, nil).body
	for _, want := range []string{"mid-1", "10.0.0.5:8583", "EUR, USD", `<time datetime="2026-11-01T00:00:00Z">`} {
		if !strings.Contains(body, want) {
			t.Errorf("MIDs page lacks %q", want)
		}
	}
}
