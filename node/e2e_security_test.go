package node_test

import (
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/paygate/gateway/cluster/link"
	"github.com/paygate/gateway/cluster/pki"
	"github.com/paygate/gateway/node/nodetest"
)

// Attacks on the cluster port (contract section 11, docs/security.md).

// attackStream is a raft.StreamLayer that dials with a TLS configuration
// of the attacker's choosing and then speaks the cluster port's protocol
// (the kind byte), as someone who read the source would.
type attackStream struct {
	cfg    *tls.Config
	closed chan struct{}
	once   sync.Once
}

func (s *attackStream) Accept() (net.Conn, error) { <-s.closed; return nil, net.ErrClosed }
func (s *attackStream) Close() error              { s.once.Do(func() { close(s.closed) }); return nil }
func (s *attackStream) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (s *attackStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), s.cfg)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte{link.KindRaft}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// selfMadeCert is a client certificate of a CA the cluster never saw,
// naming a member's id.
func selfMadeCert(t *testing.T, nodeID string) tls.Certificate {
	t.Helper()
	ca, err := pki.NewCA("attacker CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.NewNode(nodeID, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return pki.TLSCertificate(cert, key)
}

// attackers are hashicorp/raft's own client over plain TCP, over TLS with
// a self-made certificate, and over TLS with no certificate at all.
func attackers(t *testing.T) map[string]raft.Transport {
	t.Helper()
	plain, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]raft.Transport{"plain TCP": plain}
	for name, certs := range map[string][]tls.Certificate{
		"TLS with a self-made certificate": {selfMadeCert(t, "node1")},
		"TLS without a certificate":        nil,
	} {
		s := &attackStream{cfg: &tls.Config{InsecureSkipVerify: true, Certificates: certs, MinVersion: tls.VersionTLS13}, closed: make(chan struct{})} //nolint:gosec // the attacker trusts anything
		out[name] = raft.NewNetworkTransport(s, 1, 2*time.Second, io.Discard)
	}
	for _, tr := range out {
		t.Cleanup(func() { tr.(io.Closer).Close() })
	}
	return out
}

// attack sends what took a node over before the cluster port had TLS: an
// AppendEntries with a huge term and an entry no FSM can decode, committed
// at once, and a RequestVote of a huge term. It returns the errors raft's
// client saw, one per RPC (none may succeed).
func attack(tr raft.Transport, target *nodetest.Node, last uint64) []error {
	addr := raft.ServerAddress(target.RaftAddr)
	var errs []error
	var ae raft.AppendEntriesResponse
	errs = append(errs, tr.AppendEntries(raft.ServerID(target.ID), addr, &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("evil"), Addr: []byte("127.0.0.1:1")},
		Term:      1000, Leader: []byte("127.0.0.1:1"),
		PrevLogEntry: last, PrevLogTerm: 0,
		Entries:           []*raft.Log{{Index: last + 1, Term: 1000, Type: raft.LogCommand, Data: []byte{0xff, 0x13, 0x37, 'j', 'u', 'n', 'k'}}},
		LeaderCommitIndex: last + 1,
	}, &ae))
	var rv raft.RequestVoteResponse
	errs = append(errs, tr.RequestVote(raft.ServerID(target.ID), addr, &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("evil"), Addr: []byte("127.0.0.1:1")},
		Term:      2000, LastLogIndex: last + 100, LastLogTerm: 1000,
	}, &rv))
	return errs
}

// TestClusterPortRefusesRaftAttacks plays the attacker of issue 32 against
// a single node and a three-node cluster: nothing it sends is read as raft,
// leader and term stay, writes go on, and every node restarts healthy.
func TestClusterPortRefusesRaftAttacks(t *testing.T) {
	for _, size := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d node(s)", size), func(t *testing.T) {
			c := nodetest.StartCluster(t, size)
			leader := c.WaitLeader(nil, 10*time.Second)
			before, err := leader.Self(false)
			if err != nil {
				t.Fatal(err)
			}
			for name, tr := range attackers(t) {
				for _, target := range c.Nodes {
					for i, err := range attack(tr, target, before.LastLogIndex) {
						if err == nil {
							t.Fatalf("%s: RPC %d to %s was answered: the cluster port let the attacker's raft in", name, i, target.ID)
						}
					}
				}
			}
			for _, n := range c.Nodes {
				if !strings.Contains(n.Logs(), "cluster port: connection refused") {
					t.Errorf("%s did not log a refused connection: the attack did not reach its cluster port", n.ID)
				}
				st, err := n.Self(false)
				if err != nil {
					t.Fatal(err)
				}
				if st.Term != before.Term || st.LeaderID != leader.ID {
					t.Fatalf("%s: term %d leader %s after the attack, were %d and %s", n.ID, st.Term, st.LeaderID, before.Term, leader.ID)
				}
			}
			m := leader.CreateMerchant(t, 1000)
			for _, n := range c.Nodes {
				if r := m.At(n).Post(t, "charge", chargeBody(newOrderID("after-attack"), "4111111111111111", 500, 24)); r.Status != 200 {
					t.Fatalf("charge through %s after the attack: %d %s", n.ID, r.Status, r.Body)
				}
			}
			for _, n := range c.Nodes {
				n.Restart()
			}
			if size > 1 {
				c.WaitMembers(size, 30*time.Second)
			}
			c.WaitConverged(30 * time.Second)
		})
	}
}

