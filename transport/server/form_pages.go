package server

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/order/currency"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/transport/apierr"
)

// The pages are plain HTML, CSS and JavaScript embedded in the binary: no
// framework and no third-party resource, so a strict Content-Security-Policy
// holds (script and style only from the gateway itself, no inline script).

//go:embed formassets/pages.html formassets/form.css formassets/form.js
var formAssets embed.FS

var pageTemplates = template.Must(template.ParseFS(formAssets, "formassets/pages.html"))

// assets are the static files under /api/v3/form-assets/.
var assets = map[string]struct {
	path, contentType string
}{
	"form.js":  {"formassets/form.js", "text/javascript; charset=utf-8"},
	"form.css": {"formassets/form.css", "text/css; charset=utf-8"},
}

func (s *Server) serveAsset(ctx *fasthttp.RequestCtx, name string) {
	a, ok := assets[name]
	if !ok {
		writePageError(ctx, apierr.New(apierr.UnknownPath, "path", "no such path"))
		return
	}
	if !allowMethod(ctx, "GET") {
		return
	}
	body, err := formAssets.ReadFile(a.path)
	if err != nil {
		writePageError(ctx, s.errorFor("asset", err))
		return
	}
	ctx.Response.Header.Set("Cache-Control", "public, max-age=300")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.SetContentType(a.contentType)
	ctx.SetBody(body)
}

