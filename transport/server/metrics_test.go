package server

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
)

// Requests refused before serveMerchant (a body over the limit, a request
// that cannot be read) are counted like the operations' other answers:
// under the operation the path names, else under "unknown". Without that,
// gateway_http_requests_total missed every 413 and 400 2.07.
func TestEarlyRefusalsAreCounted(t *testing.T) {
	s := New(Config{})
	ln := fasthttputil.NewInmemoryListener()
	go s.Serve(ln)
	t.Cleanup(func() { ln.Close() })

	// send writes raw bytes on a new connection and returns the status.
	send := func(raw string) int {
		t.Helper()
		c, err := ln.Dial()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	post := func(path string, length int, body string) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n%s", path, length, body)
	}
	// count reads a series from /metrics, as a scraper does (0 when absent).
	count := func(series string) float64 {
		t.Helper()
		c, err := ln.Dial()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: gw\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, series+" "); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				return n
			}
		}
		return 0
	}

	big := strings.Repeat("x", BodyBytesMax+1)
	for _, c := range []struct {
		name string
		raw  string
		op   string
		code int
	}{
		// Read in full, refused by route.
		{"body over 1 MiB", post("/api/v3/charge", len(big), big), "charge", 413},
		{"body over 1 MiB, v1", post("/api/v1/status", len(big), big), "status", 413},
		{"body over 1 MiB, no operation", post("/api/v3/nothing", len(big), big), "unknown", 413},
		// Announced over the limit up to which a body is read and
		// discarded: refused once its first bytes came, the rest unread.
		{"body over the discard limit", post("/api/v3/refund", bodyBytesHardMax+1, strings.Repeat("x", 16<<10)), "refund", 413},
		{"unreadable request", "NOT A REQUEST\r\n\r\n", "unknown", 400},
	} {
		series := fmt.Sprintf(`{op=%q,code="%d"}`, c.op, c.code)
		before := count("gateway_http_requests_total" + series)
		beforeLatency := count("gateway_http_request_duration_seconds_count" + series)
		if got := send(c.raw); got != c.code {
			t.Fatalf("%s: status %d, want %d", c.name, got, c.code)
		}
		if got := count("gateway_http_requests_total" + series); got != before+1 {
			t.Errorf("%s: gateway_http_requests_total%s went from %v to %v, want one more", c.name, series, before, got)
		}
		if got := count("gateway_http_request_duration_seconds_count" + series); got != beforeLatency+1 {
			t.Errorf("%s: gateway_http_request_duration_seconds%s counted %v then %v, want one more", c.name, series, beforeLatency, got)
		}
	}

	// A connection that timed out before sending a request made none.
	series := `gateway_http_requests_total{op="unknown",code="400"}`
	before := count(series)
	var ctx fasthttp.RequestCtx
	s.transportError(&ctx, os.ErrDeadlineExceeded)
	if ctx.Response.StatusCode() != 400 {
		t.Errorf("timeout answered %d, want 400", ctx.Response.StatusCode())
	}
	if got := count(series); got != before {
		t.Errorf("a read timeout was counted: %s went from %v to %v", series, before, got)
	}
}
