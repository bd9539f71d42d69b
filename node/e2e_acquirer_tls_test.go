package node_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/cluster/pki"
	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/transport/acquirer"
)

// linkPKI writes a CA (gatewayctl certs create-ca) and certificates it
// signed for 127.0.0.1 (create-node) into a new folder: one per name.
func linkPKI(t *testing.T, names ...string) (caFile string, certs map[string][2]string) {
	t.Helper()
	dir := t.TempDir()
	if _, err := pki.CreateCAFiles(dir, "acquirer link CA"); err != nil {
		t.Fatal(err)
	}
	certs = map[string][2]string{}
	for _, name := range names {
		if _, err := pki.CreateNodeFiles(dir, name, []string{"127.0.0.1"}); err != nil {
			t.Fatal(err)
		}
		certs[name] = [2]string{filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")}
	}
	return filepath.Join(dir, pki.CACertFile), certs
}

// The acquirer link over mutual TLS (docs/acquirer.md, "Securing the
// link"), real processes: a node with the CA and its client certificate
// charges and sells through acquirerd; a node trusting another CA, and a
// node without TLS, get nothing through (their charges decline 6.02) and
// move nothing at the host; a node pointed off the machine without TLS
// refuses to start, and with --insecure-acquirer-link says so at start.
func TestAcquirerLinkOverTLS(t *testing.T) {
	caFile, certs := linkPKI(t, "acquirer", "node1")
	acq := nodetest.StartAcquirerd(t, "--tls-cert-file", certs["acquirer"][0], "--tls-key-file", certs["acquirer"][1], "--client-ca-file", caFile)
	today := time.Now().UTC().Format(time.DateOnly)

	t.Run("mutual TLS", func(t *testing.T) {
		n := nodetest.Start(t, nodetest.Options{Args: []string{"--acquirer-addr", acq.Listen, "--acquirer-timeout", "2s",
			"--acquirer-ca-file", caFile, "--acquirer-cert-file", certs["node1"][0], "--acquirer-key-file", certs["node1"][1]}})
		m := n.CreateMerchant(t, 1000)
		sale := newOrderID("tlssale")
		m.Post(t, "charge", chargeBody(sale, acquirer.CardVisaApproved, 4321, 0))
		txn := onlyTxn(t, m.WaitStatus(t, sale, "settled", 10*time.Second))
		auth := newOrderID("tlsauth")
		m.Post(t, "charge", chargeBody(auth, acquirer.CardMastercardApproved, 500, 24))
		m.WaitStatus(t, auth, "authorized", 10*time.Second)
		rows := acq.Report(today)
		if len(rows) != 2 || rows[1][2] != acquirer.RRN(txn["id"].(string)) || rows[1][5] != "4321" {
			t.Fatalf("settlement report %v, want the header and the sale", rows)
		}
	})

	refused := func(t *testing.T, says string, args ...string) {
		t.Helper()
		n := nodetest.Start(t, nodetest.Options{Args: append([]string{"--acquirer-addr", acq.Listen, "--acquirer-timeout", "300ms"}, args...)})
		m := n.CreateMerchant(t, 1000)
		before := len(acq.Report(today))
		id := newOrderID("tlsno")
		m.Post(t, "charge", chargeBody(id, acquirer.CardVisaApproved, 100, 0))
		if st := m.WaitStatus(t, id, "declined", 30*time.Second); st.Str("decline.code") != "6.02" {
			t.Fatalf("charge over a refused link: %s", st.Body)
		}
		if !strings.Contains(n.Logs(), says) {
			t.Fatalf("the node's log does not say %q:\n%s", says, n.Logs())
		}
		if rows := acq.Report(today); len(rows) != before {
			t.Fatalf("a refused link moved money: %v", rows)
		}
	}
	t.Run("another CA", func(t *testing.T) {
		otherCA, otherCerts := linkPKI(t, "node1")
		refused(t, "certificate signed by unknown authority",
			"--acquirer-ca-file", otherCA, "--acquirer-cert-file", otherCerts["node1"][0], "--acquirer-key-file", otherCerts["node1"][1])
	})
	t.Run("no TLS", func(t *testing.T) {
		refused(t, "acquirer link: connection lost")
		if !strings.Contains(acq.Logs(), "TLS handshake refused") {
			t.Fatalf("acquirerd did not log the refused plaintext link:\n%s", acq.Logs())
		}
	})

	t.Run("off the machine without TLS", func(t *testing.T) {
		n := nodetest.Start(t, nodetest.Options{Args: []string{"--acquirer-addr", "192.0.2.10:8583"}, NotReady: true})
		if code := n.WaitExit(30 * time.Second); code <= 0 {
			t.Fatalf("gatewayd with a remote --acquirer-addr and no TLS was not refused (exit %d):\n%s", code, n.Logs())
		}
		if !strings.Contains(n.Logs(), "--acquirer-ca-file") {
			t.Fatalf("the refusal does not say what to do:\n%s", n.Logs())
		}
		insecure := nodetest.Start(t, nodetest.Options{Args: []string{"--acquirer-addr", "192.0.2.10:8583", "--insecure-acquirer-link"}})
		if !strings.Contains(insecure.Logs(), "the acquirer link is NOT encrypted") {
			t.Fatalf("no warning at start with --insecure-acquirer-link:\n%s", insecure.Logs())
		}
	})
}
