package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/apierr"
	"github.com/paygate/gateway/transport/operator"
)

// Auth is the node's operator.Authenticator: operators sign in here, from
// the dashboard (a Go call) or the admin API (POST /admin/v1/sessions).
//
// Passwords are checked, attempts counted and sessions proposed on the
// leader: a follower sends the attempt over the cluster port
// (/peer/v1/sign-in, mutual TLS) and waits until it has applied the new
// session itself, so the next page it serves knows it. A session is a
// replicated record holding the SHA-256 of its token, so any node checks a
// token from its own applied state and a session outlives its leader.
// Every attempt is an audit record, durable before SignIn returns.
//
// A session also ends when unused for the idle timeout (PCI DSS v4.0
// 8.2.8; Config.OperatorIdleTimeout). Its idle deadline is in the
// replicated record, so every node refuses an idle session from its own
// applied state. Session renews the deadline of a session in use through
// the log, only once it could move by renewEvery: an active operator costs
// about one entry a minute, not one a page view (see renew).
type Auth struct {
	s       *Server
	limiter *operator.Limiter
	// refusals bounds the audit records of rate-limited attempts (see
	// refusalBurst): a client hammering sign-in must not fill the log.
	refusals *operator.Limiter

	// renewing holds the token hashes whose renewal this node is making,
	// so that a page's parallel requests propose one.
	renewMu  sync.Mutex
	renewing map[string]struct{}
}

var _ operator.Authenticator = (*Auth)(nil)

// A rate-limited attempt is recorded at most refusalBurst times at once
// per email and source IP, then once a minute; attempts beyond that are
// refused all the same, and counted in the node's log only.
const (
	refusalBurst    = 3
	refusalInterval = time.Minute
)

func newAuth(s *Server) *Auth {
	return &Auth{s: s, limiter: operator.NewLimiter(),
		refusals: operator.NewLimiterWith(refusalBurst, refusalInterval, refusalBurst, refusalInterval),
		renewing: map[string]struct{}{}}
}

// renewTimeout bounds a renewal of a session's idle deadline, which the
// request that uses the session waits for.
const renewTimeout = 2 * time.Second

// renewEvery is how far a session's idle deadline must be able to move
// before a use renews it: a minute, or a fifteenth of a short timeout.
func renewEvery(idle time.Duration) time.Duration { return min(time.Minute, idle/15) }

// Authenticator is the node's Auth, for the dashboard.
func (s *Server) Authenticator() *Auth { return s.auth }

// Audit outcomes of a sign-in.
const (
	signInOK          = "ok"
	signInFailed      = "failed"
	signInRateLimited = "rate_limited"
)

// SignIn implements operator.Authenticator.
func (a *Auth) SignIn(email, password, sourceIP string, now time.Time) (string, operator.Session, error) {
	c := a.s.cfg.Cluster
	if c == nil {
		return "", operator.Session{}, errNoLeader
	}
	if c.Route().Self {
		return a.signInHere(email, password, sourceIP, now)
	}
	var out signInAnswer
	status, err := a.s.callLeader("/peer/v1/sign-in", signInRequest{Email: email, Password: password}, sourceIP, &out)
	switch {
	case err != nil:
		return "", operator.Session{}, err
	case status == 401:
		return "", operator.Session{}, operator.ErrBadCredentials
	case status == 429:
		return "", operator.Session{}, operator.ErrRateLimited
	case status != 200:
		return "", operator.Session{}, fmt.Errorf("%w: the leader answered the sign-in with %d", errNoLeader, status)
	}
	// Read-your-writes: the leader applied the session; wait (bounded) for
	// this node to, so the caller's next request here finds it.
	var sess operator.Session
	if !appliedBy(time.Now().Add(3*time.Second), func() (ok bool) { sess, ok = a.Session(out.Token, now); return ok }) {
		return "", operator.Session{}, fmt.Errorf("%w: this node has not applied the new session yet; retry", errNoLeader)
	}
	return out.Token, sess, nil
}

