package node

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paygate/gateway/bench/launch"
	"github.com/paygate/gateway/internal/syncbuf"
	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/operator"
)

// The node's Authenticator, as the dashboard calls it: a session in use
// lives until its absolute expiry, ends at sign-out, and dies with its
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
		!sess.Expires.Equal(time.Unix(0, now.Add(operator.SessionLifetime).UnixNano())) ||
		!sess.IdleExpires.Equal(time.Unix(0, now.Add(operator.SessionIdleTimeout).UnixNano())) {
		t.Fatalf("sign in: %+v %v", sess, err)
	}
	// Used every 10 minutes, the session lives to its absolute expiry,
	// and not past it.
	same := func(got operator.Session) bool {
		return got.Email == sess.Email && got.Role == sess.Role && got.CSRF == sess.CSRF && got.Expires.Equal(sess.Expires)
	}
	for at := 10 * time.Minute; at < operator.SessionLifetime; at += 10 * time.Minute {
		if got, ok := auth.Session(token, now.Add(at)); !ok || !same(got) {
			t.Fatalf("session in use at +%s: %+v %v", at, got, ok)
		}
	}
	if got, ok := auth.Session(token, now.Add(operator.SessionLifetime-time.Second)); !ok || !same(got) ||
		!got.IdleExpires.Equal(sess.Expires) {
		t.Fatalf("session in use before its expiry: %+v %v", got, ok)
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

// A session unused for the idle timeout is refused (PCI DSS 8.2.8); a use
// renews its deadline through the log, at most once a minute; a record
// written before idle timeouts has only its absolute expiry.
func TestAuthenticatorSessionIdleTimeout(t *testing.T) {
	n := startInProcess(t)
	t.Cleanup(func() { n.Shutdown(t.Context()) })
	adminPost(t, n, "/admin/v1/operators", `{"email":"sam@example.com","role":"support","password":"long enough pass"}`, 200)
	auth := n.Authenticator()
	const idle = operator.SessionIdleTimeout
	now := time.Now()
	signIn := func() string {
		t.Helper()
		token, _, err := auth.SignIn("sam@example.com", "long enough pass", "10.1.1.1", now)
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	idleUntil := func(token string) time.Duration {
		t.Helper()
		rec, err := n.store.Session(operator.TokenHash(token))
		if err != nil || rec == nil {
			t.Fatalf("session record: %+v %v", rec, err)
		}
		return time.Duration(rec.IdleUntil - now.UnixNano())
	}

	// Unused: live until its idle deadline, refused from it on.
	unused, used := signIn(), signIn()
	if _, ok := auth.Session(used, now.Add(idle-time.Second)); !ok {
		t.Fatal("session refused a second before its idle deadline")
	}
	if _, ok := auth.Session(unused, now.Add(idle)); ok {
		t.Fatal("session unused for the idle timeout is alive")
	}
	if _, ok := auth.Session(unused, now.Add(idle+time.Hour)); ok {
		t.Fatal("idle session alive later")
	}
	// The use at idle-1s renewed the other one.
	if got := idleUntil(used); got != 2*idle-time.Second {
		t.Fatalf("idle deadline after a use at +%s: +%s", idle-time.Second, got)
	}

	// Used at +10m: renewed to +25m; at +20m: live, renewed to +35m;
	// unused since, refused at +35m.
	active := signIn()
	if got, ok := auth.Session(active, now.Add(10*time.Minute)); !ok || !got.IdleExpires.Equal(time.Unix(0, now.Add(25*time.Minute).UnixNano())) {
		t.Fatalf("session at +10m: %+v %v", got, ok)
	}
	if got := idleUntil(active); got != 25*time.Minute {
		t.Fatalf("idle deadline after a use at +10m: +%s", got)
	}
	// Uses that would move the deadline by less than a minute propose
	// nothing.
	proposed := metricCount(t, "gateway_raft_entry_commands_sum")
	for _, at := range []time.Duration{10 * time.Minute, 10*time.Minute + 30*time.Second, 10*time.Minute + 59*time.Second} {
		if _, ok := auth.Session(active, now.Add(at)); !ok {
			t.Fatalf("session at +%s refused", at)
		}
	}
	if got := metricCount(t, "gateway_raft_entry_commands_sum") - proposed; got != 0 {
		t.Fatalf("uses within a minute of the last renewal proposed %v commands", got)
	}
	if got := idleUntil(active); got != 25*time.Minute {
		t.Fatalf("idle deadline moved by less than a minute: +%s", got)
	}
	if _, ok := auth.Session(active, now.Add(20*time.Minute)); !ok {
		t.Fatal("renewed session refused at +20m")
	}
	if got := idleUntil(active); got != 35*time.Minute {
		t.Fatalf("idle deadline after a use at +20m: +%s", got)
	}
	if _, ok := auth.Session(active, now.Add(35*time.Minute)); ok {
		t.Fatal("session alive at its renewed idle deadline")
	}

	// A record from before idle timeouts: only its absolute expiry.
	old, err := operator.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	rec := &command.Session{TokenHash: operator.TokenHash(old), Email: "sam@example.com", CreatedAt: now.UnixNano(),
		ExpiresAt: now.Add(operator.SessionLifetime).UnixNano()}
	if res, err := n.raft.Propose(t.Context(), &command.Cmd{Session: rec}); err != nil || res.Err != nil {
		t.Fatalf("old-format session: %v %v", err, res.Err)
	}
	if got, ok := auth.Session(old, now.Add(2*time.Hour)); !ok || !got.IdleExpires.IsZero() {
		t.Fatalf("old-format session after 2 h unused: %+v %v", got, ok)
	}
	if got, _ := n.store.Session(rec.TokenHash); got == nil || *got != *rec {
		t.Fatalf("old-format session's record changed: %+v", got)
	}
	if _, ok := auth.Session(old, now.Add(operator.SessionLifetime)); ok {
		t.Fatal("old-format session alive at its expiry")
	}
}

// A page's parallel requests renew its session once: one command.
func TestSessionRenewalOfParallelRequests(t *testing.T) {
	n := startInProcess(t)
	t.Cleanup(func() { n.Shutdown(t.Context()) })
	adminPost(t, n, "/admin/v1/operators", `{"email":"pat@example.com","role":"support","password":"long enough pass"}`, 200)
	now := time.Now()
	token, _, err := n.Authenticator().SignIn("pat@example.com", "long enough pass", "10.1.1.1", now)
	if err != nil {
		t.Fatal(err)
	}
	proposed := metricCount(t, "gateway_raft_entry_commands_sum")
	var wg sync.WaitGroup
	refused := make(chan int, 32)
	for i := range 32 {
		wg.Go(func() {
			// Each request a millisecond apart, as a page's are.
			if _, ok := n.Authenticator().Session(token, now.Add(10*time.Minute+time.Duration(i)*time.Millisecond)); !ok {
				refused <- i
			}
		})
	}
	wg.Wait()
	close(refused)
	for i := range refused {
		t.Errorf("request %d refused", i)
	}
	if got := metricCount(t, "gateway_raft_entry_commands_sum") - proposed; got != 1 {
		t.Fatalf("32 parallel requests proposed %v commands, want 1", got)
	}
	rec, _ := n.store.Session(operator.TokenHash(token))
	if rec == nil || rec.IdleUntil < now.Add(25*time.Minute).UnixNano() {
		t.Fatalf("not renewed: %+v", rec)
	}
}

// The leader deletes the records of sessions expired or idle past their
// deadline, and only those.
func TestExpiredSessionsArePruned(t *testing.T) {
	n := startInProcess(t)
	t.Cleanup(func() { n.Shutdown(t.Context()) })
	adminPost(t, n, "/admin/v1/operators", `{"email":"ann@example.com","role":"support","password":"long enough pass"}`, 200)
	now := time.Now()
	old, _, err := n.Authenticator().SignIn("ann@example.com", "long enough pass", "10.1.1.1", now.Add(-operator.SessionLifetime))
	if err != nil {
		t.Fatal(err)
	}
	idle, _, err := n.Authenticator().SignIn("ann@example.com", "long enough pass", "10.1.1.1", now.Add(-operator.SessionIdleTimeout))
	if err != nil {
		t.Fatal(err)
	}
	live, _, err := n.Authenticator().SignIn("ann@example.com", "long enough pass", "10.1.1.1", now)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := n.pruneSessionsOnce(t.Context(), now.Add(time.Second)); err != nil || got != 2 {
		t.Fatalf("pruned %d, %v; want the expired one and the idle one", got, err)
	}
	for name, token := range map[string]string{"expired": old, "idle": idle} {
		if rec, _ := n.store.Session(operator.TokenHash(token)); rec != nil {
			t.Fatalf("the %s session's record is still stored", name)
		}
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

// A session used on a follower is renewed by the leader through the log
// (/peer/v1/session-touch, over the cluster port's mutual TLS): the
// leader's and every replica's record hold the new idle deadline, and each
// node checks its own. Without a leader a use is still served, not
// renewed, and the failure is logged without the token or its hash.
func TestClusterSessionRenewalThroughAFollower(t *testing.T) {
	c := startInProcessCluster(t, 3)
	nodes := c.nodes
	var leader *Node
	var followers []*Node
	for _, n := range nodes {
		if n.raft.IsLeader() {
			leader = n
		} else {
			followers = append(followers, n)
		}
	}
	if leader == nil || len(followers) != 2 {
		t.Fatalf("no single leader among %d nodes", len(nodes))
	}
	adminPost(t, leader, "/admin/v1/operators", `{"email":"ivy@example.com","role":"support","password":"long enough pass"}`, 200)
	follower, other := followers[0], followers[1]
	now := time.Now()
	var token string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		// The follower may not know of the leader's operator record yet:
		// the leader decides, so only the leader's applied state matters.
		if token, _, err = follower.Authenticator().SignIn("ivy@example.com", "long enough pass", "10.1.1.1", now); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sign-in on a follower: %v", err)
		}
	}
	hash := operator.TokenHash(token)
	idleUntil := func(n *Node) time.Duration {
		rec, err := n.store.Session(hash)
		if err != nil || rec == nil {
			return -1
		}
		return time.Duration(rec.IdleUntil - now.UnixNano())
	}
	waitIdleUntil := func(n *Node, want time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); idleUntil(n) != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s's record: idle deadline +%s, want +%s", n.cfg.NodeID, idleUntil(n), want)
			}
		}
	}
	// The leader decided the sign-in's deadline by its own clock, a moment
	// after now; wait for the other replica to have the session.
	signedIn := idleUntil(leader)
	if signedIn < operator.SessionIdleTimeout || signedIn > operator.SessionIdleTimeout+10*time.Second {
		t.Fatalf("the leader's record after the sign-in: +%s", signedIn)
	}
	waitIdleUntil(other, signedIn)

	// Used on the follower at +10m: renewed to +25m, on the follower at
	// once (it waits for its own apply), on the leader (which applied it
	// before answering), on the other replica in its turn.
	got, ok := follower.Authenticator().Session(token, now.Add(10*time.Minute))
	if !ok || !got.IdleExpires.Equal(time.Unix(0, now.Add(25*time.Minute).UnixNano())) {
		t.Fatalf("session on the follower at +10m: %+v %v", got, ok)
	}
	for _, n := range []*Node{follower, leader} {
		if d := idleUntil(n); d != 25*time.Minute {
			t.Fatalf("%s's record after the renewal: +%s, want +25m", n.cfg.NodeID, d)
		}
	}
	waitIdleUntil(other, 25*time.Minute)
	// So the other replica serves it past the sign-in's deadline (+15m),
	// and renews it in turn, through the leader.
	if _, ok := other.Authenticator().Session(token, now.Add(20*time.Minute)); !ok {
		t.Fatal("session refused at +20m on the other replica after a renewal on the follower")
	}
	for _, n := range []*Node{other, leader} {
		if d := idleUntil(n); d != 35*time.Minute {
			t.Fatalf("%s's record after the second renewal: +%s, want +35m", n.cfg.NodeID, d)
		}
	}
	waitIdleUntil(follower, 35*time.Minute)
	for _, n := range nodes {
		if _, ok := n.Authenticator().Session(token, now.Add(35*time.Minute)); ok {
			t.Fatalf("%s: session alive at its idle deadline", n.cfg.NodeID)
		}
	}

	// No leader: the follower still serves a live session, within the
	// renewal's bound, and keeps its record as it was.
	c.stop(t, leader)
	c.stop(t, other)
	start := time.Now()
	if _, ok := follower.Authenticator().Session(token, now.Add(30*time.Minute)); !ok {
		t.Fatal("a live session refused because its renewal failed")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a use whose renewal failed took %s", took)
	}
	if d := idleUntil(follower); d != 35*time.Minute {
		t.Fatalf("the follower's record changed without a leader: +%s", d)
	}
	if !strings.Contains(c.logs[follower.cfg.NodeID].String(), "idle deadline not renewed") {
		t.Error("the failed renewal is not logged")
	}
	for id, l := range c.logs {
		if s := l.String(); strings.Contains(s, hash) || strings.Contains(s, token) {
			t.Errorf("%s's log holds the session token or its hash", id)
		}
	}
}

