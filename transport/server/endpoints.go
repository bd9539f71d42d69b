package server

import (
	"bytes"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/actors"
	"github.com/paygate/gateway/cluster"
	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/vault"
	"github.com/paygate/gateway/transport/api"
	"github.com/paygate/gateway/transport/apierr"
)

// idempotencyKeyMax bounds the Idempotency-Key header, in characters.
const idempotencyKeyMax = 255

// call is one authenticated merchant request. body is fasthttp's own
// buffer, valid only while the request is handled: nothing kept or sent to
// an actor may point into it. Parse's values are copies (strings and
// order_metadata's raw values alike, TestParseKeepsNothingOfTheBody) and the
// hashes are computed at once, so no copy of the body is made per request.
type call struct {
	ctx      *fasthttp.RequestCtx
	merchant *Merchant
	body     []byte
	now      time.Time
}

// answer is an operation's result: a JSON body for HTTP 200, or an error.
type answer struct {
	body []byte
	// view, when set instead of body, is rendered straight into the
	// response's pooled body buffer: no copy of the order JSON per answer.
	view *order.View
	err  *apierr.Error
}

// endpoint serves one merchant operation on an authenticated body.
type endpoint func(s *Server, c call) answer

// operation builds an endpoint from its request type: decode strictly and
// validate, listing every violation at once (api.Parse), then dispatch. This is the one path every operation shares.
func operation[R any](validate func(*R, time.Time) *apierr.Error, dispatch func(*Server, *call, *R) answer) endpoint {
	return func(s *Server, c call) answer {
		// The call and its request in one allocation: they live as long.
		op := &struct {
			c   call
			req R
		}{c: c}
		if err := api.ParseInto(op.c.body, &op.req, func(r *R) *apierr.Error { return s.guardCallback(r, validate(r, op.c.now)) }); err != nil {
			return answer{err: err}
		}
		return dispatch(s, &op.c, &op.req)
	}
}

// orderCreating is a request that creates an order (charge, init-payment,
// wallet payments): it carries the shared order fields, callback_url too.
type orderCreating interface{ Shared() *api.OrderFields }

// guardCallback adds the callback guard's refusal of an order-creating
// request's callback_url to err, the request's other violations. The guard
// is part of validation, so one 422 2.01 lists every violation (contract
// section 3), not the others first and callback_url on the next attempt.
func (s *Server) guardCallback(r any, err *apierr.Error) *apierr.Error {
	if oc, ok := r.(orderCreating); ok {
		return api.WithCallbackGuard(err, oc.Shared(), s.cfg.CheckCallbackURL)
	}
	return err
}

// ignoreNow adapts a validator that needs no clock.
func ignoreNow[R any](f func(*R) *apierr.Error) func(*R, time.Time) *apierr.Error {
	return func(r *R, _ time.Time) *apierr.Error { return f(r) }
}

// merchantEndpoints lists every signed operation under /api/v3 and /api/v1.
// Feature files add theirs (walletEndpoints, formEndpoints, vendorEndpoints).
func (s *Server) merchantEndpoints() map[string]endpoint {
	eps := map[string]endpoint{
		"charge": operation(api.ValidateCharge, (*Server).charge),
		"settle": operation(ignoreNow(api.ValidateSettle), func(s *Server, c *call, r *api.SettleRequest) answer {
			// 0 (no amount) settles the whole authorised amount.
			return s.operate(c, order.KindSettle, *r.OrderID, deref(r.Amount), "")
		}),
		"void": operation(ignoreNow(api.ValidateVoid), func(s *Server, c *call, r *api.VoidRequest) answer {
			// 0 (no amount) voids the full amount; the order refuses any other.
			return s.operate(c, order.KindVoid, *r.OrderID, deref(r.Amount), "")
		}),
		"refund": operation(ignoreNow(api.ValidateRefund), func(s *Server, c *call, r *api.RefundRequest) answer {
			return s.operate(c, order.KindRefund, *r.OrderID, *r.Amount, deref(r.RefundReasonCode))
		}),
		"status":      operation(ignoreNow(api.ValidateStatus), (*Server).status),
		"list-orders": operation(ignoreNow(api.ValidateListOrders), (*Server).listOrders),
	}
	for _, extra := range []map[string]endpoint{s.walletEndpoints(), s.formEndpoints(), s.vendorEndpoints()} {
		for name, ep := range extra {
			eps[name] = ep
		}
	}
	return eps
}

