// Package dashboard is the back office's web pages at /dashboard/ (contract
// 13): sign-in, orders (search, one order with its transactions and
// notifications, resend, settle, void, refund), merchants, MIDs, failed
// notifications, the cluster and the audit log.
//
// It holds no business logic of its own: everything it reads or changes
// goes through Backend, which the front end implements with the functions
// behind the admin API, and every operator is signed in by an
// operator.Authenticator. What it adds is the web's part:
//
//   - Pages are rendered on the server (html/template) and work without
//     JavaScript; the stylesheet and one small script (times in the
//     viewer's zone) are embedded and served from /dashboard/assets/, so the
//     Content-Security-Policy allows nothing from another origin and no
//     inline script or style.
//   - The session cookie is HttpOnly, SameSite=Strict, Secure under TLS,
//     scoped to /dashboard/. Signing in always issues a new token and
//     ends the one the browser held (no session fixation).
//   - Every POST carries a CSRF token, checked before anything else: the
//     session's (operator.Session.CSRF), or on the sign-in form a
//     double-submit token bound to a short-lived cookie.
//   - Every action is checked on the server with Role.Can, whatever the
//     page showed, and is an audit record whose actor is the operator's
//     e-mail (refusals included). Sign-ins and sign-outs are audited by
//     the Authenticator.
//   - Writes run on the leader: a follower relays the whole request
//     (Backend.Leader), which the leader checks again.
package dashboard

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/transport/apierr"
	"github.com/paygate/gateway/transport/operator"
)

// Prefix is where the dashboard is served.
const Prefix = "/dashboard/"

const (
	// sessionCookie holds the Authenticator's session token.
	sessionCookie = "pg_session"
	// signInCookie holds the sign-in form's double-submit CSRF token.
	signInCookie = "pg_signin"
	// csrfField is every form's CSRF field.
	csrfField = "csrf"
	// signInTokenTTL bounds how long a drawn sign-in form can be posted.
	signInTokenTTL = 30 * time.Minute
	// formFieldMax bounds one form value, in bytes (a name, an e-mail).
	formFieldMax = 512
)

//go:embed assets/*.html assets/app.css assets/app.js
var assetsFS embed.FS

// contentSecurityPolicy: nothing from another origin, no inline script or
// style, forms post only here, never framed.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// Config is what the dashboard needs.
type Config struct {
	Backend Backend
	// Auth signs operators in; nil: no operators exist on this node, and
	// every page says so.
	Auth   operator.Authenticator
	Logger *slog.Logger
	// Now is the clock (tests may replace it).
	Now func() time.Time
}

// Dashboard serves /dashboard/.
type Dashboard struct {
	cfg   Config
	pages *template.Template
}

// New builds the dashboard.
func New(cfg Config) *Dashboard {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Dashboard{cfg: cfg, pages: template.Must(template.New("").Funcs(funcs).ParseFS(assetsFS, "assets/*.html"))}
}

// request is one request being served.
type request struct {
	ctx  *fasthttp.RequestCtx
	sess operator.Session
	// token is the session's cookie value.
	token string
}

// Handler serves a request under /dashboard/.
func (d *Dashboard) Handler(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	route := strings.TrimPrefix(strings.TrimPrefix(path, "/dashboard"), "/")
	if name, ok := strings.CutPrefix(route, "assets/"); ok {
		d.serveAsset(ctx, name)
		return
	}
	if !ctx.IsGet() && !ctx.IsHead() && !ctx.IsPost() {
		ctx.Response.Header.Set("Allow", "GET, POST")
		d.plain(ctx, fasthttp.StatusMethodNotAllowed, "Method not allowed.")
		return
	}
	if d.cfg.Auth == nil {
		d.plain(ctx, fasthttp.StatusServiceUnavailable, "The dashboard needs operators, and this node has none configured.")
		return
	}
	// Writes run on the leader; a follower relays the request and its answer.
	if ctx.IsPost() && d.cfg.Backend.Leader(ctx) {
		return
	}
	if route == "sign-in" {
		d.serveSignIn(ctx)
		return
	}
	r := &request{ctx: ctx, token: string(ctx.Request.Header.Cookie(sessionCookie))}
	sess, ok := d.cfg.Auth.Session(r.token, d.cfg.Now())
	if !ok {
		if ctx.IsPost() {
			d.plain(ctx, fasthttp.StatusForbidden, "Your session has ended: sign in again.")
			return
		}
		target := "/dashboard/sign-in"
		if route != "" {
			target += "?next=" + url.QueryEscape(string(ctx.RequestURI()))
		}
		seeOther(ctx, target)
		return
	}
	r.sess = sess
	if ctx.IsPost() && !csrfMatches(string(ctx.PostArgs().Peek(csrfField)), sess.CSRF) {
		d.refuse(r, fasthttp.StatusForbidden, "The form's security token is missing or wrong. Reload the page and try again.")
		return
	}
	d.route(r, route)
}