// inProcessCluster is nodes of one cluster running in this process.
type inProcessCluster struct {
	nodes   []*Node
	logs    map[string]*syncbuf.Buffer // by node id
	stopped map[*Node]bool
}

// stop shuts n down (once: the test's cleanup stops the others).
func (c *inProcessCluster) stop(t *testing.T, n *Node) {
	t.Helper()
	if c.stopped[n] {
		return
	}
	c.stopped[n] = true
	if err := n.Shutdown(context.Background()); err != nil {
		t.Errorf("%s: shutdown: %v", n.cfg.NodeID, err)
	}
}

// startInProcessCluster starts size development nodes in this process
// that share a vault key: the first bootstraps the cluster (and its CA),
// the others join it with a join token, so the cluster port runs mutual
// TLS. It returns once every node is ready, with each node's log.
func startInProcessCluster(t *testing.T, size int) *inProcessCluster {
	t.Helper()
	key := nodetest.NewKeyFile(t)
	c := &inProcessCluster{logs: map[string]*syncbuf.Buffer{}, stopped: map[*Node]bool{}}
	logs := c.logs
	t.Cleanup(func() {
		for _, n := range slices.Backward(c.nodes) {
			c.stop(t, n)
		}
	})
	for i := 1; i <= size; i++ {
		cfg := Defaults()
		cfg.Dev, cfg.VaultKeyFile, cfg.DataDir = true, key, t.TempDir()
		cfg.NodeID = "node" + strconv.Itoa(i)
		cfg.HTTPAddr, cfg.RaftAddr = nodetest.FreeAddr(t), nodetest.FreeAddr(t)
		if i > 1 {
			cfg.Join = c.nodes[0].Addr()
			tok, err := launch.Admin{BaseURL: "http://" + c.nodes[0].Addr(), Token: DevAdminToken, Client: http.DefaultClient}.JoinToken(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			cfg.JoinToken = tok
		}
		logs[cfg.NodeID] = &syncbuf.Buffer{}
		n, err := Start(cfg, slog.New(slog.NewTextHandler(logs[cfg.NodeID], &slog.HandlerOptions{Level: slog.LevelDebug})))
		if err != nil {
			t.Fatalf("%s: %v", cfg.NodeID, err)
		}
		c.nodes = append(c.nodes, n)
		for deadline := time.Now().Add(20 * time.Second); !n.Ready(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not become ready\n%s", cfg.NodeID, logs[cfg.NodeID])
			}
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if f := c.nodes[0].raft.Raft.GetConfiguration(); f.Error() == nil && len(f.Configuration().Servers) == size {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster has not %d members", size)
		}
	}
	return c
}
