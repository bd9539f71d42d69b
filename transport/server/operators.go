package server

import (
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/apierr"
	"github.com/paygate/gateway/transport/operator"
)

// The back office's operators (contract 13), an admin's to manage:
//
//	POST /admin/v1/operators {"email","role","password"}  add one
//	GET  /admin/v1/operators                              list them (never a hash)
//	POST /admin/v1/operators/{email}/disable              disable one: its sessions end at once
//
// A disabled operator's record stays (the email keeps naming one person in
// the audit log) and the email cannot be added again.

type addOperatorRequest struct {
	Email    string `json:"email"`
	Role     string `json:"role"`
	Password string `json:"password"`
}

// OperatorView is an operator as the admin API shows it: no password hash.
type OperatorView struct {
	Email      string `json:"email"`
	Role       string `json:"role"`
	CreatedAt  string `json:"created_at"`
	Disabled   bool   `json:"disabled"`
	DisabledAt string `json:"disabled_at,omitempty"`
}

func operatorView(op *command.Operator) OperatorView {
	v := OperatorView{Email: op.Email, Role: op.Role, CreatedAt: time.Unix(0, op.CreatedAt).UTC().Format(time.RFC3339),
		Disabled: op.DisabledAt != 0}
	if v.Disabled {
		v.DisabledAt = time.Unix(0, op.DisabledAt).UTC().Format(time.RFC3339)
	}
	return v
}

// serveOperators routes /admin/v1/operators[/…] (rest: what follows).
func (s *Server) serveOperators(ctx *fasthttp.RequestCtx, rest string) {
	if rest == "" {
		switch {
		case ctx.IsGet():
			s.listOperators(ctx)
		case ctx.IsPost():
			s.addOperator(ctx)
		default:
			writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use GET to list operators, POST to add one"))
		}
		return
	}
	escaped, ok := strings.CutSuffix(rest, "/disable")
	email, err := url.PathUnescape(escaped)
	if !ok || err != nil || email == "" || strings.Contains(escaped, "/") {
		writeError(ctx, apierr.New(apierr.UnknownPath, "path", "no such admin route"))
		return
	}
	if !ctx.IsPost() {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use POST to disable an operator"))
		return
	}
	s.disableOperator(ctx, strings.ToLower(email))
}

func (s *Server) addOperator(ctx *fasthttp.RequestCtx) {
	var req addOperatorRequest
	if err := json.Unmarshal(ctx.PostBody(), &req, json.RejectUnknownMembers(true)); err != nil {
		writeError(ctx, apierr.New(apierr.BadBody, "body", `body must be a JSON object {"email","role","password"}, and nothing else`))
		return
	}
	var verr *apierr.Error
	invalid := func(attr, msg string) {
		if verr == nil {
			verr = &apierr.Error{Code: apierr.Invalid}
		}
		verr.Add(attr, msg)
	}
	email, ok := operator.NormalizeEmail(req.Email)
	if !ok {
		invalid("email", "email should be a plain address (local@domain.tld), at most 254 characters")
	}
	if !operator.Role(req.Role).Valid() {
		invalid("role", "role should be one of support, finance, admin")
	}
	if msg := operator.CheckPassword(req.Email, req.Password); msg != "" {
		invalid("password", msg)
	}
	if verr != nil {
		writeError(ctx, verr)
		return
	}
	ctx.SetUserValue(auditTargetKey, "operator:"+email)
	hash, err := operator.HashPassword(req.Password)
	if err != nil {
		writeError(ctx, s.errorFor("add operator", err))
		return
	}
	rec := &command.Operator{Email: email, Role: req.Role, PasswordHash: hash, CreatedAt: s.cfg.Now().UnixNano()}
	res, err := s.cfg.Cluster.Propose(ctx, &command.Cmd{Operator: rec})
	if err == nil {
		err = res.Err
	}
	if errors.Is(err, persistence.ErrOperatorExists) {
		writeError(ctx, apierr.New(apierr.OperatorExists, "email", "an operator with this email exists (a disabled one is kept)"))
		return
	}
	if err != nil {
		writeError(ctx, s.errorFor("add operator", err))
		return
	}
	writeJSON(ctx, 200, operatorView(rec))
}

func (s *Server) listOperators(ctx *fasthttp.RequestCtx) {
	ops, err := s.cfg.Store.Operators()
	if err != nil {
		writeError(ctx, s.errorFor("list operators", err))
		return
	}
	out := make([]OperatorView, 0, len(ops))
	for i := range ops {
		out = append(out, operatorView(&ops[i]))
	}
	writeJSON(ctx, 200, map[string]any{"operators": out})
}

func (s *Server) disableOperator(ctx *fasthttp.RequestCtx, email string) {
	ctx.SetUserValue(auditTargetKey, "operator:"+email)
	res, err := s.cfg.Cluster.Propose(ctx, &command.Cmd{Operator: &command.Operator{
		Email: email, Disable: true, DisabledAt: s.cfg.Now().UnixNano()}})
	if err == nil {
		err = res.Err
	}
	if errors.Is(err, persistence.ErrNoOperator) {
		writeError(ctx, apierr.New(apierr.NotFound, "email", "no operator with this email"))
		return
	}
	if err != nil {
		writeError(ctx, s.errorFor("disable operator", err))
		return
	}
	op, err := s.cfg.Store.Operator(email)
	if err != nil || op == nil {
		writeError(ctx, s.errorFor("disable operator", errors.Join(err, errors.New("operator vanished"))))
		return
	}
	writeJSON(ctx, 200, operatorView(op))
}

// MerchantView is a merchant as GET /admin/v1/merchants lists it: the
// public halves of its keys only (a secret is shown once, when made).
type MerchantView struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	RateLimitRPS     int    `json:"rate_limit_rps"`
	APIPublicKey     string `json:"api_public_key"`
	WebhookPublicKey string `json:"webhook_public_key"`
	CreatedAt        string `json:"created_at"`
}

// listMerchants is GET /admin/v1/merchants: {"merchants":[…]} by id, from
// this node's applied state.
func (s *Server) listMerchants(ctx *fasthttp.RequestCtx) {
	ms, err := s.cfg.Store.Merchants()
	if err != nil {
		writeError(ctx, s.errorFor("list merchants", err))
		return
	}
	out := make([]MerchantView, 0, len(ms))
	for _, m := range ms {
		out = append(out, MerchantView{ID: m.ID, Name: m.Name, RateLimitRPS: m.RateLimitRPS, APIPublicKey: m.APIPublicKey,
			WebhookPublicKey: m.WebhookPublicKey, CreatedAt: time.Unix(0, m.CreatedAt).UTC().Format(time.RFC3339)})
	}
	writeJSON(ctx, 200, map[string]any{"merchants": out})
}
