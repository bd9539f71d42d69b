// Package link is the cluster port (--raft-addr): one TCP listener under
// mutual TLS 1.3 that carries everything nodes say to each other, told
// apart by a first byte sent after the handshake, as rqlite's tcp.Mux does:
//
//	KindRaft  hashicorp/raft's RPCs (a raft.StreamLayer)
//	KindPeer  the peer service: forwarded client requests, peer status, membership
//	KindJoin  a new node asking for its certificate with a join token
//
// A connection must complete a TLS handshake first; a plaintext one fails
// it and is closed. Raft and peer connections must also present a client
// certificate the cluster CA signed: without one they are closed before a
// byte of theirs is read past the kind. Only a join connection may come
// without a client certificate (the joiner has none yet); it reaches one
// handler, which checks the token's secret and nothing else (see
// transport/server's peer service). With Config.TLS nil (the loopback-only
// --insecure-cluster-links) the same mux runs on plain TCP.
//
// The package knows nothing of what the connections carry.
package link

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Kinds of connection: the first byte a dialler sends after the handshake.
const (
	KindRaft byte = 'R'
	KindPeer byte = 'P'
	KindJoin byte = 'J'
)

// handshakeTimeout bounds the TLS handshake and the kind byte of an
// incoming connection; pendingMax bounds connections still in it.
const (
	handshakeTimeout = 10 * time.Second
	pendingMax       = 256
)

// TLS is a node's identity on the links and the CA it trusts.
type TLS struct {
	CA   *x509.CertPool
	Cert tls.Certificate
}

// Config configures a link.
type Config struct {
	// Addr is the listen address; Advertise what the others dial (default
	// Addr), the address raft records for this node.
	Addr      string
	Advertise string
	// TLS nil: plain TCP (loopback clusters under --insecure-cluster-links).
	TLS    *TLS
	Logger *slog.Logger
}

// Link is a node's cluster port.
type Link struct {
	cfg        Config
	ln         net.Listener
	serverTLS  *tls.Config
	clientTLS  *tls.Config
	queues     map[byte]chan net.Conn
	pending    chan struct{}
	closed     chan struct{}
	closeOnce  sync.Once
	refused    sync.Mutex
	lastRefuse time.Time
	// cert is this node's certificate; SetCertificate replaces it (a
	// renewal) for the handshakes that follow.
	cert atomic.Pointer[tls.Certificate]
}

// Listen opens the cluster port.
func Listen(cfg Config) (*Link, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on the cluster port %s: %w", cfg.Addr, err)
	}
	if cfg.Advertise == "" {
		cfg.Advertise = cfg.Addr
	}
	l := &Link{
		cfg: cfg, ln: ln, pending: make(chan struct{}, pendingMax), closed: make(chan struct{}),
		queues: map[byte]chan net.Conn{KindRaft: make(chan net.Conn, 16), KindPeer: make(chan net.Conn, 16), KindJoin: make(chan net.Conn, 4)},
	}
	if cfg.TLS != nil {
		l.SetCertificate(cfg.TLS.Cert)
		l.serverTLS = &tls.Config{
			MinVersion:     tls.VersionTLS13,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return l.cert.Load(), nil },
			// A joiner has no certificate yet; KindRaft and KindPeer
			// connections without a verified one are closed below.
			ClientAuth: tls.VerifyClientCertIfGiven,
			ClientCAs:  cfg.TLS.CA,
		}
		l.clientTLS = &tls.Config{
			MinVersion: tls.VersionTLS13,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return l.cert.Load(), nil
			},
			RootCAs: cfg.TLS.CA,
		}
	}
	go l.accept()
	return l, nil
}

// SetCertificate makes c this node's certificate for the handshakes that
// follow (a renewed one; connections already open keep theirs).
func (l *Link) SetCertificate(c tls.Certificate) { l.cert.Store(&c) }

// Certificate is this node's current certificate (nil on an insecure link).
func (l *Link) Certificate() *tls.Certificate { return l.cert.Load() }

// Secure reports whether the link runs under TLS.
func (l *Link) Secure() bool { return l.serverTLS != nil }

// Addr is the advertised address.
func (l *Link) Addr() net.Addr { return addr(l.cfg.Advertise) }

// ListenAddr is the address actually listened on (a port 0 resolved).
func (l *Link) ListenAddr() net.Addr { return l.ln.Addr() }

// Close stops the listener and every Accept. Connections already handed
// out are their owners' to close.
func (l *Link) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.closed)
		err = l.ln.Close()
	})
	return err
}

func (l *Link) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			l.cfg.Logger.Error("cluster port: accept", "error", err)
			return
		}
		select {
		case l.pending <- struct{}{}:
			go l.admit(c)
		default:
			c.Close() // too many connections still in their handshake
		}
	}
}

