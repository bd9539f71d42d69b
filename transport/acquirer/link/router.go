package link

import (
	"context"
	"fmt"
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"github.com/paygate/gateway/transport/acquirer"
)

// Router is the acquirer the order actors call on a node that may speak to
// several acquirer hosts (contract 12, MIDs): each request goes over the
// link to its AcquirerAddr, the default link when that is empty or the
// default's own address. One link per distinct address, dialled on first
// use and kept for the node's life: a MID is never re-pointed, so its host
// is wanted again, and a link holds the STANs of its unanswered requests.
// The BIN lookup and 3-D Secure enrolment are not acquirer messages; they
// come from the default Acquirer's directory.
type Router struct {
	def     *Acquirer
	defAddr string
	dial    func(addr string) *Client

	mu     sync.Mutex
	byAddr map[string]*Acquirer
	closed bool
}

// NewRouter routes to def (the link to defaultAddr) and, for any other
// address, to a link dial makes: the node passes the one dial function
// every link of its is made with (timeout, logger, transport).
func NewRouter(def *Acquirer, defaultAddr string, dial func(addr string) *Client) *Router {
	return &Router{def: def, defAddr: defaultAddr, dial: dial, byAddr: map[string]*Acquirer{}}
}

// Authorize sends req over its host's link.
func (r *Router) Authorize(ctx context.Context, req acquirer.AuthRequest) (acquirer.AuthResult, error) {
	a, err := r.link(req.AcquirerAddr)
	if err != nil {
		return acquirer.AuthResult{}, err
	}
	return a.Authorize(ctx, req)
}

// Move sends req over its host's link.
func (r *Router) Move(ctx context.Context, req acquirer.MoveRequest) (acquirer.MoveResult, error) {
	a, err := r.link(req.AcquirerAddr)
	if err != nil {
		return acquirer.MoveResult{}, err
	}
	return a.Move(ctx, req)
}

// Enrollment reports the issuer's 3-D Secure enrolment for a card.
func (r *Router) Enrollment(pan string) acquirer.Enrollment { return r.def.Enrollment(pan) }

// CardInfo looks up brand, issuer, card type and issuer country.
func (r *Router) CardInfo(pan string) acquirer.CardInfo { return r.def.CardInfo(pan) }

// Default is the link to the node's default acquirer.
func (r *Router) Default() *Acquirer { return r.def }

// Addrs lists the addresses of the links dialled for MIDs so far.
func (r *Router) Addrs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.byAddr))
	for addr := range r.byAddr {
		out = append(out, addr)
	}
	return out
}

// link is the Acquirer for addr, dialled on first use.
func (r *Router) link(addr string) (*Acquirer, error) {
	if addr == "" || addr == r.defAddr {
		return r.def, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	a, ok := r.byAddr[addr]
	if !ok {
		c := r.dial(addr)
		a = NewAcquirer(c)
		r.byAddr[addr] = a
		// Per host, cheap: whether its link is up. The totals of
		// client.go cover every link together.
		metrics.GetOrCreateGauge(fmt.Sprintf(`gateway_acquirer_link_up{addr=%q}`, addr), func() float64 {
			if c.Connected() {
				return 1
			}
			return 0
		})
	}
	return a, nil
}

// Close ends the links dialled for MIDs (the default's is its owner's to
// close); requests still waiting on them fail with ErrClosed.
func (r *Router) Close() {
	r.mu.Lock()
	r.closed = true
	links := r.byAddr
	r.byAddr = map[string]*Acquirer{}
	r.mu.Unlock()
	for _, a := range links {
		a.client.Close()
	}
}
