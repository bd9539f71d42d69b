package bench

import (
	"bytes"
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/transport/signature"
)

// fakeGateway emulates the parts of a node the harness uses: signed
// charge/status/settle/refund under /api/v3/, /healthz, /readyz, the admin
// API's merchants and cluster membership, and notifications to callback_url
// signed with the webhook pair. A charge answers "processing" and becomes
// "authorized" authDelay later.
// fakeJoinToken is the join token a fake node1 makes and expects.
const fakeJoinToken = "v1.fake"

type fakeGateway struct {
	ln         net.Listener
	srv        *fasthttp.Server
	url        string
	adminToken string
	authDelay  time.Duration

	mu        sync.Mutex
	merchants map[string]*fakeMerchant // by API public key
	orders    map[string]*fakeOrder    // by merchant public key + "/" + order_id
	members   []string

	badAuth    atomic.Int64 // requests refused with 1.01
	stallFrom  atomic.Int64 // unix nanos: requests arriving in [stallFrom, stallUntil) wait until stallUntil
	stallUntil atomic.Int64
	hooks      sync.WaitGroup
	// ignoreRefunds answers a refund 200 with the order unchanged, as a
	// gateway that lost it would.
	ignoreRefunds atomic.Bool
}

type fakeMerchant struct {
	ID                   string
	APIPK, APISK         string
	WebhookPK, WebhookSK string
}

type fakeOrder struct {
	ID                         string
	Amount, Settled, Refunded  int64
	Status, Callback, LastTxOp string
	merchant                   *fakeMerchant
}

func newFakeGateway(addr, adminToken, nodeID string) (*fakeGateway, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	g := &fakeGateway{
		ln: ln, url: "http://" + ln.Addr().String(), adminToken: adminToken, authDelay: 2 * time.Millisecond,
		merchants: map[string]*fakeMerchant{}, orders: map[string]*fakeOrder{}, members: []string{nodeID},
	}
	g.srv = &fasthttp.Server{Handler: g.handle}
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

// startFake starts an in-process fake with one merchant and stops it with the test.
func startFake(t *testing.T) (*fakeGateway, *fakeMerchant) {
	t.Helper()
	g, err := newFakeGateway("127.0.0.1:0", "admin-token", "node1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.close)
	return g, g.addMerchant()
}

func (g *fakeGateway) close() {
	_ = g.srv.Shutdown()
	g.hooks.Wait()
}

func (g *fakeGateway) addMerchant() *fakeMerchant {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(g.merchants) + 1
	m := &fakeMerchant{
		ID:    fmt.Sprintf("m%d", n),
		APIPK: fmt.Sprintf("api_pk_%d", n), APISK: fmt.Sprintf("api_sk_%d", n),
		WebhookPK: fmt.Sprintf("hook_pk_%d", n), WebhookSK: fmt.Sprintf("hook_sk_%d", n),
	}
	g.merchants[m.APIPK] = m
	return m
}

// stall makes every request arriving in [from, from+d) wait until from+d,
// like a node paused by a long GC or an fsync stall.
func (g *fakeGateway) stall(from time.Time, d time.Duration) {
	g.stallUntil.Store(from.Add(d).UnixNano())
	g.stallFrom.Store(from.UnixNano())
}

func (g *fakeGateway) handle(ctx *fasthttp.RequestCtx) {
	if now := time.Now().UnixNano(); now >= g.stallFrom.Load() && now < g.stallUntil.Load() {
		time.Sleep(time.Duration(g.stallUntil.Load() - now))
	}
	path := string(ctx.Path())
	switch {
	case path == "/healthz" || path == "/readyz":
		writeJSON(ctx, 200, map[string]any{"status": "ok"})
	case strings.HasPrefix(path, "/admin/v1/"):
		g.admin(ctx, strings.TrimPrefix(path, "/admin/v1/"))
	case strings.HasPrefix(path, "/api/v3/") && ctx.IsPost():
		g.api(ctx, strings.TrimPrefix(path, "/api/v3/"))
	default:
		writeError(ctx, 404, "0.01", "path", "no such path")
	}
}

func (g *fakeGateway) admin(ctx *fasthttp.RequestCtx, op string) {
	if string(ctx.Request.Header.Peek("Authorization")) != "Bearer "+g.adminToken {
		writeError(ctx, 401, "1.01", "authorization", "bad admin token")
		return
	}
	switch op {
	case "merchants":
		m := g.addMerchant()
		writeJSON(ctx, 200, map[string]any{"merchant_id": m.ID,
			"api":     map[string]string{"public_key": m.APIPK, "secret_key": m.APISK},
			"webhook": map[string]string{"public_key": m.WebhookPK, "secret_key": m.WebhookSK}})
	case "cluster":
		g.mu.Lock()
		members := make([]map[string]string, len(g.members))
		for i, id := range g.members {
			members[i] = map[string]string{"node_id": id}
		}
		g.mu.Unlock()
		writeJSON(ctx, 200, map[string]any{"members": members, "leader_id": "node1"})
	case "cluster/join-token":
		writeJSON(ctx, 200, map[string]any{"join_token": fakeJoinToken, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	case "cluster/join":
		var j struct {
			NodeID    string `json:"node_id"`
			JoinToken string `json:"join_token"`
		}
		_ = json.Unmarshal(ctx.PostBody(), &j)
		if j.JoinToken != fakeJoinToken { // the spawner passes the token it was given on
			writeError(ctx, 401, "1.01", "join_token", "join token missing or wrong")
			return
		}
		g.mu.Lock()
		g.members = append(g.members, j.NodeID)
		g.mu.Unlock()
		writeJSON(ctx, 200, map[string]any{})
	default:
		writeError(ctx, 404, "0.01", "path", "no such path")
	}
}

func (g *fakeGateway) api(ctx *fasthttp.RequestCtx, op string) {
	body := ctx.PostBody()
	pk := string(ctx.Request.Header.Peek("merchant"))
	g.mu.Lock()
	m := g.merchants[pk]
	g.mu.Unlock()
	if m == nil || !signature.Verify(m.APIPK, m.APISK, body, ctx.Request.Header.Peek("signature")) {
		g.badAuth.Add(1)
		writeError(ctx, 401, "1.01", "signature", "signature mismatch")
		return
	}
	var req struct {
		OrderID     string `json:"order_id"`
		Amount      int64  `json:"amount"`
		CallbackURL string `json:"callback_url"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.OrderID == "" {
		writeError(ctx, 400, "2.07", "body", "body is not a JSON object with order_id")
		return
	}
	key := pk + "/" + req.OrderID
	g.mu.Lock()
	defer g.mu.Unlock()
	o := g.orders[key]
	if op == "charge" {
		if o == nil {
			o = &fakeOrder{ID: req.OrderID, Amount: req.Amount, Status: "processing", Callback: req.CallbackURL, LastTxOp: "auth", merchant: m}
			g.orders[key] = o
			time.AfterFunc(g.authDelay, func() { g.authorize(o) })
		}
		writeJSON(ctx, 200, o.view())
		return
	}
	if o == nil {
		writeError(ctx, 404, "2.05", "order_id", "order not found")
		return
	}
	switch {
	case op == "status":
	case op == "settle" && o.Status == "authorized" && req.Amount > 0 && req.Amount <= o.Amount:
		o.Status, o.Settled, o.LastTxOp = "settled", req.Amount, "settle"
	case op == "refund" && g.ignoreRefunds.Load():
	case op == "refund" && o.Status == "settled" && req.Amount > 0 && req.Amount <= o.Settled-o.Refunded:
		o.Refunded += req.Amount
		o.LastTxOp = "refund"
		if o.Refunded == o.Settled {
			o.Status = "refunded"
		}
	default:
		writeError(ctx, 409, "0.03", "status", "order status is illegal for the "+op+" operation")
		return
	}
	writeJSON(ctx, 200, o.view())
}

func (g *fakeGateway) authorize(o *fakeOrder) {
	g.mu.Lock()
	o.Status = "authorized"
	view, callback, m := o.view(), o.Callback, o.merchant
	g.mu.Unlock()
	if callback != "" {
		g.hooks.Add(1)
		go g.notify(callback, m, view)
	}
}

// notify posts the order to its callback_url until it is answered 200 {"status":"ok"} (three tries).
func (g *fakeGateway) notify(url string, m *fakeMerchant, order map[string]any) {
	defer g.hooks.Done()
	body, _ := json.Marshal(order)
	for range 3 {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("merchant", m.WebhookPK)
		req.Header.Set("signature", signature.Sign(m.WebhookPK, m.WebhookSK, body))
		resp, err := hookClient.Do(req)
		if err == nil {
			var ack struct {
				Status string `json:"status"`
			}
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && json.Unmarshal(buf.Bytes(), &ack) == nil && ack.Status == "ok" {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var hookClient = &http.Client{Timeout: 2 * time.Second}

func (o *fakeOrder) view() map[string]any {
	return map[string]any{
		"order_id": o.ID, "amount": o.Amount, "currency": "USD", "status": o.Status,
		"settled_amount": o.Settled, "refunded_amount": o.Refunded,
		"transaction": map[string]any{"id": "t-" + o.LastTxOp, "operation": o.LastTxOp, "status": "success"},
	}
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, _ := json.Marshal(v)
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func writeError(ctx *fasthttp.RequestCtx, status int, code, attr, msg string) {
	writeJSON(ctx, status, map[string]any{"error": map[string]any{"code": code, "messages": map[string][]string{attr: {msg}}}})
}

// Fake gatewayd process mode: TestMain runs fakeGatewayd instead of the tests
// when this variable is set, so that the test binary itself is the
// "gatewayd" Spawn starts.
const (
	envFakeGatewayd = "GATEWAYBENCH_FAKE_GATEWAYD" // "1": serve; "fail": print and exit 1 at once
	envFakePIDDir   = "GATEWAYBENCH_FAKE_PIDDIR"   // where each fake node writes <node-id>.pid
)

func TestMain(m *testing.M) {
	switch os.Getenv(envFakeGatewayd) {
	case "":
		os.Exit(nodetest.Run(m))
	case "fail":
		fmt.Println("fake gatewayd: refusing to start")
		os.Exit(1)
	default:
		os.Exit(fakeGatewayd(os.Args[1:]))
	}
}

// fakeGatewayd parses gatewayd's flags (contract section 10), checks the
// ones Spawn must give, serves the fake gateway and exits 0 on SIGTERM.
func fakeGatewayd(args []string) int {
	fs := flag.NewFlagSet("gatewayd", flag.ContinueOnError)
	httpAddr := fs.String("http-addr", "", "")
	raftAddr := fs.String("raft-addr", "", "")
	dataDir := fs.String("data-dir", "", "")
	nodeID := fs.String("node-id", "", "")
	adminToken := fs.String("admin-token", "", "")
	allowPrivate := fs.Bool("allow-private-callbacks", false, "")
	settleUnit := fs.String("settle-delay-unit", "", "")
	retryDelays := fs.String("webhook-retry-delays", "", "")
	vaultKeyFile := fs.String("vault-key-file", "", "")
	join := fs.String("join", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	key, err := os.ReadFile(*vaultKeyFile)
	if err != nil {
		fmt.Println("vault key:", err)
		return 2
	}
	if k, err := hex.DecodeString(strings.TrimSpace(string(key))); err != nil || len(k) != 32 {
		fmt.Println("vault key: want 64 hex characters")
		return 2
	}
	if st, err := os.Stat(*dataDir); err != nil || !st.IsDir() {
		fmt.Println("data dir missing")
		return 2
	}
	if *raftAddr == "" || *adminToken == "" || !*allowPrivate || *settleUnit == "" || *retryDelays == "" {
		fmt.Println("missing flags")
		return 2
	}
	g, err := newFakeGateway(*httpAddr, *adminToken, *nodeID)
	if err != nil {
		fmt.Println("listen:", err)
		return 1
	}
	if dir := os.Getenv(envFakePIDDir); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, *nodeID+".pid"), []byte(fmt.Sprint(os.Getpid())), 0o600)
	}
	if *join != "" {
		body, _ := json.Marshal(map[string]string{"node_id": *nodeID, "raft_addr": *raftAddr, "http_addr": *httpAddr,
			"join_token": os.Getenv("GATEWAY_JOIN_TOKEN")})
		joined := false
		for range 100 {
			req, _ := http.NewRequest(http.MethodPost, "http://"+*join+"/admin/v1/cluster/join", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+*adminToken)
			if resp, err := hookClient.Do(req); err == nil {
				resp.Body.Close()
				if joined = resp.StatusCode == 200; joined {
					break
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !joined {
			fmt.Println("join failed")
			return 1
		}
	}
	fmt.Printf("fake gatewayd %s serving on %s\n", *nodeID, *httpAddr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	g.close()
	return 0
}