// admit runs the handshake and reads the kind byte, then queues the
// connection for its kind or closes it.
func (l *Link) admit(raw net.Conn) {
	defer func() { <-l.pending }()
	raw.SetDeadline(time.Now().Add(handshakeTimeout))
	conn := raw
	verified := false
	if l.serverTLS != nil {
		tc := tls.Server(raw, l.serverTLS)
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			if errors.Is(err, io.EOF) {
				raw.Close() // connected and left: a reachability probe
				return
			}
			l.refuse(raw, "TLS handshake failed", err)
			return
		}
		verified = len(tc.ConnectionState().VerifiedChains) > 0
		conn = tc
	}
	var kind [1]byte
	if _, err := io.ReadFull(conn, kind[:]); err != nil {
		conn.Close()
		return
	}
	q, ok := l.queues[kind[0]]
	if !ok {
		l.refuse(conn, "unknown connection kind", nil)
		return
	}
	if l.serverTLS != nil && kind[0] != KindJoin && !verified {
		l.refuse(conn, "no client certificate of the cluster CA", nil)
		return
	}
	conn.SetDeadline(time.Time{})
	select {
	case q <- conn:
	case <-l.closed:
		conn.Close()
	}
}

// refuse closes a connection and logs why, at most once a second (an
// attacker's flood must not flood the log).
func (l *Link) refuse(c net.Conn, why string, err error) {
	remote := c.RemoteAddr().String()
	c.Close()
	l.refused.Lock()
	defer l.refused.Unlock()
	if time.Since(l.lastRefuse) < time.Second {
		return
	}
	l.lastRefuse = time.Now()
	args := []any{"remote", remote, "reason", why}
	if err != nil {
		args = append(args, "error", err)
	}
	l.cfg.Logger.Warn("cluster port: connection refused", args...)
}

// next waits for a connection of one kind.
func (l *Link) next(kind byte) (net.Conn, error) {
	select {
	case c := <-l.queues[kind]:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Dial opens a connection of a kind to another member's cluster port,
// presenting this node's certificate and checking the other's.
func (l *Link) Dial(address string, kind byte, timeout time.Duration) (net.Conn, error) {
	return dial(address, kind, l.clientTLS, timeout)
}

// DialJoin opens a join connection to a member whose certificate ca must
// have signed (the CA a join token pinned), without a client certificate.
// ca nil dials plain TCP (an insecure cluster).
func DialJoin(address string, ca *x509.CertPool, timeout time.Duration) (net.Conn, error) {
	var cfg *tls.Config
	if ca != nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: ca}
	}
	return dial(address, KindJoin, cfg, timeout)
}

func dial(address string, kind byte, cfg *tls.Config, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	raw, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return nil, err
	}
	conn := raw
	if cfg != nil {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			raw.Close()
			return nil, err
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			// A dial error: nothing was sent (a forwarder counts on it).
			return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: raw.RemoteAddr(), Err: fmt.Errorf("cluster link TLS handshake: %w", err)}
		}
		conn = tc
	}
	raw.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte{kind}); err != nil {
		conn.Close()
		return nil, err
	}
	raw.SetWriteDeadline(time.Time{})
	return conn, nil
}

// PeerNodeID is the node id (certificate common name) of the member at the
// other end of a verified connection, "" on an insecure link or for a
// joiner.
func PeerNodeID(c net.Conn) string {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return ""
	}
	st := tc.ConnectionState()
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return ""
	}
	return st.PeerCertificates[0].Subject.CommonName
}

// Listener returns a net.Listener of one kind's connections (KindPeer,
// KindJoin), for a server to serve. Closing it closes the link.
func (l *Link) Listener(kind byte) net.Listener { return kindListener{l: l, kind: kind} }

type kindListener struct {
	l    *Link
	kind byte
}

func (k kindListener) Accept() (net.Conn, error) { return k.l.next(k.kind) }
func (k kindListener) Close() error              { return k.l.Close() }
func (k kindListener) Addr() net.Addr            { return k.l.Addr() }

// RaftLayer is the raft.StreamLayer of the link's KindRaft connections.
func (l *Link) RaftLayer() raft.StreamLayer { return raftLayer{l} }

type raftLayer struct{ l *Link }

func (r raftLayer) Accept() (net.Conn, error) { return r.l.next(KindRaft) }
func (r raftLayer) Close() error              { return r.l.Close() }
func (r raftLayer) Addr() net.Addr            { return r.l.Addr() }
func (r raftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return r.l.Dial(string(address), KindRaft, timeout)
}

type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }
