package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paygate/gateway/bench/launch"
)

// SpawnOptions says how to start a local cluster of gatewayd processes.
type SpawnOptions struct {
	// Binary is the gatewayd executable (see launch.BuildGatewayd). Required.
	Binary string
	// Nodes is 1 or 3.
	Nodes int
	// Dir is where the cluster's temporary directory is made; "" means os.TempDir().
	Dir string
	// ReadyTimeout bounds each wait: a node's /readyz, the cluster's membership,
	// a merchant's creation. Default 60s.
	ReadyTimeout time.Duration
	// StopTimeout is how long Close waits after SIGTERM before SIGKILL. Default 10s.
	StopTimeout time.Duration
	// SettleDelayUnit is passed as --settle-delay-unit. Default "1h": with a
	// shorter unit the charges' settle.delay_hours=24 auto-settles orders
	// during the run, which races the lifecycle's own settle and adds writes
	// no workload asked for.
	SettleDelayUnit string
	// WebhookRetryDelays is passed as --webhook-retry-delays. The default
	// retries within seconds so that a failed delivery is retried inside a run.
	WebhookRetryDelays string
	// ExtraArgs are appended to every node's arguments; "{node}" in one is
	// replaced by the node's id (node1, ...), for flags that need a path of
	// each node's own, such as --raft-log-dir.
	ExtraArgs []string
	// Env is added to every node's environment.
	Env []string
	// Pprof has every node serve net/http/pprof on a loopback port of its
	// own (Node.PprofAddr), for the run's node profiles.
	Pprof bool
	// Log receives progress messages; nil discards them.
	Log io.Writer
}

// Spawn defaults.
const (
	DefaultSettleDelayUnit    = "1h"
	DefaultWebhookRetryDelays = "50ms,100ms,200ms,400ms,800ms,1s,2s,4s"
	defaultReadyTimeout       = 60 * time.Second
	defaultStopTimeout        = 10 * time.Second
	startAttempts             = 3 // a node that exits before it is ready is retried on fresh ports
	logTailBytes              = 2048
)

// Cluster is a set of gatewayd processes started by Spawn. Close stops them
// and removes their directory; it is safe to call more than once and from a
// deferred call after any error.
type Cluster struct {
	Dir        string // temporary directory holding every node's data, log and the vault key
	AdminToken string
	Nodes      []*Node

	opts      SpawnOptions
	vaultKey  string
	joinToken string // for the nodes that join node1
	closeOnce sync.Once
	closeErr  error
}

// Node is one gatewayd process.
type Node struct {
	ID       string
	HTTPAddr string // 127.0.0.1:PORT
	RaftAddr string
	// PprofAddr is where the node serves net/http/pprof, with
	// SpawnOptions.Pprof; empty otherwise.
	PprofAddr string
	DataDir   string
	LogPath   string // the process's stdout and stderr

	cmd     *exec.Cmd
	logFile *os.File
	exited  chan struct{} // closed when the process has exited
	waitErr error         // the exit status, once exited is closed
}

// URL is the node's base address for the merchant API and admin API.
func (n *Node) URL() string { return "http://" + n.HTTPAddr }

