package actors

import (
	"context"
	"log/slog"
	"time"

	"github.com/paygate/gateway/persistence"
)

// ScheduleReader is what the scheduler reads from the store.
type ScheduleReader interface {
	DueSettlements(now int64, limit int) ([]persistence.OrderRef, error)
	PendingAuths() ([]persistence.OrderRef, error)
}

// Scheduler drives the durable schedules of the leader: automatic
// settlements whose delay has ended, and authorisations left pending by a
// restart or a leadership change. The schedules live in the store, so a new
// leader simply starts a Scheduler and continues them.
type Scheduler struct {
	Store    ScheduleReader
	Registry *Registry
	Logger   *slog.Logger
	Now      func() time.Time
	// Poll is how often due settlements are looked for.
	Poll time.Duration
}

// dueBatchMax bounds how many settlements one poll starts.
const dueBatchMax = 1000

// Run resumes pending authorisations once, then polls for due settlements
// until ctx ends. Duplicate AutoSettle messages are harmless: the actor
// re-checks the order before proposing.
func (s *Scheduler) Run(ctx context.Context) {
	pending, err := s.Store.PendingAuths()
	if err != nil {
		s.Logger.Error("list pending authorisations", "error", err)
	}
	for _, ref := range pending {
		s.Registry.Send(Key{ref.Merchant, ref.OrderID}, ResumeAuth{})
	}
	if len(pending) > 0 {
		s.Logger.Info("resumed pending authorisations", "count", len(pending))
	}
	t := time.NewTicker(s.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due, err := s.Store.DueSettlements(s.Now().UnixNano(), dueBatchMax)
		if err != nil {
			s.Logger.Error("list due settlements", "error", err)
			continue
		}
		for _, ref := range due {
			s.Registry.Send(Key{ref.Merchant, ref.OrderID}, AutoSettle{})
		}
	}
}
