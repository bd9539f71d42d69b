package node_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
)

// docs/cluster.md, run as written: one shell session takes the walkthrough's
// blocks in order, as an operator would type them. Only the ports are moved
// to free ones. Between blocks the test checks what the doc says the
// operator sees.
func TestClusterDocWalkthrough(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "cluster.md"))
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]string{}
	for _, p := range []string{"8081", "8082", "8083", "7001", "7002", "7003"} {
		ports["127.0.0.1:"+p] = nodetest.FreeAddr(t)
	}
	block := func(marker string) string {
		t.Helper()
		re := regexp.MustCompile("(?s)<!-- " + marker + " -->\\s*```sh\\n(.*?)\\n```")
		m := re.FindSubmatch(doc)
		if m == nil {
			t.Fatalf("docs/cluster.md has no %s block", marker)
		}
		s := string(m[1])
		for from, to := range ports {
			s = strings.ReplaceAll(s, from, to)
		}
		return s
	}
	addr := func(doc string) string { return ports[doc] }

	// The build step, run from the repository root into the walkthrough's dir.
	if b := block("cluster-build"); b != "go build -o bin/ ./cmd/gatewayd ./cmd/gatewayctl" {
		t.Fatalf("the doc's build command changed to %q: update this test with it", b)
	}
	work := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(work, "bin")+"/", "./cmd/gatewayd", "./cmd/gatewayctl")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}

	sh := startShell(t, work)
	prepare := block("cluster-prepare")
	tok := regexp.MustCompile(`export GATEWAY_ADMIN_TOKEN=(\S+)`).FindStringSubmatch(prepare)
	if tok == nil {
		t.Fatalf("the prepare block sets no admin token:\n%s", prepare)
	}
	sh.run(prepare)
	sh.run(block("cluster-start"))
	sh.run(block("cluster-token"))
	sh.run(block("cluster-join"))
	nodes := map[string]*nodetest.Node{}
	for i, a := range []string{"127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8083"} {
		nodes[fmt.Sprintf("node%d", i+1)] = &nodetest.Node{ID: fmt.Sprintf("node%d", i+1), HTTPAddr: addr(a), Token: tok[1]}
	}
	waitView(t, nodes["node2"], 30*time.Second, func(v *nodetest.ClusterView) bool {
		return reachable(v) == 3 && v.LeaderID == "node1"
	})

	out := sh.run(block("cluster-status"))
	if !regexp.MustCompile(`(?m)^leader node1, term `).MatchString(out) || strings.Count(out, " yes ") < 6 {
		t.Fatalf("status after start:\n%s", out)
	}
	out = sh.run(block("cluster-merchant"))
	if !strings.Contains(out, `"merchant_id"`) {
		t.Fatalf("merchant through a follower:\n%s", out)
	}

	killed := time.Now()
	sh.run(block("cluster-kill"))
	out = sh.run(block("cluster-watch"))
	m := regexp.MustCompile(`(?m)^leader (node[23]), term \d+`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "node1  ?") {
		t.Fatalf("status %s after killing the leader:\n%s", time.Since(killed).Round(time.Millisecond), out)
	}
	t.Logf("after the kill the status shows %s leading", m[1])

	out = sh.run(block("cluster-restart"))
	v := waitView(t, nodes["node1"], 30*time.Second, func(v *nodetest.ClusterView) bool {
		if reachable(v) != 3 {
			return false
		}
		for _, mb := range v.Members[1:] {
			if mb.Self.AppliedIndex != v.Members[0].Self.AppliedIndex {
				return false
			}
		}
		return true
	})
	if v.LeaderID == "node1" || v.Members[0].Self.State != "Follower" {
		t.Fatalf("node1 back: %+v\n%s", v, out)
	}
	if !strings.Contains(out, "node1  Follower") && !strings.Contains(out, "node1  ?") {
		t.Fatalf("status after restart:\n%s", out)
	}

	sh.run(block("cluster-stop"))
	sh.wait(t, 30*time.Second)
}

func reachable(v *nodetest.ClusterView) int {
	n := 0
	for _, m := range v.Members {
		if m.Reachable && m.Voter {
			n++
		}
	}
	return n
}

func waitView(t *testing.T, n *nodetest.Node, timeout time.Duration, ok func(*nodetest.ClusterView) bool) *nodetest.ClusterView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *nodetest.ClusterView
	var lastErr error
	for time.Now().Before(deadline) {
		v, err := n.Status()
		if err == nil && ok(v) {
			return v
		}
		last, lastErr = v, err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("cluster view from %s not as expected after %s: %+v %v", n.ID, timeout, last, lastErr)
	return nil
}

// shell is one bash session fed commands on stdin, in its own process
// group so the test can end it and every node it started.
type shell struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	mu     sync.Mutex
	out    strings.Builder
	seq    int
	exited chan struct{}
}

func startShell(t *testing.T, dir string) *shell {
	t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	s := &shell{t: t, cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.mu.Lock()
			s.out.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
		}
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); pw.Close(); close(s.exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the shell and the nodes it started
		<-s.exited
		if t.Failed() {
			for _, f := range []string{"node1", "node2", "node3"} {
				if b, err := os.ReadFile(filepath.Join(dir, "data", f+".log")); err == nil {
					t.Logf("%s log (tail):\n%s", f, tail(string(b), 3000))
				}
			}
		}
	})
	return s
}

// run types a block and returns what it printed.
func (s *shell) run(block string) string {
	s.t.Helper()
	s.seq++
	marker := fmt.Sprintf("__block_%d_done__", s.seq)
	s.mu.Lock()
	startAt := s.out.Len()
	s.mu.Unlock()
	if _, err := io.WriteString(s.stdin, block+"\necho "+marker+"\n"); err != nil {
		s.t.Fatalf("shell: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		out := s.out.String()[startAt:]
		s.mu.Unlock()
		if i := strings.Index(out, marker+"\n"); i >= 0 {
			return out[:i]
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("block did not finish:\n%s", block)
	return ""
}

// wait ends the session and waits for every process it started to exit.
func (s *shell) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	s.stdin.Close()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		// The group is gone once the shell and every node exited.
		if err := syscall.Kill(-s.cmd.Process.Pid, 0); err != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("nodes still running %s after the stop block", timeout)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
