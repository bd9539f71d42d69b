package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/transport/acquirer"
)

func TestLedgerAndCompare(t *testing.T) {
	day := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC).UnixNano()
	other := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC).UnixNano()
	o := &order.Order{ID: "o1", Txns: []order.Transaction{
		{ID: "auth", Operation: order.OpAuth, Status: order.TxnSuccess, Amount: 1000, Currency: "USD", UpdatedAt: day},
		{ID: "settle", Operation: order.OpSettle, Status: order.TxnSuccess, Amount: 600, Currency: "USD", UpdatedAt: day},
		{ID: "r1", Operation: order.OpRefund, Status: order.TxnSuccess, Amount: 100, Currency: "USD", UpdatedAt: day},
		{ID: "r2", Operation: order.OpRefund, Status: order.TxnFail, Amount: 50, Currency: "USD", UpdatedAt: day},
		{ID: "r3", Operation: order.OpRefund, Status: order.TxnSuccess, Amount: 70, Currency: "USD", UpdatedAt: other},
	}}
	ours := Ledger(o)
	if len(ours) != 3 || ours[0].Type != "capture" || ours[0].RRN != acquirer.RRN("auth") || ours[1].RRN != acquirer.RRN("r1") {
		t.Fatalf("ledger %+v", ours)
	}
	report, err := ParseReport(strings.NewReader("date,mid,rrn,arn,type,amount,currency\n" +
		"2026-11-28,m," + acquirer.RRN("auth") + ",x,capture,600,EUR\n" +
		"2026-11-28,m,ZZZZ,x,sale,5,USD\n"))
	if err != nil {
		t.Fatal(err)
	}
	res := Compare(report, ours)
	// r3 is another day's: not expected in this report.
	if res.Clean() || res.Matched != 0 || len(res.Mismatches) != 1 || len(res.MissingAtGateway) != 1 ||
		len(res.MissingAtAcquirer) != 1 || res.MissingAtAcquirer[0].RRN != acquirer.RRN("r1") {
		t.Fatalf("compare: %+v", res)
	}
	if _, err := ParseReport(strings.NewReader("date,rrn\n")); err == nil {
		t.Fatal("a report with the wrong header was read")
	}
}