// Spawn starts opts.Nodes gatewayd processes on loopback ports in a new
// temporary directory and waits until they form a ready cluster: node1 first,
// until its /readyz answers 200; then the others with --join node1's HTTP
// address, until /admin/v1/cluster on node1 lists every member and each
// answers /readyz. On error everything it started is stopped and removed again.
func Spawn(ctx context.Context, opts SpawnOptions) (*Cluster, error) {
	if opts.Binary == "" {
		return nil, errors.New("spawn: no gatewayd binary")
	}
	if opts.Nodes != 1 && opts.Nodes != 3 {
		return nil, fmt.Errorf("spawn: %d nodes; 1 or 3", opts.Nodes)
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = defaultReadyTimeout
	}
	if opts.StopTimeout == 0 {
		opts.StopTimeout = defaultStopTimeout
	}
	if opts.SettleDelayUnit == "" {
		opts.SettleDelayUnit = DefaultSettleDelayUnit
	}
	if opts.WebhookRetryDelays == "" {
		opts.WebhookRetryDelays = DefaultWebhookRetryDelays
	}
	bin, err := filepath.Abs(opts.Binary)
	if err != nil {
		return nil, err
	}
	opts.Binary = bin
	dir, err := os.MkdirTemp(opts.Dir, "gatewaybench-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, AdminToken: randomHex(16), opts: opts}
	if err := c.start(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	// The vault key: 32 random bytes as 64 hex characters (contract section 10).
	c.vaultKey = filepath.Join(c.Dir, "vault.key")
	if err := os.WriteFile(c.vaultKey, []byte(randomHex(32)+"\n"), 0o600); err != nil {
		return err
	}
	if err := c.startNode(ctx, "node1", "", "/readyz"); err != nil {
		return err
	}
	c.logf("gatewayd node1 ready on %s", c.Nodes[0].HTTPAddr)
	if c.opts.Nodes == 1 {
		return nil
	}
	// The others join through node1, with a join token (their cluster
	// links are under mutual TLS; docs/security.md), unless the extra
	// arguments turn TLS off. /healthz says a process is up (its ports
	// bound); it can serve once the cluster has taken it in.
	if !slices.Contains(c.opts.ExtraArgs, "--insecure-cluster-links") {
		tok, err := c.adminOf(c.Nodes[0]).JoinToken(ctx)
		if err != nil {
			return err
		}
		c.joinToken = tok
	}
	for i := 2; i <= c.opts.Nodes; i++ {
		if err := c.startNode(ctx, fmt.Sprintf("node%d", i), c.Nodes[0].HTTPAddr, "/healthz"); err != nil {
			return err
		}
	}
	if err := c.awaitMembers(ctx, c.opts.Nodes); err != nil {
		return err
	}
	for _, n := range c.Nodes[1:] {
		if err := c.awaitHTTP(ctx, n, "/readyz"); err != nil {
			return err
		}
		c.logf("gatewayd %s ready on %s", n.ID, n.HTTPAddr)
	}
	return nil
}

// startNode starts one node and waits until path answers 200 on it. A node
// that exits before that (a port taken between choosing and binding it) is
// tried again on fresh ports with an empty data directory.
func (c *Cluster) startNode(ctx context.Context, id, join, path string) error {
	var lastErr error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		n, err := c.launch(id, join)
		if err != nil {
			return err
		}
		c.Nodes = append(c.Nodes, n)
		err = c.awaitHTTP(ctx, n, path)
		if err == nil {
			return nil
		}
		lastErr = err
		if !n.Exited() || ctx.Err() != nil {
			return err
		}
		c.Nodes = c.Nodes[:len(c.Nodes)-1]
		_ = os.RemoveAll(n.DataDir)
		c.logf("gatewayd %s exited before it was up (attempt %d/%d)", id, attempt, startAttempts)
	}
	return lastErr
}

func (c *Cluster) launch(id, join string) (*Node, error) {
	ports, err := launch.FreePorts(3)
	if err != nil {
		return nil, err
	}
	n := &Node{
		ID:       id,
		HTTPAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		RaftAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		DataDir:  filepath.Join(c.Dir, id, "data"),
		LogPath:  filepath.Join(c.Dir, id, "gatewayd.log"),
		exited:   make(chan struct{}),
	}
	if err := os.MkdirAll(n.DataDir, 0o700); err != nil {
		return nil, err
	}
	n.logFile, err = os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--http-addr", n.HTTPAddr,
		"--raft-addr", n.RaftAddr,
		"--data-dir", n.DataDir,
		"--node-id", n.ID,
		"--admin-token", c.AdminToken,
		"--allow-private-callbacks",
		"--settle-delay-unit", c.opts.SettleDelayUnit,
		"--webhook-retry-delays", c.opts.WebhookRetryDelays,
		"--vault-key-file", c.vaultKey,
	}
	if join != "" {
		args = append(args, "--join", join)
	}
	if c.opts.Pprof {
		n.PprofAddr = fmt.Sprintf("127.0.0.1:%d", ports[2])
		args = append(args, "--pprof-addr", n.PprofAddr)
	}
	for _, a := range c.opts.ExtraArgs {
		args = append(args, strings.ReplaceAll(a, "{node}", id))
	}
	// Not exec.CommandContext: the process must outlive a cancelled context
	// long enough to be stopped with SIGTERM by Close.
	n.cmd = exec.Command(c.opts.Binary, args...)
	n.cmd.Dir = filepath.Join(c.Dir, id)
	n.cmd.Stdout = n.logFile
	n.cmd.Stderr = n.logFile
	n.cmd.Env = append(os.Environ(), c.opts.Env...)
	if join != "" && c.joinToken != "" {
		n.cmd.Env = append(n.cmd.Env, "GATEWAY_JOIN_TOKEN="+c.joinToken) // not in ps
	}
	n.cmd.SysProcAttr = childProcAttr()
	if err := n.cmd.Start(); err != nil {
		n.logFile.Close()
		return nil, fmt.Errorf("start %s: %w", c.opts.Binary, err)
	}
	go func() {
		n.waitErr = n.cmd.Wait()
		n.logFile.Close()
		close(n.exited)
	}()
	return n, nil
}

