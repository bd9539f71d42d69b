package persistence

import (
	"io"
	"log/slog"
	"strconv"
	"testing"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
)

// chargeCmds are the two commands of one card charge as the order actor
// proposes them: the acceptance (with a sealed card of the usual size) and
// the acquirer's approval (with a new payment token).
func chargeCmds(id string, at int64) (create, outcome *command.Cmd) {
	create = &command.Cmd{Order: &order.Command{
		Kind: order.KindCreate, Time: at, Merchant: "m_bench", OrderID: id, TxnID: "t-" + id,
		RequestHash: "h-" + id,
		Create: &order.CreateData{
			Amount: 1020, Currency: "USD", Description: "bench", ProcessingMID: "bench-mid", SettleDelayHours: 24,
			Source: order.PaymentSource{Type: "card", CardID: "c-" + id, BIN: "411111", Brand: "VISA",
				CardType: "CREDIT", ExpMonth: "12", ExpYear: "2035", HolderName: "Bench User",
				Masked: "411111******1111", IssuerCountry: "US", Issuer: "Bench Bank"},
			SealedCard: make([]byte, 120),
		},
	}}
	outcome = &command.Cmd{Order: &order.Command{
		Kind: order.KindAuthOutcome, Time: at + 1000, Merchant: "m_bench", OrderID: id, TxnID: "t-" + id,
		ARN: "arn-" + id,
		Outcome: &order.OutcomeData{Approved: true, AuthCode: "123456", AVSCheck: "Y", CVVCheck: "M",
			RiskDecision: "accept", PaymentToken: "tok-" + id, TokenExpiresAt: at + 1e15, AutoSettleAt: at + 1e12},
	}}
	return create, outcome
}

// BenchmarkApplyCharges measures the FSM's side of one charge: its two
// commands applied to a store that already holds prefill charges, in
// batches shaped like the proposer's entries under load (11 new orders'
// acceptances with the previous 11 orders' outcomes). ns/op is per charge.
func BenchmarkApplyCharges(b *testing.B) {
	benchmarkApply(b, false)
}

// BenchmarkApplyNotifications is BenchmarkApplyCharges with a callback URL
// on every order: each approval writes a notification, and the next batch
// carries its delivery result, as the dispatcher proposes it. ns/op is per
// charge with its notification; stored-B/op counts the bytes the batches
// hand Pebble for it (the notification's body should be among them once).
func BenchmarkApplyNotifications(b *testing.B) {
	benchmarkApply(b, true)
}

func benchmarkApply(b *testing.B, notify bool) {
	const prefill = 50_000
	l := newChargeLoad(b, notify)
	l.run(b, prefill, "pre-")
	b.ReportAllocs()
	b.ResetTimer()
	l.stored = 0
	l.run(b, b.N, "run-")
	b.ReportMetric(float64(l.stored)/float64(b.N), "stored-B/op")
}

// chargeLoad applies charges to a store the way the FSM sees them under
// load: batches of perBatch new orders' acceptances with the previous
// batch's outcomes and, with notify, the delivery results of the
// notifications the batch before committed.
type chargeLoad struct {
	s       *Store
	notify  bool
	idx     uint64
	pending []*command.Cmd
	stored  int // bytes handed to Pebble
}

const chargeLoadPerBatch = 11