// namedEndpoint is a merchant operation with its name, the one string its
// requests are counted and logged under.
type namedEndpoint struct {
	name  string
	serve endpoint
}

// endpointAt finds the merchant operation at path (/api/v3/<op> or
// /api/v1/<op>) without making a string of it.
func (s *Server) endpointAt(path []byte) (namedEndpoint, bool) {
	for _, prefix := range [...]string{"/api/v3/", "/api/v1/"} {
		if op, ok := bytes.CutPrefix(path, []byte(prefix)); ok {
			ep, known := s.endpoints[string(op)]
			return ep, known
		}
	}
	return namedEndpoint{}, false
}

// serveMerchant serves a request to /api/v3/ or /api/v1/: ep when known,
// else a request for no such operation.
func (s *Server) serveMerchant(ctx *fasthttp.RequestCtx, ep namedEndpoint, known bool) {
	start := time.Now()
	op := opUnknown
	if known {
		op = ep.name
	}
	status := s.serveOp(ctx, op, ep.serve, known)
	s.metrics.observe(op, status, start)
}

func (s *Server) serveOp(ctx *fasthttp.RequestCtx, op string, ep endpoint, known bool) int {
	fail := func(e *apierr.Error) int {
		writeError(ctx, e)
		return e.Code.HTTP
	}
	if !known {
		return fail(apierr.New(apierr.UnknownPath, "path", "no such operation"))
	}
	if !ctx.IsPost() {
		ctx.Response.Header.Set("Allow", "POST")
		return fail(apierr.New(apierr.MethodNotAllowed, "method", "use POST for this operation"))
	}
	// Followers relay to the leader, which authenticates and rate-limits.
	if handled, status := s.forward(ctx); handled {
		return status
	}
	m, aerr := s.authenticate(ctx)
	if aerr != nil {
		return fail(aerr)
	}
	if !m.limiter.Allow() {
		return fail(apierr.New(apierr.RateLimited, "merchant", "rate limit exceeded; retry after the Retry-After delay"))
	}
	a := ep(s, call{ctx: ctx, merchant: m, body: ctx.PostBody(), now: s.cfg.Now()})
	if a.err != nil {
		return fail(a.err)
	}
	if a.view != nil {
		writeView(ctx, a.view)
	} else {
		writeRaw(ctx, 200, a.body)
	}
	return 200
}

// reply renders an order actor's reply.
func (s *Server) reply(op string, r any, err error) answer {
	rep, aerr := s.actorReply(op, r, err)
	switch {
	case aerr != nil:
		return answer{err: aerr}
	case rep.Raw != nil:
		return answer{body: rep.Raw}
	}
	return answer{view: order.NewView(rep.Order, order.WithTxn, rep.TxnID)}
}

// actorReply unwraps an order actor's answer to a registry request: the
// reply, or the catalogue error for a failed request, a failure inside the
// actor or a state-machine rejection.
func (s *Server) actorReply(op string, r any, err error) (*actors.Reply, *apierr.Error) {
	if err != nil {
		return nil, s.errorFor(op, err)
	}
	rep := r.(*actors.Reply)
	switch {
	case rep.Err != nil:
		return nil, s.errorFor(op, rep.Err)
	case rep.Reject != nil:
		return nil, rejectionError(rep.Reject)
	}
	return rep, nil
}

func (s *Server) charge(c *call, r *api.ChargeRequest) answer {
	return s.pay(c, "charge", r, *r.Settle.DelayHours)
}

