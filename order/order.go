// Package order is the pure order state machine: the data model of an order
// and the one function, Apply, that moves it from state to state.
//
// It does no I/O and reads no clock or random source: every non-deterministic
// input (time, transaction ids, acquirer answers, tokens) arrives inside the
// Command, decided once by the leader before proposing. The order actor calls
// Apply to decide before it proposes; the Raft FSM calls the same function to
// apply the committed command, so every replica computes the same bytes.
// They share the idempotency rule the same way (UseOfKey).
//
// It knows nothing of how commands and orders are encoded in the log or the
// store: that is package persistence/command's.
//
// order/ is the domain, the middle of the dependency graph: it and its
// sibling fact tables (order/card: Luhn, brands, CVV length, expiry,
// masking; order/currency: ISO 4217) import nothing of the project's edges,
// and every edge may import them. Business rejections are data of this
// package (Rejection, RejectKind), from Apply and from the order actors'
// checks before proposing (CheckTokenCard); the HTTP front end alone turns
// them into the error catalogue's codes. depcheck's test keeps it so.
package order

// Status is an order status (contract section 4).
type Status string

// Order statuses.
const (
	StatusCreated    Status = "created"
	StatusProcessing Status = "processing"
	StatusAuthorized Status = "authorized"
	StatusDeclined   Status = "declined"
	StatusSettled    Status = "settled"
	StatusVoided     Status = "voided"
	StatusRefunded   Status = "refunded"
	StatusExpired    Status = "expired"
)

// TxnStatus is a transaction status (contract section 4).
type TxnStatus string

// Transaction statuses.
const (
	TxnCreated TxnStatus = "created"
	TxnVerify  TxnStatus = "verify"
	TxnSuccess TxnStatus = "success"
	TxnFail    TxnStatus = "fail"
)

// Operation is a transaction type (interface 2.2).
type Operation string

// Transaction operations.
const (
	OpAuth   Operation = "auth"
	OpSale   Operation = "sale"
	OpSettle Operation = "settle"
	OpVoid   Operation = "void"
	OpRefund Operation = "refund"
)

// Transaction is one money movement inside an order (interface 2.2).
// Times are Unix nanoseconds, decided by the leader.
type Transaction struct {
	ID               string    `json:"id"`
	CreatedAt        int64     `json:"created_at"`
	UpdatedAt        int64     `json:"updated_at"`
	Operation        Operation `json:"operation"`
	Status           TxnStatus `json:"status"`
	Currency         string    `json:"currency"`
	Amount           int64     `json:"amount"`
	AuthCode         string    `json:"auth_code,omitempty"`
	ARN              string    `json:"arn,omitempty"`
	RefundReasonCode string    `json:"refund_reason_code,omitempty"`
}

// Decline is set on a declined order.
type Decline struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ThreeDS is the 3-D Secure result object (interface 2.3).
type ThreeDS struct {
	Enrolled             string `json:"enrolled,omitempty"` // "Y"/"N": set when downgraded to non-secure
	AuthenticationResult string `json:"authentication_result,omitempty"`
	Version              string `json:"version,omitempty"`
	ECI                  string `json:"eci,omitempty"`
	XID                  string `json:"xid,omitempty"`
	CAVV                 string `json:"cavv,omitempty"`
}

// Address is a billing address (interface 2.6).
type Address struct {
	Line1   string `json:"line1,omitempty"`
	Line2   string `json:"line2,omitempty"`
	City    string `json:"city,omitempty"`
	State   string `json:"state,omitempty"`
	Zip     string `json:"zip,omitempty"`
	Country string `json:"country,omitempty"`
}

// PaymentSource is what the gateway may show of the instrument (interface
// 2.5). It never holds a full card number or a CVV.
type PaymentSource struct {
	Type           string   `json:"type"`
	CardID         string   `json:"card_id,omitempty"`
	PaymentToken   string   `json:"payment_token,omitempty"`
	TokenExpiresAt int64    `json:"token_expires_at,omitempty"` // Unix nanoseconds
	Issuer         string   `json:"issuer,omitempty"`
	BIN            string   `json:"bin,omitempty"`
	Brand          string   `json:"card_brand,omitempty"`
	CardType       string   `json:"card_type,omitempty"`
	ExpMonth       string   `json:"card_exp_month,omitempty"`
	ExpYear        string   `json:"card_exp_year,omitempty"`
	HolderName     string   `json:"card_holder_name,omitempty"`
	Masked         string   `json:"masked_card_number,omitempty"`
	IssuerCountry  string   `json:"issuer_country,omitempty"`
	Billing        *Address `json:"billing_address,omitempty"`
}

// TokenGrant is what a payment token stands for: which merchant may charge
// which stored card, until when, and the masked card details that payments
// by the token show. Approving a payment that asked for a token issues one.
type TokenGrant struct {
	Merchant  string        `json:"merchant"`
	CardID    string        `json:"card_id"`
	ExpiresAt int64         `json:"expires_at"` // Unix ns
	Source    PaymentSource `json:"source"`
}

