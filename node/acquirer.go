package node

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/paygate/gateway/transport/acquirer/host"
	"github.com/paygate/gateway/transport/acquirer/link"
)

// startAcquirer connects the node to its acquirer host over ISO 8583
// (contract section 12): the one at --acquirer-addr, or, without it, the
// sandbox host started here with its ledger in <data-dir>/acquirer, so a
// development node and the tests need no other process. The in-process
// host is reached over an in-memory connection (link.Pipe) instead of a
// socket: above the connection everything is the same (frames, codec,
// STAN matching, timeouts, the host's decisions and ledger), and the
// kernel's share of each message is gone (docs/acquirer.md, "What the
// link costs").
func (n *Node) startAcquirer(cfg Config, logger *slog.Logger) (*link.Acquirer, error) {
	lc := link.Config{Addr: cfg.AcquirerAddr, Timeout: cfg.AcquirerTimeout, Logger: logger.With("component", "acquirer-link")}
	var err error
	if lc.TLS, err = acquirerTLS(cfg, logger); err != nil {
		return nil, err
	}
	if cfg.AcquirerAddr == "" {
		h, err := host.Open(host.Config{DataDir: filepath.Join(cfg.DataDir, "acquirer"),
			Logger: logger.With("component", "acquirer-host"), CaptureUnknownOriginals: true})
		if err != nil {
			return nil, err
		}
		h.SetFaults(host.Faults{LatencyMS: cfg.AcquirerLatency.Milliseconds()})
		n.acquirerHost = h
		lc.Addr = inProcessAcquirer
		lc.Dial = func(context.Context, string) (net.Conn, error) {
			client, server := link.Pipe()
			go h.ServeConn(server)
			return client, nil
		}
		logger.Info("sandbox acquirer host in-process", "addr", lc.Addr)
	}
	n.acquirerLink = link.Dial(lc)
	return link.NewAcquirer(n.acquirerLink), nil
}

// inProcessAcquirer is the in-process host's address in logs.
const inProcessAcquirer = "in-process"

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
