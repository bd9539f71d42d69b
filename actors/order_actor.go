package actors

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/order/card"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/persistence/vault"
	"github.com/paygate/gateway/transport/acquirer"
)

// Proposer replicates a command and returns its applied result. The cluster
// node implements it; tests may use an in-memory one.
type Proposer interface {
	Propose(ctx context.Context, cmd *command.Cmd) (persistence.Result, error)
}

// Acquirer is what order actors need of the card acquirer: the outbound
// adapter in transport/acquirer (the sandbox; an ISO 8583 link next)
// satisfies it. It is declared here, by its consumer, so that the actors
// name only what they call and tests can hand them any implementation.
type Acquirer interface {
	// Authorize asks for an authorisation. A declined payment is a result,
	// not an error; an error is a transport failure (or ctx ended) and is
	// retried with the same Reference, on which the acquirer is idempotent.
	Authorize(ctx context.Context, req acquirer.AuthRequest) (acquirer.AuthResult, error)
	// Enrollment reports the issuer's 3-D Secure enrolment for a card.
	Enrollment(pan string) acquirer.Enrollment
	// CardInfo looks up brand, issuer, card type and issuer country.
	CardInfo(pan string) acquirer.CardInfo
	// Move sends a capture, reversal or refund recorded in the log. An
	// error is a transport failure: repeat the same request, which the
	// acquirer answers with its first answer.
	Move(ctx context.Context, req acquirer.MoveRequest) (acquirer.MoveResult, error)
}

// Reader is the read side of the store the actors need.
type Reader interface {
	GetOrder(merchant, id string) (*order.Order, error)
	CachedOrder(merchant, id string) *order.Order
	Token(token string) (*persistence.TokenRecord, error)
	Card(cardID string) ([]byte, error)
	Idempotency(merchant, key string) (*persistence.IdemRecord, error)
	MIDs // routes.go
}

// tokenInvalid refuses a payment_token that is unknown, expired or another
// merchant's.
var tokenInvalid = &order.Rejection{Kind: order.RejectTokenInvalid, Attribute: "payment_source.payment_token",
	Message: "payment_token is unknown, expired or belongs to another merchant"}

// Deps are what order actors share.
type Deps struct {
	Proposer Proposer
	Store    Reader
	Acquirer Acquirer
	Vault    *vault.Vault
	Logger   *slog.Logger
	// Now and NewID are the leader's sources of time and identifiers; they
	// are read here, before proposing, never in Apply.
	Now   func() time.Time
	NewID func() string
	// SettleUnit is the length of one settle.delay_hours hour.
	SettleUnit time.Duration
	// TokenTTL is how long a payment token stays usable.
	TokenTTL time.Duration
	// ProposeTimeout bounds one proposal.
	ProposeTimeout time.Duration
	// AuthAttempts bounds acquirer calls that fail in transport before the
	// order is declined 6.02.
	AuthAttempts int
	// ThreeDS configures 3-D Secure challenges (forms.go).
	ThreeDS ThreeDSConfig
}

// Create asks an order actor to create the order (charge, wallet payment).
type Create struct {
	Merchant    string
	OrderID     string
	RequestHash string
	Data        order.CreateData
	// Card is a card seen in this request (nil for a token payment). CVV,
	// of a card or a token payment, stays in memory only until the acquirer
	// call: no command carries it.
	Card  *vault.Card
	CVV   string
	Token string
	// Wallet carries wallet cryptogram data to the acquirer.
	Cryptogram, ECI string
}

// Operation asks for settle, void or refund.
type Operation struct {
	Kind             order.Kind
	Merchant         string
	OrderID          string
	Amount           int64
	RefundReasonCode string
	IdempotencyKey   string
	RequestHash      string
}

// Reply answers Create and Operation: the order, or the domain's rejection
// (Reject: the front end maps it to the error catalogue), or a failure (Err).
type Reply struct {
	Order  *order.Order
	TxnID  string
	Raw    []byte // the stored first answer of an idempotent repeat
	Reject *order.Rejection
	Err    error
}

// ResumeAuth asks the actor to finish an authorisation left pending (after a
// restart or a leadership change).
type ResumeAuth struct{}

