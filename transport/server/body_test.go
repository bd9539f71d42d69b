package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/paygate/gateway/internal/heapstats"
)

func bodyTestServer(t *testing.T) *fasthttputil.InmemoryListener {
	t.Helper()
	s := New(Config{})
	ln := fasthttputil.NewInmemoryListener()
	go s.Serve(ln)
	t.Cleanup(func() { ln.Close() })
	return ln
}

// exchange writes raw on c and reads one answer.
func exchange(t *testing.T, c net.Conn, br *bufio.Reader, raw string) (int, string) {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestAnnouncedBodyReservesNothing: a client that announces a large body
// and sends nothing more holds no memory for it. fasthttp reserved the
// whole announced length up front (8 MiB per connection, for anyone,
// unsigned) until bodies were streamed and read as they arrive.
func TestAnnouncedBodyReservesNothing(t *testing.T) {
	ln := bodyTestServer(t)
	heap := func() uint64 { return heapstats.AfterGC().HeapAlloc }
	before := heap()
	const conns = 20
	for range conns {
		c, err := ln.Dial()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// Expect: 100-continue (curl sends it before large bodies) makes the
		// server say when it has read the headers and waits for the body:
		// the event after which the heap is measured.
		fmt.Fprintf(c, "POST /api/v3/charge HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", BodyBytesMax)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
			t.Fatalf("the server did not ask for the body: %q %v", line, err)
		}
		io.WriteString(c, "{")
	}
	grew := int64(heap()) - int64(before)
	t.Logf("heap grew %d KiB for %d connections that announced %d KiB each", grew>>10, conns, BodyBytesMax>>10)
	if grew > conns*(128<<10) {
		t.Errorf("heap grew %d KiB for %d stalled bodies: memory is reserved by the announced length", grew>>10, conns)
	}
}

// TestBodyLimits: the 1 MiB limit holds for bodies of every framing, and a
// refused body that was read (discarded) leaves the connection usable.
func TestBodyLimits(t *testing.T) {
	ln := bodyTestServer(t)
	c, err := ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)

	big := strings.Repeat("x", BodyBytesMax+1)
	st, body := exchange(t, c, br, fmt.Sprintf("POST /api/v3/charge HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n%s", len(big), big))
	if st != 413 || !strings.Contains(body, `"2.01"`) {
		t.Fatalf("body over 1 MiB: %d %s", st, body)
	}
	if st, body = exchange(t, c, br, "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n"); st != 200 {
		t.Fatalf("the connection after a discarded body: %d %s", st, body)
	}
	// A chunked body announces no length: it is cut at the limit.
	chunked := func(body string) string {
		var b strings.Builder
		b.WriteString("POST /healthz HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n")
		for len(body) > 0 {
			n := min(len(body), 64<<10)
			fmt.Fprintf(&b, "%x\r\n%s\r\n", n, body[:n])
			body = body[n:]
		}
		b.WriteString("0\r\n\r\n")
		return b.String()
	}
	if st, body = exchange(t, c, br, chunked(`{"small":true}`)); st != 200 {
		t.Fatalf("small chunked body: %d %s", st, body)
	}
	c2, err := ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	done := make(chan struct{})
	go func() { // the server stops reading at the limit: write without blocking the answer
		defer close(done)
		io.WriteString(c2, chunked(big))
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	c2.Close()
	<-done
	if resp.StatusCode != 413 || !strings.Contains(string(got), `"2.01"`) {
		t.Fatalf("chunked body over 1 MiB: %d %s", resp.StatusCode, got)
	}
}

// TestMultipartBodyIsHeldToTheLimit: fasthttp parses a multipart/form-data
// body before the handler when asked to, with no size limit in streaming
// mode (files past 16 MiB go to temporary files). The gateway reads no
// multipart forms: such a body is a body like any other, 1 MiB at most.
func TestMultipartBodyIsHeldToTheLimit(t *testing.T) {
	ln := bodyTestServer(t)
	c, err := ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	part := "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n" + strings.Repeat("x", BodyBytesMax+1) + "\r\n--b--\r\n"
	st, body := exchange(t, c, bufio.NewReader(c), fmt.Sprintf(
		"POST /api/v3/charge HTTP/1.1\r\nHost: gw\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: %d\r\n\r\n%s", len(part), part))
	if st != 413 || !strings.Contains(body, `"2.01"`) {
		t.Fatalf("multipart body over 1 MiB: %d %s", st, body)
	}
}
