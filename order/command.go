package order

// Kind names a command in the replicated log.
type Kind string

// Command kinds. Each is one state change of one order.
const (
	KindCreate      Kind = "create"       // charge or wallet payment accepted: the order starts processing
	KindAuthOutcome Kind = "auth_outcome" // the acquirer answered an authorisation
	KindSettle      Kind = "settle"       // manual settle, or automatic when Auto is set
	KindVoid        Kind = "void"
	KindRefund      Kind = "refund"
)

// Command is one state change, with every non-deterministic input decided
// by the leader before proposing. It never carries a card number in clear or
// a CVV: card data travels sealed by the vault (SealedCard) and is written to
// the vault's own key space by the FSM, not to the order.
type Command struct {
	Kind     Kind   `json:"k"`
	Time     int64  `json:"t"` // Unix nanoseconds, leader's clock
	Merchant string `json:"m"`
	OrderID  string `json:"o"`
	// TxnID is the transaction the command creates (create, settle, void,
	// refund) or answers (auth_outcome).
	TxnID string `json:"x,omitempty"`
	// Amount is the amount of a settle or refund, and the amount a void
	// request named. 0 is none: a settle without one settles the whole
	// authorised amount, a void voids it (the order refuses any but its own).
	Amount int64  `json:"a,omitempty"`
	ARN    string `json:"arn,omitempty"`
	// RefundReasonCode is the optional 4-digit reason of a refund.
	RefundReasonCode string `json:"rr,omitempty"`
	// Auto marks a settle started by the auto-settle schedule: it settles the
	// full amount and is a no-op rejection if the order moved on.
	Auto bool `json:"auto,omitempty"`
	// IdempotencyKey and RequestHash make settle, void and refund repeatable
	// (contract section 5). For create, RequestHash identifies the creating
	// request so a repeat with the same body replays.
	IdempotencyKey string `json:"ik,omitempty"`
	RequestHash    string `json:"h,omitempty"`

	// Move is set on a settle, void or refund that goes to the acquirer
	// (and on the outcome of an authorisation that had no answer in time,
	// which is reversed): the movement is recorded pending with these, and
	// the order moves only on its answer (KindMoveOutcome). Without it
	// (log entries written before the link sent movements) the operation
	// completes at once as it did then.
	Move *Move `json:"mv,omitempty"`

	Create  *CreateData  `json:"c,omitempty"`
	Outcome *OutcomeData `json:"r,omitempty"`
	// Hosted form and 3-D Secure steps (form.go): the form of an
	// init-payment, the card of a form submit, a challenge, its result.
	Form          *FormData          `json:"form,omitempty"`
	Submit        *SubmitData        `json:"submit,omitempty"`
	Challenge     *ChallengeData     `json:"challenge,omitempty"`
	ThreeDSResult *ThreeDSResultData `json:"three_ds_result,omitempty"`
}

// SettleManually is the CreateData.SettleDelayHours of an order made by
// /auth (contract section 15, "a charge that never auto-settles"). 0 makes
// a sale, > 0 an authorisation settled automatically after that many hours,
// SettleManually one that only a settle request (or a void) ends: approval
// schedules no automatic settle. It is negative so that no
// settle.delay_hours a merchant can send (0 to 8760) means it.
const SettleManually int64 = -1

// CreateData is the order as accepted from a charge or wallet request.
type CreateData struct {
	Amount           int64         `json:"amount"`
	Currency         string        `json:"currency"`
	Description      string        `json:"description,omitempty"`
	Descriptor       string        `json:"descriptor,omitempty"`
	Website          string        `json:"website,omitempty"`
	ProcessingMID    string        `json:"processing_mid"`
	SubscriptionID   string        `json:"subscription_id,omitempty"`
	CallbackURL      string        `json:"callback_url,omitempty"`
	SuccessURL       string        `json:"success_url,omitempty"`
	FailURL          string        `json:"fail_url,omitempty"`
	SettleDelayHours int64         `json:"settle_delay_hours"`
	Source           PaymentSource `json:"source"`
	// SealedCard is the vault blob of a card seen for the first time; the
	// FSM stores it under Source.CardID. Empty for token payments.
	SealedCard []byte `json:"sealed_card,omitempty"`
	// ThreeDS is 3-D Secure data known at creation (external MPI).
	ThreeDS *ThreeDS `json:"three_ds,omitempty"`
	// ReplayKey is the wallet token's transaction id (wallet.Payment's
	// ReplayKey): the FSM refuses a create whose key an earlier order used
	// (RejectReplay) and records it for the order it creates.
	ReplayKey string `json:"replay_key,omitempty"`
	// Wallet authentication of a wallet payment: the auth method
	// (CRYPTOGRAM_3DS, PAN_ONLY, EMV), the ECI, and the one-time cryptogram,
	// which is kept only in the pending authorisation (see PendingAuth).
	WalletAuthMethod string `json:"wallet_auth_method,omitempty"`
	WalletECI        string `json:"wallet_eci,omitempty"`
	WalletCryptogram string `json:"wallet_cryptogram,omitempty"`
	// three_ds.force and three_ds.attempt_non_secure of the request (charge,
	// init-payment), kept on the order for the 3-D Secure decision.
	ThreeDSForce     bool `json:"three_ds_force,omitempty"`
	AttemptNonSecure bool `json:"attempt_non_secure,omitempty"`
	// CustomerEmail is customer.email of the request, kept on the order for
	// the back office's search (never in the merchant-facing view).
	CustomerEmail string `json:"customer_email,omitempty"`
}