// pay creates an order from a card or token payment: a charge, or one of
// the vendor library's operations that are charges under other names
// (vendorEndpoints). op names the operation: the same bytes posted to
// another one are another request, 409 5.06 for that order_id, not the
// first one's order (a body with both payment_source and recurring_token
// is a charge and a recurring payment), while a charge keeps the
// un-namespaced hash its stored orders were made with.
func (s *Server) pay(c *call, op string, r *api.ChargeRequest, settleDelayHours int64) answer {
	hash := s.requestHash(c.body)
	if op != "charge" {
		hash = s.operationHash(op, c.body)
	}
	// The message and its card in one allocation: they live as long.
	withCard := &struct {
		msg  actors.Create
		card vault.Card
	}{msg: actors.Create{
		Merchant: c.merchant.ID, OrderID: *r.OrderID, RequestHash: hash,
		Data: createData(&r.OrderFields, settleDelayHours),
	}}
	msg := &withCard.msg
	ps := r.PaymentSource
	msg.Data.Source.Billing = address(ps.BillingAddress)
	// The CVV of either source goes to the acquirer in memory only (never
	// into the command); a token's is checked against its card by the actor.
	msg.CVV = deref(ps.CardCVV)
	switch *ps.Type {
	case "card":
		withCard.card = vault.Card{PAN: *ps.CardNumber, ExpMonth: twoDigitMonth(*ps.CardExpMonth),
			ExpYear: fourDigitYear(*ps.CardExpYear), HolderName: *ps.CardHolderName}
		msg.Card = &withCard.card
	case "token":
		msg.Token = *ps.PaymentToken
	}
	if t := r.ThreeDS; t != nil && t.MPIData != nil {
		msg.Data.ThreeDS = &order.ThreeDS{Version: api.MPIVersion(t.MPIData), ECI: deref(t.MPIData.ECI),
			CAVV: deref(t.MPIData.CAVV), XID: deref(t.MPIData.XID), AuthenticationResult: "Y"}
	}
	if t := r.ThreeDS; t != nil { // 3-D Secure decision: actors/forms.go
		msg.Data.ThreeDSForce = t.Force != nil && *t.Force
		msg.Data.AttemptNonSecure = t.AttemptNonSecure != nil && *t.AttemptNonSecure
	}
	res, err := s.cfg.Registry.Request(actors.Key{Merchant: c.merchant.ID, OrderID: *r.OrderID}, msg, s.cfg.RequestTimeout)
	return s.reply(op, res, err)
}

// createData copies the shared order fields into the create command, with
// the operation's settle delay (settle.delay_hours, or order.SettleManually
// for an auth, whose request has no settle). An
// order for a subscription product (subscription_product_id, a shared field
// of every order-creating request) gets its subscription_id here, once: a
// repeat of the request answers the order as it stands, id included.
func createData(f *api.OrderFields, settleDelayHours int64) order.CreateData {
	d := order.CreateData{
		Amount: *f.Amount, Currency: strings.ToUpper(*f.Currency), Description: *f.OrderDescription,
		Descriptor: deref(f.DynamicDescriptor), Website: deref(f.Website), ProcessingMID: *f.ProcessingMID,
		CallbackURL: deref(f.CallbackURL), SuccessURL: deref(f.SuccessURL), FailURL: deref(f.FailURL),
		SettleDelayHours: settleDelayHours,
	}
	if f.SubscriptionProductID != nil {
		d.SubscriptionID = uuid.NewString()
	}
	if f.Customer != nil {
		d.CustomerEmail = deref(f.Customer.Email)
	}
	return d
}

func address(a *api.Address) *order.Address {
	if a == nil {
		return nil
	}
	return &order.Address{Line1: deref(a.Line1), Line2: deref(a.Line2), City: deref(a.City),
		State: deref(a.State), Zip: deref(a.Zip), Country: deref(a.Country)}
}

