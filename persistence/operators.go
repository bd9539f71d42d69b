package persistence

import (
	"errors"
	"fmt"

	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/persistence/command"
)

// Back-office operators and their sessions (contract 13), replicated so
// that any node can check a session and a session outlives its leader:
//
//	j/<email>        → Operator JSON (role, argon2id hash, disabled)
//	v/<token sha256> → Session JSON (email, expiry, idle deadline)
//
// Neither a password nor a session token is stored: only their hashes.
// Whether a session is live (not expired, not idle past its deadline, its
// operator not disabled) is decided by the reader with its own clock; the
// FSM never reads one.
const (
	prefixOperator = "j/"
	prefixSession  = "v/"
)

// Operator records' refusals, the same on every replica.
var (
	ErrOperatorExists   = errors.New("an operator with this email already exists")
	ErrNoOperator       = errors.New("no operator with this email")
	ErrOperatorDisabled = errors.New("the operator is disabled")
)

func operatorKey(email string) []byte { return []byte(prefixOperator + email) }
func sessionKey(hash string) []byte   { return []byte(prefixSession + hash) }

// applyOperator adds an operator (refused if the email has a record, even a
// disabled one) or disables one.
func (b *Batch) applyOperator(op *command.Operator) Result {
	cur, err := getJSON[command.Operator](b, operatorKey(op.Email))
	if err != nil {
		panic(fmt.Sprintf("persistence: read operator: %v", err))
	}
	if op.Disable {
		if cur == nil {
			return Result{Err: ErrNoOperator}
		}
		if cur.DisabledAt != 0 {
			return Result{} // already disabled: the first time stands
		}
		cur.DisabledAt = op.DisabledAt
		b.putJSON(operatorKey(op.Email), cur)
		return Result{}
	}
	if cur != nil {
		return Result{Err: ErrOperatorExists}
	}
	if op.Email == "" || op.PasswordHash == "" || op.Role == "" {
		return Result{Err: fmt.Errorf("operator without email, role or password hash")}
	}
	rec := *op
	rec.DisabledAt = 0
	b.putJSON(operatorKey(op.Email), &rec)
	return Result{}
}

// applySession starts a session for a live operator, ends one, or renews
// one's idle deadline.
func (b *Batch) applySession(s *command.Session) Result {
	if s.TokenHash == "" {
		return Result{Err: fmt.Errorf("session without token hash")}
	}
	if s.End {
		b.del(sessionKey(s.TokenHash))
		return Result{}
	}
	if s.Touch {
		return b.touchSession(s)
	}
	op, err := getJSON[command.Operator](b, operatorKey(s.Email))
	if err != nil {
		panic(fmt.Sprintf("persistence: read operator: %v", err))
	}
	switch {
	case op == nil:
		return Result{Err: ErrNoOperator}
	case op.DisabledAt != 0:
		return Result{Err: ErrOperatorDisabled}
	}
	b.putJSON(sessionKey(s.TokenHash), s)
	return Result{}
}

// touchSession renews a session's idle deadline to the command's
// IdleUntil, capped at the session's absolute expiry. A touch never
// shortens a session (two renewals may commit out of order), never extends
// it past its expiry, and never revives one that has no record (signed
// out, or pruned): the same on every replica, as the deadline comes from
// the command and no clock is read here. The operator is not checked: a
// disabled operator's session is refused by every reader whatever its
// deadline.
func (b *Batch) touchSession(s *command.Session) Result {
	cur, err := getJSON[command.Session](b, sessionKey(s.TokenHash))
	if err != nil {
		panic(fmt.Sprintf("persistence: read session: %v", err))
	}
	if cur == nil {
		return Result{}
	}
	idle := max(cur.IdleUntil, min(s.IdleUntil, cur.ExpiresAt))
	if idle == cur.IdleUntil {
		return Result{}
	}
	cur.IdleUntil = idle
	b.putJSON(sessionKey(s.TokenHash), cur)
	return Result{}
}

// Operator returns an operator's record (email lower-cased), or nil.
func (s *Store) Operator(email string) (*command.Operator, error) {
	return getJSON[command.Operator](s.db, operatorKey(email))
}

// Operators lists every operator, by email.
func (s *Store) Operators() ([]command.Operator, error) {
	return scanJSON[command.Operator](s, prefixOperator)
}

// Session returns the session of a token hash, or nil (never started, or
// ended). Its expiry and its operator are the caller's to check.
func (s *Store) Session(tokenHash string) (*command.Session, error) {
	return getJSON[command.Session](s.db, sessionKey(tokenHash))
}

// ExpiredSessions lists the token hashes of up to limit sessions that
// expired, or whose idle deadline passed, before before (Unix ns), for the
// leader to delete: every node refuses them already, and a use that finds
// one idle does not renew it. Sessions are
// few (one per sign-in within a lifetime), so this reads them all rather
// than keep an expiry index.
func (s *Store) ExpiredSessions(before int64, limit int) ([]string, error) {
	var out []string
	var derr error
	err := s.scan([]byte(prefixSession), prefixEnd(prefixSession), func(_, v []byte) bool {
		var sess command.Session
		if derr = json.Unmarshal(v, &sess); derr != nil {
			return false
		}
		if sess.ExpiresAt < before || (sess.IdleUntil != 0 && sess.IdleUntil < before) {
			out = append(out, sess.TokenHash)
		}
		return len(out) < limit
	})
	if err == nil {
		err = derr
	}
	return out, err
}
