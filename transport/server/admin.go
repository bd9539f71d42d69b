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
)

// serveAdmin routes /admin/v1. Admin errors share the merchant API's JSON
// shape and codes (apierr.AdminAuth for a missing or wrong token).
func (s *Server) serveAdmin(ctx *fasthttp.RequestCtx, route string) {
	// A member forwards an admin write it authorised itself (forward.go).
	if !fromPeer(ctx) && !s.adminAuthorized(ctx) {
		writeError(ctx, apierr.New(apierr.AdminAuth, "authorization", "admin bearer token missing or wrong"))
		return
	}
	// Admin writes run on the leader; reads answer from this node.
	if !ctx.IsGet() && !ctx.IsHead() {
		if handled, _ := s.forward(ctx); handled {
			return
		}
		// The leader records every state-changing call, once answered.
		defer s.recordAudit(ctx, AdminTokenActor, route)
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
	if route == "mids" {
		s.serveMIDs(ctx) // admin_mids.go
		return
	}
	if route == "merchants" {
		if !ctx.IsPost() {
			writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use POST to create a merchant"))
			return
		}
		s.createMerchant(ctx)
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

// adminAuthorized checks the bearer token in constant time. With no token
// configured the admin API is off.
func (s *Server) adminAuthorized(ctx *fasthttp.RequestCtx) bool {
	if s.cfg.AdminToken == "" {
		return false
	}
	got, ok := strings.CutPrefix(string(ctx.Request.Header.Peek("Authorization")), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.AdminToken)) == 1
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
