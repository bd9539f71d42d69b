package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygate/gateway/transport/signature"
)

const (
	testPK = "whk_pk_1a2b3c"
	testSK = "whk_sk_4d5e6f"
)

var testBody = []byte(`{"order_id":"order-1","status":"declined","amount":1020,"currency":"USD"}`)

func testDelivery(url string) Delivery {
	return Delivery{URL: url, Body: testBody, PublicKey: testPK, Key: signature.NewKey(testPK, testSK)}
}

// clientFor returns a Client whose guard permits only the given receivers.
func clientFor(t *testing.T, cfg Config, allow ...netip.AddrPort) (*Client, *netLog) {
	t.Helper()
	g, log := newTestGuard(t, nil, allow...)
	cfg.Guard = g
	c := NewClient(cfg)
	t.Cleanup(c.CloseIdleConnections)
	return c, log
}

func TestDeliverDelivered(t *testing.T) {
	var got struct {
		sync.Mutex
		n      int
		method string
		path   string
		header http.Header
		body   []byte
	}
	url, addr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		// The receiver verifies the notification as a merchant would.
		if r.Header.Get("merchant") != testPK ||
			!signature.Verify(r.Header.Get("merchant"), testSK, body, []byte(r.Header.Get("signature"))) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		got.Lock()
		got.n++
		got.method, got.path, got.header, got.body = r.Method, r.URL.RequestURI(), r.Header.Clone(), body
		got.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, ` {"status": "ok", "received": true}`+"\n")
	}))
	c, log := clientFor(t, Config{UserAgent: "paygate-test/1"}, addr)

	d := testDelivery(url + "/hooks/paygate?shop=1")
	d.CreatedAt = time.Date(2026, 11, 25, 18, 5, 1, 123456789, time.UTC).UnixNano()
	a := c.Deliver(context.Background(), d)
	if !a.Delivered || a.HTTPCode != 200 || a.Error != "" || a.Duration <= 0 {
		t.Fatalf("Deliver = %+v, want delivered", a)
	}
	got.Lock()
	defer got.Unlock()
	if at := got.header.Get(CreatedAtHeader); at != "2026-11-25T18:05:01.123456789Z" {
		t.Errorf("%s = %q", CreatedAtHeader, at)
	}
	if got.n != 1 || got.method != http.MethodPost || got.path != "/hooks/paygate?shop=1" || !bytes.Equal(got.body, testBody) {
		t.Errorf("receiver saw %d %s %s %q", got.n, got.method, got.path, got.body)
	}
	if ct := got.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	if sig := got.header.Get("signature"); sig != signature.Sign(testPK, testSK, testBody) {
		t.Errorf("signature = %q", sig)
	}
	if ua := got.header.Get("User-Agent"); ua != "paygate-test/1" {
		t.Errorf("User-Agent = %q", ua)
	}
	for _, s := range log.socketAddrs() {
		if s != addr.String() {
			t.Errorf("socket to %s", s)
		}
	}
}

// A delivery without a key is never sent unsigned: it fails before a
// connection is made.
func TestDeliverWithoutKeyIsNotSent(t *testing.T) {
	var hits atomic.Int32
	url, addr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, `{"status":"ok"}`)
	}))
	c, log := clientFor(t, Config{}, addr)
	d := testDelivery(url)
	d.Key = nil
	if a := c.Deliver(context.Background(), d); a.Delivered || a.Error != errNoKey {
		t.Fatalf("Deliver = %+v, want %q", a, errNoKey)
	}
	if hits.Load() != 0 || len(log.socketAddrs()) != 0 {
		t.Fatalf("%d requests, sockets %v: an unsigned notification went out", hits.Load(), log.socketAddrs())
	}
}

