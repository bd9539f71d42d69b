package order

// ARNCode is one transaction's acquirer reference number as /arn-code
// answers it (contract section 15): the vendor's client library reads these
// names.
type ARNCode struct {
	ARNCode       string    `json:"arn_code"`
	TransactionID string    `json:"transaction_id"`
	Operation     Operation `json:"operation"`
	Amount        int64     `json:"amount"`
	Currency      string    `json:"currency"`
	CreatedAt     string    `json:"created_at"` // TimeLayout, UTC
}

// ARNCodes lists the order's transactions that carry an ARN, in the order
// they were made: every money movement the acquirer accepted (auth or sale,
// settle, void, refund). A declined or still pending authorisation has none,
// so an order may have an empty list; it is never nil.
func ARNCodes(o *Order) []ARNCode {
	codes := make([]ARNCode, 0, len(o.Txns))
	for i := range o.Txns {
		t := &o.Txns[i]
		if t.ARN == "" {
			continue
		}
		codes = append(codes, ARNCode{ARNCode: t.ARN, TransactionID: t.ID, Operation: t.Operation,
			Amount: t.Amount, Currency: t.Currency, CreatedAt: FormatTime(t.CreatedAt)})
	}
	return codes
}
