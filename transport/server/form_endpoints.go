package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/actors"
	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/vault"
	"github.com/paygate/gateway/transport/api"
	"github.com/paygate/gateway/transport/apierr"
)

// The hosted payment form and the sandbox 3-D Secure pages (interface 4.1,
// 4.2, 6.2; contract sections 1 and 9a). See docs/hosted-form.md.
//
//	POST {base_url}/init-payment                 signed: creates the order, answers form_url
//	GET  /api/v3/purchase/{token}                the form page (HTML)
//	POST /api/v3/purchase/{token}/pay            the card, as JSON: the charge pipeline
//	GET  /api/v3/purchase/{token}/status         the page follows the order
//	GET  /api/v3/3ds/{id}                        the sandbox issuer page (redirect_url)
//	POST /api/v3/3ds/{id}                        outcome=success|failure
//	GET  /api/v3/3ds/{id}/result, /status        the result page follows the order
//	GET  /api/v3/form-assets/{form.js,form.css}  the pages' own script and style
//
// The form's calls are authorised by the unguessable token, not by a
// signature; the token opens exactly one order and pays it at most once.

// FormConfig configures the hosted payment form and the sandbox 3-D Secure
// pages (contract sections 1 and 9a).
type FormConfig struct {
	// URL is {form_url}, the public address put into form_url (and, by the
	// actors, into redirect_url). No trailing slash.
	URL string
	// TTL is the lifetime of an unpaid form (--form-ttl; 0: 30 minutes).
	TTL time.Duration
	// Now is the clock of form expiry and card checks (nil: the server's).
	Now func() time.Time
}

// DefaultFormTTL is the form lifetime when none is configured.
const DefaultFormTTL = 30 * time.Minute

// Page paths.
const (
	purchasePrefix = "/api/v3/purchase/"
	threeDSPrefix  = "/api/v3/3ds/"
	assetPrefix    = "/api/v3/form-assets/"
)

// formTokenBytes is the length of a form token before encoding: 256 bits.
const formTokenBytes = 32

func (s *Server) formNow() time.Time {
	if s.cfg.Forms.Now != nil {
		return s.cfg.Forms.Now()
	}
	return s.cfg.Now()
}

func (s *Server) formTTL() time.Duration {
	if s.cfg.Forms.TTL > 0 {
		return s.cfg.Forms.TTL
	}
	return DefaultFormTTL
}

// formEndpoints are the signed operations of the hosted form.
func (s *Server) formEndpoints() map[string]endpoint {
	return map[string]endpoint{
		"init-payment": operation(ignoreNow(api.ValidateInitPayment), (*Server).initPayment),
	}
}

// formToken is the form token of an order: 256 bits of HMAC-SHA256 under a
// key derived from the cluster's request-hash key (replicated; it does not
// rotate with the vault key), over the merchant, the order id and the
// creation time the leader decided. Unguessable without the key, and the
// same for a repeated init-payment, which finds the order's creation time
// again; the store keeps only its SHA-256.
func (s *Server) formToken(merchant, orderID string, createdAt int64) string {
	k := hmac.New(sha256.New, s.hashing.Load().key)
	k.Write([]byte("hosted-form-token"))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write([]byte(merchant))
	m.Write([]byte{0})
	m.Write([]byte(orderID))
	m.Write([]byte{0})
	m.Write(binary.BigEndian.AppendUint64(nil, uint64(createdAt)))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:formTokenBytes])
}

// initPaymentAnswer is the init-payment response (interface 4.1), plus the
// order's status.
type initPaymentAnswer struct {
	OrderID        string       `json:"order_id"`
	Amount         int64        `json:"amount"`
	Currency       string       `json:"currency"`
	Status         order.Status `json:"status"`
	SubscriptionID string       `json:"subscription_id,omitempty"`
	PaymentForm    struct {
		FormURL string `json:"form_url"`
	} `json:"payment_form"`
}

