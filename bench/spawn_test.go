//go:build unix

package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary is its own fake gatewayd (see TestMain): these tests check
// Spawn's process handling; the lead's spawn test runs the real binary.

func fakeSpawnOptions(t *testing.T, nodes int) SpawnOptions {
	t.Helper()
	t.Setenv(envFakeGatewayd, "1")
	return SpawnOptions{Binary: os.Args[0], Nodes: nodes, Dir: t.TempDir(), ReadyTimeout: 10 * time.Second, StopTimeout: 5 * time.Second}
}

func TestSpawnThreeNodes(t *testing.T) {
	opts := fakeSpawnOptions(t, 3)
	c, err := Spawn(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Nodes) != 3 || len(c.Targets()) != 3 {
		t.Fatalf("nodes %v", c.Targets())
	}
	m, err := c.CreateMerchant(context.Background(), "bench")
	if err != nil || m.API.PublicKey == "" || m.Webhook.SecretKey == "" {
		t.Fatalf("merchant %+v, %v", m, err)
	}
	if leader, err := c.LeaderTarget(context.Background()); err != nil || leader != c.Nodes[0].URL() {
		t.Fatalf("leader %q, %v; want node1's %s", leader, err, c.Nodes[0].URL())
	}
	rep, err := Run(context.Background(), Config{Targets: c.Targets(), Workload: WorkloadCeiling, Concurrency: 3, Duration: 300 * time.Millisecond})
	if err != nil || rep.Ops["healthz"].Count == 0 || rep.Target != strings.Join(c.Targets(), ",") {
		t.Fatalf("ceiling over three nodes: %+v, %v", rep, err)
	}
	dir := c.Dir
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if !n.Exited() || n.waitErr != nil {
			t.Errorf("%s: exited %v, %v (want a clean exit on SIGTERM)", n.ID, n.Exited(), n.waitErr)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster dir %s still there: %v", dir, err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestSpawnFailureCleansUp(t *testing.T) {
	opts := fakeSpawnOptions(t, 1)
	t.Setenv(envFakeGatewayd, "fail")
	_, err := Spawn(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "refusing to start") {
		t.Fatalf("Spawn = %v, want the node's log in the error", err)
	}
	if left, _ := os.ReadDir(opts.Dir); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestMainSpawnRun is the whole CLI path with --spawn 1: start, create a
// merchant, run, write JSON, and stop the node afterwards.
func TestMainSpawnRun(t *testing.T) {
	fakeSpawnOptions(t, 1) // sets the fake mode
	pidDir := t.TempDir()
	t.Setenv(envFakePIDDir, pidDir)
	out := filepath.Join(t.TempDir(), "spawn.json")
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"run", "--spawn", "1", "--gatewayd", os.Args[0],
		"--workload", "lifecycle", "--concurrency", "2", "--duration", "500ms", "--json", out}, &stdout, &stderr)
	if code != ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	reps, err := LoadReports(out)
	if err != nil || reps[0].Ops["lifecycle"].Count == 0 || reps[0].Errors.Total != 0 {
		t.Fatalf("report %+v, %v\n%s", reps, err, stdout.String())
	}
	b, err := os.ReadFile(filepath.Join(pidDir, "node1.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Errorf("spawned node %d still running after Main returned (kill 0: %v)", pid, err)
	}
}