// appliedBy polls applied, a check of this node's applied state, until it
// holds or deadline passes, and reports whether it held: a follower's wait
// for an entry the leader has applied (read-your-writes after a sign-in or
// a renewal).
func appliedBy(deadline time.Time, applied func() bool) bool {
	for {
		if applied() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// errNoLeader is the failure of a sign-in or sign-out this node could not
// get decided by a leader (the admin API answers 503 6.02).
var errNoLeader = errors.New("no leader could take the request")

// signInHere is SignIn on the leader.
func (a *Auth) signInHere(email, password, sourceIP string, now time.Time) (string, operator.Session, error) {
	norm, valid := operator.NormalizeEmail(email)
	actor := norm
	if !valid {
		actor = auditActorOf(email)
	}
	record := func(result string) error {
		return a.s.writeAudit(persistence.AuditRecord{Actor: actor, Action: "sign-in", Target: "operator:" + actor,
			SourceIP: sourceIP, Result: result})
	}
	if !a.limiter.Allow(actor, sourceIP, now) {
		if a.refusals.Allow(actor, sourceIP, now) {
			if err := record(signInRateLimited); err != nil {
				return "", operator.Session{}, err
			}
		} else {
			a.s.cfg.Logger.Warn("sign-in refused by the rate limit, not audited (too many)", "source_ip", sourceIP)
		}
		return "", operator.Session{}, operator.ErrRateLimited
	}
	var op *command.Operator
	if valid {
		var err error
		if op, err = a.s.cfg.Store.Operator(norm); err != nil {
			return "", operator.Session{}, err
		}
	}
	ok := false
	if op == nil || op.DisabledAt != 0 {
		operator.VerifyDecoy(password) // the same time as a wrong password
	} else {
		var err error
		if ok, err = operator.VerifyPassword(op.PasswordHash, password); err != nil {
			a.s.cfg.Logger.Error("operator's stored password hash unreadable", "operator", norm, "error", err)
		}
	}
	if !ok {
		if err := record(signInFailed); err != nil {
			return "", operator.Session{}, err
		}
		return "", operator.Session{}, operator.ErrBadCredentials
	}
	token, err := operator.NewToken()
	if err != nil {
		return "", operator.Session{}, err
	}
	expires := now.Add(operator.SessionLifetime)
	rec := &command.Session{TokenHash: operator.TokenHash(token), Email: norm, CreatedAt: now.UnixNano(),
		ExpiresAt: expires.UnixNano(), IdleUntil: min(now.Add(a.s.cfg.OperatorIdleTimeout).UnixNano(), expires.UnixNano())}
	res, err := a.s.cfg.Cluster.Propose(context.Background(), &command.Cmd{Session: rec})
	if err == nil {
		err = res.Err
	}
	if errors.Is(err, persistence.ErrOperatorDisabled) || errors.Is(err, persistence.ErrNoOperator) {
		// Disabled between the read and the proposal.
		if err := record(signInFailed); err != nil {
			return "", operator.Session{}, err
		}
		return "", operator.Session{}, operator.ErrBadCredentials
	}
	if err != nil {
		return "", operator.Session{}, err
	}
	if err := record(signInOK); err != nil {
		// No answer without its record: end the session just made.
		a.endSession(rec.TokenHash, sourceIP)
		return "", operator.Session{}, err
	}
	return token, operator.Session{Email: norm, Role: operator.Role(op.Role), CSRF: operator.CSRFToken(token),
		Expires: time.Unix(0, rec.ExpiresAt), IdleExpires: time.Unix(0, rec.IdleUntil)}, nil
}

// auditActorOf is what an audit record names for a sign-in whose email is
// not an address: the text, cut to an address's length, valid UTF-8.
func auditActorOf(email string) string {
	email = strings.ToValidUTF8(email, "?")
	for len(email) > 254 {
		_, size := utf8.DecodeLastRuneInString(email)
		email = email[:len(email)-size]
	}
	return email
}

// Session implements operator.Authenticator from this node's applied
// state: the token's record, neither expired nor idle past its deadline at
// now, its operator not disabled. The role is the operator's now. A live
// session is in use: its idle deadline is renewed (see renew) when it
// would move by renewEvery or more. A record without an idle deadline
// (written before there was one) has only its absolute expiry, and is not
// renewed.
func (a *Auth) Session(token string, now time.Time) (operator.Session, bool) {
	if !operator.IsToken(token) {
		return operator.Session{}, false
	}
	hash := operator.TokenHash(token)
	rec, err := a.s.cfg.Store.Session(hash)
	at := now.UnixNano()
	if err != nil || rec == nil || at >= rec.ExpiresAt || (rec.IdleUntil != 0 && at >= rec.IdleUntil) {
		return operator.Session{}, false
	}
	op, err := a.s.cfg.Store.Operator(rec.Email)
	if err != nil || op == nil || op.DisabledAt != 0 || !operator.Role(op.Role).Valid() {
		return operator.Session{}, false
	}
	sess := operator.Session{Email: op.Email, Role: operator.Role(op.Role), CSRF: operator.CSRFToken(token),
		Expires: time.Unix(0, rec.ExpiresAt)}
	if rec.IdleUntil != 0 {
		idle := a.s.cfg.OperatorIdleTimeout
		sess.IdleExpires = time.Unix(0, rec.IdleUntil)
		until, every := min(now.Add(idle).UnixNano(), rec.ExpiresAt), int64(renewEvery(idle))
		if until-rec.IdleUntil >= every && a.renew(hash, until, every) {
			sess.IdleExpires = time.Unix(0, until)
		}
	}
	return sess, true
}

// renew moves the idle deadline of the session of hash to until (Unix ns,
// already capped at its expiry) through the log, unless it has moved to
// within every (ns) of it meanwhile, and reports whether it did: on the
// leader by its own proposal, on a follower by asking the leader
// (/peer/v1/session-touch) and waiting until it has applied the renewed
// record itself, so that its next request does not renew again.
// It waits at most renewTimeout, and is best-effort: the session was live
// when asked, so the request is served whatever comes of it, and a later
// use renews it. A renewal of the session this node is already renewing
// is not made twice (a page's parallel requests).
//
// A renewal is not an audit record: a keep-alive is not an operator's
// action (sign-in and sign-out are recorded).
func (a *Auth) renew(hash string, until, every int64) bool {
	a.renewMu.Lock()
	if _, busy := a.renewing[hash]; busy {
		a.renewMu.Unlock()
		return false
	}
	a.renewing[hash] = struct{}{}
	a.renewMu.Unlock()
	defer func() {
		a.renewMu.Lock()
		delete(a.renewing, hash)
		a.renewMu.Unlock()
	}()
	// A renewal that ended between the caller's read and here has been
	// applied (the leader's proposal returns once it is; a follower waits
	// for it): read again rather than renew twice.
	if rec, err := a.s.cfg.Store.Session(hash); err == nil && rec != nil && until-rec.IdleUntil < every {
		return false
	}
	err := a.touch(hash, until)
	if err != nil {
		// Neither the token nor its hash is logged.
		a.s.cfg.Logger.Warn("operator session's idle deadline not renewed; the request is served, a later one retries", "error", err)
	}
	return err == nil
}

// touch is renew's proposal, on the leader or asked of it.
func (a *Auth) touch(hash string, until int64) error {
	c := a.s.cfg.Cluster
	if c == nil {
		return errNoLeader
	}
	if c.Route().Self {
		_, err := a.touchHere(hash, until)
		return err
	}
	deadline := time.Now().Add(renewTimeout)
	var out sessionTouchAnswer
	status, err := a.s.callLeaderWithin(renewTimeout, "/peer/v1/session-touch", sessionTouchRequest{TokenHash: hash, IdleUntil: until}, "", &out)
	if err == nil && status != 200 {
		err = fmt.Errorf("%w: the leader answered the session renewal with %d", errNoLeader, status)
	}
	if err != nil {
		return err
	}
	// Read-your-writes, as after a sign-in: wait (bounded) for this node
	// to apply what the leader did. Past the deadline the renewal is made
	// all the same, and applied here in its turn (at worst the next
	// request renews once more).
	appliedBy(deadline, func() bool {
		rec, err := a.s.cfg.Store.Session(hash)
		return out.IdleUntil == 0 || err != nil || rec == nil || rec.IdleUntil >= out.IdleUntil
	})
	return nil
}

// touchHere is touch on the leader: it proposes the renewal (within
// renewTimeout) and answers the session's idle deadline after it (0: the
// session has no record, it ended).
func (a *Auth) touchHere(hash string, until int64) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), renewTimeout)
	defer cancel()
	res, err := a.s.cfg.Cluster.Propose(ctx, &command.Cmd{Session: &command.Session{TokenHash: hash, Touch: true, IdleUntil: until}})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return 0, err
	}
	rec, err := a.s.cfg.Store.Session(hash)
	if err != nil || rec == nil {
		return 0, err
	}
	return rec.IdleUntil, nil
}