// The attacker's client is real: against a node whose cluster port has no
// TLS (--insecure-cluster-links), the same AppendEntries deposes it. So
// the test above fails if the cluster port stops refusing it.
func TestClusterPortAttackWorksWithoutTLS(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--insecure-cluster-links"}})
	if !strings.Contains(n.Logs(), "cluster links are NOT encrypted") {
		t.Fatalf("an insecure node did not warn at start:\n%s", n.Logs())
	}
	before, err := n.Self(false)
	if err != nil {
		t.Fatal(err)
	}
	plain := attackers(t)["plain TCP"]
	var ae raft.AppendEntriesResponse
	err = plain.AppendEntries(raft.ServerID(n.ID), raft.ServerAddress(n.RaftAddr), &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("evil"), Addr: []byte("127.0.0.1:1")},
		Term:      1000, Leader: []byte("127.0.0.1:1"), PrevLogEntry: before.LastLogIndex + 50,
	}, &ae)
	// The raw stream lacks the kind byte the mux wants: speak it first.
	if err == nil {
		t.Fatal("a plain raft client without the kind byte was answered")
	}
	c, err := net.Dial("tcp", n.RaftAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tr := raft.NewNetworkTransport(&onceStream{conn: c}, 1, 2*time.Second, io.Discard)
	defer tr.Close()
	if err := tr.AppendEntries(raft.ServerID(n.ID), raft.ServerAddress(n.RaftAddr), &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("evil"), Addr: []byte("127.0.0.1:1")},
		Term:      1000, Leader: []byte("127.0.0.1:1"), PrevLogEntry: before.LastLogIndex + 50,
	}, &ae); err != nil {
		t.Fatalf("the insecure node did not answer the attacker: %v", err)
	}
	if ae.Term != 1000 {
		t.Fatalf("the insecure node answered term %d, want the attacker's 1000 (it stepped down)", ae.Term)
	}
}

// onceStream hands raft one plain connection with the raft kind byte sent.
type onceStream struct {
	conn net.Conn
	used bool
}

func (s *onceStream) Accept() (net.Conn, error) { select {} }
func (s *onceStream) Close() error              { return nil }
func (s *onceStream) Addr() net.Addr            { return s.conn.LocalAddr() }
func (s *onceStream) Dial(raft.ServerAddress, time.Duration) (net.Conn, error) {
	if s.used {
		return nil, errors.New("used")
	}
	s.used = true
	_, err := s.conn.Write([]byte{link.KindRaft})
	return s.conn, err
}