func (s *Server) operate(c *call, kind order.Kind, orderID string, amount int64, reason string) answer {
	key := string(c.ctx.Request.Header.Peek("Idempotency-Key"))
	if !utf8.ValidString(key) {
		return answer{err: apierr.New(apierr.Invalid, "idempotency-key", "idempotency-key should be UTF-8 text")}
	}
	if utf8.RuneCountInString(key) > idempotencyKeyMax {
		return answer{err: apierr.New(apierr.Invalid, "idempotency-key", "idempotency-key should have at most 255 characters")}
	}
	msg := &actors.Operation{
		Kind: kind, Merchant: c.merchant.ID, OrderID: orderID, Amount: amount,
		RefundReasonCode: reason, IdempotencyKey: key,
	}
	if key != "" {
		msg.RequestHash = s.operationHash(string(kind), c.body)
	}
	res, err := s.moveMoney(msg)
	if repeatIsANewRefund(c.ctx) && outcomeUnknown(res, err) {
		return answer{err: refundOutcomeUnknown()}
	}
	return s.reply(string(kind), res, err)
}

// moveMoney asks the order's actor to settle, void or refund (the merchant
// API, and the back office on an operator's behalf).
func (s *Server) moveMoney(msg *actors.Operation) (any, error) {
	return s.cfg.Registry.Request(actors.Key{Merchant: msg.Merchant, OrderID: msg.OrderID}, msg, s.cfg.RequestTimeout)
}

// repeatIsANewRefund reports whether sending this request again could move
// money again: a refund without an Idempotency-Key (contract section 5).
// Every other operation is safe to repeat: a charge by its order_id, a keyed
// refund by its key, a settle or void by the order's status.
func repeatIsANewRefund(ctx *fasthttp.RequestCtx) bool {
	p := string(ctx.Path())
	return (p == "/api/v3/refund" || p == "/api/v1/refund") && len(ctx.Request.Header.Peek("Idempotency-Key")) == 0
}

// outcomeUnknown reports whether a request that failed may still take
// effect: its actor had not answered in time (the actor still runs it), or
// its command had reached raft before leadership was lost.
func outcomeUnknown(res any, err error) bool {
	if errors.Is(err, actors.ErrTimeout) {
		return true
	}
	rep, ok := res.(*actors.Reply)
	return ok && errors.Is(rep.Err, cluster.ErrOutcomeUnknown)
}

// refundOutcomeUnknown answers a refund of unknown outcome that a repeat
// would make twice: 503 6.02 says "safe to retry", which it is not.
func refundOutcomeUnknown() *apierr.Error {
	return apierr.New(apierr.Internal, "order_id", "the refund may have been made: read the order's refunded_amount "+
		"with status before sending it again (a refund sent with an Idempotency-Key can be repeated as it is)")
}

// status reads the applied state directly: reads never go through the log.
// They are linearizable because forward runs the leader's read barrier first.
func (s *Server) status(c *call, r *api.StatusRequest) answer {
	body, err := s.cfg.Store.OrderStatusJSON(c.merchant.ID, *r.OrderID)
	if err != nil {
		return answer{err: s.errorFor("status", err)}
	}
	if body == nil {
		return answer{err: orderNotFound()}
	}
	return answer{body: body}
}

// orderNotFound answers for an order_id this merchant has no order under
// (another merchant's order is not found either): 404 2.05, the code for
// that and nothing else (contract section 15).
func orderNotFound() *apierr.Error {
	return apierr.New(apierr.NotFound, "order_id", "order not found")
}

// deref is an optional member's value, its zero value when absent.
func deref[T any](p *T) T {
	var v T
	if p != nil {
		v = *p
	}
	return v
}

func twoDigitMonth(m string) string {
	if len(m) == 1 {
		return "0" + m
	}
	return m
}

func fourDigitYear(y string) string {
	if len(y) == 2 {
		return "20" + y
	}
	return y
}
