package link

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/paygate/gateway/cluster/pki"
)

func identity(t *testing.T, ca *pki.CA, nodeID string) *TLS {
	t.Helper()
	cert, key, err := ca.NewNode(nodeID, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return &TLS{CA: ca.Pool(), Cert: pki.TLSCertificate(cert, key)}
}

func newCA(t *testing.T) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func listen(t *testing.T, id *TLS) *Link {
	t.Helper()
	l, err := Listen(Config{Addr: "127.0.0.1:0", TLS: id})
	if err != nil {
		t.Fatal(err)
	}
	l.cfg.Advertise = l.ListenAddr().String()
	t.Cleanup(func() { l.Close() })
	return l
}

// closedByServer reports whether the server closed c without sending
// anything: a read ends in an error.
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return n == 0 && err != nil
}

// Two members of one CA talk; each side knows the other's node id.
func TestMembersTalk(t *testing.T) {
	ca := newCA(t)
	a, b := listen(t, identity(t, ca, "a")), listen(t, identity(t, ca, "b"))
	got := make(chan net.Conn, 1)
	go func() {
		c, err := b.Listener(KindPeer).Accept()
		if err == nil {
			got <- c
		}
	}()
	c, err := a.Dial(b.ListenAddr().String(), KindPeer, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	s := <-got
	defer s.Close()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q %v", buf, err)
	}
	if id := PeerNodeID(s); id != "a" {
		t.Fatalf("server sees peer %q, want a", id)
	}
	if id := PeerNodeID(c); id != "b" {
		t.Fatalf("client sees peer %q, want b", id)
	}
}

// Plaintext, another CA's certificate, and no certificate on a raft or
// peer connection are closed before anything of theirs is read.
func TestStrangersAreRefused(t *testing.T) {
	ca := newCA(t)
	b := listen(t, identity(t, ca, "b"))
	addr := b.ListenAddr().String()

	plain, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.Write([]byte{KindRaft, 0, 0, 0, 0, 0, 0, 0, 1}) // raft's AppendEntries type byte and more
	if !closedByServer(t, plain) {
		t.Fatal("a plaintext connection was kept open")
	}

	stranger := listen(t, identity(t, newCA(t), "b"))
	stranger.clientTLS.RootCAs = ca.Pool() // it trusts the cluster, the cluster does not trust it
	if c, err := stranger.Dial(addr, KindRaft, 5*time.Second); err == nil {
		if !closedByServer(t, c) {
			t.Fatal("a certificate of another CA was let in")
		}
		c.Close()
	}

	for _, kind := range []byte{KindRaft, KindPeer} {
		c, err := DialJoin(addr, ca.Pool(), 5*time.Second) // no client certificate
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte{kind}) // DialJoin sent KindJoin; dial again with the kind by hand
		c.Close()
		raw, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
		if err != nil {
			t.Fatal(err)
		}
		raw.Write([]byte{kind})
		if !closedByServer(t, raw) {
			t.Fatalf("kind %q without a client certificate was let in", kind)
		}
		raw.Close()
	}
}

// A joiner without a certificate reaches the join listener, and checks the
// member against the CA it pinned.
func TestJoinConnections(t *testing.T) {
	ca := newCA(t)
	b := listen(t, identity(t, ca, "b"))
	got := make(chan net.Conn, 1)
	go func() {
		c, err := b.Listener(KindJoin).Accept()
		if err == nil {
			got <- c
		}
	}()
	c, err := DialJoin(b.ListenAddr().String(), ca.Pool(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := <-got
	if PeerNodeID(s) != "" {
		t.Fatal("a joiner has a node id")
	}
	s.Close()
	if _, err := DialJoin(b.ListenAddr().String(), newCA(t).Pool(), 5*time.Second); err == nil {
		t.Fatal("a joiner accepted a member whose CA is not the pinned one")
	}
}
