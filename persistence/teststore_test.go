package persistence

import (
	"bytes"
	"io"
	"log/slog"
	"testing"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
)

// testStore is a store in a test's temporary folder that commands can be
// applied to, one batch per call, and that can be reopened (which empties
// the decoded-order cache). It is closed when the test ends.
type testStore struct {
	*Store
	t      *testing.T
	dir    string
	logger *slog.Logger
}

func newTestStore(t *testing.T) *testStore {
	t.Helper()
	ts := &testStore{t: t, dir: t.TempDir(), logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ts.open()
	t.Cleanup(func() { ts.Close() })
	return ts
}

func (ts *testStore) open() {
	ts.t.Helper()
	s, err := Open(ts.dir, ts.logger)
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.Store = s
}

// reopen closes and opens the store again.
func (ts *testStore) reopen() {
	ts.t.Helper()
	if err := ts.Close(); err != nil {
		ts.t.Fatal(err)
	}
	ts.open()
}

// apply applies cmds in one batch committed at Raft index idx.
func (ts *testStore) apply(idx uint64, cmds ...*command.Cmd) []Result {
	ts.t.Helper()
	b := ts.NewBatch()
	defer b.Close()
	out := make([]Result, 0, len(cmds))
	for _, c := range cmds {
		out = append(out, b.Apply(c))
	}
	if err := b.Commit(idx); err != nil {
		ts.t.Fatal(err)
	}
	return out
}

// restoreFrom replaces dst's state with a snapshot of src, as a follower
// installs the leader's snapshot.
func restoreFrom(t *testing.T, dst, src *Store) {
	t.Helper()
	var buf bytes.Buffer
	sn := src.NewSnapshot()
	err := sn.Write(&buf)
	sn.Release()
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Restore(&buf); err != nil {
		t.Fatal(err)
	}
}

// createCmd is a card payment's acceptance of order orderID of merchant m1,
// its request identified by hash.
func createCmd(orderID, hash string) *command.Cmd {
	return &command.Cmd{Order: &order.Command{
		Kind: order.KindCreate, Time: 1, Merchant: "m1", OrderID: orderID, TxnID: "t-" + orderID,
		RequestHash: hash,
		Create: &order.CreateData{Amount: 100, Currency: "USD", ProcessingMID: "mid", SettleDelayHours: 1,
			Source: order.PaymentSource{Type: "card"}},
	}}
}

// orderIDsOf returns the order id of each of a listing's items, failing
// the test when the listing failed.
func orderIDsOf[T any](t *testing.T, items []T, err error, orderID func(T) string) []string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range items {
		ids = append(ids, orderID(it))
	}
	return ids
}

func refOrderID(r OrderRef) string { return r.OrderID }
