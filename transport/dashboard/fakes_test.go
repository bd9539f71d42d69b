package dashboard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/cluster"
	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/transport/apierr"
	"github.com/paygate/gateway/transport/operator"
	"github.com/paygate/gateway/transport/webhook"
)

// memAuth is an in-memory operator.Authenticator for the handler tests
// (the node's is replicated; this one only keeps the contract: a new
// random token per sign-in, sign-out ends it).
type memAuth struct {
	mu        sync.Mutex
	operators map[string]memOperator // by e-mail
	sessions  map[string]operator.Session
	signIns   int
}

type memOperator struct {
	password string
	role     operator.Role
}

func newMemAuth() *memAuth {
	return &memAuth{operators: map[string]memOperator{}, sessions: map[string]operator.Session{}}
}

func (a *memAuth) add(email, password string, role operator.Role) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.operators[email] = memOperator{password: password, role: role}
}

func randomHex() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (a *memAuth) SignIn(email, password, _ string, now time.Time) (string, operator.Session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.signIns++
	if email == "limited@ops.example" { // stands for an address over the sign-in limit
		return "", operator.Session{}, operator.ErrRateLimited
	}
	op, ok := a.operators[email]
	if !ok || op.password != password {
		return "", operator.Session{}, operator.ErrBadCredentials
	}
	token := randomHex()
	s := operator.Session{Email: email, Role: op.role, CSRF: randomHex(), Expires: now.Add(time.Hour)}
	a.sessions[token] = s
	return token, s, nil
}

func (a *memAuth) Session(token string, now time.Time) (operator.Session, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[token]
	return s, ok && now.Before(s.Expires)
}

func (a *memAuth) SignOut(token string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sessions, token)
	return nil
}

// fakeBackend is a Backend over a few orders in memory, recording what it
// was asked to change.
type fakeBackend struct {
	mu        sync.Mutex
	orders    map[string]*order.Order // merchant/id
	notes     []webhook.AdminView
	moves     []Movement
	resent    []string
	merchants []Merchant
	audit     []persistence.AuditRecord
	secure    bool
}

func newFakeBackend() *fakeBackend {
	o := &order.Order{Merchant: "mer_a", ID: "order-1", Amount: 123456, Currency: "EUR", Status: order.StatusSettled,
		SettledAmount: 123456, CustomerEmail: "jane@example.com", CreatedAt: time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC).UnixNano(),
		Source: order.PaymentSource{Type: "card", Brand: "visa", BIN: "424242", Masked: "424242******4242"},
		Txns:   []order.Transaction{{ID: "t1", Operation: "charge", Status: "success", Currency: "EUR", Amount: 123456}}}
	return &fakeBackend{
		orders: map[string]*order.Order{"mer_a/order-1": o},
		notes: []webhook.AdminView{{ID: "n1", MerchantID: "mer_a", OrderID: "order-1", OrderStatus: "settled", URL: "https://shop.example/hook",
			State: "failed", CreatedAt: "2026-11-28T04:00:00.000Z", FinishedAt: "2026-11-28T05:00:00.000Z",
			Attempts: []webhook.AdminAttempt{{At: "2026-11-28T04:00:01.000Z", HTTPCode: 500, DurationMs: 12}}}},
		merchants: []Merchant{{ID: "mer_a", Name: "Shop", APIPublicKey: "pk_a", WebhookPublicKey: "whpk_a"}},
	}
}

func (b *fakeBackend) Leader(*fasthttp.RequestCtx) bool { return false }
func (b *fakeBackend) SourceIP(ctx *fasthttp.RequestCtx) string {
	return ctx.RemoteIP().String()
}
func (b *fakeBackend) SecureClient(*fasthttp.RequestCtx) bool { return b.secure }

func (b *fakeBackend) SearchOrders(get func(string) (string, bool)) (persistence.SearchPage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var page persistence.SearchPage
	email, _ := get("email")
	last4, _ := get("card_last4")
	if v, ok := get("limit"); ok && v == "0" {
		return page, apierr.New(apierr.Invalid, "limit", "limit should be from 1 to 1000")
	}
	for _, o := range b.orders {
		if (email == "" || strings.EqualFold(o.CustomerEmail, email)) && (last4 == "" || strings.HasSuffix(o.Source.Masked, last4)) {
			page.Orders = append(page.Orders, o)
		}
	}
	return page, nil
}

func (b *fakeBackend) Order(merchant, id string) (*order.Order, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.orders[merchant+"/"+id], nil
}

func (b *fakeBackend) Notifications(merchant, orderID string) ([]webhook.AdminView, error) {
	return b.notes, nil
}

func (b *fakeBackend) FailedNotifications(int) ([]webhook.AdminView, error) { return b.notes, nil }

func (b *fakeBackend) Redeliver(_ context.Context, id string) (webhook.AdminView, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.resent = append(b.resent, id)
	return b.notes[0], nil
}

func (b *fakeBackend) MoveMoney(m Movement) (*order.Order, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.moves = append(b.moves, m)
	o := b.orders[m.Merchant+"/"+m.OrderID]
	return o, nil
}

func (b *fakeBackend) Merchants() ([]Merchant, error) { return b.merchants, nil }

