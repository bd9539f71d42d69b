package host

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/paygate/gateway/cluster/pki"
)

// ServerTLS is the host's side of a TLS link (docs/acquirer.md, "Securing
// the link"): certFile and keyFile are its certificate, and clientCAFile,
// when given, makes the link mutual: a client without a certificate that
// chains to it is refused at the handshake.
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("the host's TLS needs its certificate and key")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("host certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		ca, err := pki.LoadCA(clientCAFile, "")
		if err != nil {
			return nil, fmt.Errorf("client CA: %w", err)
		}
		cfg.ClientCAs, cfg.ClientAuth = ca.Pool(), tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// handshakeTimeout bounds a TLS client's handshake: a connection that
// says nothing does not hold a goroutine for ever.
const handshakeTimeout = 10 * time.Second

// handshake completes a TLS connection's handshake before the first
// message is read, and reports whether it succeeded: a plaintext client,
// or one whose certificate the client CA did not sign, is refused here and
// logged, before any byte it sent is read as ISO 8583.
func (h *Host) handshake(c net.Conn) bool {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return true
	}
	tc.SetDeadline(time.Now().Add(handshakeTimeout))
	err := tc.Handshake()
	tc.SetDeadline(time.Time{})
	if err == nil {
		return true
	}
	now := time.Now().UnixNano()
	if last := h.lastRefusal.Load(); now-last >= int64(time.Second) && h.lastRefusal.CompareAndSwap(last, now) {
		h.cfg.Logger.Warn("acquirer host: TLS handshake refused", "remote_addr", c.RemoteAddr().String(), "error", err)
	}
	return false
}