func TestDeliverNotDelivered(t *testing.T) {
	const marker = "SECRET-RECEIVER-TEXT"
	cases := []struct {
		code int
		body string
		want string
	}{
		{200, `{"status":"OK"}`, errNotOK},
		{200, `{"status":"` + marker + `"}`, errNotOK},
		{200, `{"Status":"ok"}`, errNotOK},
		{200, `{"STATUS":"ok"}`, errNotOK},
		{200, `{"status":1}`, errNotOK},
		{200, `{"status":null}`, errNotOK},
		{200, `{"status":["ok"]}`, errNotOK},
		{200, `{"result":"ok"}`, errNotOK},
		{200, `["ok"]`, errNotOK},
		{200, `"ok"`, errNotOK},
		{200, `ok`, errNotOK},
		{200, `null`, errNotOK},
		{200, ``, errNotOK},
		{200, `{"status":"ok"} trailing ` + marker, errNotOK},
		{200, `{"status":"ok"`, errNotOK},
		{200, `<html>` + marker + `</html>`, errNotOK},
		{201, `{"status":"ok"}`, "http status 201"},
		{202, `{"status":"ok"}`, "http status 202"},
		{204, ``, "http status 204"},
		{400, `{"status":"ok"}`, "http status 400"},
		{404, marker, "http status 404"},
		{500, `{"status":"ok","error":"` + marker + `"}`, "http status 500"},
		{503, ``, "http status 503"},
	}
	var mu sync.Mutex
	next := cases[0]
	url, addr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tc := next
		mu.Unlock()
		w.WriteHeader(tc.code)
		io.WriteString(w, tc.body)
	}))
	c, _ := clientFor(t, Config{}, addr)
	for _, tc := range cases {
		mu.Lock()
		next = tc
		mu.Unlock()
		a := c.Deliver(context.Background(), testDelivery(url))
		if a.Delivered || a.HTTPCode != tc.code || a.Error != tc.want {
			t.Errorf("%d %q: Deliver = %+v, want error %q", tc.code, tc.body, a, tc.want)
		}
		if strings.Contains(a.Error, marker) {
			t.Errorf("Attempt.Error echoes the response body: %q", a.Error)
		}
	}
}

func TestDeliver500(t *testing.T) {
	url, addr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "internal error", http.StatusInternalServerError)
	}))
	c, _ := clientFor(t, Config{}, addr)
	a := c.Deliver(context.Background(), testDelivery(url))
	if a.Delivered || a.HTTPCode != 500 || a.Error != "http status 500" {
		t.Fatalf("Deliver = %+v", a)
	}
}

func TestDeliverTimeoutAwaitingResponse(t *testing.T) {
	release := make(chan struct{})
	url, addr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // lets the server notice the client leaving
		select {                    // never answers in time
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	const rt = 300 * time.Millisecond
	c, _ := clientFor(t, Config{ConnectTimeout: time.Second, ResponseTimeout: rt}, addr)
	start := time.Now()
	a := c.Deliver(context.Background(), testDelivery(url))
	el := time.Since(start)
	if a.Delivered || a.Error != "timeout" || a.HTTPCode != 0 {
		t.Fatalf("Deliver = %+v, want timeout", a)
	}
	if el < rt || el > rt+time.Second {
		t.Errorf("timed out after %v, want about %v", el, rt)
	}
}

// Headers arrive at once but the body stalls: the whole-attempt deadline
// (ConnectTimeout + ResponseTimeout) ends it.
func TestDeliverTimeoutReadingBody(t *testing.T) {
	release := make(chan struct{})
	url, addr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // lets the server notice the client leaving
		w.WriteHeader(200)
		io.WriteString(w, `{"status":`)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release) })
	c, _ := clientFor(t, Config{ConnectTimeout: 200 * time.Millisecond, ResponseTimeout: 200 * time.Millisecond}, addr)
	start := time.Now()
	a := c.Deliver(context.Background(), testDelivery(url))
	if a.Delivered || a.Error != "timeout" || a.HTTPCode != 200 {
		t.Fatalf("Deliver = %+v, want timeout", a)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("took %v", el)
	}
}

