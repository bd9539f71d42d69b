package actors

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
)

// ScheduleReader is what the scheduler reads from the store.
type ScheduleReader interface {
	// DueSettlements lists orders whose auto-settle time has come, a page
	// at a time: after the cursor, and the cursor for the next page.
	DueSettlements(now int64, after persistence.ScheduleCursor, limit int) ([]persistence.OrderRef, persistence.ScheduleCursor, error)
	PendingAuths() ([]persistence.OrderRef, error)
	// DueExpiries lists unpaid forms and unanswered 3-D Secure challenges
	// whose time is up, as DueSettlements does.
	DueExpiries(now int64, after persistence.ScheduleCursor, limit int) ([]persistence.OrderRef, persistence.ScheduleCursor, error)
	// FinishedNotifications lists notifications delivered before
	// a time, and ExpiredIdempotency idempotency records written before a
	// time, oldest first.
	FinishedNotifications(before int64, limit int) ([]command.NotifyExpiry, error)
	ExpiredIdempotency(before int64, limit int) ([]command.IdemExpiry, error)
}

// Scheduler drives the durable schedules of the leader: automatic
// settlements whose delay has ended, authorisations left pending by a
// restart or a leadership change, hosted forms and 3-D Secure challenges
// whose time is up, and records past their retention (finished
// notifications, idempotency records). The schedules live in the store,
// so a new leader simply starts a Scheduler and continues them.
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
	// PageSize is how many due entries are read at once, and how many
	// records one prune removes, up to prunePageMax (0: 1,000).
	PageSize int
	// Proposer commits the retention passes' prunes.
	Proposer Proposer
	// NotifyRetention is how long delivered notifications are
	// kept, with their bodies (0: for ever).
	NotifyRetention time.Duration
	// RetentionPoll is how often the retention passes run (0: a minute).
	RetentionPoll time.Duration
	// ResumePoll is how often pending authorisations are taken on again
	// (0: 30 s): one whose outcome failed to commit while this node went
	// on leading would otherwise wait for the next leader.
	ResumePoll time.Duration
}

// scheduleWorkers bounds the settlements (or expiries) under way at once:
// each runs its order's actor and waits for its command to commit, so a
// backlog is worked through at the pace of the log without an actor and a
// goroutine for every entry of it at once.
const scheduleWorkers = 32

// Run resumes pending authorisations, and again every ResumePoll, and
// polls for due settlements and expiries until ctx ends. Each poll works
// through everything due at its start, a page at a time, so the schedule
// keeps up with any rate of payments; an entry whose order did not change
// (a proposal that failed) is left for the next poll. Duplicate messages
// are harmless: the actor re-checks the order before proposing.
func (s *Scheduler) Run(ctx context.Context) {
	// Logged even when there were none: it says the new leader has taken
	// over what was pending (and tests wait for it).
	s.Logger.Info("resumed pending authorisations", "count", s.resumePending())
	resumePoll := s.ResumePoll
	if resumePoll <= 0 {
		resumePoll = 30 * time.Second
	}
	expiryPoll := s.ExpiryPoll
	if expiryPoll <= 0 {
		expiryPoll = s.Poll
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.every(ctx, expiryPoll, s.expireDue) })
	retentionPoll := s.RetentionPoll
	if retentionPoll <= 0 {
		retentionPoll = time.Minute
	}
	wg.Go(func() { s.every(ctx, retentionPoll, s.pruneIdempotency) })
	wg.Go(func() { s.every(ctx, resumePoll, func(context.Context) { s.resumePending() }) })
	if s.NotifyRetention > 0 {
		wg.Go(func() { s.every(ctx, retentionPoll, s.pruneNotifications) })
	}
	s.every(ctx, s.Poll, s.settleDue)
	wg.Wait()
}

// resumePending asks the actor of every pending authorisation to take it
// on, and returns how many there were. An actor whose acquirer answer is
// still on its way, or whose order waits for the customer's 3-D Secure
// answer, does nothing; the others call the acquirer again with the same
// reference, which binds it to its first answer.
func (s *Scheduler) resumePending() int {
	pending, err := s.Store.PendingAuths()
	if err != nil {
		s.Logger.Error("list pending authorisations", "error", err)
	}
	for _, ref := range pending {
		s.Registry.Send(Key{ref.Merchant, ref.OrderID}, ResumeAuth{})
	}
	return len(pending)
}

// every runs pass each period until ctx ends; a pass longer than the
// period is followed at once by the next.
func (s *Scheduler) every(ctx context.Context, period time.Duration, pass func(context.Context)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pass(ctx)
		}
	}
}

// settleDue settles every order whose auto-settle time has come.
func (s *Scheduler) settleDue(ctx context.Context) {
	s.workThrough(ctx, "settlements", s.Store.DueSettlements, AutoSettle{})
}

