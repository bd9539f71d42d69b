package actors

import (
	"testing"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
)

type midTable map[string]*command.MID

func (t midTable) MID(mid string) *command.MID { return t[mid] }
func (t midTable) MerchantHasMIDs(merchant string) bool {
	for _, m := range t {
		if m.MerchantID == merchant {
			return true
		}
	}
	return false
}

// The MID rules of a new order, and the host of an order's messages: its
// MID's when registered for its merchant by the order's creation, else the
// default ("").
func TestRoutes(t *testing.T) {
	mids := midTable{
		"A": {MID: "A", MerchantID: "m1", AcquirerAddr: "a:1", Currencies: []string{"EUR", "USD"}, RegisteredAt: 100},
		"B": {MID: "B", MerchantID: "m2", AcquirerAddr: "b:1", Currencies: []string{"USD"}, RegisteredAt: 100},
	}
	for _, tc := range []struct {
		merchant, mid, cur string
		kind               order.RejectKind
		attr               string
	}{
		{"m1", "A", "USD", order.RejectNone, ""},
		{"m1", "A", "GBP", order.RejectCurrency, "currency"},
		{"m1", "B", "USD", order.RejectInvalid, "processing_mid"}, // another merchant's
		{"m1", "Z", "USD", order.RejectInvalid, "processing_mid"},
		{"m3", "Z", "GBP", order.RejectNone, ""}, // no MIDs: anything goes to the default
		{"m3", "A", "USD", order.RejectNone, ""},
	} {
		rej := checkRoute(mids, tc.merchant, &order.CreateData{ProcessingMID: tc.mid, Currency: tc.cur})
		if (rej == nil) != (tc.kind == order.RejectNone) || rej != nil && (rej.Kind != tc.kind || rej.Attribute != tc.attr) {
			t.Errorf("%s %s %s: %+v", tc.merchant, tc.mid, tc.cur, rej)
		}
	}
	for _, tc := range []struct {
		merchant, mid string
		created       int64
		want          string
	}{
		{"m1", "A", 100, "a:1"},
		{"m1", "A", 99, ""},  // before the registration: authorised by the default
		{"m3", "A", 200, ""}, // another merchant naming A
		{"m1", "", 200, ""},
		{"m2", "B", 500, "b:1"},
	} {
		o := &order.Order{Merchant: tc.merchant, ProcessingMID: tc.mid, CreatedAt: tc.created}
		if got := AcquirerAddr(mids, o); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc, got, tc.want)
		}
	}
}
