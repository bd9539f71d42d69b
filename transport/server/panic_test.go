package server

import (
	"bufio"
	"bytes"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
)

// A handler that panics answers that request 500 5.03 and leaves the node
// serving: the next request on a new connection is answered. The log has
// the panic but not the request's body (it may hold a card number).
func TestAPanickingHandlerAnswers500AndTheServerLives(t *testing.T) {
	var logs bytes.Buffer
	s := New(Config{
		Logger:     slog.New(slog.NewTextHandler(&logs, nil)),
		AdminToken: "t0ken",
		AdminRoutes: map[string]AdminHandler{
			"boom": func(*fasthttp.RequestCtx) { panic("boom: an unexpected state") },
		},
	})
	ln := fasthttputil.NewInmemoryListener()
	go s.Serve(ln)
	t.Cleanup(func() { ln.Close() })
	before := handlerPanics.Get()

	c, br := dial(t, ln)
	status, body := exchange(t, c, br, "GET /admin/v1/boom?card=4111111111111111 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t0ken\r\n\r\n")
	if status != 500 || !strings.Contains(body, `"5.03"`) {
		t.Fatalf("panicking handler answered %d %s, want 500 5.03", status, body)
	}
	if got := handlerPanics.Get(); got != before+1 {
		t.Errorf("gateway_http_handler_panics_total went from %d to %d, want one more", before, got)
	}
	c2, br2 := dial(t, ln)
	if status, _ := exchange(t, c2, br2, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); status != 200 {
		t.Fatalf("after the panic /healthz answered %d", status)
	}
	if !strings.Contains(logs.String(), "boom: an unexpected state") {
		t.Errorf("the log does not name the panic: %s", logs.String())
	}
	if strings.Contains(logs.String(), "4111111111111111") {
		t.Errorf("the log quotes the request: %s", logs.String())
	}
}

func dial(t *testing.T, ln *fasthttputil.InmemoryListener) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}
