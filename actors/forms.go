package actors

import (
	"crypto/rand"
	"encoding/base64"
	"time"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/vault"
	"github.com/paygate/gateway/transport/acquirer"
)

// The hosted form and 3-D Secure, in the order actor.
//
// A payment, from a charge or from the form, becomes "pending" with its
// create (or form submit) command. proceed then takes it on, once, on the
// actor that holds the card in memory: it decides 3-D Secure before the
// acquirer is asked, because the sandbox acquirer (like a real one) binds a
// reference to its first answer: an unauthenticated call for a card that
// needs 3-D Secure would be declined for good.
//
//	pending already authenticated (mpi_data, a 3-D Secure result) or
//	downgraded, or a wallet payment                      → acquirer
//	issuer enrolled, or three_ds.force                   → challenge: verify, redirect_url
//	issuer not enrolled, force and attempt_non_secure    → non-secure (enrolled "N") → acquirer
//	issuer not enrolled otherwise                        → declined 5.01, acquirer never asked
//	an ordinary card without force                       → acquirer
//
// After a restart the scheduler resumes only due authorisations
// (order.PendingAuth.Due): proceed decides again from the stored order, which
// gives the same answer; an order waiting in verify is left to its customer
// (or to the expiry schedule).

// ThreeDSConfig configures 3-D Secure challenges.
type ThreeDSConfig struct {
	// URLBase is {form_url}; a challenge's redirect_url is
	// URLBase + "/api/v3/3ds/" + its id.
	URLBase string
	// TTL is how long a challenge waits for the customer before it counts
	// as not authenticated (0: DefaultChallengeTTL).
	TTL time.Duration
}

// DefaultChallengeTTL is the challenge lifetime when none is configured.
const DefaultChallengeTTL = 30 * time.Minute

// Values of the sandbox access control server (the issuer page).
const (
	ACSVersion = "2.2.0"
	// AuthenticationResult values: Y authenticated, N not authenticated
	// (the customer failed the challenge), U not completed in time.
	AuthResultYes     = "Y"
	AuthResultNo      = "N"
	AuthResultTimeout = order.AuthenticationTimedOut
)

// InitPayment asks the order actor to create an order that waits for its
// hosted form (init-payment).
type InitPayment struct {
	Merchant    string
	OrderID     string
	RequestHash string
	// Time is the creation time, decided with the form token (the front
	// end derives the token from it, so a repeated request finds it again).
	Time time.Time
	Data order.CreateData
	Form order.FormData
}

// FormPayment is the card a customer entered on the hosted form. The CVV
// stays in memory until the acquirer call.
type FormPayment struct {
	Merchant string
	OrderID  string
	Card     vault.Card
	CVV      string
}

// ThreeDSAnswer is the customer's answer on the issuer page.
type ThreeDSAnswer struct {
	ChallengeID   string
	Authenticated bool
}

// Expire asks the actor to end an unpaid form, or a 3-D Secure challenge
// nobody answered, whose time is up.
type Expire struct{}

// heldCVV is the CVV of the payment waiting for a 3-D Secure answer.
type heldCVV struct {
	txnID string
	cvv   string
	until time.Time
}

func (h *heldCVV) active(now time.Time) bool { return h.txnID != "" && now.Before(h.until) }

// take returns the CVV held for txnID ("" if none) and forgets it.
func (h *heldCVV) take(txnID string) string {
	cvv := ""
	if h.txnID == txnID {
		cvv = h.cvv
	}
	*h = heldCVV{}
	return cvv
}

func (a *orderActor) handleForm(env *envelope) {
	switch m := env.msg.(type) {
	case *InitPayment:
		env.respond(a.initPayment(m))
	case *FormPayment:
		env.respond(a.formPayment(m))
	case *ThreeDSAnswer:
		env.respond(a.threeDSAnswer(m))
	case Expire:
		a.expire()
	}
}

func (a *orderActor) challengeTTL() time.Duration {
	if a.deps.ThreeDS.TTL > 0 {
		return a.deps.ThreeDS.TTL
	}
	return DefaultChallengeTTL
}

func (a *orderActor) initPayment(m *InitPayment) *Reply {
	cur, err := a.deps.Store.GetOrder(m.Merchant, m.OrderID)
	if err != nil {
		return &Reply{Err: err}
	}
	cmd := &order.Command{
		Kind: order.KindInitPayment, Time: m.Time.UnixNano(), Merchant: m.Merchant, OrderID: m.OrderID,
		RequestHash: m.RequestHash, Create: &m.Data, Form: &m.Form,
	}
	if cur != nil {
		// The same request again answers the order as it stands; another
		// one is a conflict. Decided locally: nothing to replicate.
		_, out := order.Apply(cur, cmd)
		return &Reply{Order: cur, Reject: out.Reject}
	}
	if rej := checkRoute(a.deps.Store, m.Merchant, &m.Data); rej != nil {
		return &Reply{Reject: rej}
	}
	res, err := a.propose(cmd)
	if err != nil {
		return &Reply{Err: err}
	}
	return &Reply{Order: res.Order, Reject: res.Outcome.Reject}
}

