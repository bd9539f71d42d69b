package node_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/paygate/gateway/node/nodetest"
)

// The request-hash key (idempotency records, hosted-form tokens) outlives a
// vault key rotation: a charge and a settle retried with their
// Idempotency-Key and body answer as the first time (not 409 5.06), and a
// repeated init-payment answers the same form URL, which opens: while the
// node runs with the new key and the old one as previous, after the old
// key is gone, and on a node that joined after the rotation and leads.
func TestRequestHashKeySurvivesVaultRotation(t *testing.T) {
	oldKey, newKey := nodetest.NewKeyFile(t), nodetest.NewKeyFile(t)
	n := nodetest.Start(t, nodetest.Options{KeyFile: oldKey})
	retry := idempotentRequests(t, n)
	retry("before the rotation", n)

	rotateVaultKey(t, n, newKey, oldKey)
	retry("new key, old key as previous", n)
	waitFor(t, 60*time.Second, func() bool { return vaultCount(t, n) == 0 })

	dropOldVaultKey(t, n, oldKey)
	retry("the old key removed", n)

	// A node that never had the old key gets the key from the log.
	joiner := nodetest.Start(t, nodetest.Options{ID: "node2", KeyFile: newKey, Join: n.HTTPAddr})
	c := nodetest.ClusterOf(t, newKey, n, joiner)
	c.WaitMembers(2, 30*time.Second)
	c.WaitConverged(30 * time.Second)
	if _, err := joiner.Admin("POST", "/admin/v1/cluster/transfer-leadership", `{"node_id":"`+joiner.ID+`"}`, nil); err != nil {
		t.Fatalf("transfer leadership: %v", err)
	}
	if l := c.WaitLeader(nil, 10*time.Second); l != joiner {
		t.Fatalf("leader after the transfer: %s", l.ID)
	}
	retry("a node that joined after the rotation, leading", joiner)
}

// A data dir of a version before the replicated key (its store has no
// record; its hashes and form tokens were keyed by the vault key's
// derivation), upgraded and rotated in one restart: the leader records the
// derivation of the previous key, and every stored hash keeps matching,
// then and after the old key is gone.
func TestRequestHashKeyOfAnOlderDataDir(t *testing.T) {
	oldKey, newKey := nodetest.NewKeyFile(t), nodetest.NewKeyFile(t)
	n := nodetest.Start(t, nodetest.Options{KeyFile: oldKey})
	retry := idempotentRequests(t, n)
	if err := n.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	// The record goes, as an older version never wrote it (raft does not
	// replay an entry the store has applied).
	db, err := pebble.Open(filepath.Join(n.DataDir, "state"), &pebble.Options{FormatMajorVersion: pebble.FormatNewest})
	if err != nil {
		t.Fatal(err)
	}
	if v, closer, err := db.Get([]byte("y/rh")); err != nil || len(v) == 0 {
		t.Fatalf("the store holds no request-hash key record: %v", err)
	} else {
		closer.Close()
	}
	if err := db.Delete([]byte("y/rh"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	setFlag(n, "--vault-key-file", newKey)
	setFlag(n, "--vault-previous-key-file", oldKey)
	n.Restart() // stopped above, to edit its store
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(n.Logs(), "recorded the request-hash key in the log") })
	retry("upgraded and rotated", n)
	waitFor(t, 60*time.Second, func() bool { return vaultCount(t, n) == 0 })
	dropOldVaultKey(t, n, oldKey)
	retry("upgraded, the old key removed", n)
}

// idempotentRequests makes a charge and a settle with an Idempotency-Key
// and an order through init-payment at node n, and returns a check that
// repeats the three at a node and fails unless each answers as the first
// time did: the same charge and settle (not 409 5.06), the same form
// token, and a form that opens.
func idempotentRequests(t *testing.T, n *nodetest.Node) func(stage string, at *nodetest.Node) {
	t.Helper()
	m := n.CreateMerchant(t, 1000)
	chargeID, formID := newOrderID("hk"), newOrderID("hkform")
	charge := chargeBody(chargeID, "4111111111111111", 1500, 24)
	settle := map[string]any{"order_id": chargeID, "amount": 500}
	form := initBody(formID, 990, "USD")
	first := m.Post(t, "charge", charge, "Idempotency-Key", "hk-charge-1")
	if first.Status != 200 {
		t.Fatalf("charge: %d %s", first.Status, first.Body)
	}
	m.WaitStatus(t, chargeID, "authorized", 10*time.Second)
	settled := m.Post(t, "settle", settle, "Idempotency-Key", "hk-settle-1")
	if settled.Status != 200 {
		t.Fatalf("settle: %d %s", settled.Status, settled.Body)
	}
	formToken := formTokenOf(t, n, initForm(t, m, form))

	retry := func(stage string, at *nodetest.Node) {
		t.Helper()
		ma := m.At(at)
		if r := ma.Post(t, "charge", charge, "Idempotency-Key", "hk-charge-1"); r.Status != 200 || r.Str("order_id") != chargeID {
			t.Fatalf("%s: the charge retried: %d %s", stage, r.Status, r.Body)
		}
		if r := ma.Post(t, "settle", settle, "Idempotency-Key", "hk-settle-1"); r.Status != 200 || string(r.Body) != string(settled.Body) {
			t.Fatalf("%s: the settle retried: %d %s, first %s", stage, r.Status, r.Body, settled.Body)
		}
		url := initForm(t, ma, form)
		if tok := formTokenOf(t, at, url); tok != formToken {
			t.Fatalf("%s: the repeated init-payment answered another form token", stage)
		}
		if st, _, page := httpDo(t, "GET", url, "", ""); st != 200 || !strings.Contains(string(page), "<form") {
			t.Fatalf("%s: the form URL answered %d: %.300s", stage, st, page)
		}
		// A different body under the same key is still another request.
		expectError(t, ma.Post(t, "settle", map[string]any{"order_id": chargeID, "amount": 501}, "Idempotency-Key", "hk-settle-1"), 409, "5.06", "idempotency-key")
	}
	return retry
}

// formTokenOf is the token of a form URL of node n.
func formTokenOf(t *testing.T, n *nodetest.Node, url string) string {
	t.Helper()
	tok, ok := strings.CutPrefix(url, n.URL()+"/api/v3/purchase/")
	if !ok || tok == "" {
		t.Fatalf("form URL %q is not under %s", url, n.URL())
	}
	return tok
}
