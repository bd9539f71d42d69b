package node_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/transport/signature"
	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/tokenmaker"
	"github.com/paygate/gateway/transport/wallet/walleta"
	"github.com/paygate/gateway/transport/wallet/walletb"
)

// Wallet payments end to end (issue 6): real gatewayd processes whose wallet
// flags point at a development set the test generated, tokens made by the
// tokenmaker playing the provider and the device, signed HTTP requests.

// walletSetDir generates a development set under a temp dir.
func walletSetDir(t *testing.T) (string, *tokenmaker.DevSet) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "wallet-set")
	ds, err := tokenmaker.GenerateDevSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, ds
}

// walletFlags are the node flags for the set in dir (contract section 10).
func walletFlags(dir string, ds *tokenmaker.DevSet) []string {
	return []string{
		"--walleta-merchant-id", ds.A.MerchantID,
		"--walleta-processing-key-file", filepath.Join(dir, tokenmaker.FileWalletAProcessingKeys),
		"--walleta-root-cert-file", filepath.Join(dir, tokenmaker.FileWalletARootCert),
		"--walletb-recipient-id", ds.B.RecipientID,
		"--walletb-private-key-file", filepath.Join(dir, tokenmaker.FileWalletBRecipientKey),
		"--walletb-root-keys-file", filepath.Join(dir, tokenmaker.FileWalletBRootKeys),
	}
}

// otherSet is a second provider/merchant set, for tokens the node must not
// accept. Generated once per test process (RSA key generation is slow).
var otherSet = sync.OnceValues(func() (*tokenmaker.DevSet, error) { return tokenmaker.GenerateDevSet("") })

