// Package nodetest runs real gatewayd processes for end-to-end tests: it
// builds the binary once, starts nodes on free loopback ports, and speaks
// signed HTTP to them. Building, ports and the admin calls a new cluster
// needs (join tokens, merchants) are bench/launch's, shared with
// gatewaybench --spawn. Nothing here is a stub: every request goes through
// the real front end, actors, raft and store.
package nodetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/paygate/gateway/bench/launch"
	"github.com/paygate/gateway/internal/syncbuf"
	"github.com/paygate/gateway/transport/signature"
)

// AdminToken is the admin token test nodes run with.
const AdminToken = "test-admin-token"

// binary is a command built once per test process.
type binary struct {
	once sync.Once
	path string
	err  error
}

var gatewaydBinary, acquirerdBinary binary

// build builds the module's ./cmd/<name> once and returns its path.
func (b *binary) build(t testing.TB, name string) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", name+"-bin-")
		if err != nil {
			b.err = err
			return
		}
		// The same build as gatewaybench --spawn (bench/launch).
		b.path, b.err = launch.Build(context.Background(), dir, name)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Binary builds gatewayd once per test process and returns its path.
func Binary(t testing.TB) string { return gatewaydBinary.build(t, "gatewayd") }

// Run runs the package's tests, then removes the binary Binary built (42 MB
// per test process otherwise left in the temporary folder). Call it from
// TestMain: os.Exit(nodetest.Run(m)).
func Run(m *testing.M) int {
	code := m.Run()
	for _, b := range []*binary{&gatewaydBinary, &acquirerdBinary} {
		if b.path != "" {
			os.RemoveAll(filepath.Dir(b.path))
		}
	}
	return code
}

// FreeAddr returns a loopback address with a free port.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ports, err := launch.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0])
}

// Node is a gatewayd process and what it needs to be restarted.
type Node struct {
	t        testing.TB
	ID       string
	HTTPAddr string
	RaftAddr string
	DataDir  string
	Args     []string // extra flags
	Env      []string // extra environment (GATEWAY_JOIN_TOKEN)
	cmd      *exec.Cmd
	logs     *syncbuf.Buffer
	stdout   *syncbuf.Buffer
	exited   chan struct{}
	exitErr  error
	paused   atomic.Bool // SIGSTOPped: running, but answering nothing

	// Token is the admin token when it is not AdminToken (nodes that
	// nodetest did not start).
	Token string
}

// Options configure a test node.
type Options struct {
	ID      string
	DataDir string   // default: a new temp dir
	Join    string   // HTTP address of a member to join
	KeyFile string   // vault key file; default: a new random key
	Args    []string // extra flags, e.g. --settle-delay-unit=10ms
	// NotReady returns once the process runs, without waiting for it to
	// be ready (a node expected never to be).
	NotReady bool
	// JoinToken is given to a node with Join (GATEWAY_JOIN_TOKEN). Empty:
	// Start asks the member at Join for a new one, unless NoJoinToken is
	// set or the node runs with --insecure-cluster-links.
	JoinToken   string
	NoJoinToken bool
}

// Start starts a node and waits until /readyz answers 200.
func Start(t testing.TB, o Options) *Node {
	t.Helper()
	if o.ID == "" {
		o.ID = "node1"
	}
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	keyFile := o.KeyFile
	if keyFile == "" {
		keyFile = NewKeyFile(t)
	}
	n := &Node{t: t, ID: o.ID, HTTPAddr: FreeAddr(t), RaftAddr: FreeAddr(t), DataDir: o.DataDir}
	n.Args = append([]string{
		"--node-id", o.ID, "--data-dir", o.DataDir, "--admin-token", AdminToken,
		"--vault-key-file", keyFile, "--allow-private-callbacks", "--log-level", "info",
	}, o.Args...)
	if o.Join != "" {
		n.Args = append(n.Args, "--join", o.Join)
		token := o.JoinToken
		if token == "" && !o.NoJoinToken && !slices.Contains(n.Args, "--insecure-cluster-links") {
			token = NewJoinToken(t, o.Join)
		}
		if token != "" {
			// In the environment, as operators are told: ps shows arguments.
			n.Env = append(n.Env, "GATEWAY_JOIN_TOKEN="+token)
		}
	}
	n.start()
	t.Cleanup(func() { n.Kill() })
	if !o.NotReady {
		n.WaitReady(30 * time.Second)
	}
	return n
}

// NewJoinToken asks the member at httpAddr for a join token (valid 1 h).
func NewJoinToken(t testing.TB, httpAddr string) string {
	t.Helper()
	tok, err := launch.Admin{BaseURL: "http://" + httpAddr, Token: AdminToken, Client: testClient}.JoinToken(context.Background())
	if err != nil {
		t.Fatalf("join token from %s: %v", httpAddr, err)
	}
	return tok
}

