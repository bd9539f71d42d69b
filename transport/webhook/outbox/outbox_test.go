package outbox

import (
	"reflect"
	"testing"

	"github.com/paygate/gateway/persistence/command"
)

// Each update moves a notification as the contract's schedule says, and a
// late result leaves a settled one as it is.
func TestApply(t *testing.T) {
	pending := func() *Notification { return &Notification{ID: "n", State: Pending, NextDueAt: 10} }
	attempt := &command.AttemptRecord{At: 20, HTTPCode: 500}
	for _, tc := range []struct {
		name    string
		n       *Notification
		u       command.NotifyUpdate
		changed bool
		want    Notification
	}{
		{"retry due", pending(), command.NotifyUpdate{Attempt: attempt, NextDueAt: 50, Time: 21}, true,
			Notification{State: Pending, FirstAttemptAt: 20, NextDueAt: 50}},
		{"delivered", pending(), command.NotifyUpdate{Attempt: attempt, Delivered: true, Time: 21}, true,
			Notification{State: Delivered, FirstAttemptAt: 20, FinishedAt: 21}},
		{"no retry left", pending(), command.NotifyUpdate{Attempt: attempt, Time: 21}, true,
			Notification{State: Failed, FirstAttemptAt: 20, NextDueAt: 10, FinishedAt: 21}},
		{"late result", &Notification{State: Delivered, FinishedAt: 5}, command.NotifyUpdate{Attempt: attempt, NextDueAt: 50, Time: 21}, false,
			Notification{State: Delivered, FinishedAt: 5}},
		{"redeliver", &Notification{State: Failed, FirstAttemptAt: 3, FinishedAt: 5}, command.NotifyUpdate{Redeliver: true, Time: 30}, true,
			Notification{State: Pending, NextDueAt: 30}},
	} {
		changed := Apply(tc.n, &tc.u)
		got := *tc.n
		got.ID, got.Attempts = "", nil
		got.Body = nil
		if changed != tc.changed || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Apply = %v, %+v; want %v, %+v", tc.name, changed, got, tc.changed, tc.want)
		}
	}
}

// The attempt history keeps the latest AttemptsMax.
func TestApplyBoundsHistory(t *testing.T) {
	n := &Notification{State: Pending}
	for i := range AttemptsMax + 3 {
		Apply(n, &command.NotifyUpdate{Attempt: &command.AttemptRecord{At: int64(i + 1)}, NextDueAt: 99})
	}
	if len(n.Attempts) != AttemptsMax || n.Attempts[0].At != 4 || n.FirstAttemptAt != 1 {
		t.Fatalf("history %d from %d, first attempt %d", len(n.Attempts), n.Attempts[0].At, n.FirstAttemptAt)
	}
}