func (s *Server) initPayment(c *call, r *api.InitPaymentRequest) answer {
	data := createData(&r.OrderFields, *r.Settle.DelayHours)
	if t := r.ThreeDS; t != nil {
		data.ThreeDSForce = t.Force != nil && *t.Force
		data.AttemptNonSecure = t.AttemptNonSecure != nil && *t.AttemptNonSecure
	}
	lang := ""
	if r.PaymentForm != nil && r.PaymentForm.Language != nil {
		lang = strings.ToLower(*r.PaymentForm.Language)
	}
	now := s.formNow()
	token := s.formToken(c.merchant.ID, *r.OrderID, now.UnixNano())
	msg := &actors.InitPayment{
		Merchant: c.merchant.ID, OrderID: *r.OrderID,
		// Namespaced: the same bytes posted to charge are another request.
		RequestHash: s.operationHash("init-payment", c.body),
		Time:        now, Data: data,
		Form: order.FormData{TokenHash: persistence.SecretHash(token), ExpiresAt: now.Add(s.formTTL()).UnixNano(), Language: lang},
	}
	res, err := s.cfg.Registry.Request(actors.Key{Merchant: c.merchant.ID, OrderID: *r.OrderID}, msg, s.cfg.RequestTimeout)
	rep, aerr := s.actorReply("init-payment", res, err)
	if aerr != nil {
		return answer{err: aerr}
	}
	o := rep.Order
	// A repeated request answers the stored order: its token derives from
	// the stored creation time.
	token = s.formToken(o.Merchant, o.ID, o.CreatedAt)
	if persistence.SecretHash(token) != o.FormTokenHash {
		return answer{err: s.errorFor("init-payment", errors.New("form token does not match the order"))}
	}
	a := initPaymentAnswer{OrderID: o.ID, Amount: o.Amount, Currency: o.Currency, Status: o.Status,
		SubscriptionID: o.SubscriptionID}
	a.PaymentForm.FormURL = s.cfg.Forms.URL + purchasePrefix + token
	body, err := marshalJSON(a)
	if err != nil {
		return answer{err: s.errorFor("init-payment", err)}
	}
	return answer{body: body}
}

// servePages serves the unsigned pages and the form's own calls under
// /api/v3/purchase/{token}/... and /api/v3/3ds/...; it reports whether it
// answered.
func (s *Server) servePages(ctx *fasthttp.RequestCtx, path string) bool {
	switch {
	case strings.HasPrefix(path, assetPrefix):
		s.serveAsset(ctx, path[len(assetPrefix):])
	case strings.HasPrefix(path, purchasePrefix):
		token, sub, _ := strings.Cut(path[len(purchasePrefix):], "/")
		s.serveForm(ctx, token, sub)
	case strings.HasPrefix(path, threeDSPrefix):
		id, sub, _ := strings.Cut(path[len(threeDSPrefix):], "/")
		s.serveIssuer(ctx, id, sub)
	default:
		return false
	}
	return true
}

// formOrder finds the order a form token opens (nil when none).
func (s *Server) formOrder(token string) (*order.Order, *persistence.FormRecord, error) {
	if token == "" || len(token) > 128 {
		return nil, nil, nil
	}
	rec, err := s.cfg.Store.FormByTokenHash(persistence.SecretHash(token))
	if err != nil || rec == nil {
		return nil, nil, err
	}
	o, err := s.cfg.Store.GetOrder(rec.Merchant, rec.OrderID)
	return o, rec, err
}

func (s *Server) serveForm(ctx *fasthttp.RequestCtx, token, sub string) {
	// A payment is a write: a follower relays it to the leader, which
	// answers. Pages and status reads are served from this node's applied
	// state.
	if sub == "pay" && ctx.IsPost() {
		if handled, _ := s.forward(ctx); handled {
			return
		}
	}
	o, rec, err := s.formOrder(token)
	if err != nil {
		s.pageError(ctx, sub == "", s.errorFor("form", err))
		return
	}
	if o == nil {
		s.pageError(ctx, sub == "", apierr.New(apierr.NotFound, "token", "no payment form at this address"))
		return
	}
	switch sub {
	case "":
		if !allowMethod(ctx, "GET") {
			return
		}
		s.renderFormPage(ctx, o, rec, token)
	case "status":
		if !allowMethod(ctx, "GET") {
			return
		}
		writePageJSON(ctx, 200, s.pageStatus(o))
	case "pay":
		if !allowMethod(ctx, "POST") {
			return
		}
		s.formPay(ctx, o)
	default:
		writePageError(ctx, apierr.New(apierr.UnknownPath, "path", "no such path"))
	}
}