// websiteOrigin is the origin of the order's website (interface 2.1: the
// website where the order was placed): "https://shop.example" for
// "https://shop.example/cart" or for a bare "shop.example"; "" when it
// names no http(s) origin.
func websiteOrigin(website string) string {
	w := strings.TrimSpace(website)
	if w == "" {
		return ""
	}
	if !strings.Contains(w, "://") {
		w = "https://" + w
	}
	u, err := url.Parse(w)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		strings.ContainsAny(u.Host, " ;,'\"*") {
		return ""
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

// contentSecurityPolicy is every page's policy. Script, style, fetch and
// form posts go only to the gateway itself; no inline script. The pages may
// be framed (the form in a merchant's iframe; the issuer page inside it):
// by the order's website origin when it has one, by any site otherwise,
// matching the target of the page's message to its parent (contract 9a).
// X-Frame-Options is not sent: frame-ancestors supersedes it, and DENY or
// SAMEORIGIN would forbid the embedding the form is made for.
func contentSecurityPolicy(o *order.Order) string {
	ancestors := "*"
	if o != nil {
		if origin := websiteOrigin(o.Website); origin != "" {
			ancestors = "'self' " + origin
		}
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
		"form-action 'self'; base-uri 'none'; frame-ancestors " + ancestors
}

// pageConfig is the data the script reads from the page (a JSON block, not
// executed, so allowed by the policy).
type pageConfig struct {
	Mode         string            `json:"mode"` // pay, follow or static
	PayURL       string            `json:"payUrl,omitempty"`
	StatusURL    string            `json:"statusUrl,omitempty"`
	TargetOrigin string            `json:"targetOrigin"`
	Initial      *pageStatus       `json:"initial,omitempty"`
	Texts        map[string]string `json:"texts"`
}

// pageData is what the templates render.
type pageData struct {
	Lang        string
	Title       string
	T           map[string]string
	Merchant    string
	Description string
	Amount      string
	OrderID     string
	State       string // form: pay, follow or expired
	PayLabel    string
	StatusText  string
	Card        string
	Action      string
	Heading     string
	Text        string
	Config      pageConfig
}

func (s *Server) newPageData(o *order.Order) *pageData {
	lang := defaultLanguage
	if o != nil {
		lang = pageLanguage(o.Language)
	}
	d := &pageData{Lang: lang, T: pageTexts[lang]}
	d.Title = d.T["title_pay"]
	d.Config = pageConfig{Mode: "static", TargetOrigin: "*", Texts: scriptTexts(lang)}
	if o == nil {
		return d
	}
	if origin := websiteOrigin(o.Website); origin != "" {
		d.Config.TargetOrigin = origin
	}
	d.Merchant = o.Descriptor
	if d.Merchant == "" {
		if m := s.cfg.Merchants.ByID(o.Merchant); m != nil {
			d.Merchant = m.Name
		}
	}
	d.Description = o.Description
	exp := 2
	if c, ok := currency.Lookup(o.Currency); ok {
		exp = c.Exponent
	}
	d.Amount = formatAmount(o.Amount, o.Currency, exp, lang)
	d.OrderID = o.ID
	return d
}

func (s *Server) renderPage(ctx *fasthttp.RequestCtx, status int, name string, o *order.Order, d *pageData) {
	var buf bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&buf, name, d); err != nil {
		s.cfg.Logger.Error("render page", "page", name, "error", err)
		writePageError(ctx, apierr.New(apierr.Internal, "server", "internal error"))
		return
	}
	h := &ctx.Response.Header
	h.Set("Content-Security-Policy", contentSecurityPolicy(o))
	h.Set("Referrer-Policy", "no-referrer") // the token is in the address
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	ctx.SetStatusCode(status)
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.SetBody(buf.Bytes())
}

// renderFormPage is GET /api/v3/purchase/{token}: the form while it can be
// paid; once paid, the payment followed to its outcome; once expired, that.
func (s *Server) renderFormPage(ctx *fasthttp.RequestCtx, o *order.Order, rec *persistence.FormRecord, token string) {
	d := s.newPageData(o)
	base := purchasePrefix + token
	d.Config.StatusURL = base + "/status"
	switch {
	case o.Status == order.StatusExpired, o.Status == order.StatusCreated && s.formNow().UnixNano() >= o.FormExpiresAt:
		d.State = "expired"
	case o.Status == order.StatusCreated && !rec.Consumed:
		d.State = "pay"
		d.Config.Mode = "pay"
		d.Config.PayURL = base + "/pay"
		d.PayLabel = fmt.Sprintf(d.T["pay"], d.Amount)
	default:
		d.State = "follow"
		d.Config.Mode = "follow"
		d.Config.Initial = s.pageStatus(o)
		d.StatusText = d.Config.Texts["processing"]
	}
	s.renderPage(ctx, 200, "form", o, d)
}

// renderIssuerPage is the sandbox access control server's challenge.
func (s *Server) renderIssuerPage(ctx *fasthttp.RequestCtx, o *order.Order, id string) {
	d := s.newPageData(o)
	d.Title = d.T["issuer_title"]
	d.Card = o.Source.Masked
	d.Action = threeDSPrefix + id
	s.renderPage(ctx, 200, "issuer", o, d)
}

// renderResultPage follows the order after the challenge, tells the parent
// window and sends the customer to success_url or fail_url.
func (s *Server) renderResultPage(ctx *fasthttp.RequestCtx, o *order.Order, id string) {
	d := s.newPageData(o)
	d.Title = d.T["result_title"]
	d.Config.Mode = "follow"
	d.Config.StatusURL = threeDSPrefix + id + "/status"
	d.Config.Initial = s.pageStatus(o)
	d.StatusText = d.Config.Texts["processing"]
	s.renderPage(ctx, 200, "result", o, d)
}

// pageError answers a failure of a page (HTML, for people) or of one of the
// pages' calls (JSON, like every answer under /api/).
func (s *Server) pageError(ctx *fasthttp.RequestCtx, html bool, e *apierr.Error) {
	if !html {
		writePageError(ctx, e)
		return
	}
	d := s.newPageData(nil)
	d.Heading, d.Text = d.T["error_title"], ""
	if e.Code == apierr.NotFound {
		d.Heading, d.Text = d.T["not_found_title"], d.T["not_found_text"]
	} else {
		for _, attr := range e.Attributes() {
			d.Text = strings.Join(e.Messages[attr], " ")
			break
		}
	}
	d.Title = d.Heading
	if e.Code == apierr.RateLimited || e.Code == apierr.Unavailable {
		ctx.Response.Header.Set("Retry-After", "1")
	}
	s.renderPage(ctx, e.Code.HTTP, "message", nil, d)
}
