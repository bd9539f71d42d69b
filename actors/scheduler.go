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
	// DueExpiries lists unpaid forms and unanswered 3-D Secure challenges
	// whose time is up.
	DueExpiries(now int64, limit int) ([]persistence.OrderRef, error)
}

// Scheduler drives the durable schedules of the leader: automatic
// settlements whose delay has ended, authorisations left pending by a
// restart or a leadership change, and hosted forms and 3-D Secure
// challenges whose time is up. The schedules live in the store, so a new
// leader simply starts a Scheduler and continues them.
type Scheduler struct {
	Store    ScheduleReader
	Registry *Registry
	Logger   *slog.Logger
	Now      func() time.Time
	// Poll is how often due settlements are looked for.
	Poll time.Duration
	// ExpiryPoll is how often ended forms and challenges are looked for
	// (0: Poll).
	ExpiryPoll time.Duration
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
	expiryPoll := s.ExpiryPoll
	if expiryPoll <= 0 {
		expiryPoll = s.Poll
	}
	et := time.NewTicker(expiryPoll)
	defer et.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-et.C:
			s.expireDue()
			continue
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

// expireDue asks the actors of ended forms and challenges to expire them.
// Duplicates are harmless: the actor re-checks the order before proposing,
// and Apply refuses an expiry that is not due.
func (s *Scheduler) expireDue() {
	due, err := s.Store.DueExpiries(s.Now().UnixNano(), dueBatchMax)
	if err != nil {
		s.Logger.Error("list due expiries", "error", err)
		return
	}
	for _, ref := range due {
		s.Registry.Send(Key{ref.Merchant, ref.OrderID}, Expire{})
	}
}