// formPay runs the customer's card through the charge pipeline: strict
// decoding, the charge's validation of a card payment_source, the order's
// actor, one replicated form_submit command, then the same 3-D Secure
// decision and authorisation as a charge.
func (s *Server) formPay(ctx *fasthttp.RequestCtx, o *order.Order) {
	// A JSON content type forces a CORS preflight on cross-site posts, which
	// this endpoint never answers: only the gateway's own page can pay.
	if ct := string(ctx.Request.Header.ContentType()); !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		writePageError(ctx, apierr.New(apierr.BadBody, "content-type", "content-type should be application/json"))
		return
	}
	now := s.formNow()
	body := append([]byte(nil), ctx.PostBody()...)
	req, perr := api.Parse(body, func(r *api.FormCardRequest) *apierr.Error {
		api.NormalizeFormCard(r)
		return api.ValidateFormCard(r, now)
	})
	if perr != nil {
		writePageError(ctx, perr)
		return
	}
	// A form that can no longer be paid (paid, declined, expired) answers
	// from the applied state, as its actor would: posts to it, whoever
	// sends them, do not use up the merchant's rate limit for the pages,
	// which its customers paying on other forms need. The actor decides
	// again, and the log after it.
	if rej := order.FormSubmitRefused(o, now.UnixNano()); rej != nil {
		writePageError(ctx, rejectionError(rej))
		return
	}
	// Only a card that may pay an open form counts against the limit.
	if m := s.cfg.Merchants.ByID(o.Merchant); m != nil && m.pageLimiter != nil && !m.pageLimiter.Allow() {
		writePageError(ctx, apierr.New(apierr.RateLimited, "merchant", "rate limit exceeded; retry after the Retry-After delay"))
		return
	}
	msg := &actors.FormPayment{
		Merchant: o.Merchant, OrderID: o.ID,
		Card: vault.Card{PAN: *req.CardNumber, ExpMonth: twoDigitMonth(*req.CardExpMonth),
			ExpYear: fourDigitYear(*req.CardExpYear), HolderName: *req.CardHolderName},
		CVV: deref(req.CardCVV),
	}
	res, err := s.cfg.Registry.Request(actors.Key{Merchant: o.Merchant, OrderID: o.ID}, msg, s.cfg.RequestTimeout)
	a := s.reply("form-pay", res, err)
	if a.err != nil {
		writePageError(ctx, a.err)
		return
	}
	writePageJSON(ctx, 200, s.pageStatus(res.(*actors.Reply).Order))
}

// pageStatus is what the pages may know of an order: never the payment
// token, the card id or anything the merchant alone should see.
type pageStatus struct {
	OrderID  string         `json:"order_id"`
	Status   order.Status   `json:"status"`
	Amount   int64          `json:"amount"`
	Currency string         `json:"currency"`
	Decline  *order.Decline `json:"decline,omitempty"`
	// RedirectURL is the issuer page while a 3-D Secure challenge is open.
	RedirectURL string `json:"redirect_url,omitempty"`
	// Final is set once the payment attempt has its outcome; ReturnURL is
	// then success_url or fail_url with order_id and status, when given.
	Final     bool   `json:"final"`
	ReturnURL string `json:"return_url,omitempty"`
}

func (s *Server) pageStatus(o *order.Order) *pageStatus {
	p := &pageStatus{OrderID: o.ID, Status: o.Status, Amount: o.Amount, Currency: o.Currency,
		Decline: o.Decline, Final: o.Status.Final()}
	if o.Pending != nil && o.Pending.Challenge != "" {
		p.RedirectURL = o.RedirectURL
	}
	if p.Final {
		p.ReturnURL = returnURL(o)
	}
	return p
}

// returnURL is where the customer goes once the payment attempt has its
// outcome: success_url for a payment that went through, fail_url for a
// declined one, with order_id and status added to the query. An expired
// form was never paid: the page shows it and sends nobody anywhere.
func returnURL(o *order.Order) string {
	var raw string
	switch o.Status {
	case order.StatusDeclined:
		raw = o.FailURL
	case order.StatusAuthorized, order.StatusSettled, order.StatusVoided, order.StatusRefunded:
		raw = o.SuccessURL
	}
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	q := u.Query()
	q.Set("order_id", o.ID)
	q.Set("status", string(o.Status))
	u.RawQuery = q.Encode()
	return u.String()
}

// challengeOrder finds the order of a 3-D Secure challenge id.
func (s *Server) challengeOrder(id string) (*order.Order, error) {
	if id == "" || len(id) > 128 {
		return nil, nil
	}
	ref, err := s.cfg.Store.ChallengeOrder(id)
	if err != nil || ref == nil {
		return nil, err
	}
	return s.cfg.Store.GetOrder(ref.Merchant, ref.OrderID)
}

