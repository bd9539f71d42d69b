package persistence

import (
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
)

// Orders are stored in the binary codec and read back exactly, from the
// batch, the cache and Pebble; an order a data dir holds as JSON (written
// before the codec) is still read, changed, and then rewritten in binary.
func TestStoredOrderFormat(t *testing.T) {
	s := newTestStore(t)
	apply, reopen := s.apply, s.reopen
	raw := func(orderID string) []byte {
		t.Helper()
		v, err := get(s.db, orderKey("m1", orderID))
		if err != nil || v == nil {
			t.Fatalf("raw order %s: %v %v", orderID, v, err)
		}
		return v
	}
	outcome := func(orderID string) *command.Cmd {
		return &command.Cmd{Order: &order.Command{Kind: order.KindAuthOutcome, Time: 2, Merchant: "m1", OrderID: orderID,
			TxnID: "t-" + orderID, Outcome: &order.OutcomeData{Approved: true, AuthCode: "A1"}}}
	}

	// Binary: two commands on one order in one batch (the second reads the
	// first's write), then read back from the cache and from Pebble.
	res := apply(1, walletCreate("o1", "h1", ""), outcome("o1"))
	want := res[1].Order
	if want == nil || want.Status != order.StatusAuthorized {
		t.Fatalf("apply: %+v", res[1])
	}
	if v := raw("o1"); v[0] == '{' {
		t.Fatalf("stored as JSON: %q", v)
	}
	if got, err := s.GetOrder("m1", "o1"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("cached order: %+v %v\nwant %+v", got, err, want)
	}
	reopen()
	if got, err := s.GetOrder("m1", "o1"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("order from Pebble: %+v %v\nwant %+v", got, err, want)
	}

	// Legacy JSON, as putJSON wrote it, read by GetOrder and by the batch.
	legacy := apply(2, walletCreate("o2", "h2", ""))[0].Order
	js, err := json.Marshal(legacy, json.Deterministic(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Set(orderKey("m1", "o2"), js, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	reopen()
	if got, err := s.GetOrder("m1", "o2"); err != nil || got == nil || got.Status != order.StatusProcessing ||
		got.Pending == nil || len(got.Txns) != 1 || got.Txns[0].ID != "t-o2" {
		t.Fatalf("legacy JSON order: %+v %v", got, err)
	}
	res = apply(3, outcome("o2"))
	if res[0].Order == nil || res[0].Order.Status != order.StatusAuthorized {
		t.Fatalf("apply on a legacy JSON order: %+v", res[0])
	}
	if v := raw("o2"); v[0] == '{' {
		t.Fatal("a changed legacy order stays JSON")
	}
	reopen()
	if got, err := s.GetOrder("m1", "o2"); err != nil || !reflect.DeepEqual(got, res[0].Order) {
		t.Fatalf("rewritten order: %+v %v", got, err)
	}

	// A corrupt value is an error, not a panic or an empty order.
	for _, v := range [][]byte{{'{'}, {0x7f}, {1, 5}} {
		if o, err := decodeOrderValue(v); err == nil {
			t.Fatalf("%q decoded: %+v", v, o)
		}
	}
}
