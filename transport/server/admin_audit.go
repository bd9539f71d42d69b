package server

import (
	"context"
	"errors"
	"fmt"
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

// recordAudit writes the call's record before its answer leaves (fasthttp
// sends the answer once the handler returns). If no record can be written
// the answer is replaced by a 500 that says so: a 200 means the change and
// its record are both in the log (docs/back-office.md).
func (s *Server) recordAudit(ctx *fasthttp.RequestCtx, actor, route string) {
	rec := persistence.AuditRecord{
		Actor: actor, Action: string(ctx.Method()) + " /admin/v1/" + route,
		Target: auditTarget(ctx, route), SourceIP: sourceIP(ctx), Result: auditResult(ctx),
	}
	if err := s.writeAudit(rec); err != nil {
		s.cfg.Logger.Error("audit record not written", "actor", rec.Actor, "action", rec.Action, "target", rec.Target,
			"source_ip", rec.SourceIP, "result", rec.Result, "error", err)
		if ctx.Response.StatusCode() < 400 {
			ctx.Response.Header.Del("Retry-After")
			writeError(ctx, apierr.New(apierr.Internal, "audit", "the change was made, but its audit record could not be written "+
				"(no leader); the node's log has the record: check the change before repeating it"))
		}
	}
}

// auditWriteWithin bounds how long writeAudit waits for a leader: a
// leadership change takes a few election timeouts.
const auditWriteWithin = 10 * time.Second

// writeAudit appends rec to the chain and returns once it is committed:
// on this node if it leads, else on the leader, asked over the cluster
// port (/peer/v1/audit), retrying while leadership moves. A record asked
// of a leader that applied it but whose answer was lost is appended again
// on the retry: a duplicate, never a loss.
func (s *Server) writeAudit(rec persistence.AuditRecord) error {
	c := s.cfg.Cluster
	if c == nil {
		return errors.New("no cluster")
	}
	deadline := time.Now().Add(auditWriteWithin)
	for {
		var err error
		if c.Route().Self {
			err = s.appendAudit(rec)
		} else if !c.InConfiguration() {
			err = s.auditThroughFormerMembers(rec)
		} else {
			var status int
			if status, err = s.callLeader("/peer/v1/audit", rec, "", nil); err == nil && status != 200 {
				err = fmt.Errorf("the leader answered %d", status)
			}
		}
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// auditThroughFormerMembers sends rec to whichever of the members this
// node last knew leads now. A leader that removed itself is out of the
// configuration and knows no leader, yet its removal must be recorded: the
// members it left still accept a call on their cluster port (its
// certificate is the cluster CA's), and the one that leads appends it.
func (s *Server) auditThroughFormerMembers(rec persistence.AuditRecord) error {
	members, err := s.cfg.Cluster.Members()
	if err != nil {
		return err
	}
	self := s.cfg.Cluster.SelfMember().NodeID
	err = fmt.Errorf("%w: none of the members this node knew leads", errNoLeader)
	for _, m := range members {
		if m.ID == self || m.RaftAddr == "" {
			continue
		}
		status, cerr := s.callPeer(m.RaftAddr, "/peer/v1/audit", rec, "", nil)
		if cerr == nil && status == 200 {
			return nil
		}
	}
	return err
}

// peerAudit is /peer/v1/audit: a member's record, appended here (the
// leader). The member authenticated the call it records.
func (s *Server) peerAudit(ctx *fasthttp.RequestCtx) {
	var rec persistence.AuditRecord
	if err := json.Unmarshal(ctx.PostBody(), &rec); err != nil {
		writeError(ctx, apierr.New(apierr.BadBody, "body", "an audit record"))
		return
	}
	if !s.cfg.Cluster.Route().Self {
		writeError(ctx, apierr.New(apierr.Unavailable, "cluster", "this node is not the leader"))
		return
	}
	if err := s.appendAudit(rec); err != nil {
		writeError(ctx, s.errorFor("audit", err))
		return
	}
	writeJSON(ctx, 200, map[string]string{"status": "recorded"})
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