// AutoSettle asks the actor to settle an order whose delay has ended.
type AutoSettle struct{}

// authAnswer is the acquirer's answer, with what the order said when the
// authorisation started that the outcome depends on (neither changes
// after creation), so applying it needs no read of the order.
type authAnswer struct {
	txnID            string
	res              acquirer.AuthResult
	issueToken       bool  // a card payment: approval issues a payment token
	settleDelayHours int64 // > 0: approval schedules the automatic settle
	// unanswered: no answer came in any attempt; the decline 6.02 records
	// the authorisation's reversal.
	unanswered bool
}

// orderActor serialises every operation on one order. It keeps no order
// state of its own: it reads the applied state from the store, decides, and
// proposes; the FSM's result is the truth it replies with. Blocking on a
// proposal blocks only this order's mailbox.
//
// It retires as soon as it is quiet (DESIGN.md, "Passivation"): nothing in
// its mailbox, no acquirer answer it is waiting for, no CVV held.
type orderActor struct {
	key       Key
	deps      *Deps
	reg       *Registry
	processed uint64
	// awaiting counts the acquirer answers this actor arranged to be sent
	// to it and has not received: it stays for them rather than have a
	// successor spawned to take them.
	awaiting int
	// held is the CVV of a payment waiting for its 3-D Secure answer: in
	// this actor's memory only, never stored (forms.go).
	held heldCVV
	// moving names the movements being repeated on a goroutine of this
	// actor's (moves.go), by transaction id.
	moving map[string]bool
	// term is the registry's term the actor was spawned in: it ends when
	// the registry stops its actors (leadership lost), and with it the
	// repeats this actor started.
	term context.Context
}

// NewOrderActorProducer returns the registry's actor factory.
func NewOrderActorProducer(deps *Deps, reg func() *Registry) func(Key) actor.Actor {
	return func(k Key) actor.Actor {
		r := reg()
		return &orderActor{key: k, deps: deps, reg: r, term: r.Term()}
	}
}

// Receive runs on whichever goroutine posts to the idle mailbox (registry.go):
// a request's caller, the acquirer's answer, a goroutine of Send's own.
// System messages (Started, Stopping) may run under a registry shard lock,
// so nothing here acts on them.
func (a *orderActor) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*envelope); ok {
		a.processed++
		a.handle(m)
		a.afterMessage(ctx, m)
	}
}

// afterMessage retires the actor when nothing is left for it to do, or else
// frees a request's caller from the messages queued behind its own.
//
// An actor holding a CVV for an open challenge stays until the challenge
// ends (the customer's answer or the scheduler's Expire reaches it), so the
// CVV is there for the authorisation. TryRetire refuses while messages are
// on their way, so nothing sent is lost to a stopping actor.
func (a *orderActor) afterMessage(ctx actor.Context, env *envelope) {
	if a.awaiting == 0 && !a.held.active(time.Now()) && a.reg.TryRetire(a.key, ctx.Self(), a.processed) {
		ctx.Stop(ctx.Self())
		return
	}
	if env.isRequest() {
		a.reg.HandOffQueued(a.key, ctx.Self(), a.processed)
	}
}

func (a *orderActor) handle(env *envelope) {
	switch m := env.msg.(type) {
	case *Create:
		env.respond(a.create(m))
	case *Operation:
		env.respond(a.operate(m))
	case *authAnswer:
		// A successor of the actor that asked takes the answer as well.
		a.awaiting = max(a.awaiting-1, 0)
		a.applyAuthAnswer(*m)
	case *moveAnswer:
		a.awaiting = max(a.awaiting-1, 0)
		a.applyMoveAnswer(*m)
	case ResumeAuth:
		a.resume()
	case AutoSettle:
		a.autoSettle()
	default:
		a.handleForm(env)
	}
}

func (a *orderActor) propose(cmd *order.Command) (persistence.Result, error) {
	return a.proposeCmd(&command.Cmd{Order: cmd})
}

// proposeCmd proposes an order command's wrapping, which a caller on the
// hot path allocates along with the command.
func (a *orderActor) proposeCmd(pc *command.Cmd) (persistence.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), a.deps.ProposeTimeout)
	defer cancel()
	return a.deps.Proposer.Propose(ctx, pc)
}