// An endless body: only MaxResponseBytes (+1 to notice the excess) is read,
// and the attempt ends at once.
func TestDeliverHugeResponseBody(t *testing.T) {
	var written atomic.Int64
	url, addr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		io.WriteString(w, `{"status":"ok","pad":"`)
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for i := 0; i < 1<<15; i++ { // up to 1 GiB
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	c, _ := clientFor(t, Config{MaxResponseBytes: 1024, ResponseTimeout: 5 * time.Second}, addr)
	start := time.Now()
	a := c.Deliver(context.Background(), testDelivery(url))
	if a.Delivered || a.HTTPCode != 200 || a.Error != "response body too large" {
		t.Fatalf("Deliver = %+v", a)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("took %v", el)
	}
	if w := written.Load(); w >= 1<<30 {
		t.Errorf("receiver could write the whole %d bytes: the client kept reading", w)
	}

	// Exactly at the limit is fine.
	body := `{"status":"ok","pad":"` + strings.Repeat("y", 1024-len(`{"status":"ok","pad":""}`)) + `"}`
	url2, addr2 := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
	c2, _ := clientFor(t, Config{MaxResponseBytes: int64(len(body))}, addr2)
	if a := c2.Deliver(context.Background(), testDelivery(url2)); !a.Delivered {
		t.Fatalf("body of exactly MaxResponseBytes: %+v", a)
	}
}

// The limit is exact whatever the body's framing: MaxResponseBytes is
// accepted, one more is too large, and an endless body ends the attempt at
// once.
func TestDeliverBodyLimit(t *testing.T) {
	const limit = 4096
	body := func(size int) string {
		if size < len(`{"status":"ok"}`) {
			return strings.Repeat(" ", size)
		}
		return `{"status":"ok"}` + strings.Repeat(" ", size-len(`{"status":"ok"}`))
	}
	framings := map[string]func(conn net.Conn, b string){
		"content-length": func(conn net.Conn, b string) {
			fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
		},
		"chunked": func(conn net.Conn, b string) {
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
			for len(b) > 0 {
				n := min(len(b), 1000)
				fmt.Fprintf(conn, "%x\r\n%s\r\n", n, b[:n])
				b = b[n:]
			}
			io.WriteString(conn, "0\r\n\r\n")
		},
		"until close": func(conn net.Conn, b string) {
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"+b)
		},
	}
	for name, write := range framings {
		for _, size := range []int{0, 10, limit, limit + 1, 1 << 20} {
			addr := rawReceiver(t, func(conn net.Conn) {
				defer conn.Close()
				readRequest(conn)
				write(conn, body(size))
			})
			c, _ := clientFor(t, Config{MaxResponseBytes: limit}, addr)
			a := c.Deliver(context.Background(), testDelivery("http://"+addr.String()+"/"))
			switch {
			case size > limit && a.Error != errTooLarge:
				t.Errorf("%s, %d bytes: %+v, want %q", name, size, a, errTooLarge)
			case size <= limit && size >= len(`{"status":"ok"}`) && !a.Delivered:
				t.Errorf("%s, %d bytes: %+v, want delivered", name, size, a)
			case size < len(`{"status":"ok"}`) && a.Error != errNotOK:
				t.Errorf("%s, %d bytes: %+v, want %q", name, size, a, errNotOK)
			}
		}
	}

	endless := map[string]string{
		"content-length": "HTTP/1.1 200 OK\r\nContent-Length: 1099511627776\r\n\r\n",
		"until close":    "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
	}
	for name, header := range endless {
		addr := rawReceiver(t, func(conn net.Conn) {
			defer conn.Close()
			readRequest(conn)
			io.WriteString(conn, header)
			chunk := bytes.Repeat([]byte(" "), 32<<10)
			for i := 0; i < 1<<15; i++ { // up to 1 GiB
				if _, err := conn.Write(chunk); err != nil {
					return
				}
			}
		})
		c, _ := clientFor(t, Config{MaxResponseBytes: limit}, addr)
		start := time.Now()
		if a := c.Deliver(context.Background(), testDelivery("http://"+addr.String()+"/")); a.Error != errTooLarge || a.HTTPCode != 200 {
			t.Errorf("endless body, %s: %+v", name, a)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("endless body, %s: took %v", name, el)
		}
	}
}

func TestDeliverRedirectNotFollowed(t *testing.T) {
	var targetHits atomic.Int64
	target, targetAddr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		targetHits.Add(1)
		io.WriteString(w, `{"status":"ok"}`)
	}))
	for _, code := range []int{301, 302, 303, 307, 308} {
		url, addr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target+"/moved", code)
		}))
		// Both receivers are permitted: only the client's policy stops it.
		c, _ := clientFor(t, Config{}, addr, targetAddr)
		a := c.Deliver(context.Background(), testDelivery(url))
		want := fmt.Sprintf("redirect not followed (%d)", code)
		if a.Delivered || a.HTTPCode != code || a.Error != want {
			t.Errorf("Deliver = %+v, want %q", a, want)
		}
	}
	if n := targetHits.Load(); n != 0 {
		t.Errorf("redirect target was hit %d times", n)
	}
}

// Answers are read to the end, so one connection serves many attempts.
func TestDeliverReusesConnections(t *testing.T) {
	var newConns atomic.Int64
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) % 4 {
		case 0:
			http.Error(w, "busy", 503)
		case 1:
			io.WriteString(w, `{"status":"nope"}`)
		case 2:
			http.Redirect(w, r, "/elsewhere", 302)
		default:
			io.WriteString(w, `{"status":"ok"}`)
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			newConns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, _ := clientFor(t, Config{}, netip.MustParseAddrPort(srv.Listener.Addr().String()))
	for i := 0; i < 12; i++ {
		c.Deliver(context.Background(), testDelivery(srv.URL))
	}
	if got := newConns.Load(); got != 1 {
		t.Errorf("12 sequential attempts used %d connections, want 1", got)
	}
}