// route serves a signed-in operator's request.
func (d *Dashboard) route(r *request, route string) {
	post := r.ctx.IsPost()
	parts := strings.Split(route, "/")
	switch {
	case route == "" && !post:
		seeOther(r.ctx, "/dashboard/orders")
	case route == "sign-out" && post:
		d.signOut(r)
	case route == "orders" && !post:
		d.ordersPage(r)
	case len(parts) == 3 && parts[0] == "orders" && !post:
		d.orderPage(r, parts[1], parts[2], "", 0)
	case len(parts) == 4 && parts[0] == "orders" && post:
		d.moveMoney(r, parts[1], parts[2], parts[3])
	case len(parts) == 3 && parts[0] == "notifications" && parts[2] == "resend" && post:
		d.resend(r, parts[1])
	case route == "notifications" && !post:
		d.failedPage(r)
	case route == "merchants":
		if post {
			d.createMerchant(r)
		} else {
			d.merchantsPage(r, nil, "", 0)
		}
	case route == "mids" && !post:
		d.midsPage(r)
	case route == "cluster" && !post:
		d.clusterPage(r)
	case route == "audit" && !post:
		d.auditPage(r)
	default:
		d.render(r, fasthttp.StatusNotFound, "error", "Not found", map[string]any{"Message": "There is no such page."})
	}
}

