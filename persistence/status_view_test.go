package persistence

import (
	"bytes"
	"testing"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
)

// The memoised status rendering is the order's view, for the version the
// cache holds now: after a change the next read renders the new version;
// an order read from Pebble (not cached) renders the same bytes; an order
// that does not exist has none.
func TestOrderStatusJSONFollowsVersions(t *testing.T) {
	s := newTestStore(t)
	apply := func(idx uint64, c *command.Cmd) *order.Order { return s.apply(idx, c)[0].Order }
	view := func(o *order.Order) []byte { return order.NewView(o, order.WithAllTxns, "").Marshal() }
	read := func() []byte {
		t.Helper()
		v, err := s.OrderStatusJSON("m1", "o1")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	created := apply(1, walletCreate("o1", "h1", ""))
	first := read()
	if !bytes.Equal(first, view(created)) || !bytes.Equal(read(), first) {
		t.Fatalf("created order: %s", first)
	}
	authorised := apply(2, &command.Cmd{Order: &order.Command{Kind: order.KindAuthOutcome, Time: 2, Merchant: "m1",
		OrderID: "o1", TxnID: "t-o1", Outcome: &order.OutcomeData{Approved: true, AuthCode: "A1"}}})
	if got := read(); !bytes.Equal(got, view(authorised)) || bytes.Equal(got, first) {
		t.Fatalf("after the change the old rendering was served: %s", got)
	}

	s.reopen() // empties the cache
	if got := read(); !bytes.Equal(got, view(authorised)) {
		t.Fatalf("order from Pebble: %s", got)
	}
	if v, err := s.OrderStatusJSON("m1", "missing"); v != nil || err != nil {
		t.Fatalf("missing order: %s %v", v, err)
	}
}
