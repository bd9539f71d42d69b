package webhook

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The failure situations of one attempt, each with the Attempt.Error (and
// HTTPCode) an operator sees.

// rawReceiver accepts TCP connections on 127.0.0.1 and hands each to serve,
// which owns (and closes) it.
func rawReceiver(t *testing.T, serve func(net.Conn)) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(conn)
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

// readRequest reads one whole request from conn (so closing conn afterwards
// sends a FIN, not a reset).
func readRequest(conn net.Conn) {
	req, err := http.ReadRequest(bufio.NewReader(conn))
	if err == nil {
		io.Copy(io.Discard, req.Body)
	}
}

// tlsReceiver starts an HTTPS server on 127.0.0.1 (certificate for
// example.com, 127.0.0.1 and ::1) and returns it.
func tlsReceiver(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// trust makes c accept certificates issued by srv's test CA. It must come
// before c's first https attempt.
func trust(c *Client, srv *httptest.Server) {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c.tlsConfig.RootCAs = pool
}

func deliverWithin(t *testing.T, c *Client, ctx context.Context, url string, max time.Duration) Attempt {
	t.Helper()
	start := time.Now()
	a := c.Deliver(ctx, testDelivery(url))
	if el := time.Since(start); el > max {
		t.Errorf("attempt took %v, want at most %v", el, max)
	}
	return a
}

func wantAttempt(t *testing.T, a Attempt, code int, err string) {
	t.Helper()
	if a.Delivered || a.HTTPCode != code || a.Error != err {
		t.Errorf("Deliver = %+v, want HTTPCode %d, Error %q", a, code, err)
	}
}

// DNS, TCP and TLS are all "connect": a slow resolver times out as a connect
// timeout, bounded by ConnectTimeout.
func TestDeliverConnectTimeoutResolving(t *testing.T) {
	g, _ := newTestGuard(t, nil)
	g.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	c := NewClient(Config{Guard: g, ConnectTimeout: 200 * time.Millisecond, ResponseTimeout: 5 * time.Second})
	defer c.CloseIdleConnections()
	a := deliverWithin(t, c, context.Background(), "http://slow-dns.example.com/hook", 2*time.Second)
	wantAttempt(t, a, 0, errConnTimeout)
}

// A receiver that accepts TCP but never answers the TLS handshake.
func TestDeliverConnectTimeoutTLSHandshake(t *testing.T) {
	addr := rawReceiver(t, func(conn net.Conn) {
		defer conn.Close()
		io.Copy(io.Discard, conn) // until the client gives up
	})
	c, _ := clientFor(t, Config{ConnectTimeout: 200 * time.Millisecond, ResponseTimeout: 5 * time.Second}, addr)
	a := deliverWithin(t, c, context.Background(), "https://"+addr.String()+"/hook", 2*time.Second)
	wantAttempt(t, a, 0, errConnTimeout)
}

func TestDeliverTLSHandshakeFailures(t *testing.T) {
	// Not TLS at all: bytes that are no TLS record.
	garbage := rawReceiver(t, func(conn net.Conn) {
		defer conn.Close()
		conn.Write([]byte("\x00\x01\x02\x03\x04 this is not TLS\r\n"))
		io.Copy(io.Discard, conn)
	})
	c, _ := clientFor(t, Config{ConnectTimeout: time.Second}, garbage)
	wantAttempt(t, c.Deliver(context.Background(), testDelivery("https://"+garbage.String()+"/")), 0, errTLS)

	// A plain HTTP server behind an https URL (net/http reported this as
	// "server gave HTTP response to HTTPS client").
	plain, plainAddr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"status":"ok"}`)
	}))
	c2, _ := clientFor(t, Config{ConnectTimeout: time.Second}, plainAddr)
	wantAttempt(t, c2.Deliver(context.Background(), testDelivery(strings.Replace(plain, "http:", "https:", 1))), 0, errConnect)

	// The receiver refuses every TLS version the client offers: an alert.
	old := httptest.NewUnstartedServer(http.NotFoundHandler())
	old.TLS = &tls.Config{MaxVersion: tls.VersionTLS11}
	old.StartTLS()
	t.Cleanup(old.Close)
	oldAddr := netip.MustParseAddrPort(old.Listener.Addr().String())
	c3, _ := clientFor(t, Config{ConnectTimeout: time.Second}, oldAddr)
	trust(c3, old)
	wantAttempt(t, c3.Deliver(context.Background(), testDelivery(old.URL)), 0, errConnect)
}

func TestDeliverCertificateErrors(t *testing.T) {
	srv := tlsReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"status":"ok"}`)
	}))
	addr := netip.MustParseAddrPort(srv.Listener.Addr().String())
	port := addr.Port()
	g, _ := newTestGuard(t, map[string][]netip.Addr{
		"example.com":       {netip.MustParseAddr("127.0.0.1")},
		"wrong.example.org": {netip.MustParseAddr("127.0.0.1")},
	}, addr)
	// Unknown authority.
	untrusting := NewClient(Config{Guard: g, ConnectTimeout: time.Second})
	defer untrusting.CloseIdleConnections()
	wantAttempt(t, untrusting.Deliver(context.Background(), testDelivery(srv.URL)), 0, errTLSCert)

	c := NewClient(Config{Guard: g, ConnectTimeout: time.Second})
	defer c.CloseIdleConnections()
	trust(c, srv)
	// The certificate names example.com and 127.0.0.1, both verified.
	for _, u := range []string{srv.URL, fmt.Sprintf("https://example.com:%d/hook", port)} {
		if a := c.Deliver(context.Background(), testDelivery(u)); !a.Delivered {
			t.Errorf("%s: %+v", u, a)
		}
	}
	// Trusted issuer, wrong name: the server name comes from the URL host.
	wantAttempt(t, c.Deliver(context.Background(), testDelivery(fmt.Sprintf("https://wrong.example.org:%d/hook", port))), 0, errTLSCert)
}

