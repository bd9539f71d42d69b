package node_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/tokenmaker"
	"github.com/paygate/gateway/transport/wallet/walleta"
	"github.com/paygate/gateway/transport/wallet/walletb"
)

// The card vendor's own client library against a real gatewayd (contract
// section 15, issue 34): tests/clientlib drives the Node library through
// every one of its HTTP methods; the Go tests below send what a merchant's
// code gets wrong to each of the operations it added.

// clientLibDir is tests/clientlib, where the library is pinned.
func clientLibDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "tests", "clientlib")
}

// nodeTools finds node and npm (Debian's nodejs and npm packages). Without
// them the test skips, unless CI=true, where it must run (scripts/test
// installs them).
func nodeTools(t *testing.T) (node, npm string) {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNPM := exec.LookPath("npm")
	if errNode == nil && errNPM == nil {
		return node, npm
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("node or npm is not installed; the client-library test must run in CI (scripts/test installs them)")
	}
	t.Skip("node or npm is not installed (apt-get install nodejs npm); skipping the client-library test")
	return "", ""
}

// installClientLib runs npm ci in dir unless the library pinned in
// package.json is installed already (scripts/test installs it first).
func installClientLib(t *testing.T, npm, dir string) {
	t.Helper()
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	var installed struct {
		Version string `json:"version"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil || json.Unmarshal(data, &pkg) != nil || pkg.Dependencies["@solidgate/node-sdk"] == "" {
		t.Fatalf("tests/clientlib/package.json does not pin @solidgate/node-sdk: %v", err)
	}
	data, err = os.ReadFile(filepath.Join(dir, "node_modules", "@solidgate", "node-sdk", "package.json"))
	if err == nil && json.Unmarshal(data, &installed) == nil && installed.Version == pkg.Dependencies["@solidgate/node-sdk"] {
		return
	}
	cmd := exec.Command(npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in tests/clientlib: %v\n%s", err, out)
	}
}

// walletToken is a wallet payment the Node test sends with the library.
type walletToken struct {
	Amount        int64          `json:"amount"`
	Currency      string         `json:"currency"`
	PaymentSource map[string]any `json:"payment_source"`
}

func TestVendorClientLibrary(t *testing.T) {
	node, npm := nodeTools(t)
	dir := clientLibDir(t)
	installClientLib(t, npm, dir)

	setDir, ds := walletSetDir(t)
	n := nodetest.Start(t, nodetest.Options{Args: walletFlags(setDir, ds)})
	m := n.CreateMerchant(t, 10000)

	// Wallet tokens are single use and bound to this node's keys (and
	// walletb-pay ECv2 to the merchant): made here, one per method and
	// version.
	tokens := map[string]map[string]walletToken{}
	for i, version := range []string{"v1", "v3"} {
		amount := int64(1250 + i)
		a := walletVersion{wallet.WalletA, walleta.VersionEC}
		b := walletVersion{wallet.WalletB, walletb.VersionECv2}
		tokens[version] = map[string]walletToken{
			"applePay":  {amount, "USD", a.source(t, ds, m.ID, tokenmaker.PaymentInput{Amount: amount, Currency: "USD"})},
			"googlePay": {amount, "USD", b.source(t, ds, m.ID, tokenmaker.PaymentInput{})},
		}
	}
	tokensJSON, err := json.Marshal(tokens)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// TAP whatever the Node version's default reporter: the counts below read it.
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=tap", "sdk.test.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GATEWAY_URL="+n.URL(),
		"API_PUBLIC_KEY="+m.PublicKey, "API_SECRET_KEY="+m.SecretKey,
		"WEBHOOK_PUBLIC_KEY="+m.WebhookPK, "WEBHOOK_SECRET_KEY="+m.WebhookSK,
		"WALLET_TOKENS="+string(tokensJSON),
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test tests/clientlib/sdk.test.js: %v\n%s", err, out)
	}
	// node --test reports every subtest; a file that ran none passes too.
	if !strings.Contains(string(out), "# fail 0") || strings.Contains(string(out), "# pass 0\n") {
		t.Fatalf("the client-library tests did not all run and pass:\n%s", out)
	}
	t.Logf("%s", out)
}

// recurringBody is a recurring payment by token (contract section 15).
func recurringBody(orderID string, amount int64, token string) map[string]any {
	b := chargeBody(orderID, "4111111111111111", amount, 24)
	delete(b, "payment_source")
	b["recurring_token"] = token
	return b
}

// Bad input on each operation the vendor's library added: refused with the
// catalogue's code on the request's own field, nothing made.
func TestVendorRoutesRefuseBadInput(t *testing.T) {
	setDir, ds := walletSetDir(t)
	n := nodetest.Start(t, nodetest.Options{Args: walletFlags(setDir, ds)})
	m := n.CreateMerchant(t, 10000)
	other := n.CreateMerchant(t, 10000)

	// A token and an order of each merchant.
	paid := func(mm *nodetest.Merchant) (orderID, token string) {
		id := newOrderID("vendor-src")
		mm.Post(t, "charge", chargeBody(id, "4111111111111111", 1000, 24))
		return id, mm.WaitStatus(t, id, "authorized", 5*time.Second).Str("payment_source.payment_token")
	}
	_, token := paid(m)
	otherOrder, otherToken := paid(other)
	notMade := func(t *testing.T, id string) {
		t.Helper()
		expectError(t, m.Post(t, "status", map[string]any{"order_id": id}), 404, "2.05", "order_id")
	}

	for _, op := range []string{"recurring", "resign"} {
		t.Run(op+" recurring_token", func(t *testing.T) {
			for name, tok := range map[string]any{"missing": nil, "unknown": "tok_doesnotexist", "another merchant's": otherToken} {
				id := newOrderID("vendor-" + op)
				body := recurringBody(id, 500, token)
				if op == "resign" {
					body["card_cvv"] = "123"
				}
				if tok == nil {
					delete(body, "recurring_token")
				} else {
					body["recurring_token"] = tok
				}
				r := m.Post(t, op, body)
				switch name {
				case "missing":
					expectError(t, r, 422, "2.01", "recurring_token")
				default:
					expectError(t, r, 422, "7.01", "recurring_token")
				}
				if strings.Contains(string(r.Body), "payment_source") {
					t.Errorf("%s token: the answer names the charge's field: %s", name, r.Body)
				}
				notMade(t, id)
			}
		})
	}
	t.Run("resign card_cvv", func(t *testing.T) {
		id := newOrderID("vendor-resign")
		expectError(t, m.Post(t, "resign", recurringBody(id, 500, token)), 422, "2.01", "card_cvv")
		// Four digits for a visa card: known only once the token resolves.
		body := recurringBody(id, 500, token)
		body["card_cvv"] = "1234"
		expectError(t, m.Post(t, "resign", body), 422, "2.06", "card_cvv")
		notMade(t, id)
	})
	t.Run("recurring card_cvv", func(t *testing.T) {
		id := newOrderID("vendor-recurring")
		body := recurringBody(id, 500, token)
		body["card_cvv"] = "123"
		expectError(t, m.Post(t, "recurring", body), 422, "2.01", "card_cvv")
		notMade(t, id)
	})

	for _, c := range []struct{ op, walletType string }{{"apple-pay", wallet.WalletA}, {"google-pay", wallet.WalletB}} {
		t.Run(c.op+" body", func(t *testing.T) {
			id := newOrderID("vendor-" + c.op)
			body := walletBody(id, 1000, nil)
			delete(body, "payment_source")
			expectError(t, m.Post(t, c.op, body), 422, "2.01", "payment_source")
			// The right shape, a token that does not verify.
			v := walletVersion{c.walletType, walleta.VersionEC}
			if c.walletType == wallet.WalletB {
				v.version = walletb.VersionECv2
			}
			ps := v.source(t, anotherSet(t), m.ID, tokenmaker.PaymentInput{Amount: 1000})
			expectError(t, m.Post(t, c.op, walletBody(id, 1000, ps)), 422, "2.01", "payment_source")
			// Another type of payment_source.
			ps = map[string]any{"type": "card"}
			expectError(t, m.Post(t, c.op, walletBody(id, 1000, ps)), 422, "2.01", "payment_source.type")
			notMade(t, id)
		})
	}

	t.Run("arn-code", func(t *testing.T) {
		expectError(t, m.Post(t, "arn-code", map[string]any{"order_id": otherOrder}), 404, "2.05", "order_id")
		expectError(t, m.Post(t, "arn-code", map[string]any{"order_id": "no-such-order"}), 404, "2.05", "order_id")
		expectError(t, m.Post(t, "arn-code", map[string]any{}), 422, "2.01", "order_id")
		expectError(t, m.Post(t, "arn-code", "[]"), 400, "2.07", "body")
		// Its owner sees it.
		if r := other.Post(t, "arn-code", map[string]any{"order_id": otherOrder}); r.Status != 200 {
			t.Fatalf("arn-code of the merchant's own order: %d %s", r.Status, r.Body)
		}
	})

	t.Run("auth", func(t *testing.T) {
		id := newOrderID("vendor-auth")
		// settle.delay_hours would not be honoured: refused, not ignored.
		expectError(t, m.Post(t, "auth", chargeBody(id, "4111111111111111", 500, 24)), 422, "2.01", "settle")
		notMade(t, id)
		body := chargeBody(id, "4111111111111111", 500, 24)
		delete(body, "settle")
		body["payment_source"].(map[string]any)["card_number"] = "4111111111111112"
		expectError(t, m.Post(t, "auth", body), 422, "2.08", "payment_source.card_number")
		notMade(t, id)
	})

	t.Run("unknown operation", func(t *testing.T) {
		for _, op := range []string{"arn_code", "applepay", "payments/charge", ""} {
			expectError(t, m.Post(t, op, map[string]any{"order_id": "x"}), 404, "0.01", "path")
		}
		// Refused before authentication, on either version.
		for _, path := range []string{"/api/v1/nope", "/api/v3/nope"} {
			st, _, body := httpDo(t, "POST", n.URL()+path, "application/json", "{}")
			if st != 404 || !strings.Contains(string(body), `"code":"0.01"`) || !strings.Contains(string(body), `"path"`) {
				t.Fatalf("%s: %d %s", path, st, body)
			}
		}
	})
}

// The library's operations on the happy path that its own test cannot
// see from outside: an auth is never settled by the schedule, a settle
// without amount settles the whole authorisation, and the same body sent
// to charge and to auth is two requests.
func TestVendorAuthIsSettledOnlyOnRequest(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--settle-delay-unit", "50ms"}})
	m := n.CreateMerchant(t, 10000)

	authID := newOrderID("auth-manual")
	body := chargeBody(authID, "4111111111111111", 800, 1)
	delete(body, "settle")
	if r := m.Post(t, "auth", body); r.Status != 200 || r.Str("transaction.operation") != "auth" {
		t.Fatalf("auth: %d %s", r.Status, r.Body)
	}
	m.WaitStatus(t, authID, "authorized", 5*time.Second)
	// A charge authorised after the auth, with the shortest delay: once the
	// schedule has settled it, it has passed the auth by.
	// Its body is also a recurring payment's (recurring_token is not a
	// charge's field, payment_source not a recurring one's).
	chargeID := newOrderID("auth-scheduled")
	both := chargeBody(chargeID, "4111111111111111", 800, 1)
	both["recurring_token"] = "tok_any"
	m.Post(t, "charge", both)
	m.WaitStatus(t, chargeID, "settled", 10*time.Second)
	// The same bytes posted to recurring are another request: refused for
	// the order_id, not answered with the charge's order.
	expectError(t, m.Post(t, "recurring", both), 409, "5.06", "order_id")
	if st := m.Post(t, "status", map[string]any{"order_id": authID}); st.Str("status") != "authorized" || st.Num("settled_amount") != 0 {
		t.Fatalf("the schedule settled an auth: %s", st.Body)
	}

	// Repeated as it was: the order as it stands.
	if r := m.Post(t, "auth", body); r.Status != 200 || r.Str("status") != "authorized" {
		t.Fatalf("auth repeated: %d %s", r.Status, r.Body)
	}

	// Settle without amount: the whole authorised amount, once.
	s := m.Post(t, "settle", map[string]any{"order_id": authID})
	if s.Status != 200 || s.Str("status") != "settled" || s.Num("settled_amount") != 800 || s.Num("transaction.amount") != 800 {
		t.Fatalf("settle without amount: %d %s", s.Status, s.Body)
	}
	expectError(t, m.Post(t, "settle", map[string]any{"order_id": authID}), 409, "0.03", "status")

	// arn-code lists the auth and the settle, by the transactions' ids.
	arn := m.Post(t, "arn-code", map[string]any{"order_id": authID})
	codes, _ := arn.Get("arn_codes").([]any)
	st := m.Post(t, "status", map[string]any{"order_id": authID})
	if arn.Status != 200 || len(codes) != 2 {
		t.Fatalf("arn-code: %d %s", arn.Status, arn.Body)
	}
	for i, want := range []string{"auth", "settle"} {
		c := codes[i].(map[string]any)
		id, _ := c["transaction_id"].(string)
		if c["operation"] != want || c["arn_code"] == "" || c["arn_code"] != st.Str("transactions."+id+".arn") ||
			c["amount"] != float64(800) || c["currency"] != "USD" || c["created_at"] != st.Str("transactions."+id+".created_at") {
			t.Fatalf("arn_codes[%d]: %v; order %s", i, c, st.Body)
		}
	}
}