func (b *fakeBackend) CreateMerchant(_ context.Context, name string, rps int) (Merchant, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := Merchant{ID: "mer_new", Name: name, APIPublicKey: "pk_new", WebhookPublicKey: "whpk_new", RateLimitRPS: rps}
	b.merchants = append(b.merchants, m)
	return m, nil
}

func (b *fakeBackend) Cluster() (cluster.Status, error) {
	self := &cluster.SelfStatus{NodeID: "node1", State: "Leader", CommitIndex: 40, AppliedIndex: 40}
	lagging := &cluster.SelfStatus{NodeID: "node2", State: "Follower", CommitIndex: 38, AppliedIndex: 35}
	return cluster.Status{NodeID: "node1", LeaderID: "node1", Term: 3, Members: []cluster.MemberStatus{
		{MemberInfo: cluster.MemberInfo{ID: "node1", Leader: true, Voter: true}, Reachable: true, Self: self},
		{MemberInfo: cluster.MemberInfo{ID: "node2", Voter: true}, Reachable: true, Self: lagging},
	}}, nil
}

func (b *fakeBackend) AuditRecords(after uint64, limit int) ([]persistence.AuditRecord, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []persistence.AuditRecord
	for _, r := range b.audit {
		if r.Seq > after && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, len(out) == limit, nil
}

func (b *fakeBackend) LastAuditSeq() (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return uint64(len(b.audit)), nil
}

func (b *fakeBackend) Audit(rec persistence.AuditRecord) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	rec.Seq = uint64(len(b.audit) + 1)
	rec.At = time.Now().UTC().Format(time.RFC3339Nano)
	rec.Hash = strings.Repeat("ab", 32)
	b.audit = append(b.audit, rec)
	return nil
}

func (b *fakeBackend) audited() []persistence.AuditRecord {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]persistence.AuditRecord(nil), b.audit...)
}

// harness is a dashboard over the fakes, with operators of every role.
type harness struct {
	t    *testing.T
	d    *Dashboard
	auth *memAuth
	be   *fakeBackend
}

const testPassword = "correct horse battery staple"

func newHarness(t *testing.T) *harness {
	auth, be := newMemAuth(), newFakeBackend()
	for _, r := range operator.Roles {
		auth.add(string(r)+"@ops.example", testPassword, r)
	}
	return &harness{t: t, d: New(Config{Backend: be, Auth: auth}), auth: auth, be: be}
}

// response is what a request answered.
type response struct {
	status  int
	body    string
	header  map[string]string
	cookies map[string]*fasthttp.Cookie
}

// do serves one request: method, path, cookies and a form body.
func (h *harness) do(method, path string, cookies map[string]string, form map[string]string) response {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	for k, v := range cookies {
		req.Header.SetCookie(k, v)
	}
	if form != nil {
		args := fasthttp.AcquireArgs()
		for k, v := range form {
			args.Set(k, v)
		}
		req.Header.SetContentType("application/x-www-form-urlencoded")
		req.SetBody(args.QueryString())
		fasthttp.ReleaseArgs(args)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 5555}, nil)
	h.d.Handler(&ctx)
	out := response{status: ctx.Response.StatusCode(), body: string(ctx.Response.Body()),
		header: map[string]string{}, cookies: map[string]*fasthttp.Cookie{}}
	ctx.Response.Header.VisitAll(func(k, v []byte) { out.header[string(k)] = string(v) })
	ctx.Response.Header.VisitAllCookie(func(k, v []byte) {
		c := &fasthttp.Cookie{}
		c.ParseBytes(v)
		out.cookies[string(k)] = c
	})
	return out
}

// signIn signs email in through the form and answers its session cookie
// and CSRF token.
func (h *harness) signIn(email string, cookies map[string]string) (token, csrf string) {
	h.t.Helper()
	page := h.do("GET", "/dashboard/sign-in", nil, nil)
	formCSRF := hiddenValue(h.t, page.body, "csrf")
	jar := map[string]string{signInCookie: string(page.cookies[signInCookie].Value())}
	for k, v := range cookies {
		jar[k] = v
	}
	res := h.do("POST", "/dashboard/sign-in", jar, map[string]string{"csrf": formCSRF, "email": email, "password": testPassword})
	if res.status != fasthttp.StatusSeeOther {
		h.t.Fatalf("sign in %s: status %d: %s", email, res.status, res.body)
	}
	c := res.cookies[sessionCookie]
	if c == nil {
		h.t.Fatalf("sign in %s: no session cookie", email)
	}
	token = string(c.Value())
	s, ok := h.auth.Session(token, time.Now())
	if !ok {
		h.t.Fatalf("sign in %s: the cookie's token is no session", email)
	}
	return token, s.CSRF
}

// hiddenValue finds <input type="hidden" name="name" value="…"> in a page.
func hiddenValue(t *testing.T, body, name string) string {
	t.Helper()
	marker := `name="` + name + `" value="`
	i := strings.Index(body, marker)
	if i < 0 {
		t.Fatalf("no %s field in the page", name)
	}
	rest := body[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}

// midBackend is a backend with a MID registry.
type midBackend struct{ *fakeBackend }

func (midBackend) MIDs() ([]MID, error) {
	return []MID{{ID: "mid-1", MerchantID: "mer_a", AcquirerAddr: "10.0.0.5:8583", Currencies: []string{"EUR", "USD"},
		RegisteredAt: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}}, nil
}