func TestDeliverConnectionResetBeforeResponse(t *testing.T) {
	addr := rawReceiver(t, func(conn net.Conn) {
		readRequest(conn)
		conn.(*net.TCPConn).SetLinger(0) // close with RST
		conn.Close()
	})
	c, _ := clientFor(t, Config{}, addr)
	wantAttempt(t, deliverWithin(t, c, context.Background(), "http://"+addr.String()+"/", 2*time.Second), 0, errConnReset)
}

func TestDeliverConnectionClosedBeforeResponse(t *testing.T) {
	addr := rawReceiver(t, func(conn net.Conn) {
		readRequest(conn)
		conn.Close()
	})
	c, _ := clientFor(t, Config{}, addr)
	wantAttempt(t, deliverWithin(t, c, context.Background(), "http://"+addr.String()+"/", 2*time.Second), 0, errConnClosed)
}

func TestDeliverMalformedResponses(t *testing.T) {
	cases := []struct {
		name, answer string
		code         int
		want         string
	}{
		{"garbage", "HELLO\r\n\r\n", 0, errRequest},
		{"headers cut short", "HTTP/1.1 200 OK\r\nContent-", 0, errRequest},
		{"headers too large", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", 0, errRequest},
		{"body cut short", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"status\"", 200, errRead},
		{"body too large", "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + strings.Repeat(" ", 5000), 200, errTooLarge},
		{"error status, body cut short", "HTTP/1.1 500 Oops\r\nContent-Length: 100\r\n\r\nxx", 500, "http status 500"},
		{"error status, body too large", "HTTP/1.1 500 Oops\r\nContent-Length: 5000\r\n\r\n" + strings.Repeat("x", 5000), 500, "http status 500"},
		{"redirect, body too large", "HTTP/1.1 302 Found\r\nLocation: /x\r\n\r\n" + strings.Repeat("x", 5000), 302, "redirect not followed (302)"},
		{"chunked, too large", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000\r\n" + strings.Repeat(" ", 4096) + "\r\n0\r\n\r\n", 200, errTooLarge},
		{"chunked ok", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"s\r\nc\r\ntatus\":\"ok\"}\r\n0\r\n\r\n", 200, ""},
		{"until close ok", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"status\":\"ok\"}", 200, ""},
		{"interim 100 then ok", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{\"status\":\"ok\"}", 200, ""},
		{"204", "HTTP/1.1 204 No Content\r\n\r\n", 204, "http status 204"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := rawReceiver(t, func(conn net.Conn) {
				defer conn.Close()
				readRequest(conn)
				io.WriteString(conn, tc.answer)
			})
			c, _ := clientFor(t, Config{MaxResponseBytes: 1024}, addr)
			a := deliverWithin(t, c, context.Background(), "http://"+addr.String()+"/", 2*time.Second)
			if tc.want == "" {
				if !a.Delivered || a.HTTPCode != tc.code || a.Error != "" {
					t.Errorf("Deliver = %+v, want delivered", a)
				}
				return
			}
			wantAttempt(t, a, tc.code, tc.want)
		})
	}
}

// hangingReceiver reads each request and never answers it, until the
// client leaves or the test ends.
func hangingReceiver(t *testing.T) (string, netip.AddrPort) {
	release := make(chan struct{})
	url, addr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // lets the server notice the client leaving
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release) }) // before the server closes: cleanups run last first
	return url, addr
}

