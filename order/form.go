package order

import "fmt"

// Hosted payment form and 3-D Secure (contract sections 4 and 9a).
//
// An init-payment creates the order in status created, with no transaction,
// waiting for its form. The customer's card turns it into a payment
// (form submit), which from then on is the same as a charge: processing
// with one auth (or sale) transaction pending at the acquirer.
//
// 3-D Secure is decided by the leader before the acquirer is asked:
//
//	processing, auth created ──challenge──▶ auth verify, redirect_url set
//	                                        (Pending.Challenge: the customer's turn)
//	auth verify ──result, authenticated──▶ auth created, three_ds set
//	                                        (Pending.ThreeDS: the acquirer's turn)
//	auth verify ──result, not authenticated──▶ declined 5.01, auth fail
//	auth created ──non-secure──▶ auth created, three_ds.enrolled "N"
//	created ──lifetime ends──▶ expired
//
// PendingAuth.Due tells the two waits apart: only a due authorisation is
// (re)sent to the acquirer, so a restart never sends a payment whose customer
// has not answered the challenge.

// Command kinds of the hosted form and 3-D Secure.
const (
	KindInitPayment      Kind = "init_payment"   // init-payment: the order starts created, waiting for its form
	KindFormSubmit       Kind = "form_submit"    // the customer paid on the form: created → processing
	KindThreeDSChallenge Kind = "3ds_challenge"  // the issuer asks for 3-D Secure: auth → verify
	KindThreeDSResult    Kind = "3ds_result"     // the customer answered the challenge (or it timed out)
	KindNonSecure        Kind = "3ds_non_secure" // issuer not enrolled: go on without 3-D Secure
	KindExpire           Kind = "expire"         // the form's lifetime ended unpaid
)

// FormData is what an init-payment adds to the order it creates (the rest
// is in Command.Create).
type FormData struct {
	// TokenHash is the lowercase hex SHA-256 of the form token; the token
	// itself is never stored or logged.
	TokenHash string `json:"token_hash"`
	// ExpiresAt is when the form stops being payable (Unix ns).
	ExpiresAt int64 `json:"expires_at"`
	// Language is payment_form.language, lower case ("" = default).
	Language string `json:"language,omitempty"`
}

// SubmitData is the card a customer entered on the form, as a charge's
// create would carry it: the displayable source and the vault-sealed card.
type SubmitData struct {
	Source     PaymentSource `json:"source"`
	SealedCard []byte        `json:"sealed_card,omitempty"`
}

// ChallengeData is a 3-D Secure challenge decided by the leader.
type ChallengeData struct {
	// ID is the unguessable id of the challenge; RedirectURL is the issuer
	// page that carries it ({form_url}/api/v3/3ds/<id>).
	ID          string `json:"id"`
	RedirectURL string `json:"redirect_url"`
	// ExpiresAt ends the customer's turn (Unix ns): an unanswered
	// challenge is then answered "not authenticated" by the leader.
	ExpiresAt int64 `json:"expires_at"`
}

// ThreeDSResultData is the outcome of a challenge: the authentication values
// the leader decided (the sandbox access control server) and, when not
// authenticated, the decline to record.
type ThreeDSResultData struct {
	ChallengeID   string   `json:"challenge_id"`
	Authenticated bool     `json:"authenticated"`
	Result        *ThreeDS `json:"result"`
	// DeclineCode and DeclineMessage decline the order when not
	// authenticated (5.01).
	DeclineCode    string `json:"decline_code,omitempty"`
	DeclineMessage string `json:"decline_message,omitempty"`
}

// Enrolled "N": the issuer does not take part in 3-D Secure and the payment
// went on non-secure (interface 2.3).
const EnrolledNo = "N"

// AuthenticationTimedOut is the authentication result "U" of a challenge
// nobody answered before its end (or answered too late).
const AuthenticationTimedOut = "U"

// Due reports whether the authorisation awaits the acquirer: pending, and
// not waiting for the customer's 3-D Secure answer. Safe on nil.
func (p *PendingAuth) Due() bool { return p != nil && p.Challenge == "" }

