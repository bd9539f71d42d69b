package link

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/paygate/gateway/transport/acquirer"
)

// The router sends a request to the link of its AcquirerAddr (the default
// when empty or the default's own address), dials one link per distinct
// address on first use and keeps it, and refuses requests once closed.
func TestRouterOneLinkPerHost(t *testing.T) {
	def := newSandbox(t, Config{Timeout: 2 * time.Second})
	_, other := startHost(t, t.TempDir(), "127.0.0.1:0")
	dials := map[string]int{}
	r := NewRouter(def.acq, def.addr, func(addr string) *Client {
		dials[addr]++
		return Dial(Config{Addr: addr, Timeout: 2 * time.Second})
	})
	t.Cleanup(r.Close)
	ctx := context.Background()
	for i, addr := range []string{"", def.addr, other, other} {
		rq := req("ref-"+string(rune('a'+i)), acquirer.CardVisaApproved)
		rq.AcquirerAddr = addr
		if res, err := r.Authorize(ctx, rq); err != nil || !res.Approved {
			t.Fatalf("to %q: %+v %v", addr, res, err)
		}
	}
	if len(dials) != 1 || dials[other] != 1 {
		t.Fatalf("dialled %v, want the other host once", dials)
	}
	if got := r.Addrs(); len(got) != 1 || got[0] != other {
		t.Fatalf("links: %v", got)
	}
	rq := req("ref-z", acquirer.CardVisaApproved)
	r.Close()
	rq.AcquirerAddr = other
	if _, err := r.Authorize(ctx, rq); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if _, err := r.Move(ctx, acquirer.MoveRequest{AcquirerAddr: "127.0.0.1:1"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("a move after Close: %v", err)
	}
}