func (s *Server) serveIssuer(ctx *fasthttp.RequestCtx, id, sub string) {
	if sub == "" && ctx.IsPost() {
		// The customer's answer is a write: on a follower the leader applies
		// it; the relayed answer has no Location, so send the browser on to
		// the result page here (it follows the order wherever it stands).
		if handled, status := s.forward(ctx); handled {
			if status == fasthttp.StatusSeeOther {
				seeOther(ctx, threeDSPrefix+id+"/result")
			}
			return
		}
	}
	o, err := s.challengeOrder(id)
	if err != nil {
		s.pageError(ctx, sub != "status", s.errorFor("3ds", err))
		return
	}
	if o == nil {
		s.pageError(ctx, sub != "status", apierr.New(apierr.NotFound, "id", "no 3-D Secure authentication at this address"))
		return
	}
	open := o.Pending != nil && o.Pending.Challenge == id
	switch sub {
	case "":
		switch {
		case ctx.IsGet() && open:
			s.renderIssuerPage(ctx, o, id)
		case ctx.IsGet():
			seeOther(ctx, threeDSPrefix+id+"/result")
		case ctx.IsPost():
			s.issuerAnswer(ctx, o, id, open)
		default:
			allowMethod(ctx, "GET, POST")
		}
	case "result":
		if allowMethod(ctx, "GET") {
			s.renderResultPage(ctx, o, id)
		}
	case "status":
		if allowMethod(ctx, "GET") {
			writePageJSON(ctx, 200, s.pageStatus(o))
		}
	default:
		writePageError(ctx, apierr.New(apierr.UnknownPath, "path", "no such path"))
	}
}

// issuerAnswer applies the customer's choice on the sandbox issuer page and
// sends the browser to the result page (POST/redirect/GET), which follows the
// order to its outcome.
func (s *Server) issuerAnswer(ctx *fasthttp.RequestCtx, o *order.Order, id string, open bool) {
	if open {
		outcome := string(ctx.PostArgs().Peek("outcome"))
		if outcome != "success" && outcome != "failure" {
			s.pageError(ctx, true, apierr.New(apierr.Invalid, "outcome", "outcome should be success or failure"))
			return
		}
		if m := s.cfg.Merchants.ByID(o.Merchant); m != nil && m.pageLimiter != nil && !m.pageLimiter.Allow() {
			s.pageError(ctx, true, apierr.New(apierr.RateLimited, "merchant", "rate limit exceeded; retry after the Retry-After delay"))
			return
		}
		msg := &actors.ThreeDSAnswer{ChallengeID: id, Authenticated: outcome == "success"}
		res, err := s.cfg.Registry.Request(actors.Key{Merchant: o.Merchant, OrderID: o.ID}, msg, s.cfg.RequestTimeout)
		if a := s.reply("3ds", res, err); a.err != nil {
			s.pageError(ctx, true, a.err)
			return
		}
	}
	seeOther(ctx, threeDSPrefix+id+"/result")
}

// seeOther sends the browser on to path on this host (POST/redirect/GET).
// The Location is relative: fasthttp's Redirect makes it absolute from the
// request's own scheme and Host, and behind a proxy that ends TLS that is
// http://, which the pages' form-action 'self' forbids after an https post
// (and would send the challenge id in clear).
func seeOther(ctx *fasthttp.RequestCtx, path string) {
	ctx.Response.Header.Set("Location", path)
	ctx.SetStatusCode(fasthttp.StatusSeeOther)
}

// allowMethod accepts the request's method when it is one of methods
// ("GET, POST"), compared whole: "OST" or "" is not POST. HEAD goes with GET.
func allowMethod(ctx *fasthttp.RequestCtx, method string) bool {
	m := string(ctx.Method())
	for _, allowed := range strings.Split(method, ", ") {
		if m == allowed || (m == "HEAD" && allowed == "GET") {
			return true
		}
	}
	ctx.Response.Header.Set("Allow", method)
	writePageError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use "+method+" for this path"))
	return false
}

// writePageJSON answers one of the pages' own calls. Like the operations'
// answers it is JSON; it is never cached.
func writePageJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	writeJSON(ctx, status, v)
}

func writePageError(ctx *fasthttp.RequestCtx, e *apierr.Error) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeError(ctx, e)
}