// TestJoinTokens: nodes join with a token (and charge through a follower,
// forwarded over the cluster port); without one, with a wrong one, one for
// another cluster or an expired one they are refused, exit non-zero and
// change nothing; a joined node restarts without a token.
func TestJoinTokens(t *testing.T) {
	c := nodetest.StartCluster(t, 3) // node2 and node3 joined with a token (nodetest.Start)
	leader := c.WaitLeader(nil, 10*time.Second)
	follower := c.Other(leader)
	m := leader.CreateMerchant(t, 1000)
	if r := m.At(follower).Post(t, "charge", chargeBody(newOrderID("join"), "4111111111111111", 700, 24)); r.Status != 200 {
		t.Fatalf("charge through %s: %d %s", follower.ID, r.Status, r.Body)
	}
	members := func() string { return memberList(t, leader) }
	before := members()

	good := nodetest.NewJoinToken(t, follower.HTTPAddr)
	tok, err := pki.ParseToken(good)
	if err != nil {
		t.Fatal(err)
	}
	wrongSecret := pki.Token{ID: tok.ID, Secret: strings.Repeat("0", 32), CAFingerprint: tok.CAFingerprint}.String()
	otherCluster := pki.Token{ID: tok.ID, Secret: tok.Secret, CAFingerprint: strings.Repeat("ab", 32)}.String()
	var expiring struct {
		JoinToken string `json:"join_token"`
		ExpiresAt string `json:"expires_at"`
	}
	if _, err := leader.Admin("POST", "/admin/v1/cluster/join-token", `{"ttl_seconds":1}`, &expiring); err != nil {
		t.Fatal(err)
	}
	exp, err := time.Parse(time.RFC3339, expiring.ExpiresAt)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(exp.Add(100 * time.Millisecond))) // let it expire (setup, not a proof)

	for _, tc := range []struct {
		name, token, says string
	}{
		{"no token", "", "needs --join-token"},
		{"not a token", "letmein", "not a join token"},
		{"wrong secret", wrongSecret, "join token is not valid"},
		{"another cluster's CA", otherCluster, "CA fingerprint"},
		{"expired", expiring.JoinToken, "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := nodetest.Start(t, nodetest.Options{ID: "node4", Join: follower.HTTPAddr, KeyFile: c.KeyFile,
				JoinToken: tc.token, NoJoinToken: tc.token == "", NotReady: true})
			code := n.WaitExit(40 * time.Second)
			if code <= 0 {
				t.Fatalf("the node was not refused (exit %d):\n%s", code, n.Logs())
			}
			if !strings.Contains(n.Logs(), tc.says) {
				t.Fatalf("the refusal does not say %q:\n%s", tc.says, n.Logs())
			}
			if after := members(); after != before {
				t.Fatalf("members changed: %s, were %s", after, before)
			}
			if _, err := os.Stat(filepath.Join(n.DataDir, "tls", pki.NodeCertFile)); err == nil {
				t.Fatal("a refused node has a node certificate")
			}
		})
	}

	// The secret is nowhere in a member's files: only its hash is kept.
	for _, n := range c.Nodes {
		filepath.Walk(n.DataDir, func(path string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return nil
			}
			if data, _ := os.ReadFile(path); strings.Contains(string(data), tok.Secret) {
				t.Errorf("%s holds a join token's secret in clear", path)
			}
			return nil
		})
	}
	// Keys are readable by the owner only.
	for _, f := range []string{filepath.Join(c.Nodes[0].DataDir, "tls", pki.CAKeyFile), filepath.Join(follower.DataDir, "tls", pki.NodeKeyFile)} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, st.Mode(), err)
		}
	}

	// A joined node restarts without its token.
	follower.Env = nil
	follower.Restart()
	c.WaitMembers(3, 30*time.Second)
	if r := m.At(follower).Post(t, "charge", chargeBody(newOrderID("join-restart"), "4111111111111111", 700, 24)); r.Status != 200 {
		t.Fatalf("charge through %s after its restart: %d %s", follower.ID, r.Status, r.Body)
	}
}

// tcpTap is a TCP proxy that keeps a copy of every byte it passes.
type tcpTap struct {
	ln     net.Listener
	target func() string
	mu     sync.Mutex
	seen   []byte
}

// newTap listens on a loopback port and passes each connection to
// target's address at the time.
func newTap(t *testing.T, target func() string) *tcpTap {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpTap{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
	return p
}

func (p *tcpTap) pipe(in net.Conn) {
	defer in.Close()
	out, err := net.Dial("tcp", p.target())
	if err != nil {
		return
	}
	defer out.Close()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.mu.Lock()
				p.seen = append(p.seen, buf[:n]...)
				p.mu.Unlock()
				dst.Write(buf[:n])
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}
	go cp(out, in)
	go cp(in, out)
	<-done
}

func (p *tcpTap) captured() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]byte(nil), p.seen...)
}

