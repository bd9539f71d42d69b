package node

import (
	"crypto/tls"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/paygate/gateway/transport/acquirer/host"
	"github.com/paygate/gateway/transport/acquirer/link"
)

// startAcquirer connects the node to its acquirer host over ISO 8583
// (contract section 12): the one at --acquirer-addr, or, without it, the
// sandbox host started here on a loopback port with its ledger in
// <data-dir>/acquirer, so a development node and the tests need no other
// process. Either way the payments take the same path: codec, TCP, host.
func (n *Node) startAcquirer(cfg Config, logger *slog.Logger) (*link.Acquirer, error) {
	tlsCfg, err := acquirerTLS(cfg, logger)
	if err != nil {
		return nil, err
	}
	addr := cfg.AcquirerAddr
	if addr == "" {
		h, err := host.Open(host.Config{DataDir: filepath.Join(cfg.DataDir, "acquirer"),
			Logger: logger.With("component", "acquirer-host"), CaptureUnknownOriginals: true})
		if err != nil {
			return nil, err
		}
		h.SetFaults(host.Faults{LatencyMS: cfg.AcquirerLatency.Milliseconds()})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			h.Close()
			return nil, err
		}
		n.acquirerHost = h
		go h.Serve(ln)
		addr = ln.Addr().String()
		logger.Info("sandbox acquirer host in-process", "addr", addr)
	}
	n.acquirerLink = link.Dial(link.Config{Addr: addr, Timeout: cfg.AcquirerTimeout, TLS: tlsCfg,
		Logger: logger.With("component", "acquirer-link")})
	return link.NewAcquirer(n.acquirerLink), nil
}

// acquirerTLS is the TLS of the link to --acquirer-addr (nil: plain TCP,
// which Config.Validate allows to a loopback address, or to any with
// --insecure-acquirer-link, said at every start).
func acquirerTLS(cfg Config, logger *slog.Logger) (*tls.Config, error) {
	if cfg.AcquirerCAFile != "" {
		return link.ClientTLS(cfg.AcquirerCAFile, cfg.AcquirerCertFile, cfg.AcquirerKeyFile)
	}
	if cfg.InsecureAcquirerLink {
		logger.Warn("the acquirer link is NOT encrypted or authenticated (--insecure-acquirer-link): card numbers cross the network to --acquirer-addr in clear; use only where something else encrypts the path",
			"acquirer_addr", cfg.AcquirerAddr)
	}
	return nil, nil
}

// closeAcquirer ends the link and the in-process host, after the actors
// that use them.
func (n *Node) closeAcquirer() {
	if n.acquirerLink != nil {
		n.acquirerLink.Close()
	}
	if n.acquirerHost != nil {
		n.acquirerHost.Close()
	}
}
