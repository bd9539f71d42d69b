package bench

import (
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/order"
)

// notificationFields reads what a full decode reads, from the node's own
// rendering of an order and from bodies that put the members elsewhere.
func TestNotificationFields(t *testing.T) {
	view := order.NewView(&order.Order{Merchant: "m1", ID: "o-1", Amount: 1020, Currency: "USD",
		Status: order.StatusAuthorized}, order.WithTxn, "t-1").Marshal()
	for _, tc := range []struct {
		name, body      string
		orderID, status string
	}{
		{"the node's view", string(view), "o-1", "authorized"},
		{"status first", `{"status":"settled","amount":1,"order_id":"o-2"}`, "o-2", "settled"},
		{"after nested values", `{"a":{"order_id":"x","b":[1,{"status":"y"}]},"order_id":"o-3","c":null,"status":"declined"}`, "o-3", "declined"},
		{"escaped", `{"order_id":"o-\u0034","status":"auth\"x"}`, "o-4", `auth"x`},
		{"no status", `{"order_id":"o-5","amount":1}`, "o-5", ""},
		{"not an object", `["order_id","o-6"]`, "", ""},
		{"empty", ``, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, st := notificationFields([]byte(tc.body))
			if id != tc.orderID || st != tc.status {
				t.Fatalf("notificationFields = %q, %q; want %q, %q", id, st, tc.orderID, tc.status)
			}
			var full struct {
				OrderID string `json:"order_id"`
				Status  string `json:"status"`
			}
			if json.Unmarshal([]byte(tc.body), &full) == nil && (full.OrderID != id || full.Status != st) {
				t.Fatalf("a full decode reads %q, %q", full.OrderID, full.Status)
			}
		})
	}
}
