package order

import (
	"time"
)

// TimeLayout is the interface's date-time format (interface 2.2), in UTC.
const TimeLayout = "2006-01-02 15:04:05"

// FormatTime renders Unix nanoseconds in TimeLayout.
func FormatTime(ns int64) string {
	return time.Unix(0, ns).UTC().Format(TimeLayout)
}

// appendTime appends FormatTime(ns) to dst.
func appendTime(dst []byte, ns int64) []byte {
	return time.Unix(0, ns).UTC().AppendFormat(dst, TimeLayout)
}

// View is the order object merchants see (interface 2.1), in responses and
// notifications. Fields that do not apply are absent; avs_check and
// cvv_check are null until known.
type View struct {
	OrderID        string              `json:"order_id"`
	Amount         int64               `json:"amount"`
	Currency       string              `json:"currency"`
	RefundedAmount int64               `json:"refunded_amount"`
	SettledAmount  int64               `json:"settled_amount"`
	Status         Status              `json:"status"`
	Descriptor     string              `json:"descriptor"`
	Decline        *Decline            `json:"decline,omitempty"`
	Risk           *RiskView           `json:"risk,omitempty"`
	AVSCheck       *string             `json:"avs_check"`
	CVVCheck       *string             `json:"cvv_check"`
	ThreeDS        *ThreeDS            `json:"three_ds,omitempty"`
	Website        string              `json:"website"`
	ProcessingMID  string              `json:"processing_mid"`
	SubscriptionID string              `json:"subscription_id,omitempty"`
	RedirectURL    string              `json:"redirect_url,omitempty"`
	Transaction    *TxnView            `json:"transaction,omitempty"`
	Transactions   map[string]*TxnView `json:"transactions,omitzero"` // present, {} when none, in the all-transactions shape
	PaymentSource  *SourceView         `json:"payment_source,omitempty"`
}

// RiskView is the order's risk object.
type RiskView struct {
	Decision string `json:"decision"`
}

// TxnView is a transaction as merchants see it (interface 2.2).
type TxnView struct {
	ID               string    `json:"id"`
	CreatedAt        string    `json:"created_at"`
	UpdatedAt        string    `json:"updated_at"`
	Operation        Operation `json:"operation"`
	Status           TxnStatus `json:"status"`
	Currency         string    `json:"currency"`
	Amount           int64     `json:"amount"`
	AuthCode         string    `json:"auth_code,omitempty"`
	ARN              string    `json:"arn,omitempty"`
	RefundReasonCode string    `json:"refund_reason_code,omitempty"`
	// Decline is why the acquirer declined a settle, void or refund.
	Decline *Decline `json:"decline,omitempty"`
}

// SourceView is payment_source in responses (interface 2.5).
type SourceView struct {
	Type                string   `json:"type"`
	CardID              string   `json:"card_id,omitempty"`
	TokenExpirationDate string   `json:"token_expiration_date,omitempty"`
	PaymentToken        string   `json:"payment_token,omitempty"`
	Issuer              string   `json:"issuer,omitempty"`
	BIN                 string   `json:"bin,omitempty"`
	CardBrand           string   `json:"card_brand,omitempty"`
	CardType            string   `json:"card_type,omitempty"`
	CardExpMonth        string   `json:"card_exp_month,omitempty"`
	CardExpYear         string   `json:"card_exp_year,omitempty"`
	CardHolderName      string   `json:"card_holder_name,omitempty"`
	MaskedCardNumber    string   `json:"masked_card_number,omitempty"`
	IssuerCountry       string   `json:"issuer_country,omitempty"`
	BillingAddress      *Address `json:"billing_address,omitempty"`
}

// Shape selects which transaction fields a view carries.
type Shape uint8

const (
	// WithTxn carries the single transaction an operation acted on.
	WithTxn Shape = iota
	// WithAllTxns carries the transactions map (status, notifications).
	WithAllTxns
)

// viewParts is a view with its payment source and one transaction's view
// (the shown one, or the first of the map): one allocation instead of three
// for every answer, status and notification rendered.
type viewParts struct {
	view   View
	source SourceView
	txn    TxnView
}

// NewView renders o. With WithTxn, txnID names the transaction to show.
func NewView(o *Order, shape Shape, txnID string) *View {
	parts := &viewParts{}
	v := &parts.view
	*v = View{
		OrderID:        o.ID,
		Amount:         o.Amount,
		Currency:       o.Currency,
		RefundedAmount: o.RefundedAmount,
		SettledAmount:  o.SettledAmount,
		Status:         o.Status,
		Descriptor:     o.Descriptor,
		Decline:        o.Decline,
		ThreeDS:        o.ThreeDS,
		Website:        o.Website,
		ProcessingMID:  o.ProcessingMID,
		SubscriptionID: o.SubscriptionID,
		RedirectURL:    o.RedirectURL,
		PaymentSource:  sourceView(&parts.source, &o.Source),
	}
	if o.RiskDecision != "" {
		v.Risk = &RiskView{Decision: o.RiskDecision}
	}
	if o.AVSCheck != "" {
		s := o.AVSCheck
		v.AVSCheck = &s
	}
	if o.CVVCheck != "" {
		s := o.CVVCheck
		v.CVVCheck = &s
	}
	switch shape {
	case WithTxn:
		if t := o.Txn(txnID); t != nil {
			v.Transaction = txnView(&parts.txn, t)
		}
	case WithAllTxns:
		v.Transactions = make(map[string]*TxnView, len(o.Txns))
		for i := range o.Txns {
			tv := &parts.txn
			if i > 0 {
				tv = new(TxnView)
			}
			v.Transactions[o.Txns[i].ID] = txnView(tv, &o.Txns[i])
		}
	}
	return v
}

// txnView fills dst with t's view and returns it.
func txnView(dst *TxnView, t *Transaction) *TxnView {
	// Both times share one string: one allocation instead of two.
	var buf [64]byte
	b := appendTime(buf[:0], t.CreatedAt)
	n := len(b)
	times := string(appendTime(b, t.UpdatedAt))
	*dst = TxnView{
		ID: t.ID, CreatedAt: times[:n], UpdatedAt: times[n:],
		Operation: t.Operation, Status: t.Status, Currency: t.Currency, Amount: t.Amount,
		AuthCode: t.AuthCode, ARN: t.ARN, RefundReasonCode: t.RefundReasonCode, Decline: t.Decline,
	}
	return dst
}

// sourceView fills v with s's view and returns it; nil without a source.
func sourceView(v *SourceView, s *PaymentSource) *SourceView {
	if s.Type == "" {
		return nil
	}
	*v = SourceView{
		Type: s.Type, CardID: s.CardID, PaymentToken: s.PaymentToken, Issuer: s.Issuer,
		BIN: s.BIN, CardBrand: s.Brand, CardType: s.CardType, CardExpMonth: s.ExpMonth,
		CardExpYear: s.ExpYear, CardHolderName: s.HolderName, MaskedCardNumber: s.Masked,
		IssuerCountry: s.IssuerCountry, BillingAddress: s.Billing,
	}
	if s.TokenExpiresAt != 0 {
		v.TokenExpirationDate = FormatTime(s.TokenExpiresAt)
	}
	return v
}

// Marshal renders a view as JSON. Map keys are sorted, so the bytes are the
// same on every replica (notification bodies are built inside Apply).
func (v *View) Marshal() []byte {
	return v.AppendJSON(make([]byte, 0, 1024))
}

// FormatTimeMillis renders Unix nanoseconds as RFC 3339 with milliseconds,
// for operators' views where attempt spacing matters.
func FormatTimeMillis(ns int64) string {
	return time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