func (a *orderActor) create(m *Create) *Reply {
	// Only a cached order is checked here: a repeat of a recent request is
	// answered at once, and anything else is decided by the FSM, which
	// replays or refuses a create for an existing order. Reading Pebble for
	// every new order_id would cost a miss on the hot path for nothing.
	cur := a.deps.Store.CachedOrder(m.Merchant, m.OrderID)
	routeRefused := checkRoute(a.deps.Store, m.Merchant, &m.Data)
	if cur == nil && (m.Token != "" || routeRefused != nil) {
		// A token may have expired since it paid for this order, and an
		// expired token is refused before anything is proposed: a repeat of
		// the charge must still find its order (contract section 5), so a
		// token payment reads the store before it resolves the token. So
		// does a request the MID rules refuse: its order may have been made
		// before the merchant's MIDs were registered.
		var err error
		if cur, err = a.deps.Store.GetOrder(m.Merchant, m.OrderID); err != nil {
			return &Reply{Err: err}
		}
	}
	if cur != nil {
		// Same request again: the order as it stands; nothing is charged.
		if cur.RequestHash == m.RequestHash {
			return &Reply{Order: cur, TxnID: cur.Txns[0].ID}
		}
		_, out := order.Apply(cur, &order.Command{Kind: order.KindCreate, RequestHash: m.RequestHash})
		return &Reply{Order: cur, Reject: out.Reject}
	}
	if routeRefused != nil {
		return &Reply{Reject: routeRefused}
	}
	now := a.deps.Now()
	// The message is this actor's own and read once: its Data becomes the
	// command's as it is, rather than a copy of the whole CreateData. (The
	// message, card and CVV included, is then reachable for as long as the
	// command: until its proposal ends, which create waits for anyway.)
	data := &m.Data
	card := m.Card
	if m.Token != "" {
		rec, c, err := a.resolveToken(m.Merchant, m.Token, now)
		if err != nil {
			return &Reply{Err: err}
		}
		if rec == nil {
			return &Reply{Reject: tokenInvalid}
		}
		// The checks of a charge that need the card's brand, now that it is
		// known, before anything is proposed.
		if rej := order.CheckTokenCard(c.PAN, m.CVV, data.ThreeDS); rej != nil {
			return &Reply{Reject: rej}
		}
		billing := data.Source.Billing // the request's, if it gave one
		data.Source = rec.Source
		if billing != nil {
			data.Source.Billing = billing
		}
		data.Source.Type = "token"
		data.Source.PaymentToken = m.Token
		data.Source.TokenExpiresAt = rec.ExpiresAt
		card = c
	} else if card != nil {
		var err error
		if data.Source, data.SealedCard, err = a.sealNewCard(m.Merchant, card, data.Source); err != nil {
			return &Reply{Err: err}
		}
	}
	// The command, its wrapping and the reply in one allocation: the reply
	// is read as soon as the command's proposal has ended.
	p := &struct {
		cmd   order.Command
		wrap  command.Cmd
		reply Reply
	}{cmd: order.Command{
		Kind: order.KindCreate, Time: now.UnixNano(), Merchant: m.Merchant, OrderID: m.OrderID,
		TxnID: a.deps.NewID(), RequestHash: m.RequestHash, Create: data,
	}}
	p.wrap.Order = &p.cmd
	res, err := a.proposeCmd(&p.wrap)
	switch {
	case err != nil:
		p.reply = Reply{Err: err}
	case res.Outcome.Reject != nil || res.Outcome.Replay:
		p.reply = Reply{Order: res.Order, TxnID: res.Outcome.TxnID, Reject: res.Outcome.Reject}
	default:
		o := res.Order
		if card != nil {
			// 3-D Secure is decided before the acquirer is asked; a challenge
			// answers with the order in verify and its redirect_url.
			o = a.proceed(res.Order, *card, m.CVV, m.Cryptogram, m.ECI)
		}
		p.reply = Reply{Order: o, TxnID: res.Outcome.TxnID}
	}
	return &p.reply
}

