package actors

import (
	"slices"
	"strings"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
)

// Processing MIDs and routing (contract 12). The registry is replicated
// state (persistence/mids.go); the actors apply its two rules:
//
//   - a new order of a merchant with a MID registered must name one of its
//     MIDs in processing_mid (else 422 2.01 on processing_mid) in a currency
//     the MID accepts (else 422 2.03 on currency), and is refused before
//     anything is proposed; a merchant without MIDs is not checked;
//   - every acquirer message of an order (authorisation, capture,
//     reversal, refund, from any node, after any restart) goes to the host
//     its MID is registered with, if the MID was registered for the order's
//     merchant by the time the order was created; otherwise to the node's
//     default acquirer. An order made before its MID's registration was
//     authorised by the default acquirer, and its later movements must
//     follow it there.

// MIDs is what the actors read of the registered MIDs.
type MIDs interface {
	MID(mid string) *command.MID
	MerchantHasMIDs(merchant string) bool
}

// checkRoute refuses a new order that breaks the MID rules, or answers nil.
func checkRoute(mids MIDs, merchant string, d *order.CreateData) *order.Rejection {
	if !mids.MerchantHasMIDs(merchant) {
		return nil
	}
	m := mids.MID(d.ProcessingMID)
	if m == nil || m.MerchantID != merchant {
		return &order.Rejection{Kind: order.RejectInvalid, Attribute: "processing_mid",
			Message: "processing_mid should be one of the MIDs registered for this merchant"}
	}
	if !slices.Contains(m.Currencies, d.Currency) {
		return &order.Rejection{Kind: order.RejectCurrency, Attribute: "currency",
			Message: "currency should be one that processing_mid " + d.ProcessingMID + " accepts: " + strings.Join(m.Currencies, ", ")}
	}
	return nil
}

// AcquirerAddr is the host of o's acquirer messages: its MID's, or "" for
// the node's default acquirer. Reconciliation reads it too, to compare one
// host's settlement report with that host's orders only.
func AcquirerAddr(mids MIDs, o *order.Order) string {
	if o.ProcessingMID == "" {
		return ""
	}
	m := mids.MID(o.ProcessingMID)
	if m == nil || m.MerchantID != o.Merchant || m.RegisteredAt > o.CreatedAt {
		return ""
	}
	return m.AcquirerAddr
}