func (a *orderActor) formPayment(m *FormPayment) *Reply {
	cur, err := a.deps.Store.GetOrder(m.Merchant, m.OrderID)
	if err != nil {
		return &Reply{Err: err}
	}
	now := a.deps.Now()
	cmd := &order.Command{
		Kind: order.KindFormSubmit, Time: now.UnixNano(), Merchant: m.Merchant, OrderID: m.OrderID,
		TxnID: a.deps.NewID(), Submit: &order.SubmitData{},
	}
	// Decide locally first: a used or expired form seals nothing and sends
	// nothing through the log. The FSM decides again on the committed command.
	if rej := order.FormSubmitRefused(cur, cmd.Time); rej != nil {
		return &Reply{Order: cur, Reject: rej}
	}
	source, sealed, err := a.sealNewCard(m.Merchant, &m.Card, order.PaymentSource{})
	if err != nil {
		return &Reply{Err: err}
	}
	cmd.Submit = &order.SubmitData{Source: source, SealedCard: sealed}
	res, err := a.propose(cmd)
	if err != nil {
		return &Reply{Err: err}
	}
	if res.Outcome.Reject != nil {
		return &Reply{Order: res.Order, Reject: res.Outcome.Reject}
	}
	o := a.proceed(res.Order, m.Card, m.CVV, "", "")
	return &Reply{Order: o, TxnID: res.Outcome.TxnID}
}

// threeDSStep is what proceed does with a pending authorisation.
type threeDSStep uint8

const (
	stepAuthorize threeDSStep = iota // to the acquirer as it is
	stepChallenge                    // the customer authenticates first
	stepNonSecure                    // downgrade, then to the acquirer
	stepDecline                      // 3-D Secure required and impossible: 5.01
)

// decideThreeDS is the 3-D Secure decision for a payment not yet
// authenticated (contract section 7).
func decideThreeDS(e acquirer.Enrollment, force, attemptNonSecure bool) threeDSStep {
	switch {
	case e == acquirer.Enrolled:
		return stepChallenge
	case e == acquirer.NotEnrolled && force && attemptNonSecure:
		return stepNonSecure
	case e == acquirer.NotEnrolled:
		return stepDecline
	case force:
		return stepChallenge
	}
	return stepAuthorize
}

// proceed takes a due authorisation on (see the file comment) and returns
// the order as it stands after any 3-D Secure step it proposed.
func (a *orderActor) proceed(o *order.Order, card vault.Card, cvv, cryptogram, eci string) *order.Order {
	p := o.Pending
	if !p.Due() {
		return o
	}
	wallet := o.Source.Type != "card" && o.Source.Type != "token"
	if p.ThreeDS != nil || cryptogram != "" || wallet {
		a.startAuth(o, card, cvv, cryptogram, eci)
		return o
	}
	now := a.deps.Now()
	// A value: only a 3-D Secure step is proposed (and allocated, in
	// proposeStep), not the plain authorisation most payments go on to.
	cmd := order.Command{Time: now.UnixNano(), Merchant: o.Merchant, OrderID: o.ID, TxnID: p.TxnID}
	switch decideThreeDS(a.deps.Acquirer.Enrollment(card.PAN), o.ThreeDSForce, o.AttemptNonSecure) {
	case stepChallenge:
		id, err := randomText(32)
		if err != nil {
			a.deps.Logger.Error("3-D Secure challenge id", "order_id", o.ID, "error", err)
			return o
		}
		expires := now.Add(a.challengeTTL())
		cmd.Kind = order.KindThreeDSChallenge
		cmd.Challenge = &order.ChallengeData{ID: id, RedirectURL: a.deps.ThreeDS.URLBase + "/api/v3/3ds/" + id,
			ExpiresAt: expires.UnixNano()}
		res, ok := a.proposeStep(cmd)
		if !ok {
			return o
		}
		a.held = heldCVV{txnID: p.TxnID, cvv: cvv, until: expires}
		return res
	case stepNonSecure:
		cmd.Kind = order.KindNonSecure
		res, ok := a.proposeStep(cmd)
		if !ok {
			return o
		}
		a.startAuth(res, card, cvv, "", "")
		return res
	case stepDecline:
		// Through the same path as an acquirer's decline, without asking it.
		a.reg.Send(a.key, &authAnswer{txnID: p.TxnID, res: acquirer.AuthResult{
			DeclineCode: acquirer.Code3DSFailed, DeclineMessage: acquirer.Msg3DSFailed,
			RiskDecision: acquirer.RiskAccept,
		}})
		return o
	}
	a.startAuth(o, card, cvv, "", "")
	return o
}