// resolveToken finds a payment token's record and opens its card; a nil
// record and no error: the token is unknown, expired or another merchant's.
func (a *orderActor) resolveToken(merchant, token string, now time.Time) (*persistence.TokenRecord, *vault.Card, error) {
	rec, err := a.deps.Store.Token(token)
	if err != nil {
		return nil, nil, err
	}
	if rec == nil || rec.Merchant != merchant || rec.ExpiresAt <= now.UnixNano() {
		return nil, nil, nil
	}
	card, err := a.openCard(rec.Merchant, rec.CardID)
	if err != nil {
		return nil, nil, err
	}
	return rec, card, nil
}

func (a *orderActor) openCard(merchant, cardID string) (*vault.Card, error) {
	blob, err := a.deps.Store.Card(cardID)
	if err != nil {
		return nil, err
	}
	if blob == nil {
		return nil, fmt.Errorf("card %s missing from the vault", cardID)
	}
	c, err := a.deps.Vault.OpenCard(blob, vault.AAD(merchant, cardID))
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// sealNewCard gives a card seen for the first time its id, seals it for the
// vault (the command carries only the blob) and fills the displayable
// details on base.
func (a *orderActor) sealNewCard(merchant string, c *vault.Card, base order.PaymentSource) (order.PaymentSource, []byte, error) {
	cardID := a.deps.NewID()
	sealed, err := a.deps.Vault.SealCard(*c, vault.AAD(merchant, cardID))
	if err != nil {
		return order.PaymentSource{}, nil, err
	}
	return cardSource(base, c, cardID, a.deps.Acquirer.CardInfo(c.PAN)), sealed, nil
}

// cardSource fills the displayable card details; the PAN itself goes only
// into the sealed blob.
func cardSource(base order.PaymentSource, c *vault.Card, cardID string, info acquirer.CardInfo) order.PaymentSource {
	s := base
	if s.Type == "" {
		s.Type = "card" // wallet payments arrive with their own type
	}
	s.CardID = cardID
	s.BIN = c.PAN[:6]
	s.Masked = card.Mask(c.PAN)
	s.Brand = info.Brand
	s.Issuer = info.Issuer
	s.CardType = info.Type
	s.IssuerCountry = info.Country
	s.ExpMonth = c.ExpMonth
	s.ExpYear = c.ExpYear
	s.HolderName = c.HolderName
	return s
}

// startAuth calls the acquirer off the actor's goroutine; the answer comes
// back through the registry (to this actor, or a successor if it retired).
func (a *orderActor) startAuth(o *order.Order, card vault.Card, cvv, cryptogram, eci string) {
	c := &authCall{deps: a.deps, reg: a.reg, key: a.key,
		req: acquirer.AuthRequest{
			Reference: o.Pending.TxnID, PAN: card.PAN, ExpMonth: card.ExpMonth, ExpYear: card.ExpYear,
			HolderName: card.HolderName, CVV: cvv, Amount: o.Amount, Currency: o.Currency,
			Descriptor: o.Descriptor, MerchantID: o.Merchant, Cryptogram: cryptogram, ECI: eci,
			MID: o.ProcessingMID, AcquirerAddr: AcquirerAddr(a.deps.Store, o), Sale: o.SettleDelayHours == 0,
		},
		answer: authAnswer{txnID: o.Pending.TxnID, issueToken: o.Source.Type == "card", settleDelayHours: o.SettleDelayHours},
	}
	if t := o.Pending.ThreeDS; t != nil {
		c.req.ThreeDS = acquirer.ThreeDSData{Authenticated: t.CAVV != "", NonSecure: t.Enrolled == order.EnrolledNo,
			ECI: t.ECI, CAVV: t.CAVV, XID: t.XID, Version: t.Version}
	}
	a.awaiting++ // the answer comes back to this actor (or a successor)
	go c.run()
}

// authCall is startAuth's acquirer call, run on a goroutine of its own. The
// request and the answer it becomes share one allocation: the answer goes
// to the actor by pointer, so it is not copied into a message of its own.
type authCall struct {
	deps   *Deps
	reg    *Registry
	key    Key
	req    acquirer.AuthRequest
	answer authAnswer
}

func (c *authCall) run() {
	c.answer.res, c.answer.unanswered = authorize(c.deps, c.req)
	// The request, card and CVV, is not kept along with the answer.
	c.req = acquirer.AuthRequest{}
	c.reg.Deliver(c.key, &c.answer)
}

// authorize calls the acquirer, retrying transport failures with the same
// reference (the acquirer's idempotency key), then gives up as 6.02
// (unanswered: the caller has the authorisation reversed).
func authorize(deps *Deps, req acquirer.AuthRequest) (res acquirer.AuthResult, unanswered bool) {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := deps.Acquirer.Authorize(ctx, req)
		cancel()
		if err == nil {
			return res, false
		}
		if attempt >= deps.AuthAttempts {
			deps.Logger.Warn("acquirer unreachable, declining and reversing", "txn_id", req.Reference, "error", err)
			return acquirer.AuthResult{
				DeclineCode: acquirer.CodeAcquirerUnreachable, DeclineMessage: acquirer.MsgAcquirerUnreachable,
				AVSCheck: acquirer.AVSUnavailable, CVVCheck: acquirer.CVVNotProcessed,
			}, true
		}
		time.Sleep(backoff)
		backoff *= 2
	}
}