func anotherSet(t *testing.T) *tokenmaker.DevSet {
	t.Helper()
	ds, err := otherSet()
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// walletBody is a valid wallet payment request (interface 4.4).
func walletBody(orderID string, amount int64, source map[string]any) map[string]any {
	return map[string]any{
		"order_id": orderID, "amount": amount, "currency": "USD",
		"order_description": "e2e wallet order", "processing_mid": "mid-1",
		"settle":         map[string]any{"delay_hours": 24},
		"customer":       map[string]any{"user_id": "u1", "email": "u1@example.com", "ip_address": "203.0.113.7"},
		"payment_source": source,
	}
}

// walletVersion is one token version: its endpoint and a maker.
type walletVersion struct {
	endpoint, version string
}

var walletVersions = []walletVersion{
	{wallet.WalletA, walleta.VersionEC}, {wallet.WalletA, walleta.VersionRSA},
	{wallet.WalletB, walletb.VersionECv1}, {wallet.WalletB, walletb.VersionECv2},
}

// source makes a payment_source of v from ds for merchant (ECv2's
// gatewayMerchantId); in may set the card and knobs.
func (v walletVersion) source(t *testing.T, ds *tokenmaker.DevSet, merchant string, in tokenmaker.PaymentInput) map[string]any {
	t.Helper()
	if v.endpoint == wallet.WalletA {
		tok, err := ds.WalletA(v.version, in)
		if err != nil {
			t.Fatal(err)
		}
		return tokenmaker.PaymentSourceA(tok)
	}
	if in.GatewayMerchantID == "" {
		in.GatewayMerchantID = merchant
	}
	tok, err := ds.WalletB(v.version, in)
	if err != nil {
		t.Fatal(err)
	}
	return tokenmaker.PaymentSourceB(tok)
}

// expectSourceRefused asserts a 422 2.01 on payment_source and that no order
// was created.
func expectSourceRefused(t *testing.T, m *nodetest.Merchant, endpoint string, body map[string]any, msg string) {
	t.Helper()
	r := m.Post(t, endpoint, body)
	expectError(t, r, 422, "2.01", "payment_source")
	if msg != "" && !strings.Contains(string(r.Body), msg) {
		t.Fatalf("want a message with %q: %s", msg, r.Body)
	}
	id := body["order_id"].(string)
	expectError(t, m.Post(t, "status", map[string]any{"order_id": id}), 404, "2.05", "order_id")
}

// waitNotification waits for a notification of orderID in status.
func waitNotification(t *testing.T, rcv *receiver, m *nodetest.Merchant, orderID, status string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, c := range rcv.Calls() {
			var body map[string]any
			if json.Unmarshal(c.body, &body) != nil || body["order_id"] != orderID || body["status"] != status {
				continue
			}
			if c.merchant != m.WebhookPK || !signature.Verify(m.WebhookPK, m.WebhookSK, c.body, []byte(c.signature)) {
				t.Fatalf("notification not signed with the webhook key pair: %s", c.body)
			}
			return body
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %s notification for %s", status, orderID)
	return nil
}

// Every version: token made → payment accepted (processing) → authorised,
// shown like a card charge with the wallet's type and the masked card, and
// notified like a card charge. The card number appears nowhere at rest or in
// the logs.
func TestWalletRoundTrip(t *testing.T) {
	setDir, ds := walletSetDir(t)
	dataDir := t.TempDir()
	n := nodetest.Start(t, nodetest.Options{DataDir: dataDir, Args: append(walletFlags(setDir, ds), "--log-level", "debug")})
	m := n.CreateMerchant(t, 10000)
	rcv := newReceiver(t)
	const pan = "5555555555554444"

	for _, v := range walletVersions {
		t.Run(v.version, func(t *testing.T) {
			id := newOrderID("w-" + v.version)
			body := walletBody(id, 1250, v.source(t, ds, m.ID, tokenmaker.PaymentInput{PAN: pan, Amount: 1250, ExpMonth: "07", ExpYear: "2031"}))
			body["callback_url"] = rcv.URL()
			r := m.Post(t, v.endpoint, body)
			if r.Status != 200 || r.Str("status") != "processing" || r.Str("transaction.operation") != "auth" ||
				r.Str("transaction.status") != "created" || r.Str("payment_source.type") != v.endpoint ||
				r.Str("payment_source.masked_card_number") != "555555******4444" || r.Get("three_ds") != nil {
				t.Fatalf("wallet payment: %d %s", r.Status, r.Body)
			}
			st := m.WaitStatus(t, id, "authorized", 5*time.Second)
			txn := onlyTxn(t, st)
			if txn["status"] != "success" || st.Str("payment_source.type") != v.endpoint ||
				st.Str("payment_source.masked_card_number") != "555555******4444" || st.Str("payment_source.card_brand") != "mastercard" ||
				st.Str("payment_source.card_exp_month") != "07" || st.Str("payment_source.card_exp_year") != "2031" ||
				st.Str("payment_source.payment_token") != "" || st.Get("three_ds") != nil {
				t.Fatalf("authorised wallet order: %s", st.Body)
			}
			nb := waitNotification(t, rcv, m, id, "authorized")
			if ps, _ := nb["payment_source"].(map[string]any); ps["type"] != v.endpoint || ps["masked_card_number"] != "555555******4444" {
				t.Fatalf("notification payment_source: %v", nb["payment_source"])
			}
			// The same request again: the order as it stands, nothing new.
			again := m.Post(t, v.endpoint, body)
			if again.Status != 200 || again.Str("status") != "authorized" || again.Str("transaction.id") != r.Str("transaction.id") {
				t.Fatalf("idempotent repeat: %d %s", again.Status, again.Body)
			}
			// Settles like a card order.
			if s := m.Post(t, "settle", map[string]any{"order_id": id, "amount": 1250}); s.Str("status") != "settled" {
				t.Fatalf("settle: %s", s.Body)
			}
		})
	}

	// The cryptogram reaches the acquirer: the sandbox's 3-D Secure card
	// needs authentication, which a CRYPTOGRAM_3DS token stands for, and
	// declines a PAN_ONLY one 5.01.
	t.Run("cryptogram reaches the acquirer", func(t *testing.T) {
		const enrolled = "4000000000003220"
		v := walletVersion{wallet.WalletB, walletb.VersionECv2}
		id := newOrderID("w-3ds")
		m.Post(t, v.endpoint, walletBody(id, 500, v.source(t, ds, m.ID, tokenmaker.PaymentInput{PAN: enrolled})))
		m.WaitStatus(t, id, "authorized", 5*time.Second)
		id2 := newOrderID("w-panonly")
		m.Post(t, v.endpoint, walletBody(id2, 500, v.source(t, ds, m.ID, tokenmaker.PaymentInput{PAN: enrolled, AuthMethod: wallet.AuthPANOnly})))
		if st := m.WaitStatus(t, id2, "declined", 5*time.Second); st.Str("decline.code") != "5.01" {
			t.Fatalf("PAN_ONLY on an enrolled card: %s", st.Body)
		}
		a := walletVersion{wallet.WalletA, walleta.VersionEC}
		id3 := newOrderID("w-3ds-a")
		m.Post(t, a.endpoint, walletBody(id3, 500, a.source(t, ds, m.ID, tokenmaker.PaymentInput{PAN: enrolled, Amount: 500})))
		m.WaitStatus(t, id3, "authorized", 5*time.Second)
		// The not-enrolled card is approved only as the non-secure charge a
		// merchant asks for, which a wallet payment is not: 5.01.
		id4 := newOrderID("w-notenrolled")
		m.Post(t, v.endpoint, walletBody(id4, 500, v.source(t, ds, m.ID, tokenmaker.PaymentInput{PAN: "4000000000003063", AuthMethod: wallet.AuthPANOnly})))
		if st := m.WaitStatus(t, id4, "declined", 5*time.Second); st.Str("decline.code") != "5.01" {
			t.Fatalf("PAN_ONLY on a not-enrolled card: %s", st.Body)
		}
	})

	// A wallet's card reaches the issuer without the API's expiry check: an
	// expired one is declined 2.09, as the sandbox's issuer would.
	t.Run("an expired card is declined", func(t *testing.T) {
		for _, v := range []walletVersion{walletVersions[0], walletVersions[3]} {
			id := newOrderID("w-expired")
			body := walletBody(id, 500, v.source(t, ds, m.ID, tokenmaker.PaymentInput{
				PAN: "4111111111111111", ExpMonth: "01", ExpYear: "2020", Amount: 500}))
			if r := m.Post(t, v.endpoint, body); r.Status != 200 {
				t.Fatalf("%s: %s", v.version, r.Body)
			}
			if st := m.WaitStatus(t, id, "declined", 5*time.Second); st.Str("decline.code") != "2.09" {
				t.Fatalf("%s, expired card: %s", v.version, st.Body)
			}
		}
	})

	t.Run("EMV and sale", func(t *testing.T) {
		v := walletVersion{wallet.WalletA, walleta.VersionRSA}
		id := newOrderID("w-emv")
		body := walletBody(id, 800, v.source(t, ds, m.ID, tokenmaker.PaymentInput{PAN: pan, Amount: 800, AuthMethod: wallet.AuthEMV}))
		body["settle"] = map[string]any{"delay_hours": 0}
		if r := m.Post(t, v.endpoint, body); r.Str("transaction.operation") != "sale" {
			t.Fatalf("sale: %s", r.Body)
		}
		m.WaitStatus(t, id, "settled", 5*time.Second)
	})

	// Stopped, the node has written and closed everything it will.
	if err := n.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(pan)) || bytes.Contains(data, []byte("4000000000003220")) {
			t.Errorf("card number in clear in %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if logs := n.Logs(); strings.Contains(logs, pan) || strings.Contains(logs, "4000000000003220") {
		t.Error("card number in the node's log output")
	}
}

// flip changes one byte of a base64 value at index i (negative: from the end).
func flip(t *testing.T, b64 string, i int) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	if i < 0 {
		i += len(b)
	}
	b[i] ^= 0x01
	return base64.StdEncoding.EncodeToString(b)
}

// withSignedMessage rewrites one field of a walletb-pay signedMessage.
func withSignedMessage(t *testing.T, tok walletb.Token, field string, edit func(string) string) walletb.Token {
	t.Helper()
	var sm map[string]string
	if err := json.Unmarshal([]byte(tok.SignedMessage), &sm); err != nil {
		t.Fatal(err)
	}
	sm[field] = edit(sm[field])
	b, _ := json.Marshal(sm)
	tok.SignedMessage = string(b)
	return tok
}

// Each refusal is 422, code 2.01, attribute payment_source, and creates no
// order.
func TestWalletRefusals(t *testing.T) {
	setDir, ds := walletSetDir(t)
	n := nodetest.Start(t, nodetest.Options{Args: walletFlags(setDir, ds)})
	m := n.CreateMerchant(t, 10000)
	other := anotherSet(t)
	now := time.Now()
	in := tokenmaker.PaymentInput{Amount: 1000}
	inB := tokenmaker.PaymentInput{GatewayMerchantID: m.ID}

	mustA := func(tok walleta.Token, err error) walleta.Token {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	mustB := func(tok walletb.Token, err error) walletb.Token {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// Sets mixing our keys with another provider's or merchant's.
	foreignChainA := *other.A // another provider's chain, our processing keys
	foreignChainA.ProcessingKeyEC, foreignChainA.ProcessingKeyRSA, foreignChainA.MerchantID = ds.A.ProcessingKeyEC, ds.A.ProcessingKeyRSA, ds.A.MerchantID
	otherMerchantA := *ds.A // our provider, another merchant's processing keys
	otherMerchantA.ProcessingKeyEC, otherMerchantA.ProcessingKeyRSA = other.A.ProcessingKeyEC, other.A.ProcessingKeyRSA
	foreignRootsB := *other.B // another provider's root keys, our recipient
	foreignRootsB.RecipientKey, foreignRootsB.RecipientID = ds.B.RecipientKey, ds.B.RecipientID
	otherRecipientB := *ds.B // our provider, another gateway's recipient key
	otherRecipientB.RecipientKey = other.B.RecipientKey

	type refusal struct {
		name, endpoint string
		source         func() map[string]any
		msg            string
	}
	cases := []refusal{
		{"walleta tampered data", wallet.WalletA, func() map[string]any {
			tok := mustA(ds.WalletA(walleta.VersionEC, in))
			tok.Data = flip(t, tok.Data, 0)
			return tokenmaker.PaymentSourceA(tok)
		}, "signature does not verify"},
		{"walleta tampered tag", wallet.WalletA, func() map[string]any {
			tok := mustA(ds.WalletA(walleta.VersionEC, in))
			tok.Data = flip(t, tok.Data, -1) // the GCM tag ends data; re-signed so decryption is what fails
			if err := ds.SignWalletA(&tok, time.Now()); err != nil {
				t.Fatal(err)
			}
			return tokenmaker.PaymentSourceA(tok)
		}, "could not be decrypted"},
		{"walleta RSA tampered tag", wallet.WalletA, func() map[string]any {
			tok := mustA(ds.WalletA(walleta.VersionRSA, in))
			tok.Data = flip(t, tok.Data, -1)
			if err := ds.SignWalletA(&tok, time.Now()); err != nil {
				t.Fatal(err)
			}
			return tokenmaker.PaymentSourceA(tok)
		}, "could not be decrypted"},
		{"walleta wrong signature", wallet.WalletA, func() map[string]any {
			tok := mustA(ds.WalletA(walleta.VersionEC, in))
			tok.Signature = mustA(ds.WalletA(walleta.VersionEC, in)).Signature // another token's
			return tokenmaker.PaymentSourceA(tok)
		}, "signature does not verify"},
		{"walleta chain not reaching the root", wallet.WalletA, func() map[string]any {
			mixed := &tokenmaker.DevSet{A: &foreignChainA}
			return tokenmaker.PaymentSourceA(mustA(mixed.WalletA(walleta.VersionEC, in)))
		}, "not trusted"},
		{"walleta expired signing time", wallet.WalletA, func() map[string]any {
			return tokenmaker.PaymentSourceA(mustA(ds.WalletA(walleta.VersionEC, tokenmaker.PaymentInput{Amount: 1000, SigningTime: now.Add(-10 * time.Minute)})))
		}, "expired"},
		{"walleta another merchant's EC key", wallet.WalletA, func() map[string]any {
			mixed := &tokenmaker.DevSet{A: &otherMerchantA}
			return tokenmaker.PaymentSourceA(mustA(mixed.WalletA(walleta.VersionEC, in)))
		}, "another merchant's key"},
		{"walleta another merchant's RSA key", wallet.WalletA, func() map[string]any {
			mixed := &tokenmaker.DevSet{A: &otherMerchantA}
			return tokenmaker.PaymentSourceA(mustA(mixed.WalletA(walleta.VersionRSA, in)))
		}, "another merchant's key"},
		{"walleta amount differs from the order", wallet.WalletA, func() map[string]any {
			return tokenmaker.PaymentSourceA(mustA(ds.WalletA(walleta.VersionEC, tokenmaker.PaymentInput{Amount: 999})))
		}, "amount does not match"},
		{"walleta currency differs from the order", wallet.WalletA, func() map[string]any {
			return tokenmaker.PaymentSourceA(mustA(ds.WalletA(walleta.VersionEC, tokenmaker.PaymentInput{Amount: 1000, Currency: "EUR"})))
		}, "currency does not match"},

		{"walletb tampered data", wallet.WalletB, func() map[string]any {
			tok := mustB(ds.WalletB(walletb.VersionECv2, inB))
			return tokenmaker.PaymentSourceB(withSignedMessage(t, tok, "encryptedMessage", func(s string) string { return flip(t, s, 3) }))
		}, "signature does not verify"},
		{"walletb tampered tag", wallet.WalletB, func() map[string]any {
			tok := mustB(ds.WalletB(walletb.VersionECv2, inB))
			tok = withSignedMessage(t, tok, "tag", func(s string) string { return flip(t, s, 0) })
			if err := ds.SignWalletB(&tok, ds.B.RecipientID, now.Add(time.Hour)); err != nil { // re-signed: the HMAC is what fails
				t.Fatal(err)
			}
			return tokenmaker.PaymentSourceB(tok)
		}, "could not be decrypted"},
		{"walletb ECv1 tampered tag", wallet.WalletB, func() map[string]any {
			tok := mustB(ds.WalletB(walletb.VersionECv1, inB))
			tok = withSignedMessage(t, tok, "tag", func(s string) string { return flip(t, s, -1) })
			if err := ds.SignWalletB(&tok, ds.B.RecipientID, time.Time{}); err != nil {
				t.Fatal(err)
			}
			return tokenmaker.PaymentSourceB(tok)
		}, "could not be decrypted"},
		{"walletb wrong signature", wallet.WalletB, func() map[string]any {
			tok := mustB(ds.WalletB(walletb.VersionECv2, inB))
			tok.Signature = mustB(ds.WalletB(walletb.VersionECv2, inB)).Signature
			return tokenmaker.PaymentSourceB(tok)
		}, "signature does not verify"},
		{"walletb ECv2 chain not reaching the root", wallet.WalletB, func() map[string]any {
			mixed := &tokenmaker.DevSet{B: &foreignRootsB}
			return tokenmaker.PaymentSourceB(mustB(mixed.WalletB(walletb.VersionECv2, inB)))
		}, "signature does not verify"},
		{"walletb ECv1 another root", wallet.WalletB, func() map[string]any {
			mixed := &tokenmaker.DevSet{B: &foreignRootsB}
			return tokenmaker.PaymentSourceB(mustB(mixed.WalletB(walletb.VersionECv1, inB)))
		}, "signature does not verify"},
		{"walletb expired intermediate key", wallet.WalletB, func() map[string]any {
			return tokenmaker.PaymentSourceB(mustB(ds.WalletB(walletb.VersionECv2, tokenmaker.PaymentInput{
				GatewayMerchantID: m.ID, IntermediateExpiration: now.Add(-time.Minute)})))
		}, "expired"},
		{"walletb expired message", wallet.WalletB, func() map[string]any {
			return tokenmaker.PaymentSourceB(mustB(ds.WalletB(walletb.VersionECv2, tokenmaker.PaymentInput{
				GatewayMerchantID: m.ID, MessageExpiration: now.Add(-time.Minute)})))
		}, "expired"},
		{"walletb ECv1 expired message", wallet.WalletB, func() map[string]any {
			return tokenmaker.PaymentSourceB(mustB(ds.WalletB(walletb.VersionECv1, tokenmaker.PaymentInput{MessageExpiration: now.Add(-time.Minute)})))
		}, "expired"},
		{"walletb wrong recipient id", wallet.WalletB, func() map[string]any {
			return tokenmaker.PaymentSourceB(mustB(ds.WalletB(walletb.VersionECv2, tokenmaker.PaymentInput{
				GatewayMerchantID: m.ID, RecipientID: "gateway:someone-else"})))
		}, "signature does not verify"},
		{"walletb another gateway's recipient key", wallet.WalletB, func() map[string]any {
			mixed := &tokenmaker.DevSet{B: &otherRecipientB}
			return tokenmaker.PaymentSourceB(mustB(mixed.WalletB(walletb.VersionECv2, inB)))
		}, "could not be decrypted"},
		{"walletb ECv2 for another merchant", wallet.WalletB, func() map[string]any {
			return tokenmaker.PaymentSourceB(mustB(ds.WalletB(walletb.VersionECv2, tokenmaker.PaymentInput{GatewayMerchantID: "mer_someone_else"})))
		}, "another merchant"},
		{"walletb ECv0", wallet.WalletB, func() map[string]any {
			src := tokenmaker.PaymentSourceB(mustB(ds.WalletB(walletb.VersionECv1, inB)))
			delete(src, "protocolVersion") // unset means ECv0 (interface 4.4)
			return src
		}, "ECv0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expectSourceRefused(t, m, tc.endpoint, walletBody(newOrderID("refused"), 1000, tc.source()), tc.msg)
		})
	}
	// The refusals created nothing: a fresh valid token still pays.
	id := newOrderID("after-refusals")
	if r := m.Post(t, wallet.WalletB, walletBody(id, 1000, tokenmaker.PaymentSourceB(mustB(ds.WalletB(walletb.VersionECv2, inB))))); r.Status != 200 {
		t.Fatalf("valid token after refusals: %s", r.Body)
	}
}

// A transaction id is refused for a second order, by the same node and
// after a restart (the record is replicated state, not memory), while the
// same request for the first order still answers with it.
func TestWalletReplayRefusedAcrossRestart(t *testing.T) {
	setDir, ds := walletSetDir(t)
	n := nodetest.Start(t, nodetest.Options{Args: walletFlags(setDir, ds)})
	m := n.CreateMerchant(t, 10000)
	m2 := n.CreateMerchant(t, 10000)

	type used struct {
		v      walletVersion
		first  map[string]any
		source map[string]any
	}
	var all []used
	for _, v := range walletVersions {
		src := v.source(t, ds, m.ID, tokenmaker.PaymentInput{Amount: 1000})
		first := walletBody(newOrderID("replay-first"), 1000, src)
		if r := m.Post(t, v.endpoint, first); r.Status != 200 {
			t.Fatalf("%s first use: %s", v.version, r.Body)
		}
		expectSourceRefused(t, m, v.endpoint, walletBody(newOrderID("replay-again"), 1000, src), "already been used")
		all = append(all, used{v, first, src})
	}
	// Another merchant presenting a token already used is refused too (for
	// ECv1 and walleta-pay, which bind no merchant, only the replay rule
	// stops it).
	expectSourceRefused(t, m2, all[0].v.endpoint, walletBody(newOrderID("replay-m2"), 1000, all[0].source), "already been used")

	n.Restart()
	for _, u := range all {
		m.WaitStatus(t, u.first["order_id"].(string), "authorized", 5*time.Second)
		expectSourceRefused(t, m, u.v.endpoint, walletBody(newOrderID("replay-restart"), 1000, u.source), "already been used")
		// The same request for the first order: its order, not a refusal.
		r := m.Post(t, u.v.endpoint, u.first)
		if r.Status != 200 || r.Str("order_id") != u.first["order_id"] || r.Str("status") != "authorized" {
			t.Fatalf("%s idempotent repeat after restart: %d %s", u.v.version, r.Status, r.Body)
		}
		// The same order_id with another body: 409, as for a charge.
		other := walletBody(u.first["order_id"].(string), 1000, u.v.source(t, ds, m.ID, tokenmaker.PaymentInput{Amount: 1000}))
		expectError(t, m.Post(t, u.v.endpoint, other), 409, "5.06", "order_id")
	}
}

// Validation of the wallet shapes (interface 4.4), through HTTP.
func TestWalletValidation(t *testing.T) {
	setDir, ds := walletSetDir(t)
	n := nodetest.Start(t, nodetest.Options{Args: walletFlags(setDir, ds)})
	m := n.CreateMerchant(t, 10000)
	a := walletVersion{wallet.WalletA, walleta.VersionEC}
	b := walletVersion{wallet.WalletB, walletb.VersionECv2}
	cases := []struct {
		name, endpoint string
		src            walletVersion
		mutate         func(src map[string]any)
		attr           string
	}{
		{"EC_v1 without ephemeralPublicKey", wallet.WalletA, a, func(s map[string]any) {
			delete(s["header"].(map[string]any), "ephemeralPublicKey")
		}, "payment_source.header.ephemeralPublicKey"},
		{"RSA_v1 without wrappedKey", wallet.WalletA, a, func(s map[string]any) { s["version"] = "RSA_v1" }, "payment_source.header.wrappedKey"},
		{"version unknown", wallet.WalletA, a, func(s map[string]any) { s["version"] = "EC_v2" }, "payment_source.version"},
		{"header missing", wallet.WalletA, a, func(s map[string]any) { delete(s, "header") }, "payment_source.header"},
		{"transactionId missing", wallet.WalletA, a, func(s map[string]any) {
			delete(s["header"].(map[string]any), "transactionId")
		}, "payment_source.header.transactionId"},
		{"walleta type on walletb-pay", wallet.WalletB, a, func(map[string]any) {}, "payment_source.type"},
		{"signedMessage missing", wallet.WalletB, b, func(s map[string]any) { delete(s, "signedMessage") }, "payment_source.signedMessage"},
		{"ECv2 without intermediateSigningKey", wallet.WalletB, b, func(s map[string]any) { delete(s, "intermediateSigningKey") }, "payment_source.intermediateSigningKey"},
		{"protocolVersion unknown", wallet.WalletB, b, func(s map[string]any) { s["protocolVersion"] = "ECv3" }, "payment_source.protocolVersion"},
		{"signature missing", wallet.WalletB, b, func(s map[string]any) { delete(s, "signature") }, "payment_source.signature"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src.source(t, ds, m.ID, tokenmaker.PaymentInput{Amount: 1000})
			tc.mutate(src)
			body := walletBody(newOrderID("wval"), 1000, src)
			expectError(t, m.Post(t, tc.endpoint, body), 422, "2.01", tc.attr)
			expectError(t, m.Post(t, "status", map[string]any{"order_id": body["order_id"]}), 404, "2.05", "order_id")
		})
	}
	// A wallet source on charge points at its endpoint.
	body := chargeBody(newOrderID("wval"), "", 1000, 24)
	body["payment_source"] = a.source(t, ds, m.ID, tokenmaker.PaymentInput{Amount: 1000})
	expectError(t, m.Post(t, "charge", body), 422, "2.01", "payment_source.type")
	// Shared order fields are validated as on charge.
	body = walletBody(newOrderID("wval"), 1000, b.source(t, ds, m.ID, tokenmaker.PaymentInput{}))
	body["currency"] = "ABCD"
	expectError(t, m.Post(t, wallet.WalletB, body), 422, "2.03", "currency")
}

// Without wallet flags and without --dev the endpoints exist but refuse.
func TestWalletOffWithoutFlags(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 10000)
	_, ds := walletSetDir(t)
	for _, v := range []walletVersion{walletVersions[0], walletVersions[3]} {
		expectSourceRefused(t, m, v.endpoint, walletBody(newOrderID("off"), 1000, v.source(t, ds, m.ID, tokenmaker.PaymentInput{Amount: 1000})),
			"payments are not configured")
	}
}