// Order is the stored state of one order. Merchant plus ID is its identity.
type Order struct {
	Merchant         string        `json:"merchant"`
	ID               string        `json:"order_id"`
	Amount           int64         `json:"amount"`
	Currency         string        `json:"currency"`
	Status           Status        `json:"status"`
	SettledAmount    int64         `json:"settled_amount"`
	RefundedAmount   int64         `json:"refunded_amount"`
	Description      string        `json:"description,omitempty"`
	Descriptor       string        `json:"descriptor,omitempty"`
	Decline          *Decline      `json:"decline,omitempty"`
	RiskDecision     string        `json:"risk_decision,omitempty"`
	AVSCheck         string        `json:"avs_check,omitempty"`
	CVVCheck         string        `json:"cvv_check,omitempty"`
	ThreeDS          *ThreeDS      `json:"three_ds,omitempty"`
	Website          string        `json:"website,omitempty"`
	ProcessingMID    string        `json:"processing_mid,omitempty"`
	SubscriptionID   string        `json:"subscription_id,omitempty"`
	RedirectURL      string        `json:"redirect_url,omitempty"`
	CallbackURL      string        `json:"callback_url,omitempty"`
	SuccessURL       string        `json:"success_url,omitempty"`
	FailURL          string        `json:"fail_url,omitempty"`
	SettleDelayHours int64         `json:"settle_delay_hours"`
	AutoSettleAt     int64         `json:"auto_settle_at,omitempty"` // Unix ns; 0 = none scheduled
	Source           PaymentSource `json:"payment_source"`
	Txns             []Transaction `json:"transactions"`
	RequestHash      string        `json:"request_hash"` // keyed hash of the creating request, for idempotency
	CreatedAt        int64         `json:"created_at"`
	UpdatedAt        int64         `json:"updated_at"`
	Version          uint64        `json:"version"` // number of applied changes; notification sequence
	Pending          *PendingAuth  `json:"pending,omitempty"`
	// Wallet payments: how the device authenticated the card
	// (CRYPTOGRAM_3DS, PAN_ONLY, EMV) and the ECI it gave. Kept for the
	// record, not shown in three_ds (the answer is a charge's without it).
	WalletAuthMethod string `json:"wallet_auth_method,omitempty"`
	WalletECI        string `json:"wallet_eci,omitempty"`
	// Hosted form (init-payment): the SHA-256 of the form token (the token
	// itself is never stored), when the form stops being payable (Unix ns)
	// and its language. The 3-D Secure options travel with the order so a
	// form payment and a resumed authorisation decide the same way.
	FormTokenHash    string `json:"form_token_hash,omitempty"`
	FormExpiresAt    int64  `json:"form_expires_at,omitempty"`
	Language         string `json:"language,omitempty"`
	ThreeDSForce     bool   `json:"three_ds_force,omitempty"`
	AttemptNonSecure bool   `json:"attempt_non_secure,omitempty"`
	// CustomerEmail is the creating request's customer.email, for the back
	// office's search by e-mail (persistence's indexes).
	CustomerEmail string `json:"customer_email,omitempty"`
}

// PendingAuth records an authorisation that was accepted (status
// processing) but whose acquirer answer is not yet applied. It is what a node
// resumes after a restart or a leadership change.
type PendingAuth struct {
	TxnID string `json:"txn_id"`
	// ThreeDS data to present to the acquirer, when authenticated.
	ThreeDS *ThreeDS `json:"three_ds,omitempty"`
	// Challenge is the id of a 3-D Secure challenge the customer has not
	// answered yet (the transaction is in verify). While it is set the
	// authorisation waits for the customer, not the acquirer: a restart must
	// not send it (see Due); ChallengeExpiresAt ends the wait (Unix ns).
	Challenge          string `json:"challenge,omitempty"`
	ChallengeExpiresAt int64  `json:"challenge_expires_at,omitempty"`
	// WalletCryptogram is a wallet payment's one-time cryptogram, kept only
	// while the authorisation is pending so that a resumed call still
	// carries it; it goes with Pending when the outcome is applied.
	WalletCryptogram string `json:"wallet_cryptogram,omitempty"`
}

// Txn returns the transaction with the given id, or nil.
func (o *Order) Txn(id string) *Transaction {
	for i := range o.Txns {
		if o.Txns[i].ID == id {
			return &o.Txns[i]
		}
	}
	return nil
}

// Clone returns a deep copy, so Apply never mutates its input.
func (o *Order) Clone() *Order {
	if o == nil {
		return nil
	}
	c := *o
	c.Txns = append([]Transaction(nil), o.Txns...)
	if o.Decline != nil {
		d := *o.Decline
		c.Decline = &d
	}
	if o.ThreeDS != nil {
		t := *o.ThreeDS
		c.ThreeDS = &t
	}
	if o.Source.Billing != nil {
		b := *o.Source.Billing
		c.Source.Billing = &b
	}
	if o.Pending != nil {
		p := *o.Pending
		if p.ThreeDS != nil {
			t := *p.ThreeDS
			p.ThreeDS = &t
		}
		c.Pending = &p
	}
	return &c
}