// HTTPS with certificate verification. The client speaks HTTP/1.1 only,
// also to a receiver that offers HTTP/2.
func TestDeliverOverTLS(t *testing.T) {
	var proto atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto.Store(int64(r.ProtoMajor))
		io.WriteString(w, `{"status":"ok"}`)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := netip.MustParseAddrPort(srv.Listener.Addr().String())

	// Untrusted certificate: a failed attempt with a stable error.
	c, _ := clientFor(t, Config{}, addr)
	if a := c.Deliver(context.Background(), testDelivery(srv.URL)); a.Delivered || a.Error != "tls: certificate verification failed" {
		t.Fatalf("untrusted cert: %+v", a)
	}

	c2, _ := clientFor(t, Config{}, addr)
	trust(c2, srv)
	if a := c2.Deliver(context.Background(), testDelivery(srv.URL)); !a.Delivered {
		t.Fatalf("Deliver = %+v", a)
	}
	if proto.Load() != 1 {
		t.Errorf("request used HTTP/%d, want HTTP/1.1", proto.Load())
	}
}

func TestDeliverConnectErrors(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := netip.MustParseAddrPort(ln.Addr().String())
	ln.Close()
	c, _ := clientFor(t, Config{ConnectTimeout: time.Second}, closed)
	if a := c.Deliver(context.Background(), testDelivery("http://"+closed.String()+"/")); a.Error != "connect: connection refused" {
		t.Errorf("closed port: %+v", a)
	}
	g, _ := newTestGuard(t, map[string][]netip.Addr{})
	g.lookup = func(context.Context, string) ([]netip.Addr, error) {
		return nil, &net.DNSError{Err: "no such host", Name: "nx.example.com", IsNotFound: true}
	}
	c2 := NewClient(Config{Guard: g})
	if a := c2.Deliver(context.Background(), testDelivery("https://nx.example.com/hook")); a.Error != "connect: dns lookup failed" {
		t.Errorf("unknown name: %+v", a)
	}
	for _, u := range []string{"", "not a url", "ftp://example.com/", "http:///x", "//example.com/x", "http://[::1/"} {
		if a := c2.Deliver(context.Background(), testDelivery(u)); a.Error != "invalid url" || a.Delivered {
			t.Errorf("Deliver(%q) = %+v", u, a)
		}
	}
}

// A nil Guard is the strict guard, and AllowPrivate permits loopback.
func TestNewClientGuards(t *testing.T) {
	url, _ := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"status":"ok"}`)
	}))
	strict := NewClient(Config{})
	defer strict.CloseIdleConnections()
	if a := strict.Deliver(context.Background(), testDelivery(url)); a.Delivered || a.Error != "connect: refused by SSRF guard" {
		t.Errorf("nil Guard: %+v", a)
	}
	open := NewClient(Config{Guard: &Guard{AllowPrivate: true}})
	defer open.CloseIdleConnections()
	if a := open.Deliver(context.Background(), testDelivery(url)); !a.Delivered {
		t.Errorf("AllowPrivate: %+v", a)
	}
}

// Many concurrent attempts to one receiver (race detector coverage).
func TestDeliverConcurrent(t *testing.T) {
	url, addr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !signature.Verify(r.Header.Get("merchant"), testSK, body, []byte(r.Header.Get("signature"))) {
			w.WriteHeader(401)
			return
		}
		io.WriteString(w, `{"status":"ok"}`)
	}))
	c, _ := clientFor(t, Config{}, addr)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := 0; i < 64; i++ {
		wg.Go(func() {
			d := testDelivery(url)
			d.Body = fmt.Appendf(nil, `{"order_id":"o-%d"}`, i)
			if a := c.Deliver(context.Background(), d); !a.Delivered {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Errorf("%d of 64 concurrent attempts failed", failed.Load())
	}
}

// With the defaults, a receiver that echoes a large body beside "status":
// "ok" has delivered (contract section 6 sets no size): a 4 KiB limit
// failed every such answer.
func TestDefaultLimitTakesALargeOKAnswer(t *testing.T) {
	body := `{"echo":"` + strings.Repeat("x", 200<<10) + `","status":"ok"}`
	url, addr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}))
	c, _ := clientFor(t, Config{}, addr)
	if a := c.Deliver(context.Background(), testDelivery(url)); !a.Delivered || a.HTTPCode != 200 {
		t.Fatalf("a 200 answer of %d bytes with status ok: %+v", len(body), a)
	}
}
