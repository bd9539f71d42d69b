package node_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
)

// vaultCount asks GET /admin/v1/vault.
func vaultCount(t *testing.T, n *nodetest.Node) int {
	t.Helper()
	var out struct {
		N *int `json:"records_under_previous_key"`
	}
	if code, err := n.Admin("GET", "/admin/v1/vault", "", &out); code != 200 || err != nil || out.N == nil {
		t.Fatalf("GET /admin/v1/vault: %d %v", code, err)
	}
	return *out.N
}

// setFlag replaces a flag's value in a node's arguments, or adds it.
func setFlag(n *nodetest.Node, flag, value string) {
	for i := 0; i+1 < len(n.Args); i++ {
		if n.Args[i] == flag {
			n.Args[i+1] = value
			return
		}
	}
	n.Args = append(n.Args, flag, value)
}

// rotateVaultKey restarts n sealing under newKey and reading oldKey too
// (docs/security.md, rotation step 2).
func rotateVaultKey(t *testing.T, n *nodetest.Node, newKey, oldKey string) {
	t.Helper()
	if err := n.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	setFlag(n, "--vault-key-file", newKey)
	setFlag(n, "--vault-previous-key-file", oldKey)
	n.Restart()
}

// dropOldVaultKey removes the old key file and restarts n without it
// (rotation step 5).
func dropOldVaultKey(t *testing.T, n *nodetest.Node, oldKey string) {
	t.Helper()
	if err := n.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(oldKey); err != nil {
		t.Fatal(err)
	}
	dropFlag(n, "--vault-previous-key-file")
	n.Restart()
}

func dropFlag(n *nodetest.Node, flag string) {
	for i := 0; i+1 < len(n.Args); i++ {
		if n.Args[i] == flag {
			n.Args = append(n.Args[:i:i], n.Args[i+2:]...)
			return
		}
	}
}

// A vault key rotation under a running charge load: the node restarted
// with the new key and the old one as previous re-seals every card and
// merchant secret through the log while charges go on, none fails,
// records_under_previous_key reaches 0; then the old key file is removed,
// the node restarted with the new key alone, and every stored card still
// pays by its token.
func TestVaultKeyRotationUnderLoad(t *testing.T) {
	oldKey, newKey := nodetest.NewKeyFile(t), nodetest.NewKeyFile(t)
	n := nodetest.Start(t, nodetest.Options{KeyFile: oldKey})
	m := n.CreateMerchant(t, 100000)
	const cards = 300
	tokens := make([]string, cards)
	ids := make([]string, cards)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < cards; i += 8 {
				ids[i] = newOrderID("vk")
				if r, err := m.TryPost("charge", chargeBody(ids[i], "4111111111111111", 100+int64(i), 24)); err != nil || r.Status != 200 {
					t.Errorf("charge: %v %v", err, r)
				}
			}
		}(w)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, id := range ids {
		tokens[i] = m.WaitStatus(t, id, "authorized", 10*time.Second).Str("payment_source.payment_token")
	}
	if c := vaultCount(t, n); c != 0 {
		t.Fatalf("before any rotation %d records are under another key", c)
	}

	// The rotation: new key to seal, the old one to read.
	rotateVaultKey(t, n, newKey, oldKey)

	var failed, done atomic.Int64
	var failure atomic.Value
	stop := make(chan struct{})
	var load sync.WaitGroup
	for w := 0; w < 4; w++ {
		load.Add(1)
		go func(w int) {
			defer load.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var body map[string]any
				if i%2 == 0 { // a new card, sealed under the new key
					body = chargeBody(newOrderID("vkload"), "4111111111111111", 300, 24)
				} else { // a stored card, sealed under either key
					body = tokenCharge(newOrderID("vktok"), tokens[(w*131+i)%cards], nil)
				}
				r, err := m.TryPost("charge", body)
				if err != nil || r.Status != 200 {
					failed.Add(1)
					failure.Store(fmt.Sprintf("%v %v", err, r))
					continue
				}
				done.Add(1)
			}
		}(w)
	}
	waitFor(t, 60*time.Second, func() bool { return vaultCount(t, n) == 0 })
	// The metric says the same.
	waitFor(t, 15*time.Second, func() bool {
		return strings.Contains(metricsText(t, n), "\ngateway_vault_records_under_previous_key 0\n")
	})
	close(stop)
	load.Wait()
	if f := failed.Load(); f != 0 {
		t.Fatalf("%d of %d requests failed during the re-wrap, e.g. %v", f, f+done.Load(), failure.Load())
	}
	// The re-wrap loop logs its end on the pass after the count reached 0.
	waitFor(t, 15*time.Second, func() bool { return strings.Contains(n.Logs(), "vault re-wrap done") })
	t.Logf("%d charges during the re-wrap, none failed", done.Load())

	// The old key goes; every stored card still pays, and the merchant's
	// secrets (re-sealed too) still sign.
	dropOldVaultKey(t, n, oldKey)
	after := make([]string, len(tokens))
	for i, tok := range tokens {
		after[i] = newOrderID("vkafter")
		if r := m.Post(t, "charge", tokenCharge(after[i], tok, nil)); r.Status != 200 {
			t.Fatalf("token %d after the old key was removed: %d %s", i, r.Status, r.Body)
		}
	}
	for _, id := range after { // the acquirer was sent each card's number
		m.WaitStatus(t, id, "authorized", 10*time.Second)
	}
	if c := vaultCount(t, n); c != 0 {
		t.Fatalf("%d records under another key after the rotation", c)
	}
	// The cluster CA's key, replicated sealed under the vault key, was
	// re-sealed too: the node still issues a joiner its certificate.
	joiner := nodetest.Start(t, nodetest.Options{ID: "node2", KeyFile: newKey, Join: n.HTTPAddr})
	nodetest.ClusterOf(t, newKey, n, joiner).WaitMembers(2, 30*time.Second)
}

func metricsText(t *testing.T, n *nodetest.Node) string {
	t.Helper()
	resp, err := clusterClient().Get(n.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 64<<10)
	for {
		k, err := resp.Body.Read(buf)
		b.Write(buf[:k])
		if err != nil {
			break
		}
	}
	return b.String()
}
