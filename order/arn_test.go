package order_test

import (
	"reflect"
	"testing"

	"github.com/paygate/gateway/order"
)

// /arn-code lists what the acquirer referenced, oldest first: the declined
// authorisation and the pending one are not in it.
func TestARNCodes(t *testing.T) {
	o := &order.Order{Currency: "EUR", Txns: []order.Transaction{
		{ID: "a", Operation: order.OpAuth, Status: order.TxnFail, Amount: 500, Currency: "EUR", CreatedAt: 0},
		{ID: "b", Operation: order.OpAuth, Status: order.TxnSuccess, Amount: 500, Currency: "EUR", ARN: "arn-b", CreatedAt: 1e9},
		{ID: "c", Operation: order.OpSettle, Status: order.TxnSuccess, Amount: 300, Currency: "EUR", ARN: "arn-c", CreatedAt: 61e9},
		{ID: "d", Operation: order.OpRefund, Status: order.TxnCreated, Amount: 100, Currency: "EUR"},
	}}
	want := []order.ARNCode{
		{ARNCode: "arn-b", TransactionID: "b", Operation: order.OpAuth, Amount: 500, Currency: "EUR", CreatedAt: "1970-01-01 00:00:01"},
		{ARNCode: "arn-c", TransactionID: "c", Operation: order.OpSettle, Amount: 300, Currency: "EUR", CreatedAt: "1970-01-01 00:01:01"},
	}
	if got := order.ARNCodes(o); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if got := order.ARNCodes(&order.Order{}); got == nil || len(got) != 0 {
		t.Fatalf("an order without ARNs: %#v, want an empty list", got)
	}
}
