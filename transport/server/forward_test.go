package server

import (
	"bufio"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// A refund without a key that a follower fails to forward is answered 500
// ("may have been made") only when the leader may have seen it: a forward
// that never got a connection was not made, and is safe to send again.
func TestForwardFailuresThatNeverReachedTheLeader(t *testing.T) {
	closedPort := func() string {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	// leader listens as the leader would, and does what with each
	// connection once it has read a whole request.
	leader := func(then func(net.Conn)) string {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() })
				if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					then(c)
				}
			}
		}()
		return l.Addr().String()
	}
	readsThenDrops := leader(func(c net.Conn) { c.Close() }) // the leader had the refund
	readsAndStalls := leader(func(net.Conn) {})              // and never answers
	for _, c := range []struct {
		name      string
		addr      string
		timeout   time.Duration
		neverSent bool
	}{
		{"connection refused", closedPort(), time.Second, true},
		{"answered by a closed connection", readsThenDrops, time.Second, false},
		{"no answer in time", readsAndStalls, 200 * time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fwd := newForwarder(time.Second, func(addr string, timeout time.Duration) (net.Conn, error) {
				return net.DialTimeout("tcp", addr, timeout)
			})
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.Header.SetMethod("POST")
			req.SetRequestURI("http://" + c.addr + "/api/v3/refund")
			req.SetBodyString(`{"order_id":"o-1","amount":100}`)
			err := fwd.client.DoTimeout(req, resp, c.timeout)
			if err == nil {
				t.Fatal("the forward did not fail")
			}
			if got := neverSent(err); got != c.neverSent {
				t.Fatalf("neverSent(%v) = %v, want %v", err, got, c.neverSent)
			}
		})
	}
}

// The same raft address spelt two ways is one address: raft records the
// first node's as its transport resolved it, the node sends it as typed.
func TestSameAddr(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"127.0.0.1:7001", "127.0.0.1:7001", true},
		{"localhost:7001", "127.0.0.1:7001", true},
		{"[::1]:7001", "[0:0:0:0:0:0:0:1]:7001", true},
		{"127.0.0.1:7001", "127.0.0.1:7002", false},
		{"127.0.0.1:7001", "127.0.0.2:7001", false},
		{"no-such-host.invalid:7001", "127.0.0.1:7001", false},
	} {
		if got := sameAddr(c.a, c.b); got != c.same {
			t.Errorf("sameAddr(%q, %q) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
}
