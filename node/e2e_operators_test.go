package node_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/persistence"
)

// Passwords of the operators this test makes: none may appear in a node's
// log or in any answer.
const (
	supportPassword = "support-pass-7f3c9a1e"
	adminPassword   = "admin-pass-b2d8e4f6"
	wrongPassword   = "wrong-pass-55aa66bb"
)

// Operators in a three-node cluster, through the admin API of real
// processes: added on a follower, signed in on a follower (the leader
// decides), a session that outlives a killed leader, a role's limits held
// by the server, a disabled operator's session refused on every node,
// sign-in attempts beyond the limit refused, and every sign-in and
// operator change in the audit chain. No password in any log or answer.
func TestOperatorsSessionsAndSignInLimits(t *testing.T) {
	c := nodetest.StartCluster(t, 3)
	leader := c.Leader()
	follower := c.Other(leader)

	// Validation: every violating field listed, nothing added.
	code, body := opCall(follower, "", "POST", "/admin/v1/operators", `{"email":"not an email","role":"root","password":"short"}`)
	if code != 401 {
		t.Fatalf("no credential: %d %s", code, body)
	}
	code, body = opCall(follower, nodetest.AdminToken, "POST", "/admin/v1/operators", `{"email":"not an email","role":"root","password":"short"}`)
	if code != 422 || !strings.Contains(body, `"code":"2.01"`) || !strings.Contains(body, `"email"`) ||
		!strings.Contains(body, `"role"`) || !strings.Contains(body, "at least 12 characters") {
		t.Fatalf("invalid operator: %d %s", code, body)
	}
	mustCall(t, follower, nodetest.AdminToken, "POST", "/admin/v1/operators",
		`{"email":"Sue@Example.com","role":"support","password":"`+supportPassword+`"}`, 200)
	mustCall(t, leader, nodetest.AdminToken, "POST", "/admin/v1/operators",
		`{"email":"ada@example.com","role":"admin","password":"`+adminPassword+`"}`, 200)
	if code, body = opCall(follower, nodetest.AdminToken, "POST", "/admin/v1/operators",
		`{"email":"sue@example.com","role":"admin","password":"another long one"}`); code != 409 || !strings.Contains(body, `"5.06"`) {
		t.Fatalf("the same email again: %d %s", code, body)
	}
	// ada was added on the leader: the follower lists her once it has applied it.
	_, list := waitAnswer(follower, nodetest.AdminToken, "GET", "/admin/v1/operators", func(code int, body string) bool {
		return code == 200 && strings.Contains(body, `"ada@example.com"`)
	})
	if !strings.Contains(list, `"email":"sue@example.com","role":"support"`) || !strings.Contains(list, `"ada@example.com"`) ||
		strings.Contains(list, "argon2") || strings.Contains(list, "pass") {
		t.Fatalf("operators list: %s", list)
	}

	// Sign in on a follower; the session works there at once, and on
	// every node once it has applied it.
	sue := signIn(t, follower, "sue@example.com", supportPassword)
	mustCall(t, follower, sue, "GET", "/admin/v1/orders?limit=1", "", 200)
	for _, n := range c.Nodes {
		if code, body := waitCode(n, sue, "GET", "/admin/v1/orders?limit=1", 200); code != 200 {
			t.Fatalf("the session on %s: %d %s", n.ID, code, body)
		}
	}
	if code, body = opCall(follower, sue, "POST", "/admin/v1/merchants", `{"name":"x"}`); code != 403 || !strings.Contains(body, `"1.02"`) {
		t.Fatalf("support creating a merchant: %d %s", code, body)
	}
	if code, _ = opCall(leader, sue, "GET", "/admin/v1/orders.csv", ""); code != 403 {
		t.Fatalf("support exporting CSV: %d", code)
	}

	// The leader dies; the session is still good on the new leader.
	leader.Kill()
	newLeader := c.WaitLeader(leader, 30*time.Second)
	if code, body = retryCall(newLeader, sue, "GET", "/admin/v1/orders?limit=1"); code != 200 {
		t.Fatalf("session on the new leader: %d %s", code, body)
	}
	other := c.Other(leader, newLeader)

	// An admin operator disables sue (on a follower): her session dies everywhere.
	ada := signIn(t, other, "ada@example.com", adminPassword)
	mustCall(t, other, ada, "POST", "/admin/v1/operators/sue@example.com/disable", "", 200)
	for _, n := range []*nodetest.Node{newLeader, other} {
		if code, _ = waitCode(n, sue, "GET", "/admin/v1/orders?limit=1", 401); code != 401 {
			t.Fatalf("disabled operator's session on %s: %d", n.ID, code)
		}
	}
	if code, _ = opCall(other, "", "POST", "/admin/v1/sessions", signInBody("sue@example.com", supportPassword)); code != 401 {
		t.Fatalf("a disabled operator signed in: %d", code)
	}

	// Sign-in attempts beyond the email's limit (5 at once) are refused,
	// the right password included, whichever node they reach.
	mustCall(t, newLeader, ada, "POST", "/admin/v1/operators",
		`{"email":"fay@example.com","role":"finance","password":"`+adminPassword+`x"}`, 200)
	nodes := []*nodetest.Node{newLeader, other}
	for i := range 5 {
		if code, _ = opCall(nodes[i%2], "", "POST", "/admin/v1/sessions", signInBody("fay@example.com", wrongPassword)); code != 401 {
			t.Fatalf("wrong password, attempt %d: %d", i+1, code)
		}
	}
	code, body = opCall(other, "", "POST", "/admin/v1/sessions", signInBody("fay@example.com", adminPassword+"x"))
	if code != 429 || !strings.Contains(body, `"5.07"`) {
		t.Fatalf("attempt beyond the limit: %d %s", code, body)
	}
	// Refused all the same, but only the first 3 are recorded: a client
	// hammering sign-in cannot fill the log.
	for i := range 4 {
		if code, _ = opCall(nodes[i%2], "", "POST", "/admin/v1/sessions", signInBody("fay@example.com", wrongPassword)); code != 429 {
			t.Fatalf("attempt %d beyond the limit: %d", i+2, code)
		}
	}
	mustCall(t, other, ada, "POST", "/admin/v1/sessions/end", "", 200)
	if code, _ = waitCode(other, ada, "GET", "/admin/v1/operators", 401); code != 401 {
		t.Fatalf("session after sign-out: %d", code)
	}

	// The audit chain holds every sign-in and operator change.
	var page struct {
		Records []persistence.AuditRecord `json:"records"`
	}
	if err := json.Unmarshal([]byte(mustCall(t, newLeader, nodetest.AdminToken, "GET", "/admin/v1/audit?limit=1000", "", 200)), &page); err != nil {
		t.Fatal(err)
	}
	if seq, err := persistence.VerifyAuditChain(persistence.AuditGenesis, 0, page.Records); err != nil {
		t.Fatalf("chain broken at %d: %v", seq, err)
	}
	count := map[string]int{}
	for _, r := range page.Records {
		count[r.Actor+" "+r.Action+" "+r.Target+" "+r.Result]++
		if r.SourceIP == "" {
			t.Errorf("record without source_ip: %+v", r)
		}
	}
	for _, w := range []string{
		"admin-token POST /admin/v1/operators operators 422 2.01",
		"admin-token POST /admin/v1/operators operator:sue@example.com 200",
		"admin-token POST /admin/v1/operators operator:sue@example.com 409 5.06",
		"sue@example.com sign-in operator:sue@example.com ok",
		"sue@example.com POST /admin/v1/merchants merchants 403 1.02",
		"ada@example.com sign-in operator:ada@example.com ok",
		"ada@example.com POST /admin/v1/operators/sue@example.com/disable operator:sue@example.com 200",
		"sue@example.com sign-in operator:sue@example.com failed",
		"ada@example.com POST /admin/v1/operators operator:fay@example.com 200",
		"ada@example.com sign-out operator:ada@example.com ok",
	} {
		if count[w] != 1 {
			t.Errorf("%d records %q, want 1", count[w], w)
		}
	}
	if got := count["fay@example.com sign-in operator:fay@example.com failed"]; got != 5 {
		t.Errorf("%d failed sign-ins of fay recorded, want 5", got)
	}
	if got := count["fay@example.com sign-in operator:fay@example.com rate_limited"]; got != 3 {
		t.Errorf("%d rate-limited sign-ins of fay recorded, want 3 of 5", got)
	}
	if t.Failed() {
		for _, r := range page.Records {
			t.Logf("%d %s %s %s %s %s", r.Seq, r.Actor, r.Action, r.Target, r.SourceIP, r.Result)
		}
	}
	for _, n := range c.Nodes {
		for _, pw := range []string{supportPassword, adminPassword, wrongPassword} {
			if strings.Contains(n.Logs(), pw) {
				t.Errorf("%s's log holds a password", n.ID)
			}
		}
	}
}

