package persistence

import (
	"errors"
	"testing"

	"github.com/paygate/gateway/persistence/command"
)

// An operator is added once; a session starts only for a live operator;
// disabling keeps the record (and refuses new sessions); sign-out deletes
// the session. Every refusal is a result, the same on every replica.
func TestOperatorsAndSessions(t *testing.T) {
	ts := newTestStore(t)
	add := &command.Operator{Email: "ann@example.com", Role: "support", PasswordHash: "$argon2id$x", CreatedAt: 1}
	res := ts.apply(1, &command.Cmd{Operator: add}, &command.Cmd{Operator: add})
	if res[0].Err != nil || !errors.Is(res[1].Err, ErrOperatorExists) {
		t.Fatalf("add twice: %v, %v", res[0].Err, res[1].Err)
	}
	sess := &command.Session{TokenHash: "h1", Email: "ann@example.com", CreatedAt: 2, ExpiresAt: 3}
	ghost := &command.Session{TokenHash: "h2", Email: "nobody@example.com", CreatedAt: 2, ExpiresAt: 3}
	res = ts.apply(2, &command.Cmd{Session: sess}, &command.Cmd{Session: ghost})
	if res[0].Err != nil || !errors.Is(res[1].Err, ErrNoOperator) {
		t.Fatalf("sessions: %v, %v", res[0].Err, res[1].Err)
	}
	if got, err := ts.Session("h1"); err != nil || got == nil || *got != *sess {
		t.Fatalf("session h1: %+v %v", got, err)
	}
	if got, _ := ts.Session("h2"); got != nil {
		t.Fatalf("a session for no operator was stored: %+v", got)
	}
	res = ts.apply(3, &command.Cmd{Operator: &command.Operator{Email: "ann@example.com", Disable: true, DisabledAt: 9}},
		&command.Cmd{Operator: &command.Operator{Email: "bob@example.com", Disable: true, DisabledAt: 9}},
		&command.Cmd{Session: &command.Session{TokenHash: "h3", Email: "ann@example.com", ExpiresAt: 10}})
	if res[0].Err != nil || !errors.Is(res[1].Err, ErrNoOperator) || !errors.Is(res[2].Err, ErrOperatorDisabled) {
		t.Fatalf("disable: %v, %v, %v", res[0].Err, res[1].Err, res[2].Err)
	}
	ops, err := ts.Operators()
	if err != nil || len(ops) != 1 || ops[0].DisabledAt != 9 || ops[0].Role != "support" || ops[0].PasswordHash != "$argon2id$x" {
		t.Fatalf("operators after disable: %+v %v", ops, err)
	}
	if r := ts.apply(4, &command.Cmd{Operator: add}); !errors.Is(r[0].Err, ErrOperatorExists) {
		t.Fatalf("a disabled email added again: %v", r[0].Err)
	}
	ts.apply(5, &command.Cmd{Session: &command.Session{TokenHash: "h1", End: true}})
	ts.reopen()
	if got, _ := ts.Session("h1"); got != nil {
		t.Fatalf("an ended session is still stored: %+v", got)
	}
}

// Expired sessions, and those idle past their deadline, are listed for the
// leader to delete; live ones are not.
func TestExpiredSessions(t *testing.T) {
	ts := newTestStore(t)
	ts.apply(1, &command.Cmd{Operator: &command.Operator{Email: "ann@example.com", Role: "admin", PasswordHash: "h", CreatedAt: 1}})
	for i, exp := range []int64{10, 20, 30} {
		ts.apply(uint64(2+i), &command.Cmd{Session: &command.Session{TokenHash: string(rune('a' + i)), Email: "ann@example.com", ExpiresAt: exp}})
	}
	// Idle from 15 on, expiring at 100.
	ts.apply(5, &command.Cmd{Session: &command.Session{TokenHash: "d", Email: "ann@example.com", ExpiresAt: 100, IdleUntil: 15}})
	for _, tc := range []struct {
		before int64
		limit  int
		want   int
	}{{10, 10, 0}, {11, 10, 1}, {15, 10, 1}, {16, 10, 2}, {31, 10, 4}, {31, 2, 2}} {
		got, err := ts.ExpiredSessions(tc.before, tc.limit)
		if err != nil || len(got) != tc.want {
			t.Errorf("ExpiredSessions(%d, %d) = %v, %v; want %d", tc.before, tc.limit, got, err, tc.want)
		}
	}
}

