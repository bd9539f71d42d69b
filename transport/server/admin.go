package server

import (
	"context"
	"crypto/subtle"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/apierr"
	"github.com/paygate/gateway/transport/operator"
)

// serveAdmin routes /admin/v1. Admin errors share the merchant API's JSON
// shape and codes (apierr.AdminAuth for a missing or wrong credential).
//
// A call is authenticated by the admin token (every right) or an
// operator's session token (the rights of its role, operator.Role.Can of
// the route's action: routeAction), both as `Authorization: Bearer`.
func (s *Server) serveAdmin(ctx *fasthttp.RequestCtx, route string) {
	if route == "sessions" || route == "sessions/end" {
		s.serveSessions(ctx, route) // sessions.go: their own credentials and audit
		return
	}
	caller, ok := s.adminCaller(ctx)
	if !ok {
		writeError(ctx, apierr.New(apierr.AdminAuth, "authorization", "admin bearer token or operator session missing, wrong or expired"))
		return
	}
	write := !ctx.IsGet() && !ctx.IsHead()
	if action := routeAction(write, route); !caller.role.Can(action) {
		writeError(ctx, apierr.New(apierr.RoleForbidden, "role", fmt.Sprintf("role %s may not %s", caller.role, strings.ReplaceAll(string(action), "_", " "))))
		if write {
			s.recordAudit(ctx, caller.actor, route)
		}
		return
	}
	// Admin writes run on the leader; reads answer from this node.
	if write {
		ctx.SetUserValue(auditActorKey, caller.actor)
		if handled, _ := s.forward(ctx); handled {
			return
		}
		// The leader records every state-changing call before it answers.
		defer s.recordAudit(ctx, caller.actor, route)
	}
	s.routeAdmin(ctx, route)
}

// routeAdmin serves an authenticated admin call.
func (s *Server) routeAdmin(ctx *fasthttp.RequestCtx, route string) {
	if route == "audit" {
		s.serveAudit(ctx)
		return
	}
	if route == "webhooks" || strings.HasPrefix(route, "webhooks/") {
		s.serveWebhooks(ctx, strings.TrimPrefix(strings.TrimPrefix(route, "webhooks"), "/"))
		return
	}
	if route == "vault" {
		s.serveVault(ctx) // admin_vault.go
		return
	}
	if route == "backup" {
		s.serveBackup(ctx) // admin_backup.go
		return
	}
	if route == "orders" || route == "orders.csv" || strings.HasPrefix(route, "orders/") {
		s.serveOrders(ctx, route)
		return
	}
	if route == "operators" || strings.HasPrefix(route, "operators/") {
		s.serveOperators(ctx, strings.TrimPrefix(strings.TrimPrefix(route, "operators"), "/")) // operators.go
		return
	}
	if route == "mids" {
		s.serveMIDs(ctx) // admin_mids.go
		return
	}
	if route == "merchants" {
		switch {
		case ctx.IsPost():
			s.createMerchant(ctx)
		case ctx.IsGet():
			s.listMerchants(ctx) // operators.go
		default:
			writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use POST to create a merchant, GET to list them"))
		}
		return
	}
	if rest, ok := strings.CutPrefix(route, "merchants/"); ok {
		s.serveMerchantAdmin(ctx, rest) // admin_rotate.go
		return
	}
	// Routes with a path parameter register by their first segment.
	first := route
	if i := strings.IndexByte(route, '/'); i >= 0 {
		first = route[:i]
	}
	if h, ok := s.cfg.AdminRoutes[route]; ok {
		h(ctx)
		return
	}
	if h, ok := s.cfg.AdminRoutes[first+"/"]; ok {
		h(ctx)
		return
	}
	writeError(ctx, apierr.New(apierr.UnknownPath, "path", "no such admin route"))
}

// adminCaller is who makes an admin call: the actor its audit records
// name and the role whose rights it has.
type adminCaller struct {
	actor string
	role  operator.Role
}

// auditActorKey is the user value holding the caller's actor, which a
// follower sends with the call it forwards (actorHeader).
const auditActorKey = "audit-actor"

// actorHeader carries the actor of an admin call a follower forwards; the
// leader reads it only from a member on the cluster port.
const actorHeader = "X-Gateway-Actor"