// WaitExit waits up to timeout for the process to end and returns its exit
// code (-1 when it is still running).
func (n *Node) WaitExit(timeout time.Duration) int {
	select {
	case <-n.exited:
		return n.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		return -1
	}
}

// NewKeyFile writes a random vault key (64 hex characters) to a temp file.
// Nodes of one cluster must share it.
func NewKeyFile(t testing.TB) string {
	t.Helper()
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "vault.key")
	if err := os.WriteFile(path, []byte(hex.EncodeToString(b[:])), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (n *Node) start() {
	n.t.Helper()
	args := append([]string{"--http-addr", n.HTTPAddr, "--raft-addr", n.RaftAddr}, n.Args...)
	n.cmd = exec.Command(Binary(n.t), args...)
	if len(n.Env) > 0 {
		n.cmd.Env = append(os.Environ(), n.Env...)
	}
	n.logs, n.stdout = &syncbuf.Buffer{}, &syncbuf.Buffer{}
	n.cmd.Stderr, n.cmd.Stdout = keepLog(n.t, n.ID, n.logs), keepLog(n.t, n.ID, n.stdout)
	n.exited = make(chan struct{})
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	go func() { n.exitErr = n.cmd.Wait(); close(n.exited) }()
}

// LogDirEnv names a folder where every process a test starts also appends
// what it writes, one file per node (node1.log, acquirerd.log) across its
// restarts: Logs holds only the current run's, and a failed random run's
// story often begins in an earlier one. Unset: nothing is written.
const LogDirEnv = "NODETEST_LOG_DIR"

// keepLog returns w, writing to the process's file under LogDirEnv as well
// when that is set.
func keepLog(t testing.TB, name string, w io.Writer) io.Writer {
	dir := os.Getenv(LogDirEnv)
	if dir == "" {
		return w
	}
	f, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("%s: %v", LogDirEnv, err)
	}
	t.Cleanup(func() { f.Close() })
	return io.MultiWriter(w, f)
}

// WaitReady waits for /readyz.
func (n *Node) WaitReady(timeout time.Duration) {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-n.exited:
			n.t.Fatalf("%s exited before ready: %v\n%s", n.ID, n.exitErr, n.logs.String())
		default:
		}
		resp, err := testClient.Get(n.URL() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	n.t.Fatalf("%s not ready after %s\n%s", n.ID, timeout, n.logs.String())
}

// Kill sends SIGKILL and waits for the process to go.
func (n *Node) Kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	select {
	case <-n.exited:
		return
	default:
	}
	n.cmd.Process.Kill()
	<-n.exited
}

// Stop sends SIGTERM and returns the exit error (nil for exit code 0).
func (n *Node) Stop(timeout time.Duration) error {
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		return n.exitErr
	case <-time.After(timeout):
		n.Kill()
		return fmt.Errorf("%s did not exit within %s", n.ID, timeout)
	}
}

// Pause stops the process with SIGSTOP, as a long GC pause or a stalled VM
// would: its sockets still accept connections and buffer requests, and it
// answers nothing until Resume.
func (n *Node) Pause() {
	n.t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		n.t.Fatalf("pause %s: %v", n.ID, err)
	}
	n.paused.Store(true)
}

// Resume continues a paused process (SIGCONT).
func (n *Node) Resume() {
	n.t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		n.t.Fatalf("resume %s: %v", n.ID, err)
	}
	n.paused.Store(false)
}

// Paused reports whether the node is paused (Pause without Resume).
func (n *Node) Paused() bool { return n.paused.Load() }

// Restart starts the process again on the same data dir and addresses.
func (n *Node) Restart() {
	n.t.Helper()
	n.Kill()
	n.start()
	n.WaitReady(30 * time.Second)
}

// Logs returns everything the node wrote to stderr and stdout so far.
func (n *Node) Logs() string { return n.logs.String() + n.stdout.String() }

// URL is the node's base URL (https:// for a node started with
// --http-tls-cert-file).
func (n *Node) URL() string {
	if slices.Contains(n.Args, "--http-tls-cert-file") {
		return "https://" + n.HTTPAddr
	}
	return "http://" + n.HTTPAddr
}

// testClient is nodetest's own HTTP client. It accepts any certificate of
// a node serving TLS: the tests of the TLS edge check the certificate
// themselves, with a client of their own.
var testClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
}}

// Merchant is a merchant's keys.
type Merchant struct {
	ID         string
	PublicKey  string
	SecretKey  string
	WebhookPK  string
	WebhookSK  string
	BaseURL    string
	HTTPClient *http.Client
}

