package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/paygate/gateway/transport/signature"
)

// TestSSRFBypassAttempts throws the usual SSRF bypasses at both guards. A
// canary listens on 127.0.0.1 (and ::1) on port P, which every loopback
// attempt targets; it must accept nothing. The request-time check must refuse
// every literal host; an actual Deliver, through a guard that permits only the
// two redirecting receivers, must be refused at dial time, and no socket may
// ever be created for a non-loopback target.
func TestSSRFBypassAttempts(t *testing.T) {
	can := newCanary(t)
	P := can.port

	// Allowed receivers that try to bounce the client elsewhere.
	toMetadata, toMetadataAddr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	}))
	toCanary, toCanaryAddr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, fmt.Sprintf("http://127.0.0.1:%d/", P), http.StatusFound)
	}))
	toCanary307, toCanary307Addr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, fmt.Sprintf("http://[::1]:%d/", P), http.StatusTemporaryRedirect)
	}))

	g, log := newTestGuard(t, nil, toMetadataAddr, toCanaryAddr, toCanary307Addr)
	c := NewClient(Config{Guard: g, ConnectTimeout: time.Second, ResponseTimeout: 2 * time.Second})
	defer c.CloseIdleConnections()

	u := func(format string) string { return fmt.Sprintf(format, P) }
	cases := []struct {
		url      string
		check    error  // CheckURL's answer
		deliver  string // Attempt.Error
		httpCode int    // 0: refused by the guard, so no socket may exist at all
	}{
		{u("http://127.0.0.1:%d/"), ErrPrivateAddress, errGuard, 0},
		{u("http://2130706433:%d/"), ErrAmbiguousHost, errGuard, 0},
		{u("http://0177.0.0.1:%d/"), ErrAmbiguousHost, errGuard, 0},
		{u("http://0x7f.0.0.1:%d/"), ErrAmbiguousHost, errGuard, 0},
		{u("http://0x7f.1:%d/"), ErrAmbiguousHost, errGuard, 0},
		{u("http://127.1:%d/"), ErrAmbiguousHost, errGuard, 0},
		{u("http://0.0.0.0:%d/"), ErrPrivateAddress, errGuard, 0},
		{u("http://0:%d/"), ErrAmbiguousHost, errGuard, 0},
		{u("http://[::1]:%d/"), ErrPrivateAddress, errGuard, 0},
		{u("http://[::ffff:127.0.0.1]:%d/"), ErrPrivateAddress, errGuard, 0},
		{u("http://[::ffff:7f00:1]:%d/"), ErrPrivateAddress, errGuard, 0},
		{u("http://[0:0:0:0:0:ffff:127.0.0.1]:%d/"), ErrPrivateAddress, errGuard, 0},
		{u("http://[::127.0.0.1]:%d/"), ErrPrivateAddress, errGuard, 0},
		{u("http://[64:ff9b::127.0.0.1]:%d/"), ErrPrivateAddress, errGuard, 0},
		{u("http://[2002:7f00:1::1]:%d/"), ErrPrivateAddress, errGuard, 0},
		{u("http://localhost:%d/"), ErrInternalHost, errGuard, 0},
		{u("http://LOCALHOST.:%d/"), ErrInternalHost, errGuard, 0},
		{u("http://foo.localhost:%d/"), ErrInternalHost, errGuard, 0},
		{u("http://127.0.0.1.:%d/"), ErrPrivateAddress, errGuard, 0},
		{u("http://127.000.000.001:%d/"), ErrAmbiguousHost, errGuard, 0},
		{u("http://user@127.0.0.1:%d/"), ErrUserinfo, errGuard, 0},
		{u("http://user:pass@127.0.0.1:%d/"), ErrUserinfo, errGuard, 0},
		{u("http://[::]:%d/"), ErrPrivateAddress, errGuard, 0},
		{u("http://017700000001:%d/"), ErrAmbiguousHost, errGuard, 0},
		{u("http://0x7f000001:%d/"), ErrAmbiguousHost, errGuard, 0},
		{u("http://[fe80::1%%25lo]:%d/"), ErrPrivateAddress, errGuard, 0},
		// A public-looking name that resolves to loopback: only the dial-time
		// check, on the resolved address, can stop it.
		{u("http://rebind.test:%d/"), nil, errGuard, 0},
		{u("ftp://127.0.0.1:%d/"), ErrScheme, errInvalidURL, 0},
		{"file:///etc/passwd", ErrScheme, errInvalidURL, 0},
		{"gopher://127.0.0.1:70/_", ErrScheme, errInvalidURL, 0},
		{"http://169.254.169.254/latest/meta-data/", ErrPrivateAddress, errGuard, 0},
		{"http://[::ffff:169.254.169.254]/latest/meta-data/", ErrPrivateAddress, errGuard, 0},
		{"http://[fd00:ec2::254]/latest/meta-data/", ErrPrivateAddress, errGuard, 0},
		{"http://metadata.google.internal/computeMetadata/v1/", ErrInternalHost, errGuard, 0},
		{"http://10.0.0.1/", ErrPrivateAddress, errGuard, 0},
		{"http://172.16.0.1/", ErrPrivateAddress, errGuard, 0},
		{"http://192.168.1.1/", ErrPrivateAddress, errGuard, 0},
		{"http://100.64.0.1/", ErrPrivateAddress, errGuard, 0},
		{"http://224.0.0.1/", ErrPrivateAddress, errGuard, 0},
		{"http://255.255.255.255/", ErrPrivateAddress, errGuard, 0},
		{"http://[ff02::1]/", ErrPrivateAddress, errGuard, 0},
		{"http://[fc00::1]/", ErrPrivateAddress, errGuard, 0},
		// Allowed receivers answering with a redirect to forbidden places.
		{toMetadata + "/hook", ErrPrivateAddress, "redirect not followed (302)", 302},
		{toCanary + "/hook", ErrPrivateAddress, "redirect not followed (302)", 302},
		{toCanary307 + "/hook", ErrPrivateAddress, "redirect not followed (307)", 307},
	}
	if len(cases) < 25 {
		t.Fatalf("only %d bypass attempts", len(cases))
	}

	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			if err := g.CheckURL(tc.url); !errors.Is(err, tc.check) || (tc.check == nil && err != nil) {
				t.Errorf("CheckURL = %v, want %v", err, tc.check)
			}
			before := len(log.socketAddrs())
			a := c.Deliver(ctx, Delivery{URL: tc.url, Body: []byte(`{"order_id":"o-1"}`), PublicKey: "whk_pk", Key: signature.NewKey("whk_pk", "whk_sk")})
			if a.Delivered || a.Error != tc.deliver || a.HTTPCode != tc.httpCode {
				t.Errorf("Deliver = %+v, want error %q, code %d", a, tc.deliver, tc.httpCode)
			}
			socks := log.socketAddrs()[before:]
			if tc.httpCode == 0 && len(socks) != 0 {
				t.Errorf("sockets were created for a refused target: %v", socks)
			}
			for _, s := range socks {
				if !isAllowed(s, toMetadataAddr, toCanaryAddr, toCanary307Addr) {
					t.Errorf("socket to %s: only the redirecting receivers may be connected", s)
				}
			}
		})
	}

	if n := can.accepted(t); n != 0 {
		t.Errorf("canary accepted %d connections, want 0", n)
	}
	if got := log.lookedUp(); len(got) != 1 || got[0] != "rebind.test" {
		t.Errorf("names looked up = %q, want only rebind.test (nothing else may reach DNS)", got)
	}
}