// applyAuthAnswer proposes the outcome without reading the order first: the
// FSM refuses an outcome for an authorisation that is no longer pending (a
// second answer after a resume), so a duplicate changes nothing.
func (a *orderActor) applyAuthAnswer(m authAnswer) {
	now := a.deps.Now()
	r := m.res
	// The command, its wrapping and its outcome in one allocation: they
	// live as long.
	proposal := &struct {
		cmd  order.Command
		wrap command.Cmd
		out  order.OutcomeData
	}{out: order.OutcomeData{
		Approved: r.Approved, AuthCode: r.AuthCode, AVSCheck: r.AVSCheck, CVVCheck: r.CVVCheck,
		RiskDecision: r.RiskDecision, DeclineCode: r.DeclineCode, DeclineMessage: r.DeclineMessage,
		Trace: r.Trace,
	}}
	out := &proposal.out
	if r.Approved {
		if m.issueToken {
			tok, err := vault.NewToken()
			if err != nil {
				a.deps.Logger.Error("issue token", "error", err)
				return
			}
			out.PaymentToken = tok
			out.TokenExpiresAt = now.Add(a.deps.TokenTTL).UnixNano()
		}
		if m.settleDelayHours > 0 {
			out.AutoSettleAt = now.Add(time.Duration(m.settleDelayHours) * a.deps.SettleUnit).UnixNano()
		}
	}
	proposal.cmd = order.Command{
		Kind: order.KindAuthOutcome, Time: now.UnixNano(), Merchant: a.key.Merchant, OrderID: a.key.OrderID,
		TxnID: m.txnID, ARN: r.ARN, Outcome: out,
	}
	if m.unanswered {
		// The acquirer may have decided it all the same: the decline
		// records its reversal, sent until acknowledged. A late approval
		// finds the authorisation no longer pending and changes nothing.
		proposal.cmd.Move = &order.Move{STAN: acquirer.STAN(m.txnID + "/reversal"), RRN: acquirer.RRN(m.txnID)}
	}
	proposal.wrap.Order = &proposal.cmd
	res, err := a.proposeCmd(&proposal.wrap)
	if err != nil {
		// Still pending in the log: the scheduler's next resume pass (or a
		// new leader) takes it on again with the same reference.
		a.deps.Logger.Warn("outcome not committed; left pending", "order_id", a.key.OrderID, "error", err)
		return
	}
	if res.Order != nil && m.unanswered {
		a.driveMoves(res.Order)
	}
}