// SignOut implements operator.Authenticator: the session's record is
// deleted on every replica (on the leader, or asked of it). Signing out a
// token that has no session is not an error. Its audit record has no
// source IP; SignOutFrom names one.
func (a *Auth) SignOut(token string) error { return a.SignOutFrom(token, "") }

// SignOutFrom is SignOut of a request from sourceIP (its audit record's).
func (a *Auth) SignOutFrom(token, sourceIP string) error {
	return a.endSession(operator.TokenHash(token), sourceIP)
}

func (a *Auth) endSession(hash, sourceIP string) error {
	c := a.s.cfg.Cluster
	if c == nil {
		return errNoLeader
	}
	if c.Route().Self {
		rec, _ := a.s.cfg.Store.Session(hash)
		res, err := c.Propose(context.Background(), &command.Cmd{Session: &command.Session{TokenHash: hash, End: true}})
		if err == nil {
			err = res.Err
		}
		if err == nil && rec != nil {
			err = a.s.writeAudit(persistence.AuditRecord{Actor: rec.Email, Action: "sign-out",
				Target: "operator:" + rec.Email, SourceIP: sourceIP, Result: signInOK})
		}
		return err
	}
	status, err := a.s.callLeader("/peer/v1/sign-out", signOutRequest{TokenHash: hash}, sourceIP, nil)
	if err == nil && status != 200 {
		err = fmt.Errorf("%w: the leader answered the sign-out with %d", errNoLeader, status)
	}
	return err
}

type signInRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

type signInAnswer struct {
	Token     string `json:"token"`
	Email     string `json:"email"`
	Role      string `json:"role"`
	ExpiresAt string `json:"expires_at"`
	// IdleExpiresAt is when the session ends unless used before; each use
	// moves it (not in the contract's answer, an addition).
	IdleExpiresAt string `json:"idle_expires_at,omitempty"`
}

type signOutRequest struct {
	TokenHash string `json:"token_hash"`
}

// sessionTouchRequest is a follower's renewal of a session's idle
// deadline; the answer names the deadline after it (0: no session).
type sessionTouchRequest struct {
	TokenHash string `json:"token_hash"`
	IdleUntil int64  `json:"idle_until"`
}

type sessionTouchAnswer struct {
	IdleUntil int64 `json:"idle_until"`
}

// serveSessions is the admin API's sign-in and sign-out:
//
//	POST /admin/v1/sessions {"email","password"} → {"token","email","role","expires_at","idle_expires_at"}
//	POST /admin/v1/sessions/end  Authorization: Bearer <session token>
//
// They need no admin credential (the password is one); sign-in has its own
// rate limit and audit records.
func (s *Server) serveSessions(ctx *fasthttp.RequestCtx, route string) {
	if !ctx.IsPost() {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use POST"))
		return
	}
	if route == "sessions/end" {
		token, _ := strings.CutPrefix(string(ctx.Request.Header.Peek("Authorization")), "Bearer ")
		if _, ok := s.auth.Session(token, s.cfg.Now()); !ok {
			writeError(ctx, apierr.New(apierr.AdminAuth, "authorization", "session token missing, unknown or expired"))
			return
		}
		if err := s.auth.SignOutFrom(token, ctx.RemoteIP().String()); err != nil {
			writeError(ctx, s.errorFor("sign out", err))
			return
		}
		writeJSON(ctx, 200, map[string]string{"status": "signed out"})
		return
	}
	var req signInRequest
	if err := json.Unmarshal(ctx.PostBody(), &req, json.RejectUnknownMembers(true)); err != nil {
		writeError(ctx, apierr.New(apierr.BadBody, "body", `body must be a JSON object {"email","password"}`))
		return
	}
	s.answerSignIn(ctx, func() (string, operator.Session, error) {
		return s.auth.SignIn(req.Email, req.Password, ctx.RemoteIP().String(), s.cfg.Now())
	})
}