// proposeStep proposes a 3-D Secure step; on failure the payment stays due
// and is taken on again when resumed.
func (a *orderActor) proposeStep(cmd order.Command) (*order.Order, bool) {
	res, err := a.propose(&cmd)
	if err != nil {
		a.deps.Logger.Warn("3-D Secure step not committed; left pending", "order_id", cmd.OrderID,
			"step", cmd.Kind, "error", err)
		return nil, false
	}
	if res.Outcome.Reject != nil {
		return res.Order, false
	}
	return res.Order, true
}

func (a *orderActor) threeDSAnswer(m *ThreeDSAnswer) *Reply {
	cur, err := a.deps.Store.GetOrder(a.key.Merchant, a.key.OrderID)
	if err != nil {
		return &Reply{Err: err}
	}
	if cur == nil || cur.Pending == nil || cur.Pending.Challenge != m.ChallengeID {
		return &Reply{Order: cur} // answered already (a second click): the order as it stands
	}
	result := AuthResultNo
	switch {
	case m.Authenticated && cur.ChallengeEnded(a.deps.Now().UnixNano()):
		// Too late: the challenge ended unanswered, whatever the click
		// says now (the scheduler's pass may not have run yet).
		result = AuthResultTimeout
	case m.Authenticated:
		result = AuthResultYes
	}
	return a.answerChallenge(cur, result)
}

// answerChallenge applies the outcome of cur's open challenge and, when
// authenticated, sends the authorisation to the acquirer with it.
func (a *orderActor) answerChallenge(cur *order.Order, result string) *Reply {
	r, err := acsResult(cur.Source.Brand, result)
	if err != nil {
		return &Reply{Err: err}
	}
	r.ChallengeID = cur.Pending.Challenge
	txnID := cur.Pending.TxnID
	res, err := a.propose(&order.Command{
		Kind: order.KindThreeDSResult, Time: a.deps.Now().UnixNano(), Merchant: cur.Merchant,
		OrderID: cur.ID, TxnID: txnID, ThreeDSResult: r,
	})
	if err != nil {
		return &Reply{Err: err}
	}
	if res.Outcome.Reject != nil {
		return &Reply{Order: res.Order}
	}
	cvv := a.held.take(txnID)
	if r.Authenticated {
		card, err := a.openCard(cur.Merchant, cur.Source.CardID)
		if err != nil {
			// Still pending and due: a restart or the next leader resumes it.
			a.deps.Logger.Error("after 3-D Secure: open card", "order_id", cur.ID, "error", err)
		} else {
			a.startAuth(res.Order, *card, cvv, "", "")
		}
	}
	return &Reply{Order: res.Order, TxnID: txnID}
}

// acsResult is the sandbox access control server's answer: fresh CAVV and
// XID values for an authentication, the 5.01 decline otherwise.
func acsResult(brand, result string) (*order.ThreeDSResultData, error) {
	if result != AuthResultYes {
		eci := "07"
		if brand == acquirer.BrandMastercard {
			eci = "00"
		}
		return &order.ThreeDSResultData{
			Result:      &order.ThreeDS{AuthenticationResult: result, Version: ACSVersion, ECI: eci},
			DeclineCode: acquirer.Code3DSFailed, DeclineMessage: acquirer.Msg3DSFailed,
		}, nil
	}
	var b [40]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	eci := "05"
	if brand == acquirer.BrandMastercard {
		eci = "02"
	}
	return &order.ThreeDSResultData{Authenticated: true, Result: &order.ThreeDS{
		AuthenticationResult: AuthResultYes, Version: ACSVersion, ECI: eci,
		CAVV: base64.StdEncoding.EncodeToString(b[:20]), XID: base64.StdEncoding.EncodeToString(b[20:]),
	}}, nil
}

func (a *orderActor) expire() {
	cur, err := a.deps.Store.GetOrder(a.key.Merchant, a.key.OrderID)
	if err != nil || cur == nil {
		return
	}
	now := a.deps.Now()
	due := cur.ExpiresAt()
	if due == 0 || due > now.UnixNano() {
		return // paid, answered, or not yet: a duplicate or early message
	}
	if cur.Status == order.StatusCreated {
		cmd := &order.Command{Kind: order.KindExpire, Time: now.UnixNano(), Merchant: cur.Merchant, OrderID: cur.ID}
		if _, err := a.propose(cmd); err != nil {
			a.deps.Logger.Warn("form expiry not committed; will retry", "order_id", cur.ID, "error", err)
		}
		return
	}
	// An open challenge nobody answered: not authenticated.
	r := a.answerChallenge(cur, AuthResultTimeout)
	if r.Err != nil {
		a.deps.Logger.Warn("3-D Secure timeout not committed; will retry", "order_id", cur.ID, "error", r.Err)
	}
}

// randomText returns n random bytes as unpadded base64url text.
func randomText(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
