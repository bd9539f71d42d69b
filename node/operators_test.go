package node

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/transport/operator"
)

// The node's Authenticator, as the dashboard calls it: a session lives
// until its absolute expiry, ends at sign-out, and dies with its
// operator; a wrong password and an unknown email fail alike.
func TestAuthenticatorSessionLifetime(t *testing.T) {
	n := startInProcess(t)
	t.Cleanup(func() { n.Shutdown(t.Context()) })
	adminPost(t, n, "/admin/v1/operators", `{"email":"Fin@Example.com","role":"finance","password":"long enough pass"}`, 200)
	var auth operator.Authenticator = n.Authenticator()
	now := time.Now()
	if _, _, err := auth.SignIn("fin@example.com", "wrong password!", "10.1.1.1", now); !errors.Is(err, operator.ErrBadCredentials) {
		t.Fatalf("wrong password: %v", err)
	}
	if _, _, err := auth.SignIn("nobody@example.com", "long enough pass", "10.1.1.1", now); !errors.Is(err, operator.ErrBadCredentials) {
		t.Fatalf("unknown email: %v", err)
	}
	token, sess, err := auth.SignIn("FIN@example.com", "long enough pass", "10.1.1.1", now)
	if err != nil || sess.Email != "fin@example.com" || sess.Role != operator.Finance || sess.CSRF == "" ||
		!sess.Expires.Equal(time.Unix(0, now.Add(operator.SessionLifetime).UnixNano())) {
		t.Fatalf("sign in: %+v %v", sess, err)
	}
	if got, ok := auth.Session(token, now.Add(operator.SessionLifetime-time.Second)); !ok || got != sess {
		t.Fatalf("session before its expiry: %+v %v", got, ok)
	}
	if _, ok := auth.Session(token, now.Add(operator.SessionLifetime)); ok {
		t.Fatal("session alive at its expiry")
	}
	if _, ok := auth.Session(token+"x", now); ok {
		t.Fatal("a changed token is a session")
	}
	if err := auth.SignOut(token); err != nil {
		t.Fatal(err)
	}
	if _, ok := auth.Session(token, now); ok {
		t.Fatal("session alive after sign-out")
	}
	second, _, err := auth.SignIn("fin@example.com", "long enough pass", "10.1.1.1", now)
	if err != nil {
		t.Fatal(err)
	}
	adminPost(t, n, "/admin/v1/operators/fin@example.com/disable", "", 200)
	if _, ok := auth.Session(second, now); ok {
		t.Fatal("a disabled operator's session is alive")
	}
	if _, _, err := auth.SignIn("fin@example.com", "long enough pass", "10.1.1.2", now); !errors.Is(err, operator.ErrBadCredentials) {
		t.Fatalf("a disabled operator signed in: %v", err)
	}
}

// The leader deletes expired sessions' records, and only those.
func TestExpiredSessionsArePruned(t *testing.T) {
	n := startInProcess(t)
	t.Cleanup(func() { n.Shutdown(t.Context()) })
	adminPost(t, n, "/admin/v1/operators", `{"email":"ann@example.com","role":"support","password":"long enough pass"}`, 200)
	now := time.Now()
	old, _, err := n.Authenticator().SignIn("ann@example.com", "long enough pass", "10.1.1.1", now.Add(-operator.SessionLifetime))
	if err != nil {
		t.Fatal(err)
	}
	live, _, err := n.Authenticator().SignIn("ann@example.com", "long enough pass", "10.1.1.1", now)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := n.pruneSessionsOnce(t.Context(), now.Add(time.Second)); err != nil || got != 1 {
		t.Fatalf("pruned %d, %v; want the expired one", got, err)
	}
	if rec, _ := n.store.Session(operator.TokenHash(old)); rec != nil {
		t.Fatal("the expired session's record is still stored")
	}
	if _, ok := n.Authenticator().Session(live, now.Add(time.Second)); !ok {
		t.Fatal("the live session was pruned")
	}
	if got, _ := n.pruneSessionsOnce(t.Context(), now.Add(time.Second)); got != 0 {
		t.Fatalf("a second pass pruned %d", got)
	}
}

func adminPost(t *testing.T, n *Node, path, body string, want int) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+n.Addr()+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+DevAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d, want %d", path, resp.StatusCode, want)
	}
}