// answerSignIn writes the answer of a sign-in.
func (s *Server) answerSignIn(ctx *fasthttp.RequestCtx, signIn func() (string, operator.Session, error)) {
	token, sess, err := signIn()
	switch {
	case errors.Is(err, operator.ErrBadCredentials):
		writeError(ctx, apierr.New(apierr.SignInFailed, "credentials", "email or password wrong, or operator disabled"))
	case errors.Is(err, operator.ErrRateLimited):
		ctx.Response.Header.Set("Retry-After", "60")
		writeError(ctx, apierr.New(apierr.SignInLimited, "credentials", "too many sign-in attempts; wait and try again"))
	case errors.Is(err, errNoLeader):
		writeError(ctx, apierr.New(apierr.Unavailable, "cluster", "no leader could take the sign-in; retry"))
	case err != nil:
		writeError(ctx, s.errorFor("sign in", err))
	default:
		answer := signInAnswer{Token: token, Email: sess.Email, Role: string(sess.Role),
			ExpiresAt: sess.Expires.UTC().Format(time.RFC3339)}
		if !sess.IdleExpires.IsZero() {
			answer.IdleExpiresAt = sess.IdleExpires.UTC().Format(time.RFC3339)
		}
		writeJSON(ctx, 200, answer)
	}
}

// peerSignIn is /peer/v1/sign-in: a follower's SignIn, decided here (the
// leader) for the client address it names.
func (s *Server) peerSignIn(ctx *fasthttp.RequestCtx) {
	if !s.cfg.Cluster.Route().Self {
		writeError(ctx, apierr.New(apierr.Unavailable, "cluster", "this node is not the leader"))
		return
	}
	var req signInRequest
	if err := json.Unmarshal(ctx.PostBody(), &req); err != nil {
		writeError(ctx, apierr.New(apierr.BadBody, "body", "sign-in body"))
		return
	}
	s.answerSignIn(ctx, func() (string, operator.Session, error) {
		return s.auth.signInHere(req.Email, req.Password, sourceIP(ctx), s.cfg.Now())
	})
}