// A ctx deadline shorter than the client's own bounds the attempt.
func TestDeliverContextDeadline(t *testing.T) {
	url, addr := hangingReceiver(t)
	c, _ := clientFor(t, Config{}, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	wantAttempt(t, deliverWithin(t, c, ctx, url, 2*time.Second), 0, errTimeout)
}

// Cancellation ends an attempt at once, whatever it is waiting for.
func TestDeliverCanceledPromptly(t *testing.T) {
	url, addr := hangingReceiver(t)
	c, _ := clientFor(t, Config{}, addr)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	wantAttempt(t, deliverWithin(t, c, ctx, url, time.Second), 0, errCanceled)

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	wantAttempt(t, deliverWithin(t, c, ctx, url, time.Second), 0, errCanceled)

	// The client is still usable afterwards.
	ok, okAddr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"status":"ok"}`)
	}))
	c2, _ := clientFor(t, Config{}, okAddr)
	if a := c2.Deliver(context.Background(), testDelivery(ok)); !a.Delivered {
		t.Errorf("after cancellation: %+v", a)
	}
}

// A kept-alive connection the receiver has since closed is not used for the
// next attempt: the attempt goes out on a new connection and succeeds.
func TestDeliverAfterReceiverClosedIdleConnection(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			var newConns, closedConns atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				io.WriteString(w, `{"status":"ok"}`)
			}))
			srv.Config.IdleTimeout = 50 * time.Millisecond
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				switch s {
				case http.StateNew:
					newConns.Add(1)
				case http.StateClosed:
					closedConns.Add(1)
				}
			}
			if useTLS {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			t.Cleanup(srv.Close)
			c, _ := clientFor(t, Config{}, netip.MustParseAddrPort(srv.Listener.Addr().String()))
			if useTLS {
				trust(c, srv)
			}
			for i := 0; i < 3; i++ {
				if a := c.Deliver(context.Background(), testDelivery(srv.URL)); !a.Delivered {
					t.Fatalf("attempt %d: %+v", i, a)
				}
				// The receiver closes the idle connection.
				for deadline := time.Now().Add(5 * time.Second); closedConns.Load() <= int64(i); time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("attempt %d: the receiver never closed the idle connection", i)
					}
				}
			}
			if n := newConns.Load(); n != 3 {
				t.Errorf("%d connections, want 3", n)
			}
		})
	}
}
