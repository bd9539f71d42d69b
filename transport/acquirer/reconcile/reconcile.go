// Package reconcile compares the acquirer's settlement report with the
// gateway's own ledger of money movements, by RRN (docs/acquirer.md,
// "Reconciliation"): what matched, what only one side has, and where the
// amounts or currencies differ.
package reconcile

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/transport/acquirer"
)

// Entry is one money movement: a sale, capture or refund.
type Entry struct {
	Date     string `json:"date"` // UTC day, YYYY-MM-DD
	RRN      string `json:"rrn"`
	Type     string `json:"type"` // sale, capture, refund
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	OrderID  string `json:"order_id,omitempty"` // the gateway's side only
}

func (e Entry) key() string { return e.Type + " " + e.RRN }

// Mismatch is a movement both sides have with different amounts or
// currencies.
type Mismatch struct {
	Acquirer Entry `json:"acquirer"`
	Gateway  Entry `json:"gateway"`
}

// Result is a reconciliation.
type Result struct {
	Dates             []string   `json:"dates"`
	Matched           int        `json:"matched"`
	MissingAtAcquirer []Entry    `json:"missing_at_acquirer"`
	MissingAtGateway  []Entry    `json:"missing_at_gateway"`
	Mismatches        []Mismatch `json:"mismatches"`
}

// Clean reports whether everything matched.
func (r *Result) Clean() bool {
	return len(r.MissingAtAcquirer) == 0 && len(r.MissingAtGateway) == 0 && len(r.Mismatches) == 0
}

// ParseReport reads a settlement report (CSV, header
// date,mid,rrn,arn,type,amount,currency).
func ParseReport(r io.Reader) ([]Entry, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("settlement report: %w", err)
	}
	want := []string{"date", "mid", "rrn", "arn", "type", "amount", "currency"}
	if len(rows) == 0 || !slices.Equal(rows[0], want) {
		return nil, fmt.Errorf("settlement report: the header must be %v", want)
	}
	out := make([]Entry, 0, len(rows)-1)
	for i, row := range rows[1:] {
		amount, err := strconv.ParseInt(row[5], 10, 64)
		if _, derr := time.Parse(time.DateOnly, row[0]); err != nil || derr != nil {
			return nil, fmt.Errorf("settlement report: line %d: bad date or amount", i+2)
		}
		out = append(out, Entry{Date: row[0], RRN: row[2], Type: row[4], Amount: amount, Currency: row[6]})
	}
	return out, nil
}

// Ledger lists an order's movements the acquirer answered approved, as its
// report names them: the sale by its RRN, a settle as the capture of its
// authorisation's RRN, each refund by its own. The date is the day the
// answer was applied.
func Ledger(o *order.Order) []Entry {
	var out []Entry
	authRRN := ""
	for _, t := range o.Txns {
		if t.Operation == order.OpAuth || t.Operation == order.OpSale {
			authRRN = acquirer.RRN(t.ID)
		}
		if t.Status != order.TxnSuccess {
			continue
		}
		e := Entry{Date: time.Unix(0, t.UpdatedAt).UTC().Format(time.DateOnly), Amount: t.Amount,
			Currency: t.Currency, OrderID: o.ID}
		switch t.Operation {
		case order.OpSale:
			e.Type, e.RRN = "sale", acquirer.RRN(t.ID)
		case order.OpSettle:
			e.Type, e.RRN = "capture", authRRN
		case order.OpRefund:
			e.Type, e.RRN = "refund", acquirer.RRN(t.ID)
		default:
			continue
		}
		out = append(out, e)
	}
	return out
}

// Compare reconciles report with the gateway's entries of the report's
// days (gateway entries of other days are left out).
func Compare(report, gateway []Entry) *Result {
	res := &Result{MissingAtAcquirer: []Entry{}, MissingAtGateway: []Entry{}, Mismatches: []Mismatch{}}
	days := map[string]bool{}
	for _, e := range report {
		days[e.Date] = true
	}
	for d := range days {
		res.Dates = append(res.Dates, d)
	}
	slices.Sort(res.Dates)
	ours := map[string]Entry{}
	for _, e := range gateway {
		if days[e.Date] {
			ours[e.key()] = e
		}
	}
	seen := map[string]bool{}
	for _, a := range report {
		g, ok := ours[a.key()]
		switch {
		case !ok:
			res.MissingAtGateway = append(res.MissingAtGateway, a)
		case g.Amount != a.Amount || g.Currency != a.Currency:
			res.Mismatches = append(res.Mismatches, Mismatch{Acquirer: a, Gateway: g})
		default:
			res.Matched++
		}
		seen[a.key()] = true
	}
	for k, g := range ours {
		if !seen[k] {
			res.MissingAtAcquirer = append(res.MissingAtAcquirer, g)
		}
	}
	slices.SortFunc(res.MissingAtAcquirer, func(a, b Entry) int { return cmpKey(a, b) })
	return res
}

func cmpKey(a, b Entry) int {
	if a.key() < b.key() {
		return -1
	}
	if a.key() > b.key() {
		return 1
	}
	return 0
}