// peerSignOut is /peer/v1/sign-out: a follower's SignOut.
func (s *Server) peerSignOut(ctx *fasthttp.RequestCtx) {
	var req signOutRequest
	if err := json.Unmarshal(ctx.PostBody(), &req); err != nil || req.TokenHash == "" {
		writeError(ctx, apierr.New(apierr.BadBody, "body", "sign-out body"))
		return
	}
	if !s.cfg.Cluster.Route().Self {
		writeError(ctx, apierr.New(apierr.Unavailable, "cluster", "this node is not the leader"))
		return
	}
	if err := s.auth.endSession(req.TokenHash, sourceIP(ctx)); err != nil {
		writeError(ctx, s.errorFor("sign out", err))
		return
	}
	writeJSON(ctx, 200, map[string]string{"status": "signed out"})
}

// peerSessionTouch is /peer/v1/session-touch: a follower's renewal of a
// session's idle deadline (Auth.renew), proposed here (the leader). The
// deadline is the follower's; the log caps it at the session's expiry.
func (s *Server) peerSessionTouch(ctx *fasthttp.RequestCtx) {
	var req sessionTouchRequest
	if err := json.Unmarshal(ctx.PostBody(), &req); err != nil || req.TokenHash == "" || req.IdleUntil <= 0 {
		writeError(ctx, apierr.New(apierr.BadBody, "body", "session-touch body"))
		return
	}
	if !s.cfg.Cluster.Route().Self {
		writeError(ctx, apierr.New(apierr.Unavailable, "cluster", "this node is not the leader"))
		return
	}
	idle, err := s.auth.touchHere(req.TokenHash, req.IdleUntil)
	if err != nil {
		writeError(ctx, s.errorFor("renew session", err))
		return
	}
	writeJSON(ctx, 200, sessionTouchAnswer{IdleUntil: idle})
}

// callLeader POSTs body as JSON to path on the leader's peer service (the
// cluster port) and decodes a 200 answer into out. clientIP, if any, is
// the address the leader's audit record names.
func (s *Server) callLeader(path string, body any, clientIP string, out any) (int, error) {
	return s.callLeaderWithin(s.fwd.timeout, path, body, clientIP, out)
}

// callLeaderWithin is callLeader answered within timeout.
func (s *Server) callLeaderWithin(timeout time.Duration, path string, body any, clientIP string, out any) (int, error) {
	route := s.cfg.Cluster.Route()
	if route.LeaderRaft == "" {
		return 0, fmt.Errorf("%w: no leader", errNoLeader)
	}
	return s.callPeerWithin(timeout, route.LeaderRaft, path, body, clientIP, out)
}

// callPeer POSTs body as JSON to path on the member at raftAddr (its
// cluster port) and decodes a 200's answer into out.
func (s *Server) callPeer(raftAddr, path string, body any, clientIP string, out any) (int, error) {
	return s.callPeerWithin(s.fwd.timeout, raftAddr, path, body, clientIP, out)
}

// callPeerWithin is callPeer answered within timeout.
func (s *Server) callPeerWithin(timeout time.Duration, raftAddr, path string, body any, clientIP string, out any) (int, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + raftAddr + path)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set(ForwardedHeader, s.cfg.Cluster.SelfMember().NodeID)
	if clientIP != "" {
		req.Header.Set(clientIPHeader, clientIP)
	}
	req.SetBody(data)
	if err := s.fwd.client.DoTimeout(req, resp, timeout); err != nil {
		return 0, fmt.Errorf("%w: %v", errNoLeader, err)
	}
	if resp.StatusCode() == 200 && out != nil {
		if err := json.Unmarshal(resp.Body(), out); err != nil {
			return 0, fmt.Errorf("the leader's answer to %s: %w", path, err)
		}
	}
	return resp.StatusCode(), nil
}

// Record writes the audit record of a dashboard action (actor: the
// operator's email; result: what came of it, e.g. "200" or "403 1.02") and
// returns once it is committed, on the leader or asked of it. A dashboard
// must not show an action as done when this fails.
func (a *Auth) Record(actor, action, target, sourceIP, result string) error {
	return a.s.writeAudit(persistence.AuditRecord{Actor: actor, Action: action, Target: target,
		SourceIP: sourceIP, Result: result})
}
