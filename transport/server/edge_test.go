package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// dialTestServer connects to a new front end with no node behind it.
func dialTestServer(t *testing.T) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := bodyTestServer(t).Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// A request that names both a Content-Length and a Transfer-Encoding is
// refused 400 and its connection closed, in either order: a proxy in front
// that framed it by the other header would see a second request hidden in
// the body, and this node must not answer it (request smuggling).
func TestBothLengthsAreRefusedAndTheConnectionClosed(t *testing.T) {
	smuggled := "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	for name, headers := range map[string]string{
		"length first":   "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
		"encoding first": "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
		"odd case":       "content-length: 5\r\ntransfer-encoding: chunked\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			c, br := dialTestServer(t)
			raw := "POST /api/v3/charge HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n0\r\n\r\n" + smuggled
			status, body := exchange(t, c, br, raw)
			if status != 400 || !strings.Contains(body, `"2.07"`) && !strings.Contains(body, "Transfer-Encoding") {
				t.Fatalf("answer %d %s, want 400 naming both lengths", status, body)
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
				t.Fatalf("after the refusal the connection gave %q (err %v), want it closed with nothing more: the smuggled request was answered", rest, err)
			}
		})
	}
}

// One length alone is served as before.
func TestOneLengthIsServed(t *testing.T) {
	c, br := dialTestServer(t)
	if status, _ := exchange(t, c, br, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"); status != 200 {
		t.Fatalf("Content-Length alone: %d", status)
	}
	if status, _ := exchange(t, c, br, "GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"); status != 200 {
		t.Fatalf("Transfer-Encoding alone: %d", status)
	}
}

// Methods are compared whole: OST is not POST, GE is not GET.
func TestMethodsAreComparedExactly(t *testing.T) {
	for _, c := range []struct {
		method  string
		allowed bool
	}{
		{"POST", true}, {"GET", true}, {"HEAD", true},
		{"OST", false}, {"POS", false}, {"ST", false}, {"GE", false}, {"T", false}, {"PUT", false}, {"post", false}, {",", false},
	} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod(c.method)
		if got := allowMethod(&ctx, "GET, POST"); got != c.allowed {
			t.Errorf("allowMethod(%q, \"GET, POST\") = %v, want %v", c.method, got, c.allowed)
		}
		if !c.allowed && (ctx.Response.StatusCode() != 405 || string(ctx.Response.Header.Peek("Allow")) != "GET, POST") {
			t.Errorf("%s: answered %d Allow %q, want 405 Allow \"GET, POST\"", c.method, ctx.Response.StatusCode(), ctx.Response.Header.Peek("Allow"))
		}
	}
	// Over HTTP, on a merchant operation.
	conn, br := dialTestServer(t)
	status, body := exchange(t, conn, br, "OST /api/v3/charge HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	if status != http.StatusMethodNotAllowed || !strings.Contains(body, "use POST") {
		t.Fatalf("OST /api/v3/charge: %d %s, want 405", status, body)
	}
}
