package node_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/transport/signature"
)

type rotated struct {
	MerchantID         string `json:"merchant_id"`
	Pair               string `json:"pair"`
	PublicKey          string `json:"public_key"`
	SecretKey          string `json:"secret_key"`
	PreviousPublicKey  string `json:"previous_public_key"`
	PreviousValidUntil string `json:"previous_valid_until"`
}

func rotateKeys(t *testing.T, n *nodetest.Node, merchantID, pair string, overlap int) rotated {
	t.Helper()
	var out rotated
	body := fmt.Sprintf(`{"pair":%q,"overlap_seconds":%d}`, pair, overlap)
	if code, err := n.Admin("POST", "/admin/v1/merchants/"+merchantID+"/rotate-keys", body, &out); code != 200 || err != nil {
		t.Fatalf("rotate %s keys: %d %v", pair, code, err)
	}
	if out.PublicKey == "" || out.SecretKey == "" || out.Pair != pair {
		t.Fatalf("rotate %s keys answered %+v", pair, out)
	}
	return out
}

// An API key rotation on a three-node cluster: the replaced pair signs
// requests until the overlap ends, to the request, and is refused with
// 401 1.01 from then on, on whichever node leads after the rotation (the
// end of the overlap is in the replicated record, not in a node's memory).
func TestMerchantAPIKeyRotationOverlap(t *testing.T) {
	c := nodetest.StartCluster(t, 3)
	leader := c.Leader()
	m := leader.CreateMerchant(t, 10000)
	id := newOrderID("rot")
	if r := m.Post(t, "charge", chargeBody(id, "4111111111111111", 1000, 24)); r.Status != 200 {
		t.Fatalf("charge: %s", r.Body)
	}
	// Asked of a follower: admin writes are forwarded to the leader.
	const overlap = 6
	asked := time.Now()
	rot := rotateKeys(t, c.Other(leader), m.ID, "api", overlap)
	answered := time.Now()
	until, err := time.Parse(time.RFC3339Nano, rot.PreviousValidUntil)
	if err != nil {
		t.Fatal(err)
	}
	if until.Before(asked.Add(overlap*time.Second)) || until.After(answered.Add(overlap*time.Second)) {
		t.Fatalf("overlap ends %s, want %d s after the rotation (asked %s, answered %s)", until, overlap, asked, answered)
	}
	if rot.PreviousPublicKey != m.PublicKey {
		t.Fatalf("previous_public_key %q, want %q", rot.PreviousPublicKey, m.PublicKey)
	}
	fresh := *m
	fresh.PublicKey, fresh.SecretKey = rot.PublicKey, rot.SecretKey

	// The leader hands over: the new one knows both pairs from the log.
	if err := leader.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	next := c.WaitLeader(leader, 10*time.Second)
	old, renewed := m.At(next), fresh.At(next)
	if r := renewed.Post(t, "status", map[string]any{"order_id": id}); r.Status != 200 {
		t.Fatalf("new key on the new leader: %d %s", r.Status, r.Body)
	}
	accepted := 0
	for {
		sent := time.Now()
		r := old.Post(t, "status", map[string]any{"order_id": id})
		done := time.Now()
		switch {
		case done.Before(until) && r.Status != 200:
			t.Fatalf("the replaced key was refused %s before its overlap ended: %d %s", until.Sub(done), r.Status, r.Body)
		case sent.After(until) && (r.Status != 401 || r.ErrorCode() != "1.01"):
			t.Fatalf("the replaced key was accepted %s after its overlap ended: %d %s", sent.Sub(until), r.Status, r.Body)
		case r.Status == 200:
			accepted++
		}
		if sent.After(until) {
			break
		}
		if time.Since(until) > 10*time.Second {
			t.Fatal("no request was sent after the overlap")
		}
		time.Sleep(50 * time.Millisecond) // pacing of the poll, not a proof
	}
	if accepted == 0 {
		t.Fatal("the replaced key signed no request during its overlap")
	}
	if r := renewed.Post(t, "status", map[string]any{"order_id": id}); r.Status != 200 {
		t.Fatalf("new key after the overlap: %d %s", r.Status, r.Body)
	}

	// A second rotation without overlap: its replaced key is refused at
	// once, and the first key names no merchant any more.
	rot2 := rotateKeys(t, next, m.ID, "api", 0)
	if r := renewed.Post(t, "status", map[string]any{"order_id": id}); r.Status != 401 || r.ErrorCode() != "1.01" {
		t.Fatalf("key replaced without overlap: %d %s", r.Status, r.Body)
	}
	if r := old.Post(t, "status", map[string]any{"order_id": id}); r.Status != 401 || !r.HasMessage("merchant") {
		t.Fatalf("the first key after two rotations: %d %s", r.Status, r.Body)
	}
	third := fresh
	third.PublicKey, third.SecretKey = rot2.PublicKey, rot2.SecretKey
	if r := third.At(next).Post(t, "status", map[string]any{"order_id": id}); r.Status != 200 {
		t.Fatalf("the newest key: %d %s", r.Status, r.Body)
	}
}