// --dev writes a development set under <data-dir>/wallet-dev once, and the
// node accepts tokens made from it, also after a restart (loaded, not made
// again).
func TestWalletDevSet(t *testing.T) {
	dataDir := t.TempDir()
	n := nodetest.Start(t, nodetest.Options{DataDir: dataDir, Args: []string{"--dev"}})
	m := n.CreateMerchant(t, 10000)
	devDir := filepath.Join(dataDir, tokenmaker.DevDirName)
	pay := func() {
		t.Helper()
		ds, err := tokenmaker.LoadDevSet(devDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range walletVersions {
			id := newOrderID("dev-" + v.version)
			if r := m.Post(t, v.endpoint, walletBody(id, 1000, v.source(t, ds, m.ID, tokenmaker.PaymentInput{Amount: 1000}))); r.Status != 200 {
				t.Fatalf("%s with the dev set: %s", v.version, r.Body)
			}
			m.WaitStatus(t, id, "authorized", 5*time.Second)
		}
	}
	pay()
	n.Restart()
	pay()
}

// A wallet payment whose authorisation is pending when the node dies is
// resumed with its cryptogram: the sandbox's enrolled card, which needs it,
// is authorised, not declined 5.01.
func TestWalletPendingResumesWithCryptogram(t *testing.T) {
	setDir, ds := walletSetDir(t)
	dir := t.TempDir()
	key := nodetest.NewKeyFile(t)
	flags := walletFlags(setDir, ds)
	n := nodetest.Start(t, nodetest.Options{DataDir: dir, KeyFile: key, Args: append(flags, "--acquirer-latency", "30s")})
	m := n.CreateMerchant(t, 10000)
	var ids []string
	for _, v := range []walletVersion{walletVersions[0], walletVersions[3]} {
		id := newOrderID("wpend")
		src := v.source(t, ds, m.ID, tokenmaker.PaymentInput{PAN: "4000000000003220", Amount: 300})
		if r := m.Post(t, v.endpoint, walletBody(id, 300, src)); r.Str("status") != "processing" {
			t.Fatalf("wallet payment: %s", r.Body)
		}
		ids = append(ids, id)
	}
	n.Kill()
	n2 := nodetest.Start(t, nodetest.Options{DataDir: dir, KeyFile: key, Args: flags})
	m2 := m.At(n2)
	for _, id := range ids {
		onlyTxn(t, m2.WaitStatus(t, id, "authorized", 10*time.Second))
	}
}

// postRetrying sends a request until it is not 503 (leadership changing).
func postRetrying(t *testing.T, m *nodetest.Merchant, op string, body any) *nodetest.Response {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := m.TryPost(op, body)
		if err == nil && r.Status != 503 {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("POST %s: still unavailable: %v %v", op, err, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Three nodes sharing one key set: tokens used through a follower (which
// forwards to the leader) are refused again after the leader is killed, by
// the new leader and through the other follower: the replay record is
// replicated, not one node's memory. A new token still pays.
func TestWalletReplayRefusedAfterLeaderChange(t *testing.T) {
	setDir, ds := walletSetDir(t)
	c := nodetest.StartCluster(t, 3, walletFlags(setDir, ds)...)
	leader := c.WaitLeader(nil, 10*time.Second)
	follower := c.Other(leader)
	m := leader.CreateMerchant(t, 10000).At(follower)

	type used struct {
		v     walletVersion
		first map[string]any
	}
	var all []used
	for _, v := range []walletVersion{walletVersions[0], walletVersions[3]} {
		first := walletBody(newOrderID("cl-first"), 1000, v.source(t, ds, m.ID, tokenmaker.PaymentInput{Amount: 1000}))
		if r := postRetrying(t, m, v.endpoint, first); r.Status != 200 {
			t.Fatalf("%s through a follower: %s", v.version, r.Body)
		}
		m.WaitStatus(t, first["order_id"].(string), "authorized", 10*time.Second)
		all = append(all, used{v, first})
	}
	c.WaitConverged(20 * time.Second)
	leader.Kill()
	newLeader := c.WaitLeader(leader, 20*time.Second)
	for _, n := range c.Nodes {
		if !n.Alive() {
			continue
		}
		mn := m.At(n)
		for _, u := range all {
			again := walletBody(newOrderID("cl-again"), 1000, u.first["payment_source"].(map[string]any))
			r := postRetrying(t, mn, u.v.endpoint, again)
			expectError(t, r, 422, "2.01", "payment_source")
			if !strings.Contains(string(r.Body), "already been used") {
				t.Fatalf("%s via %s: %s", u.v.version, n.ID, r.Body)
			}
			expectError(t, postRetrying(t, mn, "status", map[string]any{"order_id": again["order_id"]}), 404, "2.05", "order_id")
			if r := postRetrying(t, mn, u.v.endpoint, u.first); r.Status != 200 || r.Str("status") != "authorized" {
				t.Fatalf("%s idempotent repeat via %s: %s", u.v.version, n.ID, r.Body)
			}
		}
	}
	v := walletVersions[2]
	id := newOrderID("cl-new")
	if r := postRetrying(t, m.At(newLeader), v.endpoint, walletBody(id, 1000, v.source(t, ds, m.ID, tokenmaker.PaymentInput{}))); r.Status != 200 {
		t.Fatalf("new token on the new leader: %s", r.Body)
	}
	m.At(newLeader).WaitStatus(t, id, "authorized", 10*time.Second)
}
