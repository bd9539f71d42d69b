package server

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/apierr"
)

// The audit log (contract 13; persistence/audit.go keeps the chain). Every
// state-changing admin call that passed authentication is recorded on the
// leader once it has been answered, whatever the answer: actor, action
// (method and route), target, source IP and result (the HTTP status and,
// for an error, its code). A call the token refuses is not recorded: an
// unauthenticated client could otherwise fill the replicated log.
//
// The actor is AdminTokenActor while the admin API knows one credential;
// operators' sign-ins and dashboard actions will record the operator.

// AdminTokenActor is the actor of a call authenticated by the admin token.
const AdminTokenActor = "admin-token"

// auditTargetKey is the user value a handler sets to name what it changed
// (the merchant it created, the delivery it sent again).
const auditTargetKey = "audit-target"

// auditAttempts bounds the proposals of one record: another record applied
// first makes the FSM refuse it, and the leader decides again.
const auditAttempts = 5

// auditLog serialises the leader's records, so that they rarely race.
type auditLog struct{ mu sync.Mutex }

// clientIPHeader carries the client's address on a request a follower
// forwards (forward.go), for the leader's audit record.
const clientIPHeader = "X-Gateway-Client-IP"

// sourceIP is the address the call came from: the client's, as the
// forwarding member saw it, for a call forwarded over the cluster port
// (a peer authenticated by its certificate; the header is ignored on any
// other connection).
func sourceIP(ctx *fasthttp.RequestCtx) string {
	if fromPeer(ctx) {
		if ip := ctx.Request.Header.Peek(clientIPHeader); len(ip) > 0 {
			return string(ip)
		}
	}
	return ctx.RemoteIP().String()
}

// auditTarget is what the call changed: what its handler named, else the
// body's node_id (the cluster operations), else the route.
func auditTarget(ctx *fasthttp.RequestCtx, route string) string {
	if t, ok := ctx.UserValue(auditTargetKey).(string); ok && t != "" {
		return t
	}
	var body struct {
		NodeID string `json:"node_id"`
	}
	if json.Unmarshal(ctx.PostBody(), &body) == nil && body.NodeID != "" {
		return "node:" + body.NodeID
	}
	return route
}

// auditResult is the answer's HTTP status, with the error code of an error.
func auditResult(ctx *fasthttp.RequestCtx) string {
	status := ctx.Response.StatusCode()
	res := strconv.Itoa(status)
	if status >= 400 {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(ctx.Response.Body(), &e) == nil && e.Error.Code != "" {
			res += " " + e.Error.Code
		}
	}
	return res
}

// recordAudit appends the call's record. A failure is logged: the call's
// own answer is already decided (docs/back-office.md).
func (s *Server) recordAudit(ctx *fasthttp.RequestCtx, actor, route string) {
	rec := persistence.AuditRecord{
		Actor: actor, Action: string(ctx.Method()) + " /admin/v1/" + route,
		Target: auditTarget(ctx, route), SourceIP: sourceIP(ctx), Result: auditResult(ctx),
	}
	if err := s.appendAudit(rec); err != nil {
		s.cfg.Logger.Error("audit record not written", "action", rec.Action, "target", rec.Target, "error", err)
	}
}

// appendAudit proposes rec as the record after the chain's applied end.
func (s *Server) appendAudit(rec persistence.AuditRecord) error {
	s.audit.mu.Lock()
	defer s.audit.mu.Unlock()
	var err error
	for range auditAttempts {
		var head persistence.AuditHead
		if head, err = s.cfg.Store.AuditHead(); err != nil {
			return err
		}
		rec.At = s.cfg.Now().UTC().Format(time.RFC3339Nano)
		next := head.Next(rec)
		var res persistence.Result
		res, err = s.cfg.Cluster.Propose(context.Background(), &command.Cmd{Audit: &next})
		if err == nil {
			err = res.Err
		}
		if !errors.Is(err, persistence.ErrAuditOutOfOrder) {
			return err
		}
	}
	return err
}

// auditListMax bounds one page of GET /admin/v1/audit.
const auditListMax = 1000

// serveAudit is GET /admin/v1/audit?after=SEQ&limit=N:
// {"records":[…],"next_after":SEQ|null}, from this node's applied state.
func (s *Server) serveAudit(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use GET to read the audit log"))
		return
	}
	args := ctx.QueryArgs()
	var verr *apierr.Error
	invalid := func(attr, msg string) {
		if verr == nil {
			verr = &apierr.Error{Code: apierr.Invalid}
		}
		verr.Add(attr, msg)
	}
	var after uint64
	if v := args.Peek("after"); len(v) > 0 {
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			invalid("after", "after should be a record's seq (0 or more)")
		}
		after = n
	}
	limit := 100
	if v := args.Peek("limit"); len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 1 || n > auditListMax {
			invalid("limit", "limit should be from 1 to "+strconv.Itoa(auditListMax))
		}
		limit = n
	}
	if verr != nil {
		writeError(ctx, verr)
		return
	}
	recs, more, err := s.cfg.Store.AuditRecords(after, limit)
	if err != nil {
		writeError(ctx, s.errorFor("audit", err))
		return
	}
	out := struct {
		Records   []persistence.AuditRecord `json:"records"`
		NextAfter *uint64                   `json:"next_after"`
	}{Records: recs}
	if out.Records == nil {
		out.Records = []persistence.AuditRecord{}
	}
	if more {
		out.NextAfter = &recs[len(recs)-1].Seq
	}
	writeJSON(ctx, 200, out)
}