func signInBody(email, password string) string {
	return fmt.Sprintf(`{"email":%q,"password":%q}`, email, password)
}

// signIn signs in through the admin API and returns the session token. A
// node that knows no leader yet (just after a leader change) answers 503
// "no leader could take the sign-in; retry", having recorded nothing, and
// the sign-in is repeated as a client would, for up to 10 s.
func signIn(t *testing.T, n *nodetest.Node, email, password string) string {
	t.Helper()
	var out struct {
		Token, Email, Role, ExpiresAt string `json:",omitempty"`
	}
	code, body := waitAnswerTo(n, "", "POST", "/admin/v1/sessions", signInBody(email, password), func(code int, body string) bool {
		return code != 503 || !strings.Contains(body, "no leader could take the sign-in")
	})
	if code != 200 {
		t.Fatalf("POST /admin/v1/sessions on %s: %d %s, want 200", n.ID, code, body)
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil || !strings.HasPrefix(out.Token, "pgs_") || out.Email != email {
		t.Fatalf("sign-in answer %s: %v", body, err)
	}
	if strings.Contains(body, password) {
		t.Fatal("the sign-in answer holds the password")
	}
	return out.Token
}

// call sends an admin request with bearer (none if empty).
func opCall(n *nodetest.Node, bearer, method, path, body string) (int, string) {
	req, err := http.NewRequest(method, n.URL()+path, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func mustCall(t *testing.T, n *nodetest.Node, bearer, method, path, body string, want int) string {
	t.Helper()
	code, got := opCall(n, bearer, method, path, body)
	if code != want {
		t.Fatalf("%s %s on %s: %d %s, want %d", method, path, n.ID, code, got, want)
	}
	return got
}

// retryCall repeats a read while the cluster answers 503 (a new leader
// settling), for up to 10 s.
func retryCall(n *nodetest.Node, bearer, method, path string) (int, string) {
	return waitCode(n, bearer, method, path, 200)
}

// waitCode repeats a read until it answers want (a follower applying a
// change, a new leader settling), for up to 10 s, and returns the last answer.
func waitCode(n *nodetest.Node, bearer, method, path string, want int) (int, string) {
	return waitAnswer(n, bearer, method, path, func(code int, _ string) bool { return code == want })
}

// waitFor repeats a read until done says so, for up to 10 s, and returns
// the last answer.
func waitAnswer(n *nodetest.Node, bearer, method, path string, done func(code int, body string) bool) (int, string) {
	return waitAnswerTo(n, bearer, method, path, "", done)
}

// waitAnswerTo is waitAnswer for a request with a body.
func waitAnswerTo(n *nodetest.Node, bearer, method, path, reqBody string, done func(code int, body string) bool) (int, string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := opCall(n, bearer, method, path, reqBody)
		if done(code, body) || time.Now().After(deadline) {
			return code, body
		}
		time.Sleep(50 * time.Millisecond)
	}
}