// csrfMatches compares a form's token with the expected one in constant time.
func csrfMatches(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// allowed checks the operator's role for a; when it may not, it audits the
// refusal and answers 403.
func (d *Dashboard) allowed(r *request, a operator.Action, target string) bool {
	if r.sess.Role.Can(a) {
		return true
	}
	if r.ctx.IsPost() {
		d.audit(r, target, "403 forbidden")
	}
	d.render(r, fasthttp.StatusForbidden, "error", "Not allowed", map[string]any{
		"Message": "Your role (" + string(r.sess.Role) + ") may not do this. Ask an admin if you need it."})
	return false
}

// refuse answers a refused POST (audited) with a page.
func (d *Dashboard) refuse(r *request, status int, msg string) {
	d.audit(r, "", strconv.Itoa(status)+" csrf")
	d.render(r, status, "error", "Refused", map[string]any{"Message": msg})
}

// audit records a dashboard action. result is the HTTP status and, for a
// refusal, its code (as the admin API's records say it).
func (d *Dashboard) audit(r *request, target, result string) {
	action := "POST " + string(r.ctx.Path())
	if target == "" {
		target = string(r.ctx.Path())
	}
	rec := persistence.AuditRecord{Actor: r.sess.Email, Action: action, Target: target,
		SourceIP: d.cfg.Backend.SourceIP(r.ctx), Result: result}
	if err := d.cfg.Backend.Audit(rec); err != nil {
		d.cfg.Logger.Error("audit record not written", "action", action, "target", target, "error", err)
	}
}

// resultOf is an audit result for err: "200", or the status and code of
// the refusal.
func resultOf(err error) string {
	if err == nil {
		return "200"
	}
	var ae *apierr.Error
	if errors.As(err, &ae) {
		return strconv.Itoa(ae.Code.HTTP) + " " + ae.Code.Code
	}
	return "500"
}

// errorText is what an operator is told of err: the catalogue's messages,
// never an internal error's details (those are logged).
func (d *Dashboard) errorText(op string, err error) string {
	var ae *apierr.Error
	if errors.As(err, &ae) {
		var msgs []string
		for _, attr := range ae.Attributes() {
			msgs = append(msgs, ae.Messages[attr]...)
		}
		if len(msgs) > 0 {
			return strings.Join(msgs, "; ")
		}
		return ae.Code.Code
	}
	d.cfg.Logger.Error("dashboard", "op", op, "error", err)
	return "Something went wrong on the server; it has been logged. Try again."
}

// newKey is a random URL-safe token (CSRF of the sign-in form, a form's
// idempotency key).
func newKey() string {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// setCookie sets a dashboard cookie: HttpOnly, SameSite=Strict, path
// /dashboard/, Secure when the client came over TLS. A zero expiry makes a
// browser-session cookie; a past one deletes it.
func (d *Dashboard) setCookie(ctx *fasthttp.RequestCtx, name, value string, expires time.Time) {
	c := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(c)
	c.SetKey(name)
	c.SetValue(value)
	c.SetPath(Prefix)
	c.SetHTTPOnly(true)
	c.SetSameSite(fasthttp.CookieSameSiteStrictMode)
	c.SetSecure(d.cfg.Backend.SecureClient(ctx))
	if !expires.IsZero() {
		c.SetExpire(expires)
	}
	ctx.Response.Header.SetCookie(c)
}

// serveSignIn is the sign-in page and its form.
func (d *Dashboard) serveSignIn(ctx *fasthttp.RequestCtx) {
	next := safeNext(string(ctx.QueryArgs().Peek("next")))
	if !ctx.IsPost() {
		d.signInPage(ctx, fasthttp.StatusOK, next, "", "")
		return
	}
	args := ctx.PostArgs()
	if next = safeNext(string(args.Peek("next"))); next == "" {
		next = "/dashboard/orders"
	}
	email, password := string(args.Peek("email")), string(args.Peek("password"))
	cookie := string(ctx.Request.Header.Cookie(signInCookie))
	if !csrfMatches(string(args.Peek(csrfField)), cookie) {
		d.signInPage(ctx, fasthttp.StatusForbidden, next, email, "The form's security token is missing or wrong. Try again.")
		return
	}
	if len(email) > formFieldMax || len(password) > formFieldMax {
		d.signInPage(ctx, fasthttp.StatusUnprocessableEntity, next, "", "E-mail or password too long.")
		return
	}
	// A session the browser already holds is ended, never carried over:
	// whoever set that cookie (a shared machine, a planted token) gets
	// nothing of the new sign-in.
	if old := string(ctx.Request.Header.Cookie(sessionCookie)); old != "" {
		if err := d.cfg.Auth.SignOut(old); err != nil {
			d.cfg.Logger.Warn("dashboard: ending the previous session", "error", err)
		}
	}
	token, _, err := d.cfg.Auth.SignIn(email, password, d.cfg.Backend.SourceIP(ctx), d.cfg.Now())
	switch {
	case errors.Is(err, operator.ErrRateLimited):
		ctx.Response.Header.Set("Retry-After", "60")
		d.signInPage(ctx, fasthttp.StatusTooManyRequests, next, email, "Too many attempts. Wait a minute and try again.")
		return
	case errors.Is(err, operator.ErrBadCredentials):
		d.signInPage(ctx, fasthttp.StatusUnauthorized, next, email, "E-mail or password is wrong, or the operator is disabled.")
		return
	case err != nil:
		d.signInPage(ctx, fasthttp.StatusServiceUnavailable, next, email, d.errorText("sign in", err))
		return
	}
	d.setCookie(ctx, signInCookie, "", time.Unix(1, 0))
	d.setCookie(ctx, sessionCookie, token, time.Time{})
	seeOther(ctx, next)
}

// safeNext keeps a post-sign-in target only when it is a dashboard page
// (no open redirect).
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return ""
	}
	return next
}

func (d *Dashboard) signInPage(ctx *fasthttp.RequestCtx, status int, next, email, msg string) {
	token := newKey()
	d.setCookie(ctx, signInCookie, token, d.cfg.Now().Add(signInTokenTTL))
	d.render(&request{ctx: ctx}, status, "sign-in", "Sign in", map[string]any{
		"CSRF": token, "Next": next, "Email": email, "Error": msg})
}

// signerOutFrom is an Authenticator whose sign-out records the client's
// address (the node's does).
type signerOutFrom interface {
	SignOutFrom(token, sourceIP string) error
}

