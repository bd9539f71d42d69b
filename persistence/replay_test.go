package persistence

import (
	"testing"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
)

func walletCreate(orderID, hash, replayKey string) *command.Cmd {
	c := createCmd(orderID, hash)
	c.Order.Create.Source.Type = "walleta-pay"
	c.Order.Create.ReplayKey = replayKey
	return c
}

// A wallet token's transaction id is refused for a second order, in the
// same batch or a later one, while the same request for the same order still
// replays, and the record survives reopening the store.
func TestWalletReplayIsReplicatedState(t *testing.T) {
	s := newTestStore(t)
	apply := func(cmds ...*command.Cmd) []Result { return s.apply(1, cmds...) }
	res := apply(walletCreate("o1", "h1", "walleta-pay:aa"), walletCreate("o2", "h2", "walleta-pay:aa"))
	if !res[0].Outcome.Created {
		t.Fatalf("first use: %+v", res[0].Outcome)
	}
	if r := res[1].Outcome.Reject; r == nil || r.Kind != order.RejectReplay || r.Attribute != "payment_source" || res[1].Order != nil {
		t.Fatalf("second use in the same batch: %+v", res[1])
	}
	if o, err := s.GetOrder("m1", "o2"); err != nil || o != nil {
		t.Fatalf("refused order was written (%v)", err)
	}
	// The same request for the same order: the order-exists rule comes first.
	if r := apply(walletCreate("o1", "h1", "walleta-pay:aa"))[0]; !r.Outcome.Replay || r.Order == nil {
		t.Fatalf("idempotent repeat: %+v", r.Outcome)
	}
	// Another body for the same order: a conflict, not a replay refusal.
	if r := apply(walletCreate("o1", "h9", "walleta-pay:aa"))[0]; r.Outcome.Reject == nil || r.Outcome.Reject.Kind != order.RejectConflict {
		t.Fatalf("same order, other body: %+v", r.Outcome)
	}
	// Other keys, and the other wallet's id space, are free.
	if r := apply(walletCreate("o3", "h3", "walletb-pay:aa"))[0]; !r.Outcome.Created {
		t.Fatalf("other wallet's id: %+v", r.Outcome)
	}
	s.reopen()
	ref, err := s.WalletReplay("walleta-pay:aa")
	if err != nil || ref == nil || ref.Merchant != "m1" || ref.OrderID != "o1" {
		t.Fatalf("replay record after reopen: %+v %v", ref, err)
	}
	if ref, err := s.WalletReplay("walleta-pay:bb"); err != nil || ref != nil {
		t.Fatalf("unused key: %+v %v", ref, err)
	}
	if r := apply(walletCreate("o4", "h4", "walleta-pay:aa"))[0]; r.Outcome.Reject == nil || r.Outcome.Reject.Kind != order.RejectReplay {
		t.Fatalf("after reopen: %+v", r.Outcome)
	}
}