func newChargeLoad(b *testing.B, notify bool) *chargeLoad {
	s, err := Open(b.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return &chargeLoad{s: s, notify: notify}
}

// run applies n charges whose order ids start with prefix.
func (l *chargeLoad) run(b *testing.B, n int, prefix string) {
	for i := 0; i < n; i += chargeLoadPerBatch {
		batch := l.s.NewBatch()
		for _, c := range l.pending {
			batch.Apply(c)
		}
		l.pending = l.pending[:0]
		for _, n := range batch.Created {
			at := int64(l.idx+1) * 1e6
			l.pending = append(l.pending, &command.Cmd{Notify: &command.NotifyUpdate{ID: n.ID, Time: at, Delivered: true,
				Attempt: &command.AttemptRecord{At: at, HTTPCode: 200, DurationNs: 1e6}}})
		}
		for j := i; j < min(i+chargeLoadPerBatch, n); j++ {
			create, outcome := chargeCmds(prefix+strconv.Itoa(j), int64(l.idx+1)*1e6)
			if l.notify {
				create.Order.Create.CallbackURL = "https://merchant.example/hook"
			}
			if r := batch.Apply(create); !r.Outcome.Created {
				b.Fatalf("create %d: %+v", j, r.Outcome)
			}
			l.pending = append(l.pending, outcome)
		}
		l.idx++
		l.stored += batch.b.Len()
		if err := batch.Commit(l.idx); err != nil {
			b.Fatal(err)
		}
		batch.Close()
	}
}

// BenchmarkDueNotifications is one scan of the outbox by the webhook
// dispatcher on a node that has delivered 50,000 notifications (their
// queue entries deleted, most of the tombstones still in the memtable) and
// has a few in flight, as under the webhooks workload.
func BenchmarkDueNotifications(b *testing.B) {
	l := newChargeLoad(b, true)
	l.run(b, 50_000, "pre-")
	now := int64(l.idx+1) * 1e6
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		due, err := l.s.DueNotifications(now, 256, nil)
		if err != nil || len(due) == 0 || len(due) > chargeLoadPerBatch {
			b.Fatalf("due %d, err %v", len(due), err)
		}
	}
}

// BenchmarkDueNotificationsPassOver is one scan of an outbox holding
// 100,000 due notifications for one endpoint that has no room: the
// dispatcher passes over every one of them, by the endpoint its index entry
// names, without loading any (a receiver that hangs under a merchant's
// traffic). ns/op is the whole scan; ns/entry divides it by the entries.
func BenchmarkDueNotificationsPassOver(b *testing.B) {
	const backlog = 100_000
	l := newChargeLoad(b, false)
	for i := 0; i < backlog; i += 1000 {
		batch := l.s.NewBatch()
		for j := i; j < i+1000; j++ {
			create, outcome := chargeCmds("hang-"+strconv.Itoa(j), int64(j+1)*1e3)
			create.Order.Create.CallbackURL = "https://hangs.example/hook"
			batch.Apply(create)
			batch.Apply(outcome)
		}
		l.idx++
		if err := batch.Commit(l.idx); err != nil {
			b.Fatal(err)
		}
		batch.Close()
	}
	if n, _ := l.s.PendingNotificationCount(); n != backlog {
		b.Fatalf("%d pending, want %d", n, backlog)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		passed := 0
		due, err := l.s.DueNotifications(1<<62, 2000, func(_, endpoint string) bool {
			passed++
			return endpoint == "https://hangs.example"
		})
		if err != nil || len(due) != 0 || passed != backlog {
			b.Fatalf("due %d, passed over %d, err %v", len(due), passed, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/backlog, "ns/entry")
}

// BenchmarkPruneNotifications is the retention pass's side of one finished
// notification: listed from the retention index, then removed by a
// NotifyPrune of 256 (the scheduler's page), on a store that has delivered
// them. ns/op is per notification removed.
func BenchmarkPruneNotifications(b *testing.B) {
	l := newChargeLoad(b, true)
	l.run(b, b.N+2*chargeLoadPerBatch, "pre-") // the last batches' results are still pending
	b.ReportAllocs()
	b.ResetTimer()
	pruned := 0
	for pruned < b.N {
		list, err := l.s.FinishedNotifications(1<<62, min(256, b.N-pruned))
		if err != nil || len(list) == 0 {
			b.Fatalf("listed %d after %d pruned, err %v", len(list), pruned, err)
		}
		batch := l.s.NewBatch()
		r := batch.Apply(&command.Cmd{NotifyPrune: &command.NotifyPrune{Before: 1 << 62, Entries: list}})
		l.idx++
		if err := batch.Commit(l.idx); err != nil {
			b.Fatal(err)
		}
		batch.Close()
		if r.Pruned != len(list) {
			b.Fatalf("pruned %d of %d", r.Pruned, len(list))
		}
		pruned += r.Pruned
	}
}