// TestClusterTrafficCarriesNoSecrets reads every byte that passes to and
// from the leader's cluster port while a follower forwards an admin write
// and a charge: neither the card number nor the admin token is in it. The
// same capture on a cluster with --insecure-cluster-links shows the card,
// so the capture does see what passes.
func TestClusterTrafficCarriesNoSecrets(t *testing.T) {
	const card = "4111111111111111"
	for _, insecure := range []bool{false, true} {
		t.Run(fmt.Sprintf("insecure=%v", insecure), func(t *testing.T) {
			var extra []string
			if insecure {
				extra = []string{"--insecure-cluster-links"}
			}
			key := nodetest.NewKeyFile(t)
			// node1 is dialled at the tap, which passes to its cluster port
			// once Start has returned it (node1 may dial its own advertised
			// address before that; such a dial fails and is retried).
			var started atomic.Pointer[nodetest.Node]
			tap := newTap(t, func() string {
				if n := started.Load(); n != nil {
					return n.RaftAddr
				}
				return "127.0.0.1:0"
			})
			leader := nodetest.Start(t, nodetest.Options{ID: "node1", KeyFile: key,
				Args: append([]string{"--advertise-raft-addr", tap.ln.Addr().String()}, extra...)})
			started.Store(leader)
			c := nodetest.ClusterOf(t, key, leader)
			for _, id := range []string{"node2", "node3"} {
				c.Nodes = append(c.Nodes, nodetest.Start(t, nodetest.Options{ID: id, KeyFile: key, Join: leader.HTTPAddr, Args: extra}))
			}
			c.WaitMembers(3, 30*time.Second)
			if l := c.WaitLeader(nil, 10*time.Second); l != leader {
				if _, err := l.Admin("POST", "/admin/v1/cluster/transfer-leadership", `{"node_id":"node1"}`, nil); err != nil {
					t.Fatal(err)
				}
			}
			follower := c.Nodes[1]
			m := follower.CreateMerchant(t, 1000) // an admin write, forwarded
			// An operator signs in on the follower: the leader checks the
			// password, so it crosses the cluster port (and so does the
			// session token the leader makes).
			const password = "tap-password-9c1e77"
			mustCall(t, follower, nodetest.AdminToken, "POST", "/admin/v1/operators",
				`{"email":"tap@example.com","role":"support","password":"`+password+`"}`, 200)
			session := signIn(t, follower, "tap@example.com", password)
			r := m.Post(t, "charge", chargeBody(newOrderID("tap"), card, 900, 24))
			if r.Status != 200 {
				t.Fatalf("charge through %s: %d %s", follower.ID, r.Status, r.Body)
			}
			seen := tap.captured()
			if len(seen) < 1000 {
				t.Fatalf("the tap saw %d bytes: the forward did not pass it", len(seen))
			}
			hasCard := strings.Contains(string(seen), card)
			if insecure {
				if !hasCard {
					t.Fatal("the capture of an insecure cluster lacks the card number: the tap does not see the forward")
				}
				return
			}
			if hasCard {
				t.Fatal("the card number crossed the cluster port in clear")
			}
			if strings.Contains(string(seen), nodetest.AdminToken) {
				t.Fatal("the admin token crossed the cluster port")
			}
			if strings.Contains(string(seen), password) || strings.Contains(string(seen), session) {
				t.Fatal("an operator's password or session token crossed the cluster port in clear")
			}
		})
	}
}

// TestPprofAddrMustBeLoopback: --pprof-addr on every interface is refused
// at start.
func TestPprofAddrMustBeLoopback(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--pprof-addr", "0.0.0.0:6060"}, NotReady: true})
	if code := n.WaitExit(30 * time.Second); code <= 0 {
		t.Fatalf("gatewayd --pprof-addr 0.0.0.0:6060 was not refused (exit %d):\n%s", code, n.Logs())
	}
	if !strings.Contains(n.Logs(), "loopback") {
		t.Fatalf("the refusal does not say why:\n%s", n.Logs())
	}
}

// writeServerCert makes a CA and a certificate for 127.0.0.1 under it in
// dir/{cert,key}.pem, and returns the CA's pool.
func writeServerCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	ca, err := pki.NewCA("edge test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.NewNode("gateway", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := pki.KeyPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	// The key first: a reload that sees a new certificate with the old key
	// fails and keeps the previous pair until both are there.
	if err := pki.WriteFile(dir, "key.pem", keyPEM, 0o600, true); err != nil {
		t.Fatal(err)
	}
	if err := pki.WriteFile(dir, "cert.pem", pki.CertPEM(cert), 0o644, true); err != nil {
		t.Fatal(err)
	}
	return ca.Pool()
}

