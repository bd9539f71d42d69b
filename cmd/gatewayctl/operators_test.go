package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
)

func TestMain(m *testing.M) { os.Exit(nodetest.Run(m)) }

// run runs gatewayctl's command fn against n with the admin token.
func run(t *testing.T, fn func(args []string, stdout, stderr *bytes.Buffer) int, n *nodetest.Node, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append(args, "--addr", n.HTTPAddr, "--admin-token", nodetest.AdminToken)
	code := fn(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// The back office's commands against a real node: operators (the password
// from stdin, never an argument), merchants create and list, a failed
// delivery listed and resent; tables by default, the API's JSON with --json.
func TestOperatorsMerchantsAndWebhooksCommands(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	const password = "a long password 42"
	operators := func(stdin string) func([]string, *bytes.Buffer, *bytes.Buffer) int {
		return func(args []string, o, e *bytes.Buffer) int { return operatorsCmd(args, strings.NewReader(stdin), o, e) }
	}
	code, out, errOut := run(t, operators(password+"\n"), n, "add", "--email", "Ann@Example.com", "--role", "support")
	if code != 0 || !strings.Contains(out, "EMAIL") || !strings.Contains(out, "ann@example.com") || !strings.Contains(out, "support") {
		t.Fatalf("operators add: %d %q %q", code, out, errOut)
	}
	if code, _, errOut = run(t, operators("short\n"), n, "add", "--email", "bob@example.com", "--role", "admin"); code != 1 ||
		!strings.Contains(errOut, "at least 12 characters") {
		t.Fatalf("a short password: %d %q", code, errOut)
	}
	if code, _, errOut = run(t, operators(""), n, "add", "--email", "bob@example.com", "--role", "admin"); code != 1 ||
		!strings.Contains(errOut, "password") {
		t.Fatalf("no password on stdin: %d %q", code, errOut)
	}
	if code, _, _ = run(t, operators(""), n, "add", "--email", "bob@example.com", "--role", "admin", "--password", password); code != 2 {
		t.Fatalf("a password as an argument was accepted: %d", code)
	}
	if code, _, _ = run(t, operators(password), n, "add", "--email", "bob@example.com"); code != 2 {
		t.Fatalf("add without --role: %d", code)
	}
	code, out, _ = run(t, operators(""), n, "disable", "--email", "ann@example.com")
	if code != 0 || !strings.Contains(out, "ann@example.com") || strings.Contains(out, " - \n") {
		t.Fatalf("operators disable: %d %q", code, out)
	}
	code, out, _ = run(t, operators(""), n, "list", "--json")
	if code != 0 || !strings.Contains(out, `"disabled": true`) || strings.Contains(out, "argon2") || strings.Contains(out, password) {
		t.Fatalf("operators list --json: %d %q", code, out)
	}
	if code, _, errOut = run(t, operators(""), n, "disable", "--email", "nobody@example.com"); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("disable an unknown operator: %d %q", code, errOut)
	}

	merchants := func(args []string, o, e *bytes.Buffer) int { return merchantsCmd(args, o, e) }
	code, out, errOut = run(t, merchants, n, "create", "--name", "Corner Shop", "--rate-limit-rps", "7")
	if code != 0 || !strings.Contains(out, `"secret_key"`) {
		t.Fatalf("merchants create: %d %q %q", code, out, errOut)
	}
	code, out, _ = run(t, merchants, n, "list")
	if code != 0 || !strings.Contains(out, "Corner Shop") || !strings.Contains(out, "7/s") || strings.Contains(out, "secret") {
		t.Fatalf("merchants list: %d %q", code, out)
	}

	// A delivery that fails (the endpoint answers 500), listed, then resent.
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }))
	t.Cleanup(hook.Close)
	m := n.CreateMerchant(t, 100)
	body := map[string]any{
		"order_id": "hook-1", "amount": 1200, "currency": "USD", "order_description": "d", "processing_mid": "mid-1",
		"callback_url": hook.URL + "/hook", "settle": map[string]any{"delay_hours": 24},
		"customer": map[string]any{"user_id": "u1", "email": "u1@example.com", "ip_address": "203.0.113.7"},
		"payment_source": map[string]any{"type": "card", "card_number": "4111111111111111", "card_holder_name": "Jane Doe",
			"card_exp_month": "12", "card_exp_year": "2035", "card_cvv": "123"},
	}
	if r := m.Post(t, "charge", body); r.Status != 200 {
		t.Fatalf("charge: %s", r.Body)
	}
	webhooks := func(args []string, o, e *bytes.Buffer) int { return webhooksCmd(args, o, e) }
	var id string
	for deadline := time.Now().Add(10 * time.Second); id == ""; time.Sleep(50 * time.Millisecond) {
		code, out, errOut = run(t, webhooks, n, "list", "--merchant-id", m.ID, "--order-id", "hook-1")
		if code != 0 || !strings.Contains(out, "ORDER ID") {
			t.Fatalf("webhooks list: %d %q %q", code, out, errOut)
		}
		if strings.Contains(out, "HTTP 500") {
			id = strings.Fields(strings.Split(out, "\n")[1])[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failed attempt listed: %q", out)
		}
	}
	code, out, errOut = run(t, webhooks, n, "resend", "--id", id, "--json")
	if code != 0 || !strings.Contains(out, `"id": "`+id+`"`) || !strings.Contains(out, `"state"`) {
		t.Fatalf("webhooks resend: %d %q %q", code, out, errOut)
	}
	if code, _, errOut = run(t, webhooks, n, "resend", "--id", "ntf_none"); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("resend of no delivery: %d %q", code, errOut)
	}
	if code, _, _ = run(t, webhooks, n, "list"); code != 2 {
		t.Fatalf("webhooks list without --merchant-id: %d", code)
	}
}