func (d *Dashboard) signOut(r *request) {
	// The Authenticator audits sign-outs, as it does sign-ins, with the
	// client's address when it can take one.
	var err error
	if a, ok := d.cfg.Auth.(signerOutFrom); ok {
		err = a.SignOutFrom(r.token, d.cfg.Backend.SourceIP(r.ctx))
	} else {
		err = d.cfg.Auth.SignOut(r.token)
	}
	if err != nil {
		d.render(r, fasthttp.StatusServiceUnavailable, "error", "Sign out", map[string]any{"Message": d.errorText("sign out", err)})
		return
	}
	d.setCookie(r.ctx, sessionCookie, "", time.Unix(1, 0))
	seeOther(r.ctx, "/dashboard/sign-in")
}

// layout is what every page's frame renders.
type layout struct {
	Title   string
	Session operator.Session
	Nav     []navItem
	Page    any
}

type navItem struct {
	Href, Label string
	Active      bool
}

// nav is the menu: only the pages the role may open.
func nav(r *request) []navItem {
	if r.sess.Email == "" {
		return nil
	}
	path := string(r.ctx.Path())
	items := []struct {
		href, label string
		a           operator.Action
	}{
		{"/dashboard/orders", "Orders", operator.SearchOrders},
		{"/dashboard/notifications", "Failed notifications", operator.SearchOrders},
		{"/dashboard/merchants", "Merchants", operator.ManageMerchants},
		{"/dashboard/mids", "MIDs", operator.ManageMIDs},
		{"/dashboard/cluster", "Cluster", operator.ManageCluster},
		{"/dashboard/audit", "Audit log", operator.SearchOrders},
	}
	var out []navItem
	for _, it := range items {
		if r.sess.Role.Can(it.a) {
			out = append(out, navItem{Href: it.href, Label: it.label, Active: strings.HasPrefix(path, it.href)})
		}
	}
	return out
}

// render writes a page in the frame with the dashboard's headers.
func (d *Dashboard) render(r *request, status int, name, title string, page any) {
	var buf bytes.Buffer
	err := d.pages.ExecuteTemplate(&buf, name, layout{Title: title, Session: r.sess, Nav: nav(r), Page: page})
	if err != nil {
		d.cfg.Logger.Error("dashboard: render", "page", name, "error", err)
		d.plain(r.ctx, fasthttp.StatusInternalServerError, "The page could not be drawn; it has been logged.")
		return
	}
	securityHeaders(r.ctx)
	r.ctx.SetStatusCode(status)
	r.ctx.SetContentType("text/html; charset=utf-8")
	r.ctx.SetBody(buf.Bytes())
}

func securityHeaders(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
}

// plain answers a short text page (no template: also when one failed).
func (d *Dashboard) plain(ctx *fasthttp.RequestCtx, status int, msg string) {
	securityHeaders(ctx)
	ctx.SetStatusCode(status)
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString(msg + "\n")
}

// assetTypes are the static files under /dashboard/assets/.
var assetTypes = map[string]string{
	"app.css": "text/css; charset=utf-8",
	"app.js":  "text/javascript; charset=utf-8",
}

func (d *Dashboard) serveAsset(ctx *fasthttp.RequestCtx, name string) {
	ct, ok := assetTypes[name]
	if !ok || !(ctx.IsGet() || ctx.IsHead()) {
		d.plain(ctx, fasthttp.StatusNotFound, "No such asset.")
		return
	}
	body, err := assetsFS.ReadFile("assets/" + name)
	if err != nil {
		d.plain(ctx, fasthttp.StatusInternalServerError, "Asset unreadable.")
		return
	}
	securityHeaders(ctx)
	ctx.Response.Header.Set("Cache-Control", "public, max-age=300")
	ctx.SetContentType(ct)
	ctx.SetBody(body)
}

// opContext bounds a write the dashboard asks of the backend.
func opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 15*time.Second)
}

// seeOther redirects to a dashboard path. The Location is relative:
// fasthttp's Redirect makes it absolute from the request's host, which on
// a request a follower relayed is the leader's cluster address.
func seeOther(ctx *fasthttp.RequestCtx, path string) {
	ctx.Response.Header.Set("Location", path)
	ctx.SetStatusCode(fasthttp.StatusSeeOther)
}
