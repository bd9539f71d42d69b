package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"
)

// These tests never send a packet beyond loopback: every Guard they use
// records and refuses any socket to a non-loopback address (before connect)
// and answers name lookups from a fixed table instead of DNS.

// testResolver is the only "DNS" the tests' guards consult.
var testResolver = map[string][]netip.Addr{
	"rebind.test": {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
}

// netLog records what a test guard was asked to do.
type netLog struct {
	mu      sync.Mutex
	sockets []string // every address a socket was about to connect to
	lookups []string // every name looked up
}

func (l *netLog) socketAddrs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.sockets...)
}

func (l *netLog) lookedUp() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lookups...)
}

// newTestGuard returns a strict Guard that permits exactly allow. Its socket
// hook records every connect target and refuses (and fails the test on) any
// non-loopback one, so even a broken guard cannot reach the network. Its
// lookups come from testResolver (plus extra); any other name fails the test.
func newTestGuard(t *testing.T, extra map[string][]netip.Addr, allow ...netip.AddrPort) (*Guard, *netLog) {
	t.Helper()
	log := &netLog{}
	g := &Guard{allowAddrs: allow}
	g.traceSocket = func(network, address string) error {
		log.mu.Lock()
		log.sockets = append(log.sockets, address)
		log.mu.Unlock()
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !ap.Addr().Unmap().IsLoopback() {
			t.Errorf("a socket was about to connect to non-loopback %s %q", network, address)
			return errors.New("test: non-loopback connect blocked")
		}
		return nil
	}
	g.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		log.mu.Lock()
		log.lookups = append(log.lookups, host)
		log.mu.Unlock()
		if a, ok := extra[host]; ok {
			return a, nil
		}
		if a, ok := testResolver[host]; ok {
			return a, nil
		}
		t.Errorf("unexpected name lookup %q", host)
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return g, log
}

// receiver starts an HTTP server on 127.0.0.1 and returns its URL and address.
func receiver(t *testing.T, h http.Handler) (string, netip.AddrPort) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, netip.MustParseAddrPort(srv.Listener.Addr().String())
}

// canary is a listener that records every connection it accepts.
type canary struct {
	port int
	lns  []net.Listener

	mu        sync.Mutex
	peers     []string        // remote address of every accepted connection
	sentinels map[string]bool // remote addresses of accepted()'s own connections
}

// newCanary listens on 127.0.0.1 (random port) and, if possible, on [::1]
// with the same port.
func newCanary(t *testing.T) *canary {
	t.Helper()
	c := &canary{sentinels: map[string]bool{}}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = ln.Addr().(*net.TCPAddr).Port
	c.lns = append(c.lns, ln)
	if ln6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(c.port))); err == nil {
		c.lns = append(c.lns, ln6)
	}
	for _, l := range c.lns {
		go func(l net.Listener) {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				c.mu.Lock()
				c.peers = append(c.peers, conn.RemoteAddr().String())
				c.mu.Unlock()
				conn.Close()
			}
		}(l)
	}
	t.Cleanup(func() {
		for _, l := range c.lns {
			l.Close()
		}
	})
	return c
}

func (c *canary) seen(peer string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.peers {
		if p == peer {
			return true
		}
	}
	return false
}

// accepted returns how many connections the canary accepted, exactly: it
// dials a sentinel to each listener itself and waits until the sentinel is
// accepted, which (the accept queue being FIFO) means every connection made
// before was accepted and recorded too. Sentinels are not counted.
func (c *canary) accepted(t *testing.T) int {
	t.Helper()
	for _, l := range c.lns {
		conn, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatalf("sentinel dial to canary: %v", err)
		}
		me := conn.LocalAddr().String()
		c.mu.Lock()
		c.sentinels[me] = true
		c.mu.Unlock()
		deadline := time.Now().Add(5 * time.Second)
		for !c.seen(me) {
			if time.Now().After(deadline) {
				t.Fatal("canary did not accept its sentinel")
			}
			time.Sleep(time.Millisecond)
		}
		conn.Close()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, p := range c.peers {
		if !c.sentinels[p] {
			n++
		}
	}
	return n
}