func isAllowed(addr string, allowed ...netip.AddrPort) bool {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return false
	}
	for _, a := range allowed {
		if ap.Addr().Unmap() == a.Addr() && ap.Port() == a.Port() {
			return true
		}
	}
	return false
}

// The Control hook alone (as on any net.Dialer) stops sockets to forbidden
// addresses before connect, and lets the permitted receiver through.
func TestControlRefusesBeforeConnect(t *testing.T) {
	can := newCanary(t)
	_, okAddr := receiver(t, http.NotFoundHandler())
	g := &Guard{allowAddrs: []netip.AddrPort{okAddr}}
	noDNS := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		t.Errorf("DNS query to %s attempted", address)
		return nil, errors.New("test: no DNS")
	}}
	d := &net.Dialer{Timeout: time.Second, Control: g.Control, Resolver: noDNS}

	targets := []string{
		fmt.Sprintf("127.0.0.1:%d", can.port),
		fmt.Sprintf("127.0.0.2:%d", can.port),
		fmt.Sprintf("0.0.0.0:%d", can.port),
		fmt.Sprintf("[::ffff:127.0.0.1]:%d", can.port),
		fmt.Sprintf("[::1]:%d", can.port),
		fmt.Sprintf("[::]:%d", can.port),
		fmt.Sprintf("localhost:%d", can.port), // resolved by the dialer via /etc/hosts
	}
	for _, tgt := range targets {
		if strings.HasPrefix(tgt, "localhost:") && !hostsFileHasLocalhost() {
			continue // resolving it could mean a DNS query
		}
		conn, err := d.Dial("tcp", tgt)
		if err == nil {
			conn.Close()
			t.Errorf("dial %s through Control succeeded", tgt)
			continue
		}
		if !errors.Is(err, ErrRefused) && !errors.Is(err, syscall.EADDRNOTAVAIL) && !errors.Is(err, syscall.EAFNOSUPPORT) {
			t.Errorf("dial %s: %v, want refusal by the guard", tgt, err)
		}
	}
	conn, err := d.Dial("tcp", okAddr.String())
	if err != nil {
		t.Fatalf("dial to the permitted receiver: %v", err)
	}
	conn.Close()
	if n := can.accepted(t); n != 0 {
		t.Errorf("canary accepted %d connections, want 0", n)
	}
}