// A touch renews a session's idle deadline to the command's value, capped
// at its absolute expiry; it never shortens one (renewals may commit out
// of order), never changes anything else of the record, and stores nothing
// for a session that has no record (never started, signed out, pruned).
func TestSessionTouch(t *testing.T) {
	const email = "ann@example.com"
	started := func(idle int64) []*command.Cmd {
		return []*command.Cmd{{Session: &command.Session{TokenHash: "h", Email: email, CreatedAt: 1, ExpiresAt: 1000, IdleUntil: idle}}}
	}
	touch := func(idle int64) *command.Cmd {
		return &command.Cmd{Session: &command.Session{TokenHash: "h", Touch: true, IdleUntil: idle}}
	}
	for _, tc := range []struct {
		name   string
		before []*command.Cmd // applied first, at index 2
		touch  *command.Cmd
		want   int64 // the stored IdleUntil after it; -1: no record
	}{
		{"renews", started(100), touch(200), 200},
		{"renews again", started(200), touch(201), 201},
		{"never shortens", started(500), touch(200), 500},
		{"the same deadline", started(500), touch(500), 500},
		{"capped at the expiry", started(900), touch(2000), 1000},
		{"at the expiry stays", started(1000), touch(1500), 1000},
		{"a record without one gets one", started(0), touch(300), 300},
		{"other fields not read", started(100), &command.Cmd{Session: &command.Session{TokenHash: "h", Touch: true,
			IdleUntil: 400, Email: "eve@example.com", ExpiresAt: 5000, CreatedAt: 9}}, 400},
		{"unknown session", nil, touch(200), -1},
		{"ended session", append(started(100), &command.Cmd{Session: &command.Session{TokenHash: "h", End: true}}), touch(200), -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestStore(t)
			ts.apply(1, &command.Cmd{Operator: &command.Operator{Email: email, Role: "support", PasswordHash: "h", CreatedAt: 1}})
			if len(tc.before) > 0 {
				for i, r := range ts.apply(2, tc.before...) {
					if r.Err != nil {
						t.Fatalf("before %d: %v", i, r.Err)
					}
				}
			}
			if r := ts.apply(3, tc.touch); r[0].Err != nil {
				t.Fatalf("touch: %v", r[0].Err)
			}
			ts.reopen()
			got, err := ts.Session("h")
			switch {
			case err != nil:
				t.Fatal(err)
			case tc.want < 0 && got != nil:
				t.Fatalf("a touch stored a session that had no record: %+v", got)
			case tc.want < 0:
			case got == nil:
				t.Fatal("the session's record is gone")
			case got.IdleUntil != tc.want:
				t.Fatalf("IdleUntil %d, want %d", got.IdleUntil, tc.want)
			default:
				want := command.Session{TokenHash: "h", Email: email, CreatedAt: 1, ExpiresAt: 1000, IdleUntil: tc.want}
				if *got != want {
					t.Fatalf("record %+v, want %+v", *got, want)
				}
			}
		})
	}
	// In the batch that starts the session, a touch reads the record the
	// batch holds.
	ts := newTestStore(t)
	ts.apply(1, &command.Cmd{Operator: &command.Operator{Email: email, Role: "support", PasswordHash: "h", CreatedAt: 1}})
	ts.apply(2, append(started(100), touch(300))...)
	if got, _ := ts.Session("h"); got == nil || got.IdleUntil != 300 {
		t.Fatalf("touch in the starting batch: %+v", got)
	}
}