// CreateMerchant creates a merchant through the admin API.
func (n *Node) CreateMerchant(t testing.TB, rps int) *Merchant {
	t.Helper()
	m, err := launch.Admin{BaseURL: n.URL(), Token: AdminToken, Client: testClient}.CreateMerchant(context.Background(), "test", rps)
	if err != nil {
		t.Fatal(err)
	}
	return &Merchant{ID: m.ID, PublicKey: m.API.PublicKey, SecretKey: m.API.SecretKey,
		WebhookPK: m.Webhook.PublicKey, WebhookSK: m.Webhook.SecretKey, BaseURL: n.URL(),
		HTTPClient: testClient}
}

// At returns a copy of the merchant that talks to another node.
func (m *Merchant) At(n *Node) *Merchant {
	c := *m
	c.BaseURL = n.URL()
	return &c
}

// Response is an API answer.
type Response struct {
	Status int
	Body   []byte
	Header http.Header
	JSON   map[string]any
}

// Post sends a signed request to /api/v3/<op>.
func (m *Merchant) Post(t testing.TB, op string, body any, headers ...string) *Response {
	t.Helper()
	data, err := requestBody(body)
	if err != nil {
		t.Fatalf("POST %s: %v", op, err)
	}
	r, err := m.TryPost(op, data, headers...)
	if err != nil {
		t.Fatalf("POST %s: %v", op, err)
	}
	if AnswerCheck != nil {
		if err := AnswerCheck(op, data, r); err != nil {
			t.Errorf("the answer does not match docs/openapi.yaml: %v", err)
		}
	}
	return r
}

// TryPost is Post that returns transport errors instead of failing.
func (m *Merchant) TryPost(op string, body any, headers ...string) (*Response, error) {
	data, err := requestBody(body)
	if err != nil {
		return nil, err
	}
	req, _ := http.NewRequest("POST", m.BaseURL+"/api/v3/"+op, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("merchant", m.PublicKey)
	req.Header.Set("signature", signature.Sign(m.PublicKey, m.SecretKey, data))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := m.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := &Response{Status: resp.StatusCode, Header: resp.Header}
	out.Body, _ = io.ReadAll(resp.Body)
	_ = json.Unmarshal(out.Body, &out.JSON)
	return out, nil
}

// requestBody is a request's bytes: given as they are, or marshalled.
func requestBody(body any) ([]byte, error) {
	switch b := body.(type) {
	case []byte:
		return b, nil
	case string:
		return []byte(b), nil
	}
	return json.Marshal(body)
}

// Str reads a string at a dotted path of the JSON answer ("" if absent).
func (r *Response) Str(path string) string {
	v := r.Get(path)
	s, _ := v.(string)
	return s
}

// Num reads a number at a dotted path (0 if absent).
func (r *Response) Num(path string) int64 {
	v := r.Get(path)
	f, _ := v.(float64)
	return int64(f)
}

// Get reads a value at a dotted path.
func (r *Response) Get(path string) any {
	var cur any = r.JSON
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

// ErrorCode is error.code of an error answer.
func (r *Response) ErrorCode() string { return r.Str("error.code") }

// HasMessage reports whether error.messages has the attribute.
func (r *Response) HasMessage(attr string) bool {
	msgs, _ := r.Get("error.messages").(map[string]any)
	_, ok := msgs[attr]
	return ok
}

// WaitStatus polls /status until the order reaches want or the timeout.
func (m *Merchant) WaitStatus(t testing.TB, orderID, want string, timeout time.Duration) *Response {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *Response
	for time.Now().Before(deadline) {
		last = m.Post(t, "status", map[string]any{"order_id": orderID})
		if last.Str("status") == want {
			return last
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("order %s: status %q after %s, want %q: %s", orderID, last.Str("status"), timeout, want, last.Body)
	return nil
}

// Metrics returns the node's /metrics page.
func (n *Node) Metrics(t testing.TB) string {
	t.Helper()
	resp, err := http.Get(n.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	return string(body)
}

// Tool returns the path of an external program a test runs (promtool,
// systemd-analyze). Where it is missing the test is skipped, except under
// CI=true: scripts/test installs what the tests need, so a missing tool
// there is a broken setup, not a reason to pass.
func Tool(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found under CI=true (scripts/test installs it)", name)
	}
	t.Skipf("%s not found (scripts/test installs it)", name)
	return ""
}

// SampleNames lists the names of the samples of a /metrics page, as
// queries name them (a histogram's name_bucket, name_sum and name_count).
func SampleNames(page string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(page, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		out[name] = true
	}
	return out
}