// expireDue asks the actors of ended forms and challenges to expire them.
// Apply refuses an expiry that is not due.
func (s *Scheduler) expireDue(ctx context.Context) {
	s.workThrough(ctx, "expiries", s.Store.DueExpiries, Expire{})
}

// workThrough sends msg to the actor of every order the schedule lists as
// due now, page by page, at most scheduleWorkers at once; it returns when
// the schedule is exhausted or ctx ends.
func (s *Scheduler) workThrough(ctx context.Context, what string,
	list func(int64, persistence.ScheduleCursor, int) ([]persistence.OrderRef, persistence.ScheduleCursor, error), msg any) {
	pageSize := s.pageSize()
	now := s.Now().UnixNano()
	var cursor persistence.ScheduleCursor
	for ctx.Err() == nil {
		due, next, err := list(now, cursor, pageSize)
		if err != nil {
			s.Logger.Error("list due "+what, "error", err)
			return
		}
		s.deliverAll(ctx, due, msg)
		if len(due) < pageSize {
			return
		}
		cursor = next
	}
}

// deliverAll runs msg through the actors of refs, scheduleWorkers at a
// time, and returns once all have (or ctx ended).
func (s *Scheduler) deliverAll(ctx context.Context, refs []persistence.OrderRef, msg any) {
	work := make(chan persistence.OrderRef)
	var wg sync.WaitGroup
	for range min(scheduleWorkers, len(refs)) {
		wg.Go(func() {
			for ref := range work {
				s.Registry.Deliver(Key{ref.Merchant, ref.OrderID}, msg)
			}
		})
	}
feed:
	for _, ref := range refs {
		select {
		case work <- ref:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
}

func (s *Scheduler) pageSize() int {
	if s.PageSize <= 0 {
		return 1000
	}
	return s.PageSize
}

// prunePageMax bounds the records one prune removes. The FSM applies a
// prune in one go, between the payments' commands: 256 records (a read of
// an index key and two or three deletes each) hold it ~1 ms, about what a
// batch of payments does, and make a ~12 KB log entry.
const prunePageMax = 256

var (
	notificationsPruned = metrics.GetOrCreateCounter(`gateway_webhook_pruned_total`)
	idempotencyPruned   = metrics.GetOrCreateCounter(`gateway_idempotency_pruned_total`)
)

// idempotencyMargin is how long past order.IdempotencyWindow a record is kept.
// Whether a repeat replays is decided by the clock of the leader that
// proposes it: a record removed too early would let a refund repeated
// within its window be made twice. No leader's clock is a day behind.
const idempotencyMargin = 24 * time.Hour

// pruneNotifications removes the notifications that finished longer than
// NotifyRetention ago.
func (s *Scheduler) pruneNotifications(ctx context.Context) {
	before := s.Now().Add(-s.NotifyRetention).UnixNano()
	pruneExpired(ctx, s, "notifications", notificationsPruned,
		func(limit int) ([]command.NotifyExpiry, error) {
			return s.Store.FinishedNotifications(before, limit)
		},
		func(list []command.NotifyExpiry) *command.Cmd {
			return &command.Cmd{NotifyPrune: &command.NotifyPrune{Before: before, Entries: list}}
		})
}

// pruneIdempotency removes the idempotency records past their window.
func (s *Scheduler) pruneIdempotency(ctx context.Context) {
	before := s.Now().Add(-order.IdempotencyWindow - idempotencyMargin).UnixNano()
	pruneExpired(ctx, s, "idempotency records", idempotencyPruned,
		func(limit int) ([]command.IdemExpiry, error) { return s.Store.ExpiredIdempotency(before, limit) },
		func(list []command.IdemExpiry) *command.Cmd {
			return &command.Cmd{IdemPrune: &command.IdemPrune{Before: before, Entries: list}}
		})
}

// pruneExpired lists a page of expired records and proposes their removal,
// page after page, until none is left or ctx ends. The FSM checks each
// listed record again, so one that changed since the listing stays.
func pruneExpired[T any](ctx context.Context, s *Scheduler, what string, pruned *metrics.Counter,
	list func(limit int) ([]T, error), prune func([]T) *command.Cmd) {
	page := min(s.pageSize(), prunePageMax)
	for ctx.Err() == nil {
		refs, err := list(page)
		if err != nil {
			s.Logger.Error("list expired "+what, "error", err)
			return
		}
		if len(refs) == 0 {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := s.Proposer.Propose(pctx, prune(refs))
		cancel()
		if err != nil {
			s.Logger.Warn("prune "+what, "error", err)
			return
		}
		pruned.Add(r.Pruned)
		// A page none of which could go would come back first in every
		// listing: stop rather than spin on it.
		if len(refs) < page || r.Pruned == 0 {
			return
		}
	}
}