// OutcomeData is the acquirer's answer to an authorisation, plus what the
// leader decided on approval (the token and the auto-settle time).
type OutcomeData struct {
	Approved       bool   `json:"approved"`
	AuthCode       string `json:"auth_code,omitempty"`
	AVSCheck       string `json:"avs,omitempty"`
	CVVCheck       string `json:"cvv,omitempty"`
	RiskDecision   string `json:"risk,omitempty"`
	DeclineCode    string `json:"decline_code,omitempty"`
	DeclineMessage string `json:"decline_message,omitempty"`
	// PaymentToken is issued on approval of a card payment.
	PaymentToken   string `json:"token,omitempty"`
	TokenExpiresAt int64  `json:"token_expires_at,omitempty"`
	// AutoSettleAt is when an authorised order settles by itself (0: never).
	AutoSettleAt int64 `json:"auto_settle_at,omitempty"`
	// Trace is the answered authorisation's STAN and transmission time
	// (fields 11 and 7, 16 digits), which its capture or reversal names in
	// field 90.
	Trace string `json:"trace,omitempty"`
}

// RejectKind classifies a business rejection. Rejections are results, not
// failures: every replica computes the same one and nothing changes.
type RejectKind uint8

// Rejection kinds. They are the domain's reasons, not HTTP's: the front end
// (transport/server) alone maps each to its entry of the error catalogue
// (transport/apierr), the code noted beside it. New kinds go at the end: a
// kind's number is stored in idempotency records.
const (
	RejectNone          RejectKind = iota
	RejectIllegalStatus            // 409 0.03
	RejectAmount                   // 422 2.02
	RejectConflict                 // 409 5.06
	RejectNotFound                 // 404 2.05
	RejectReplay                   // 422 2.01: wallet token already used
	RejectInvalid                  // 422 2.01: a field breaks a rule (CheckTokenCard)
	RejectCVV                      // 422 2.06: card_cvv of the wrong length for the card (CheckTokenCard)
	RejectTokenInvalid             // 422 7.01: payment_token unknown, expired or another merchant's
	RejectCurrency                 // 422 2.03: a currency the order's processing MID does not accept
)

// Rejection explains why a command, or a request before it became one,
// changed nothing: the attribute at fault and why.
type Rejection struct {
	Kind      RejectKind
	Attribute string
	Message   string
	// More lists further attributes at fault in the same request (a token
	// charge's card_cvv and its MPI xid together); Kind covers them all.
	More []Fault `json:",omitempty"`
}

// Fault is one more attribute of a Rejection and its message.
type Fault struct {
	Attribute string
	Message   string
}

// Outcome is what Apply did.
type Outcome struct {
	Reject *Rejection
	// TxnID is the transaction the command created or answered.
	TxnID string
	// Replay is set when a create repeated an existing order's request:
	// nothing changed and the current order is the answer.
	Replay bool
	// StatusChanged is set when the order's status moved (a notification is
	// due), Created when the order came into existence.
	StatusChanged bool
	Created       bool
	// RedirectSet is set when a 3-D Secure challenge gave the order its
	// redirect_url: a notification is due although the status stayed
	// (interface 6.1.2).
	RedirectSet bool
	// MoveAnswered is set when the acquirer's answer to a settle, void or
	// refund was applied: a notification is due although the status may
	// have stayed (a decline, a partial refund).
	MoveAnswered bool
}

// Changed reports whether the order must be written.
func (o Outcome) Changed() bool { return o.Reject == nil && !o.Replay }