// awaitHTTP polls GET path on the node every 50 ms until it answers 200.
func (c *Cluster) awaitHTTP(ctx context.Context, n *Node, path string) error {
	return c.poll(ctx, path+" of "+n.ID, func() (bool, error) {
		resp, err := httpClient.Get(n.URL() + path)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// awaitMembers polls node1's GET /admin/v1/cluster until it lists want members.
func (c *Cluster) awaitMembers(ctx context.Context, want int) error {
	last := "no answer"
	err := c.poll(ctx, fmt.Sprintf("a cluster of %d", want), func() (bool, error) {
		var body map[string]any
		status, err := c.admin(ctx, c.Nodes[0], http.MethodGet, "/admin/v1/cluster", nil, &body)
		switch {
		case err != nil:
			last = err.Error()
		case status != http.StatusOK:
			last = fmt.Sprintf("HTTP %d", status)
		default:
			n := countMembers(body)
			last = fmt.Sprintf("%d members", n)
			return n >= want, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%w\n(last answer of GET /admin/v1/cluster: %s)", err, last)
	}
	return nil
}

// countMembers reads the member count of a GET /admin/v1/cluster answer: its
// "members" field, an array or an object keyed by node id.
func countMembers(body map[string]any) int {
	switch m := body["members"].(type) {
	case []any:
		return len(m)
	case map[string]any:
		return len(m)
	}
	return 0
}

// poll calls check every 50 ms until it is true, a node exits, ctx ends or
// ReadyTimeout passes.
func (c *Cluster) poll(ctx context.Context, what string, check func() (bool, error)) error {
	const every = 50 * time.Millisecond
	deadline := time.Now().Add(c.opts.ReadyTimeout)
	for range int(c.opts.ReadyTimeout/every) + 1 {
		ok, err := check()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		for _, n := range c.Nodes {
			if n.Exited() {
				return fmt.Errorf("gatewayd %s exited (%v) while waiting for %s; its log ends:\n%s", n.ID, n.waitErr, what, tail(n.LogPath))
			}
		}
		if !time.Now().Before(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
	var logs strings.Builder
	for _, n := range c.Nodes {
		fmt.Fprintf(&logs, "\n--- log of %s ends:\n%s", n.ID, tail(n.LogPath))
	}
	return fmt.Errorf("waited %s for %s in vain%s", c.opts.ReadyTimeout, what, logs.String())
}

// Merchant is the answer of POST /admin/v1/merchants.
type Merchant = launch.Merchant

// KeyPair is a merchant's public and secret key.
type KeyPair = launch.KeyPair

// CreateMerchant creates a merchant with no practical rate limit through
// node1's admin API. A 503 (no leader yet) is retried until ReadyTimeout.
func (c *Cluster) CreateMerchant(ctx context.Context, name string) (*Merchant, error) {
	var m *Merchant
	var last string
	err := c.poll(ctx, "a merchant", func() (bool, error) {
		var err error
		m, err = c.adminOf(c.Nodes[0]).CreateMerchant(ctx, name, 1_000_000)
		var he *launch.HTTPError
		switch {
		case errors.As(err, &he) && he.Status == http.StatusServiceUnavailable:
			last = "503"
			return false, nil
		case errors.As(err, &he):
			return false, err
		case err != nil:
			last = err.Error()
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w (last: %s)", err, last)
	}
	return m, nil
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// adminOf is node n's admin API.
func (c *Cluster) adminOf(n *Node) launch.Admin {
	return launch.Admin{BaseURL: n.URL(), Token: c.AdminToken, Client: httpClient}
}

// admin sends an admin API request with the bearer token and decodes a 2xx
// answer into out. An answer that is not 2xx is its status, not an error.
func (c *Cluster) admin(ctx context.Context, n *Node, method, path string, body []byte, out any) (int, error) {
	status, err := c.adminOf(n).Do(ctx, method, path, body, out)
	if he := (*launch.HTTPError)(nil); errors.As(err, &he) {
		return status, nil
	}
	return status, err
}

// Targets are the nodes' base addresses.
func (c *Cluster) Targets() []string {
	t := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		t[i] = n.URL()
	}
	return t
}

// LeaderTarget is the base address of the node that leads now, as node1's
// admin API says.
func (c *Cluster) LeaderTarget(ctx context.Context) (string, error) {
	var st struct {
		LeaderID string `json:"leader_id"`
	}
	status, err := c.admin(ctx, c.Nodes[0], http.MethodGet, "/admin/v1/cluster", nil, &st)
	if err != nil {
		return "", fmt.Errorf("ask for the leader: %w", err)
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("ask for the leader: HTTP %d", status)
	}
	for _, n := range c.Nodes {
		if n.ID == st.LeaderID {
			return n.URL(), nil
		}
	}
	return "", fmt.Errorf("the leader %q is not a spawned node", st.LeaderID)
}

// Processes names the nodes' processes, for the report's CPU per request.
func (c *Cluster) Processes() []NodeProcess {
	ps := make([]NodeProcess, len(c.Nodes))
	for i, n := range c.Nodes {
		ps[i] = NodeProcess{Name: n.ID, PID: n.cmd.Process.Pid, PprofAddr: n.PprofAddr}
	}
	return ps
}

// Close stops every node (SIGTERM to all at once, SIGKILL after StopTimeout)
// and removes the cluster's directory. Only processes Spawn started are
// signalled, by their own pid.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		var wg sync.WaitGroup
		for _, n := range c.Nodes {
			wg.Go(func() { n.stop(c.opts.StopTimeout) })
		}
		wg.Wait()
		c.closeErr = os.RemoveAll(c.Dir)
	})
	return c.closeErr
}

// stop ends the process: SIGTERM, then SIGKILL after timeout.
func (n *Node) stop(timeout time.Duration) {
	select {
	case <-n.exited:
		return
	default:
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		return
	case <-time.After(timeout):
	}
	_ = n.cmd.Process.Kill()
	<-n.exited
}

// Exited reports whether the node's process has ended.
func (n *Node) Exited() bool {
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

func (c *Cluster) logf(format string, args ...any) {
	if c.opts.Log != nil {
		fmt.Fprintf(c.opts.Log, format+"\n", args...)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail
	return hex.EncodeToString(b)
}

// tail is the end of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > logTailBytes {
		b = b[len(b)-logTailBytes:]
	}
	return strings.TrimRight(string(b), "\n")
}
