package actors

import (
	"net"
	"testing"
	"time"

	"github.com/paygate/gateway/transport/acquirer"
	"github.com/paygate/gateway/transport/acquirer/host"
	"github.com/paygate/gateway/transport/acquirer/link"
)

// The link is an adapter the actors can call.
var _ Acquirer = (*link.Acquirer)(nil)

// testAcquirer is the acquirer the actors' tests use: the sandbox host on
// a loopback port and the link to it, as a node without --acquirer-addr
// runs them.
type testAcquirer struct {
	*link.Acquirer
	host *host.Host
}

func newTestAcquirer(t *testing.T, latency time.Duration) *testAcquirer {
	t.Helper()
	h, err := host.Open(host.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	h.SetFaults(host.Faults{LatencyMS: latency.Milliseconds()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go h.Serve(ln)
	c := link.Dial(link.Config{Addr: ln.Addr().String(), Timeout: 10 * time.Second})
	t.Cleanup(func() {
		c.Close()
		h.Close()
	})
	return &testAcquirer{Acquirer: link.NewAcquirer(c), host: h}
}

// Authorizations reports how many authorisations the host made for a
// gateway transaction: 0 or 1.
func (a *testAcquirer) Authorizations(reference string) int {
	return a.host.Authorizations(acquirer.RRN(reference))
}

// Total reports how many authorisations the host made.
func (a *testAcquirer) Total() int { return a.host.Total() }
