package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/paygate/gateway/internal/netaddr"
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
// link costs"). The acquirer it returns routes an order whose MID is
// registered with another host to that host, over a link of its own
// (link.Router).
func (n *Node) startAcquirer(cfg Config, logger *slog.Logger) (*link.Router, error) {
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
		n.acquirerHost = h
		addr = inProcessAcquirer
		logger.Info("sandbox acquirer host in-process", "addr", addr)
	}
	// Every link, the default's and those of the hosts MIDs are registered
	// with (dialled on first use by the router), is made here, with the
	// node's one TLS configuration (the server name comes from each address).
	dial := func(addr string) *link.Client {
		lc := link.Config{Addr: addr, Timeout: cfg.AcquirerTimeout, TLS: tlsCfg,
			Logger: logger.With("component", "acquirer-link", "acquirer_addr", addr)}
		switch {
		case addr == inProcessAcquirer && n.acquirerHost != nil:
			lc.TLS = nil
			lc.Dial = func(context.Context, string) (net.Conn, error) {
				client, server := link.Pipe()
				go n.acquirerHost.ServeConn(server)
				return client, nil
			}
		case tlsCfg == nil && !cfg.InsecureAcquirerLink && !netaddr.Loopback(addr):
			// A MID's host off this machine on a node without TLS: never
			// send it card numbers in clear (its authorisations decline).
			lc.Dial = func(context.Context, string) (net.Conn, error) {
				return nil, fmt.Errorf("refusing plain TCP to %s, which is not on this machine: give the node --acquirer-ca-file (or --insecure-acquirer-link)", addr)
			}
		}
		return link.Dial(lc)
	}
	n.acquirerLink = dial(addr)
	n.acquirers = link.NewRouter(link.NewAcquirer(n.acquirerLink), addr, dial)
	return n.acquirers, nil
}

// inProcessAcquirer is the in-process host's address in logs.
const inProcessAcquirer = "in-process"

// acquirerTLS is the TLS of the links to acquirer hosts (nil: plain TCP,
// which Config.Validate allows to a loopback --acquirer-addr, or to any
// with --insecure-acquirer-link, said at every start).
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
	if n.acquirers != nil {
		n.acquirers.Close()
	}
	if n.acquirerLink != nil {
		n.acquirerLink.Close()
	}
	if n.acquirerHost != nil {
		n.acquirerHost.Close()
	}
}
