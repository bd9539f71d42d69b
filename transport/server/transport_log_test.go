package server

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp/fasthttputil"
)

// lockedBuffer is a log destination the server's goroutines may share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestMalformedHeadersKeepCardDataOutOfTheLog: fasthttp quotes the header
// line it cannot parse in its error, whatever SecureErrorLogMessage says. A
// client that leaves out the blank line before a charge's body, or puts a
// control byte in a header, had the card number and CVV written to the
// node's log.
func TestMalformedHeadersKeepCardDataOutOfTheLog(t *testing.T) {
	const pan, cvv = "4000056655665556", "741"
	charge := `{"order_id":"o1","amount":100,"currency":"USD","payment_source":{"type":"card","card_number":"` +
		pan + `","card_exp_month":"12","card_exp_year":"2035","card_cvv":"` + cvv + `"}}`
	for _, tc := range []struct{ name, raw string }{
		{"no blank line before the body", "POST /api/v3/charge HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n" + charge + "\r\n\r\n{}"},
		{"a NUL byte in a header value", "POST /api/v3/charge HTTP/1.1\r\nHost: x\r\nX-Card: " + charge + "\x00\r\nContent-Length: 2\r\n\r\n{}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuffer
			s := New(Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			ln := fasthttputil.NewInmemoryListener()
			go s.Serve(ln)
			defer ln.Close()
			c, err := ln.Dial()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			status, body := exchange(t, c, bufio.NewReader(c), tc.raw)
			if status != 400 || !strings.Contains(body, `"2.07"`) {
				t.Fatalf("answer %d %s, want 400 2.07", status, body)
			}
			_, _ = io.Copy(io.Discard, c) // the server closes the connection, then logs
			deadline := time.Now().Add(2 * time.Second)
			for !strings.Contains(logs.String(), "http transport") && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			got := logs.String()
			if !strings.Contains(got, "http transport") {
				t.Fatalf("no transport warning logged: %q", got)
			}
			if strings.Contains(got, pan) || strings.Contains(got, "card_cvv") {
				t.Fatalf("card data in the node log: %s", got)
			}
		})
	}
}

func TestRedactQuoted(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"no quotes", "no quotes"},
		{`error when serving connection "127.0.0.1:8080"<->"[::1]:5555": x`, `error when serving connection "127.0.0.1:8080"<->"[::1]:5555": x`},
		{`malformed mime header line: "{\"card_number\":\"4111\"}" end`, `malformed mime header line: <28 quoted bytes withheld> end`},
		{`a "one" and "two"`, `a <5 quoted bytes withheld> and <5 quoted bytes withheld>`},
		{`cut "open \"4111`, `cut <12 quoted bytes withheld>`},
		{`trailing backslash "ab\`, `trailing backslash <4 quoted bytes withheld>`},
		{`host name "example.com:80"`, `host name <16 quoted bytes withheld>`},
	} {
		if got := redactQuoted(tc.in); got != tc.want {
			t.Errorf("redactQuoted(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