// TestMerchantAPIOverTLS: the HTTP listener serves TLS 1.2+ with the given
// certificate, end to end (admin, charge, status), refuses older TLS and
// plain HTTP, and picks up a renewed certificate without a restart.
func TestMerchantAPIOverTLS(t *testing.T) {
	dir := t.TempDir()
	pool := writeServerCert(t, dir)
	n := nodetest.Start(t, nodetest.Options{Args: []string{
		"--http-tls-cert-file", filepath.Join(dir, "cert.pem"), "--http-tls-key-file", filepath.Join(dir, "key.pem")}})
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	m := n.CreateMerchant(t, 1000)
	m.HTTPClient = client // verifies the node's certificate against the test CA
	if !strings.HasPrefix(m.BaseURL, "https://") {
		t.Fatalf("base URL %s", m.BaseURL)
	}
	orderID := newOrderID("tls")
	if r := m.Post(t, "charge", chargeBody(orderID, "4111111111111111", 1100, 24)); r.Status != 200 {
		t.Fatalf("charge over TLS: %d %s", r.Status, r.Body)
	}
	m.WaitStatus(t, orderID, "authorized", 10*time.Second)

	old := &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}
	if c, err := tls.Dial("tcp", n.HTTPAddr, old); err == nil {
		c.Close()
		t.Fatal("a TLS 1.1 handshake was accepted")
	}
	if resp, err := http.Get("http://" + n.HTTPAddr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP was served on the TLS listener")
		}
	}

	// A renewed certificate (of another CA here, to tell them apart) is
	// served once the files change, without a restart.
	renewed := writeServerCert(t, dir)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c, err := tls.Dial("tcp", n.HTTPAddr, &tls.Config{RootCAs: renewed})
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the renewed certificate was not served: %v", err)
		}
	}
	if c, err := tls.Dial("tcp", n.HTTPAddr, &tls.Config{RootCAs: pool}); err == nil {
		c.Close()
		t.Fatal("a new connection still gets the old certificate after the renewal")
	}
}

// TestOperatorCertificates: a cluster on the operator's PKI (gatewayctl
// certs) joins with certificates and no token, forwards over the cluster
// port, refuses to make join tokens (its CA key is not the cluster's), and
// refuses a node whose certificate another CA signed.
func TestOperatorCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("operator CA")
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.WriteCA(dir, ca, false); err != nil {
		t.Fatal(err)
	}
	certArgs := func(signer *pki.CA, id string) []string {
		cert, key, err := signer.NewNode(id, []string{"127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := pki.WriteNode(filepath.Join(dir, id), cert, key, true); err != nil {
			t.Fatal(err)
		}
		return []string{"--cluster-ca-file", filepath.Join(dir, pki.CACertFile),
			"--node-cert-file", filepath.Join(dir, id, pki.NodeCertFile), "--node-key-file", filepath.Join(dir, id, pki.NodeKeyFile)}
	}
	key := nodetest.NewKeyFile(t)
	first := nodetest.Start(t, nodetest.Options{ID: "node1", KeyFile: key, Args: certArgs(ca, "node1")})
	c := nodetest.ClusterOf(t, key, first)
	for _, id := range []string{"node2", "node3"} {
		c.Nodes = append(c.Nodes, nodetest.Start(t, nodetest.Options{ID: id, KeyFile: key, Join: first.HTTPAddr, NoJoinToken: true, Args: certArgs(ca, id)}))
	}
	c.WaitMembers(3, 30*time.Second)
	leader := c.WaitLeader(nil, 10*time.Second)
	m := leader.CreateMerchant(t, 1000)
	if r := m.At(c.Other(leader)).Post(t, "charge", chargeBody(newOrderID("pki"), "4111111111111111", 300, 24)); r.Status != 200 {
		t.Fatalf("charge through a follower: %d %s", r.Status, r.Body)
	}
	if st, err := leader.Admin("POST", "/admin/v1/cluster/join-token", "", nil); st != 409 || !strings.Contains(err.Error(), "gatewayctl certs create-node") {
		t.Fatalf("join token on an operator's PKI: %d %v, want 409", st, err)
	}

	// A node whose certificate another CA signed is never added.
	other, err := pki.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	args := certArgs(other, "node4")
	args[1] = filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(args[1], append(other.CertPEM(), ca.CertPEM()...), 0o644); err != nil {
		t.Fatal(err) // it trusts the cluster too; the cluster does not trust it
	}
	stranger := nodetest.Start(t, nodetest.Options{ID: "node4", KeyFile: key, Join: first.HTTPAddr, NoJoinToken: true, Args: args, NotReady: true})
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(stranger.Logs(), "join: not added yet"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the stranger's join was not refused:\n%s", stranger.Logs())
		}
	}
	if v, err := leader.Status(); err != nil || len(v.Members) != 3 {
		t.Fatalf("members after the stranger's join: %+v %v", v, err)
	}
}

