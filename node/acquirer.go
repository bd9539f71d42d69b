package node

import (
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
// The acquirer it returns routes an order whose MID is registered with
// another host to that host, over a link of its own (link.Router).
func (n *Node) startAcquirer(cfg Config, logger *slog.Logger) (*link.Router, error) {
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
	// Every link, the default's and those of the hosts MIDs are registered
	// with (dialled on first use by the router), is made here.
	dial := func(addr string) *link.Client {
		return link.Dial(link.Config{Addr: addr, Timeout: cfg.AcquirerTimeout,
			Logger: logger.With("component", "acquirer-link", "acquirer_addr", addr)})
	}
	n.acquirerLink = dial(addr)
	n.acquirers = link.NewRouter(link.NewAcquirer(n.acquirerLink), addr, dial)
	return n.acquirers, nil
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