// adminCaller authenticates an admin call: the admin token (compared in
// constant time; with none configured it is off), or a live operator
// session. A call a member forwarded was authenticated and checked by that
// member, which names its actor.
func (s *Server) adminCaller(ctx *fasthttp.RequestCtx) (adminCaller, bool) {
	if fromPeer(ctx) {
		actor := string(ctx.Request.Header.Peek(actorHeader))
		if actor == "" {
			actor = AdminTokenActor
		}
		return adminCaller{actor: actor, role: operator.Admin}, true
	}
	got, ok := strings.CutPrefix(string(ctx.Request.Header.Peek("Authorization")), "Bearer ")
	if !ok {
		return adminCaller{}, false
	}
	if operator.IsToken(got) {
		if sess, ok := s.auth.Session(got, s.cfg.Now()); ok {
			return adminCaller{actor: sess.Email, role: sess.Role}, true
		}
	}
	if s.cfg.AdminToken != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.AdminToken)) == 1 {
		return adminCaller{actor: AdminTokenActor, role: operator.Admin}, true
	}
	return adminCaller{}, false
}

// routeAction is the operator.Action an admin call asks for: the one
// place the admin API's routes meet the permission table. A route not
// named here needs ManageCluster (admin only), so a new route is closed
// to support and finance until it is placed.
func routeAction(write bool, route string) operator.Action {
	first, _, _ := strings.Cut(route, "/")
	switch {
	case route == "orders.csv":
		return operator.ExportCSV
	case first == "orders" && !write, route == "audit" && !write, first == "webhooks" && !write:
		return operator.SearchOrders
	case first == "webhooks" && strings.HasSuffix(route, "/redeliver"):
		return operator.ResendWebhook
	case first == "reconcile":
		return operator.Reconcile
	case first == "merchants":
		return operator.ManageMerchants
	case first == "operators":
		return operator.ManageOperators
	case first == "mids":
		return operator.ManageMIDs
	}
	return operator.ManageCluster
}

type createMerchantRequest struct {
	Name         string `json:"name"`
	RateLimitRPS int    `json:"rate_limit_rps"`
}

func (s *Server) createMerchant(ctx *fasthttp.RequestCtx) {
	var req createMerchantRequest
	if body := ctx.PostBody(); len(body) > 0 {
		// Unknown members are refused, as by the cluster operations: a
		// misspelt "rate_limit" would otherwise make a merchant at the
		// default limit without a word.
		if err := json.Unmarshal(body, &req, json.RejectUnknownMembers(true)); err != nil {
			writeError(ctx, apierr.New(apierr.BadBody, "body", "body must be a JSON object with name and rate_limit_rps, and nothing else"))
			return
		}
	}
	creds, aerr := s.newMerchant(ctx, req)
	if aerr != nil {
		writeError(ctx, aerr)
		return
	}
	ctx.SetUserValue(auditTargetKey, "merchant:"+creds.MerchantID)
	writeJSON(ctx, 200, creds)
}

// newMerchant validates req and proposes the merchant it describes, with
// new keys (the admin API and the dashboard).
func (s *Server) newMerchant(ctx context.Context, req createMerchantRequest) (Credentials, *apierr.Error) {
	var verr *apierr.Error
	if req.RateLimitRPS < 0 || req.RateLimitRPS > MaxRateLimitRPS {
		verr = apierr.New(apierr.Invalid, "rate_limit_rps", fmt.Sprintf("rate_limit_rps should be from 1 to %d (0 or absent: %d)", MaxRateLimitRPS, DefaultRateLimitRPS))
	}
	if utf8.RuneCountInString(req.Name) > 255 {
		if verr == nil {
			verr = &apierr.Error{Code: apierr.Invalid}
		}
		verr.Add("name", "name should have at most 255 characters")
	}
	if verr != nil {
		return Credentials{}, verr
	}
	rec, creds, err := NewMerchantRecord(s.cfg.Vault, "", req.Name, req.RateLimitRPS, s.cfg.Now())
	if err != nil {
		return creds, s.errorFor("create merchant", err)
	}
	if _, err := s.cfg.Cluster.Propose(ctx, &command.Cmd{Merchant: rec}); err != nil {
		return creds, s.errorFor("create merchant", err)
	}
	return creds, nil
}