// A name that the system resolves (via /etc/hosts) to 127.0.0.1 is refused by
// the dial-time address check on its own, without the name rule; no DNS query
// can be sent (the resolver's Dial fails the test).
func TestDialTimeCheckCatchesNameResolvingToLoopback(t *testing.T) {
	if !hostsFileHasLocalhost() {
		t.Skip("/etc/hosts has no localhost entry; resolving it could query DNS")
	}
	can := newCanary(t)
	noDNS := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		t.Errorf("DNS query to %s attempted", address)
		return nil, errors.New("test: no DNS")
	}}
	g := &Guard{lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
		return noDNS.LookupNetIP(ctx, "ip", host)
	}}
	addrs, err := g.lookupName(context.Background(), "tcp", "localhost")
	if err != nil || len(addrs) == 0 {
		t.Fatalf("lookup localhost: %v %v", addrs, err)
	}
	for _, a := range addrs {
		if !a.Unmap().IsLoopback() {
			t.Fatalf("localhost resolved to %v", a)
		}
	}
	if _, _, err := g.filter(addrs, uint16(can.port), "localhost"); !errors.Is(err, ErrRefused) {
		t.Fatalf("filter(%v) = %v, want ErrRefused", addrs, err)
	}
	// And the whole dial path refuses it (by name, before any lookup).
	if conn, err := g.DialContext(context.Background(), "tcp", fmt.Sprintf("localhost:%d", can.port)); err == nil {
		conn.Close()
		t.Fatal("DialContext(localhost) succeeded")
	} else if !errors.Is(err, ErrRefused) {
		t.Fatalf("DialContext(localhost) = %v, want ErrRefused", err)
	}
	if n := can.accepted(t); n != 0 {
		t.Errorf("canary accepted %d connections, want 0", n)
	}
}

// Of the addresses a name resolves to, the forbidden ones are skipped without
// a socket and only the permitted one is connected.
func TestDialSkipsForbiddenResolvedAddresses(t *testing.T) {
	var hits atomic.Int64
	_, addr := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte(`{"status":"ok"}`))
	}))
	can := newCanary(t)
	port := addr.Port()
	g, log := newTestGuard(t, map[string][]netip.Addr{
		"mixed.example.com": {
			netip.MustParseAddr("10.0.0.1"),
			netip.MustParseAddr("169.254.169.254"),
			netip.MustParseAddr("::1"),
			netip.MustParseAddr("127.0.0.1"),
		},
	}, addr)
	c := NewClient(Config{Guard: g})
	defer c.CloseIdleConnections()
	a := c.Deliver(context.Background(), Delivery{URL: fmt.Sprintf("http://mixed.example.com:%d/", port), Key: signature.NewKey("", "")})
	if !a.Delivered {
		t.Fatalf("Deliver = %+v, want delivered via the permitted address", a)
	}
	if got := log.socketAddrs(); len(got) != 1 || got[0] != addr.String() {
		t.Errorf("sockets = %v, want only %s", got, addr)
	}
	if hits.Load() != 1 {
		t.Errorf("receiver hits = %d", hits.Load())
	}
	if n := can.accepted(t); n != 0 {
		t.Errorf("canary accepted %d connections, want 0", n)
	}
}

func TestDialRefusesNonTCPAndBadPorts(t *testing.T) {
	g, log := newTestGuard(t, nil)
	for _, tc := range []struct{ network, address string }{
		{"udp", "8.8.8.8:53"},
		{"unix", "/var/run/docker.sock"},
		{"tcp", "127.0.0.1"},
		{"tcp", "example.com:http"},
		{"tcp", "example.com:0"},
		{"tcp", "example.com:65536"},
		{"tcp", "bad_host!.example.com:80"},
		{"tcp", "[fe80::1%lo]:80"},
		{"tcp", "metadata:80"},
		{"tcp4", "127.0.0.1.:80"},
	} {
		if conn, err := g.DialContext(context.Background(), tc.network, tc.address); err == nil {
			conn.Close()
			t.Errorf("DialContext(%s, %s) succeeded", tc.network, tc.address)
		} else if !errors.Is(err, ErrRefused) {
			t.Errorf("DialContext(%s, %s) = %v, want ErrRefused", tc.network, tc.address, err)
		}
	}
	if s := log.socketAddrs(); len(s) != 0 {
		t.Errorf("sockets created: %v", s)
	}
}

func hostsFileHasLocalhost() bool {
	b, err := os.ReadFile("/etc/hosts")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		for _, name := range f[min(1, len(f)):] {
			if strings.EqualFold(name, "localhost") {
				return true
			}
		}
	}
	return false
}