// ExpiresAt is when the order's expiry schedule fires: the end of the form's
// lifetime for a created order, the end of an open 3-D Secure challenge;
// 0 when nothing waits.
func (o *Order) ExpiresAt() int64 {
	switch {
	case o.Status == StatusCreated:
		return o.FormExpiresAt
	case o.Status == StatusProcessing && o.Pending != nil && o.Pending.Challenge != "":
		return o.Pending.ChallengeExpiresAt
	}
	return 0
}

// ChallengeEnded reports whether the order's open 3-D Secure challenge had
// ended at t (Unix ns): an answer decided then can only be its timeout.
func (o *Order) ChallengeEnded(t int64) bool {
	end := o.ExpiresAt()
	return o.Status == StatusProcessing && end != 0 && t >= end
}

// Final reports whether the status is the end of a payment attempt: the
// form and the issuer page stop following the order there.
func (s Status) Final() bool {
	return s != StatusCreated && s != StatusProcessing
}

// existing answers an order-creating command for an order that exists: the
// same request replays, a different one is a conflict (contract section 5).
func existing(cur *Order, cmd *Command) (*Order, Outcome) {
	if cur.RequestHash == cmd.RequestHash {
		return cur, Outcome{Replay: true, TxnID: firstTxnID(cur)}
	}
	return cur, reject(RejectConflict, "order_id", "order_id has already been used with a different request")
}

func applyInitPayment(cur *Order, cmd *Command) (*Order, Outcome) {
	if cur != nil {
		return existing(cur, cmd)
	}
	c, f := cmd.Create, cmd.Form
	o := &Order{
		Merchant: cmd.Merchant, ID: cmd.OrderID, Amount: c.Amount, Currency: c.Currency,
		Status: StatusCreated, Description: c.Description, Descriptor: c.Descriptor,
		Website: c.Website, ProcessingMID: c.ProcessingMID, SubscriptionID: c.SubscriptionID,
		CallbackURL: c.CallbackURL, SuccessURL: c.SuccessURL, FailURL: c.FailURL,
		SettleDelayHours: c.SettleDelayHours, RequestHash: cmd.RequestHash,
		CreatedAt: cmd.Time, UpdatedAt: cmd.Time, Version: 1,
		FormTokenHash: f.TokenHash, FormExpiresAt: f.ExpiresAt, Language: f.Language,
		ThreeDSForce: c.ThreeDSForce, AttemptNonSecure: c.AttemptNonSecure,
		CustomerEmail: c.CustomerEmail,
	}
	return o, Outcome{Created: true}
}

// FormSubmitRefused is the state machine's refusal of a form's payment at
// time now (Unix ns), or nil when the form may pay. The front end and the
// order actor ask it to answer a used or expired form before anything is
// sealed, proposed or counted against a rate limit; the state machine
// decides again on the committed command.
func FormSubmitRefused(cur *Order, now int64) *Rejection {
	_, out := Apply(cur, &Command{Kind: KindFormSubmit, Time: now, Submit: &SubmitData{}})
	return out.Reject
}

func applyFormSubmit(cur *Order, cmd *Command) (*Order, Outcome) {
	if cur.Status != StatusCreated {
		return illegal(cur, "form submit")
	}
	if cmd.Time >= cur.FormExpiresAt {
		// The log enforces the lifetime: a card that reached the leader
		// after it ended pays nothing, whether or not the expiry is applied.
		return cur, reject(RejectIllegalStatus, "status", "the payment form has expired")
	}
	next := touch(cur, cmd)
	next.Status = StatusProcessing
	next.Source = cmd.Submit.Source
	if b := next.Source.Billing; b != nil {
		c := *b
		next.Source.Billing = &c
	}
	op := OpAuth
	if cur.SettleDelayHours == 0 {
		op = OpSale
	}
	next.Txns = append(next.Txns, Transaction{
		ID: cmd.TxnID, CreatedAt: cmd.Time, UpdatedAt: cmd.Time, Operation: op,
		Status: TxnCreated, Currency: cur.Currency, Amount: cur.Amount,
	})
	next.Pending = &PendingAuth{TxnID: cmd.TxnID}
	return next, Outcome{TxnID: cmd.TxnID, StatusChanged: true}
}

