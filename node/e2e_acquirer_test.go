package node_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/transport/acquirer"
)

// A node pointed at an acquirerd process (--acquirer-addr): a sale
// (settle.delay_hours 0) is in the host's settlement report once, with
// its amount and the RRN of its transaction; an authorisation is not (it
// has not been captured); a decline comes back as the contract's code.
func TestPaymentsReachTheAcquirerHost(t *testing.T) {
	acq := nodetest.StartAcquirerd(t)
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--acquirer-addr", acq.Listen, "--acquirer-timeout", "2s"}})
	m := n.CreateMerchant(t, 10000)

	sale := newOrderID("sale")
	m.Post(t, "charge", chargeBody(sale, acquirer.CardVisaApproved, 1234, 0))
	saleTxn := onlyTxn(t, m.WaitStatus(t, sale, "settled", 10*time.Second))
	auth := newOrderID("auth")
	m.Post(t, "charge", chargeBody(auth, acquirer.CardMastercardApproved, 500, 24))
	m.WaitStatus(t, auth, "authorized", 10*time.Second)
	declined := newOrderID("decl")
	m.Post(t, "charge", chargeBody(declined, acquirer.CardInsufficientFunds, 700, 24))
	if st := m.WaitStatus(t, declined, "declined", 10*time.Second); st.Str("decline.code") != "3.02" {
		t.Fatalf("declined order: %s", st.Body)
	}

	rows := acq.Report(time.Now().UTC().Format(time.DateOnly))
	if len(rows) != 2 {
		t.Fatalf("settlement report %v, want the header and the sale", rows)
	}
	row := rows[1]
	if row[1] != "mid-1" || row[2] != acquirer.RRN(saleTxn["id"].(string)) || row[4] != "sale" ||
		row[5] != strconv.Itoa(1234) || row[6] != "USD" || row[3] != saleTxn["arn"] {
		t.Fatalf("sale row %v, transaction %v", row, saleTxn)
	}
}

// The acquirer host down, then killed and restarted: charges meanwhile are
// declined 6.02 once their attempts run out, and the node reconnects by
// itself to approve the next.
func TestAcquirerHostDownAndRestarted(t *testing.T) {
	acq := nodetest.StartAcquirerd(t)
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--acquirer-addr", acq.Listen, "--acquirer-timeout", "300ms"}})
	m := n.CreateMerchant(t, 10000)

	acq.SetFaults(`{"down":true}`)
	down := newOrderID("down")
	m.Post(t, "charge", chargeBody(down, acquirer.CardVisaApproved, 100, 24))
	if st := m.WaitStatus(t, down, "declined", 20*time.Second); st.Str("decline.code") != "6.02" {
		t.Fatalf("charge while the acquirer is down: %s", st.Body)
	}

	acq.Restart() // faults are not kept: up again
	up := newOrderID("up")
	m.Post(t, "charge", chargeBody(up, acquirer.CardVisaApproved, 100, 24))
	m.WaitStatus(t, up, "authorized", 20*time.Second)
}