func (a *orderActor) resume() {
	if a.awaiting > 0 {
		return // the acquirer's answer is on its way to this actor
	}
	cur, err := a.deps.Store.GetOrder(a.key.Merchant, a.key.OrderID)
	if err != nil || cur == nil {
		return
	}
	a.driveMoves(cur)
	if !cur.Pending.Due() {
		return // nothing pending, or waiting for the customer's 3-D Secure answer
	}
	card, err := a.openCard(cur.Merchant, cur.Source.CardID)
	if err != nil {
		a.deps.Logger.Error("resume authorisation: open card", "order_id", cur.ID, "error", err)
		return
	}
	// The CVV was never stored: the resumed call goes without it. A wallet
	// payment's one-time cryptogram is kept while pending, so it goes along.
	a.proceed(cur, *card, "", cur.Pending.WalletCryptogram, cur.WalletECI)
}

func (a *orderActor) autoSettle() {
	cur, err := a.deps.Store.GetOrder(a.key.Merchant, a.key.OrderID)
	now := a.deps.Now()
	if err != nil || cur == nil || cur.Status != order.StatusAuthorized ||
		cur.AutoSettleAt == 0 || cur.AutoSettleAt > now.UnixNano() {
		return
	}
	cmd := &order.Command{
		Kind: order.KindSettle, Auto: true, Time: now.UnixNano(), Merchant: cur.Merchant,
		OrderID: cur.ID, TxnID: a.deps.NewID(),
	}
	cmd.Move = newMove(cur, cmd.Kind, cmd.TxnID)
	r, err := a.propose(cmd)
	if err != nil {
		a.deps.Logger.Warn("auto-settle not committed; will retry", "order_id", cur.ID, "error", err)
		return
	}
	if r.Order != nil && r.Order.Movement(cmd.TxnID) != nil {
		autoSettlements.Inc()
		// One attempt here, so the schedule goes at the acquirer's pace;
		// without an answer it is repeated in the background.
		a.sendMove(r.Order, cmd.TxnID)
	}
}

// autoSettlements counts the automatic settlements this node committed.
var autoSettlements = metrics.GetOrCreateCounter(`gateway_auto_settlements_total`)

// firstAnswer is the reply that repeats an idempotency key's first answer:
// the stored body, or the same refusal.
func firstAnswer(rec *persistence.IdemRecord) *Reply {
	if rec.Reject != nil {
		return &Reply{Reject: rec.Reject}
	}
	return &Reply{Raw: rec.Response}
}

func (a *orderActor) operate(m *Operation) *Reply {
	if m.IdempotencyKey != "" {
		rec, err := a.deps.Store.Idempotency(m.Merchant, m.IdempotencyKey)
		if err != nil {
			return &Reply{Err: err}
		}
		if rec != nil {
			switch order.UseOfKey(rec.CreatedAt, rec.RequestHash, a.deps.Now().UnixNano(), m.RequestHash) {
			case order.KeyRepeat:
				return firstAnswer(rec)
			case order.KeyConflict:
				return &Reply{Reject: order.KeyConflictRejection()}
			}
		}
	}
	cur, err := a.deps.Store.GetOrder(m.Merchant, m.OrderID)
	if err != nil {
		return &Reply{Err: err}
	}
	cmd := &order.Command{
		Kind: m.Kind, Time: a.deps.Now().UnixNano(), Merchant: m.Merchant, OrderID: m.OrderID,
		TxnID: a.deps.NewID(), Amount: m.Amount, RefundReasonCode: m.RefundReasonCode,
		IdempotencyKey: m.IdempotencyKey, RequestHash: m.RequestHash,
	}
	cmd.Move = newMove(cur, cmd.Kind, cmd.TxnID)
	// Decide locally first: an illegal operation is refused without a trip
	// through the log. The FSM decides again on the committed command. With
	// an Idempotency-Key the refusal is the key's first answer, which a
	// repeat must get again, so the FSM decides and records it.
	if _, out := order.Apply(cur, cmd); out.Reject != nil && m.IdempotencyKey == "" {
		return &Reply{Order: cur, Reject: out.Reject}
	}
	res, err := a.propose(cmd)
	if err != nil {
		return &Reply{Err: err}
	}
	if res.Replayed != nil {
		return firstAnswer(res.Replayed)
	}
	if res.Outcome.Reject != nil {
		return &Reply{Order: res.Order, TxnID: res.Outcome.TxnID, Reject: res.Outcome.Reject}
	}
	return &Reply{Order: a.afterRecorded(res), TxnID: res.Outcome.TxnID}
}