// awaitingDecision reports whether cur's authorisation is due and no 3-D
// Secure step has been taken for it yet (no authentication, no downgrade).
func awaitingDecision(cur *Order, cmd *Command) bool {
	return cur.Status == StatusProcessing && cur.Pending.Due() && cur.Pending.TxnID == cmd.TxnID &&
		cur.Pending.ThreeDS == nil
}

func applyChallenge(cur *Order, cmd *Command) (*Order, Outcome) {
	if !awaitingDecision(cur, cmd) {
		return illegal(cur, "3-D Secure challenge")
	}
	c := cmd.Challenge
	next := touch(cur, cmd)
	t := next.Txn(cmd.TxnID)
	t.Status, t.UpdatedAt = TxnVerify, cmd.Time
	next.RedirectURL = c.RedirectURL
	next.Pending.Challenge, next.Pending.ChallengeExpiresAt = c.ID, c.ExpiresAt
	return next, Outcome{TxnID: cmd.TxnID, RedirectSet: true}
}

func applyThreeDSResult(cur *Order, cmd *Command) (*Order, Outcome) {
	r := cmd.ThreeDSResult
	if cur.Status != StatusProcessing || cur.Pending == nil || cur.Pending.Challenge == "" ||
		cur.Pending.TxnID != cmd.TxnID || cur.Pending.Challenge != r.ChallengeID {
		// Answered already (a second click, a timeout racing the click).
		return illegal(cur, "3-D Secure result")
	}
	if r.Authenticated && cur.ChallengeEnded(cmd.Time) {
		// The challenge had ended when the answer was decided: only its
		// timeout (not authenticated) can close it now.
		return illegal(cur, "3-D Secure result")
	}
	if r.Result != nil && r.Result.AuthenticationResult == AuthenticationTimedOut && !cur.ChallengeEnded(cmd.Time) {
		// A timeout before the challenge's end (a leader whose clock is
		// ahead of the one that opened it) would decline a customer still
		// inside the challenge: the timeout comes again when it is due.
		return illegal(cur, "3-D Secure result")
	}
	next := touch(cur, cmd)
	shown := *r.Result
	next.ThreeDS = &shown
	t := next.Txn(cmd.TxnID)
	t.UpdatedAt = cmd.Time
	if !r.Authenticated {
		t.Status = TxnFail
		next.Status = StatusDeclined
		next.Decline = &Decline{Code: r.DeclineCode, Message: r.DeclineMessage}
		next.Pending = nil
		return next, Outcome{TxnID: cmd.TxnID, StatusChanged: true}
	}
	sent := *r.Result
	t.Status = TxnCreated
	next.Pending = &PendingAuth{TxnID: cmd.TxnID, ThreeDS: &sent}
	return next, Outcome{TxnID: cmd.TxnID}
}

func applyNonSecure(cur *Order, cmd *Command) (*Order, Outcome) {
	if !awaitingDecision(cur, cmd) {
		return illegal(cur, "3-D Secure downgrade")
	}
	next := touch(cur, cmd)
	if next.ThreeDS == nil {
		next.ThreeDS = &ThreeDS{}
	}
	next.ThreeDS.Enrolled = EnrolledNo
	next.Pending.ThreeDS = &ThreeDS{Enrolled: EnrolledNo}
	next.Txn(cmd.TxnID).UpdatedAt = cmd.Time
	return next, Outcome{TxnID: cmd.TxnID}
}

func applyExpire(cur *Order, cmd *Command) (*Order, Outcome) {
	if cur.Status != StatusCreated {
		return illegal(cur, "expire")
	}
	if cmd.Time < cur.FormExpiresAt {
		// Like auto-settle, the log enforces the schedule: an early expiry
		// changes nothing.
		return cur, reject(RejectIllegalStatus, "status",
			fmt.Sprintf("the payment form is payable until %s", FormatTime(cur.FormExpiresAt)))
	}
	next := touch(cur, cmd)
	next.Status = StatusExpired
	return next, Outcome{StatusChanged: true}
}