// A rotated webhook pair signs every notification sent after the
// rotation, and the merchant header names it; bad rotation requests are
// refused in the contract's shape.
func TestMerchantWebhookKeyRotation(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 1000)
	hooks := newReceiver(t)
	chargeWithCallback(m, t, hooks.URL())
	first := hooks.waitCalls(1, 10*time.Second)
	if c := first[0]; c.merchant != m.WebhookPK || c.signature != signature.Sign(m.WebhookPK, m.WebhookSK, c.body) {
		t.Fatalf("notification before the rotation not signed with the first pair: merchant %q", c.merchant)
	}
	rot := rotateKeys(t, n, m.ID, "webhook", 0)
	if rot.PreviousPublicKey != m.WebhookPK || rot.PreviousValidUntil != "" {
		t.Fatalf("webhook rotation answered %+v", rot)
	}
	before := len(hooks.Calls())
	for i := 0; i < 3; i++ {
		chargeWithCallback(m, t, hooks.URL())
	}
	calls := hooks.waitCalls(before+3, 10*time.Second)
	for _, c := range calls[before:] {
		if c.merchant != rot.PublicKey || c.signature != signature.Sign(rot.PublicKey, rot.SecretKey, c.body) {
			t.Fatalf("notification after the rotation: merchant %q, signature not of the new pair", c.merchant)
		}
		if signature.Verify(m.WebhookPK, m.WebhookSK, c.body, []byte(c.signature)) {
			t.Fatal("a notification after the rotation verifies with the old pair")
		}
	}
	// The API pair is untouched by a webhook rotation.
	if r := m.Post(t, "status", map[string]any{"order_id": "none"}); r.Status == 401 {
		t.Fatalf("api key refused after a webhook rotation: %s", r.Body)
	}

	path := "/admin/v1/merchants/" + m.ID + "/rotate-keys"
	expectAdminError(t, n, path, `{"pair":"sms"}`, 422, "2.01", "pair")
	expectAdminError(t, n, path, `{"pair":"api","overlap_seconds":-1}`, 422, "2.01", "overlap_seconds")
	expectAdminError(t, n, path, `{"pair":"api","overlap_seconds":2592001}`, 422, "2.01", "overlap_seconds")
	expectAdminError(t, n, path, `{"pair":"webhook","overlap_seconds":60}`, 422, "2.01", "overlap_seconds")
	expectAdminError(t, n, path, `{"pair":"api","overlap":60}`, 400, "2.07", "body")
	expectAdminError(t, n, "/admin/v1/merchants/mer_nobody/rotate-keys", `{"pair":"api"}`, 404, "0.01", "merchant_id")
	if code, err := n.Admin("GET", path, "", nil); code != 405 {
		t.Fatalf("GET rotate-keys: %d %v", code, err)
	}
}
