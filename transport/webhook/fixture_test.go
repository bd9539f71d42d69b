package webhook

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/persistence/persistencetest"
)

// fixture is a store with an in-memory log and an actor system for the
// delivery tree. Orders are written by proposing their commands, as the
// order actors would: each status change writes its notification.
type fixture struct {
	store    *persistence.Store
	proposer *persistencetest.Log
	system   *actor.ActorSystem
	logger   *slog.Logger
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(t.TempDir(), logger)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: store, proposer: persistencetest.NewLog(store), logger: logger,
		system: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))}
	t.Cleanup(func() {
		f.system.Shutdown()
		f.proposer.CloseStore()
	})
	return f
}

func (f *fixture) propose(t *testing.T, cmd *order.Command) {
	t.Helper()
	cmd.Time = time.Now().UnixNano()
	res, err := f.proposer.Propose(context.Background(), &command.Cmd{Order: cmd})
	if err != nil || res.Err != nil || res.Outcome.Reject != nil {
		t.Fatalf("%s %s: %v %v %+v", cmd.Kind, cmd.OrderID, err, res.Err, res.Outcome.Reject)
	}
}

// createWithCallbackURL creates an authorised card order of merchant m1
// whose notifications go to url: two status changes (processing, then
// authorized), two notifications.
func createWithCallbackURL(t *testing.T, f *fixture, id, url string) {
	t.Helper()
	txn := "txn-" + id
	f.propose(t, &order.Command{Kind: order.KindCreate, Merchant: "m1", OrderID: id, TxnID: txn, RequestHash: "h",
		Create: &order.CreateData{Amount: 100, Currency: "USD", ProcessingMID: "mid", SettleDelayHours: 24,
			CallbackURL: url, Source: order.PaymentSource{Type: "card", CardID: "card-" + id, BIN: "411111",
				Masked: "411111******1111", Brand: "visa", ExpMonth: "12", ExpYear: "2035"}}})
	f.propose(t, &order.Command{Kind: order.KindAuthOutcome, Merchant: "m1", OrderID: id, TxnID: txn,
		Outcome: &order.OutcomeData{Approved: true, AuthCode: "A1", AVSCheck: "Y", CVVCheck: "M", RiskDecision: "accept"}})
}

// settle settles amount of order id: one more status change.
func (f *fixture) settle(t *testing.T, id string, amount int64) {
	t.Helper()
	f.propose(t, &order.Command{Kind: order.KindSettle, Merchant: "m1", OrderID: id, TxnID: "settle-" + id, Amount: amount})
}