// TestEdgeMethodsAndWebsite: a method is compared whole on the form's pay
// route (OST used to pay as POST, and on a follower without forwarding),
// and a website that names no http(s) origin is refused.
func TestEdgeMethodsAndWebsite(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 1000)
	orderID := newOrderID("ost")
	formURL := initForm(t, m, initBody(orderID, 1500, "USD"))
	b, _ := json.Marshal(formCard("4111111111111111"))
	for _, method := range []string{"OST", "POS", "PUT"} {
		status, header, body := httpDo(t, method, formURL+"/pay", "application/json", string(b))
		if status != http.StatusMethodNotAllowed || header.Get("Allow") != "POST" {
			t.Fatalf("%s %s/pay: %d Allow %q %s, want 405 Allow POST", method, formURL, status, header.Get("Allow"), body)
		}
	}
	if r := m.Post(t, "status", map[string]any{"order_id": orderID}); r.Status != 200 || r.Str("status") != "created" {
		t.Fatalf("after the refused methods the order is %d %s, want still created", r.Status, r.Body)
	}
	for _, website := range []string{"shop.example", "javascript:alert(1)", "https://", "https://*.example"} {
		body := chargeBody(newOrderID("site"), "4111111111111111", 500, 24)
		body["website"] = website
		expectError(t, m.Post(t, "charge", body), 422, "2.01", "website")
	}
	body := chargeBody(newOrderID("site"), "4111111111111111", 500, 24)
	body["website"] = "https://shop.example/cart"
	if r := m.Post(t, "charge", body); r.Status != 200 {
		t.Fatalf("charge with an absolute website: %d %s", r.Status, r.Body)
	}
}

// TestNodeCertificateRenewedAtStart: a node whose certificate is close to
// its end gets a new one, for the same key, when it starts; so does a
// member whose node key was deleted (a new key), and both stay members.
func TestNodeCertificateRenewedAtStart(t *testing.T) {
	c := nodetest.StartCluster(t, 3)
	leader := c.WaitLeader(nil, 10*time.Second)
	follower := c.Other(leader)
	tlsDir := filepath.Join(follower.DataDir, "tls")
	readCert := func() *x509.Certificate {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(tlsDir, pki.NodeCertFile))
		if err != nil {
			t.Fatal(err)
		}
		cert, err := pki.ParseCert(data)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	// Replace the follower's certificate with one that ends in 10 days,
	// signed by the cluster CA (whose key the first node holds).
	ca, err := pki.LoadCA(filepath.Join(c.Nodes[0].DataDir, "tls", pki.CACertFile), filepath.Join(c.Nodes[0].DataDir, "tls", pki.CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	old := readCert()
	short := *old
	short.NotBefore, short.NotAfter = time.Now().Add(-300*24*time.Hour), time.Now().Add(10*24*time.Hour)
	short.SerialNumber = big.NewInt(time.Now().UnixNano())
	der, err := x509.CreateCertificate(rand.Reader, &short, ca.Cert, old.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	follower.Kill()
	if err := pki.WriteFile(tlsDir, pki.NodeCertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644, true); err != nil {
		t.Fatal(err)
	}
	follower.Env = nil
	follower.Restart()
	// At start, or (when its store lacked the replicated CA key until raft
	// replayed the log) moments later.
	var renewed *x509.Certificate
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if renewed = readCert(); renewed.NotAfter.After(time.Now().Add(300 * 24 * time.Hour)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not renewed: valid until %s\n%s", renewed.NotAfter, follower.Logs())
		}
	}
	// The certificate is written before the line is logged, and the log
	// reaches the test through a pipe: the line may follow the file.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(follower.Logs(), "node certificate renewed"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the renewal was not logged")
		}
	}
	if !renewed.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(old.PublicKey) {
		t.Fatal("the renewal changed the node's key")
	}
	c.WaitMembers(3, 30*time.Second)

	// A deleted key: a new key and certificate, still a member. (Stopped
	// with SIGTERM, its store holds the replicated CA key at start.)
	if err := follower.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{pki.NodeCertFile, pki.NodeKeyFile} {
		if err := os.Remove(filepath.Join(tlsDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	follower.Restart()
	if readCert().PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(old.PublicKey) {
		t.Fatal("the node kept its old key")
	}
	c.WaitMembers(3, 30*time.Second)
	m := leader.CreateMerchant(t, 1000)
	if r := m.At(follower).Post(t, "charge", chargeBody(newOrderID("renewed"), "4111111111111111", 800, 24)); r.Status != 200 {
		t.Fatalf("charge through the renewed follower: %d %s", r.Status, r.Body)
	}
}
