package bench_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/bench"
	"github.com/paygate/gateway/node/nodetest"
)

// Every workload runs for a moment against the real gatewayd, spawned by
// the harness itself (what `gatewaybench run --spawn 1` does): a smoke run
// with no thresholds, to keep the harness and the node in step.
func TestWorkloadsAgainstRealGatewayd(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns real nodes")
	}
	bin := nodetest.Binary(t)
	for _, w := range bench.Workloads {
		t.Run(w, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), w+".json")
			profiles := filepath.Join(t.TempDir(), "profiles")
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// The search pool is five customers of 20 orders each: a
			// page short of 20 (orders given to the wrong customer) fails.
			orders := "20"
			if w == bench.WorkloadSearch {
				orders = "100"
			}
			args := []string{"run", "--spawn", "1", "--gatewayd", bin, "--workload", w,
				"--concurrency", "4", "--duration", "1s", "--orders", orders, "--webhook-wait", "5s", "--json", out,
				"--profile-dir", profiles}
			if code := bench.Main(ctx, args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
			}
			reports, err := bench.LoadReports(out)
			if err != nil || len(reports) != 1 {
				t.Fatalf("report: %v %d", err, len(reports))
			}
			r := reports[0]
			var count int64
			for _, op := range r.Ops {
				count += op.Count
			}
			if count == 0 {
				t.Fatalf("no operation completed:\n%s", stdout.String())
			}
			if r.Errors.Total != 0 {
				t.Fatalf("errors against the real node: %+v\n%s", r.Errors, stdout.String())
			}
			checkNodeCPU(t, r, "node1")
			checkNodeProfile(t, r, "node1", profiles)
			if r.Nodes == nil {
				t.Fatalf("no node counters from the node's /metrics:\n%s", stdout.String())
			}
			// The pool's orders were just written: a fresh node serves their
			// status from its order cache, none from Pebble.
			if w == bench.WorkloadStatus && (r.Nodes.OrderReadsFromCache == 0 || r.Nodes.OrderReadsFromPebble != 0) {
				t.Fatalf("status reads on a fresh node: %+v\n%s", *r.Nodes, stdout.String())
			}
			if w == bench.WorkloadWebhooks && (r.Webhooks == nil || r.Webhooks.Delivered == 0 || r.Webhooks.Duplicates != 0 ||
				r.Webhooks.LatencyFrom != "status_change") {
				t.Fatalf("webhooks: %+v", r.Webhooks)
			}
		})
	}
}

// A charge run records its order ids; a status run reads exactly those.
func TestRecordedOrdersFeedStatus(t *testing.T) {
	bin, ctx := realGatewayd(t)
	c, err := bench.Spawn(ctx, bench.SpawnOptions{Binary: bin, Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := c.CreateMerchant(ctx, "bench")
	if err != nil {
		t.Fatal(err)
	}
	ids := filepath.Join(t.TempDir(), "ids.txt")
	base := []string{"--target", c.Targets()[0], "--merchant-key", m.API.PublicKey, "--merchant-secret", m.API.SecretKey,
		"--concurrency", "2", "--json", filepath.Join(t.TempDir(), "r.json")}
	var out bytes.Buffer
	if code := bench.Main(ctx, append([]string{"run", "--workload", "charge", "--requests", "30", "--record-orders", ids}, base...), &out, &out); code != 0 {
		t.Fatalf("charge run: %s", out.String())
	}
	if code := bench.Main(ctx, append([]string{"run", "--workload", "status", "--duration", "1s", "--pool-file", ids}, base...), &out, &out); code != 0 {
		t.Fatalf("status run: %s", out.String())
	}
	if !bytes.Contains(out.Bytes(), []byte("order pool: 30 orders")) {
		t.Fatalf("status did not read the 30 recorded orders:\n%s", out.String())
	}
	// Against a target, --node-pids names the node whose CPU to count.
	pid := c.Processes()[0].PID
	out.Reset()
	args := append([]string{"run", "--workload", "status", "--duration", "1s", "--pool-file", ids, "--node-pids", strconv.Itoa(pid)}, base...)
	if code := bench.Main(ctx, args, &out, &out); code != 0 {
		t.Fatalf("status run with --node-pids: %s", out.String())
	}
	reports, err := bench.LoadReports(base[len(base)-1])
	if err != nil || len(reports) != 1 {
		t.Fatalf("report: %v", err)
	}
	checkNodeCPU(t, reports[0], "pid "+strconv.Itoa(pid))
}

// checkNodeCPU asserts that a report on Linux counts the harness's and the
// node's CPU, in proportion to the requests made.
func checkNodeCPU(t *testing.T, r bench.Report, node string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	byName := map[string]bench.ProcessCPU{}
	for _, p := range r.ProcessCPU {
		byName[p.Name] = p
	}
	for _, name := range []string{"harness", node} {
		p, ok := byName[name]
		// A node serving requests for a second spends more than the 10 ms
		// that /proc counts in.
		if !ok || p.Seconds <= 0 || p.USPerRequest <= 0 || p.Cores <= 0 {
			t.Errorf("%s's CPU is missing from the report: %+v", name, r.ProcessCPU)
		}
	}
}

// checkNodeProfile: with --profile-dir the spawned node served pprof, its
// CPU profile of the window is in the directory, and every sampled second
// is in some layer, the HTTP server's among them (every workload makes
// requests).
func checkNodeProfile(t *testing.T, r bench.Report, node, dir string) {
	t.Helper()
	if len(r.NodeProfiles) != 1 {
		t.Fatalf("node profiles: %+v", r.NodeProfiles)
	}
	np := r.NodeProfiles[0]
	if np.Node != node || np.Error != "" || filepath.Dir(np.CPUFile) != dir || np.AllocsFile == "" {
		t.Fatalf("%s's profiles: %+v", node, np)
	}
	if _, err := os.Stat(np.CPUFile); err != nil {
		t.Fatal(err)
	}
	var sum, http float64
	for _, l := range np.Layers {
		sum += l.Share
		if l.Name == "HTTP" {
			http = l.Share
		}
	}
	if np.CPUSeconds <= 0 || http <= 0 || sum < 0.999 || sum > 1.001 {
		t.Fatalf("%s's layers (%.2fs sampled): %+v", node, np.CPUSeconds, np.Layers)
	}
}

// --gatewayd-flag reaches every spawned node, with {node} made the node's
// id: here the raft log goes to a folder of the test's.
func TestGatewaydFlagReachesTheNodes(t *testing.T) {
	bin, ctx := realGatewayd(t)
	wal := t.TempDir()
	var out bytes.Buffer
	args := []string{"run", "--spawn", "1", "--gatewayd", bin, "--workload", "charge", "--concurrency", "2",
		"--requests", "20", "--gatewayd-flag=--raft-log-dir=" + filepath.Join(wal, "{node}-wal")}
	if code := bench.Main(ctx, args, &out, &out); code != 0 {
		t.Fatalf("exit %d\n%s", code, out.String())
	}
	entries, err := os.ReadDir(filepath.Join(wal, "node1-wal"))
	if err != nil || len(entries) == 0 {
		t.Fatalf("node1's raft log is not in the folder given (%v, %d entries)\n%s", err, len(entries), out.String())
	}
}

// --leader-only sends every request of a three-node run to one node, the
// leader, and the charges are acknowledged there.
func TestLeaderOnlyTargetsOneNode(t *testing.T) {
	bin, ctx := realGatewayd(t)
	out := filepath.Join(t.TempDir(), "leader.json")
	var log bytes.Buffer
	args := []string{"run", "--spawn", "3", "--leader-only", "--gatewayd", bin, "--workload", "charge",
		"--concurrency", "4", "--requests", "40", "--json", out}
	if code := bench.Main(ctx, args, &log, &log); code != 0 {
		t.Fatalf("exit %d\n%s", code, log.String())
	}
	reps, err := bench.LoadReports(out)
	if err != nil {
		t.Fatal(err)
	}
	rep := reps[0]
	if strings.Contains(rep.Target, ",") || !strings.HasPrefix(rep.Target, "http://127.0.0.1:") {
		t.Errorf("target %q, want the leader's address alone", rep.Target)
	}
	if rep.Ops["charge"].Count != 40 || rep.Errors.Total != 0 {
		t.Errorf("charges %d, errors %d, want 40 and 0\n%s", rep.Ops["charge"].Count, rep.Errors.Total, log.String())
	}
	if len(rep.ProcessCPU) != 4 { // the harness and three nodes
		t.Errorf("process CPU for %d processes, want the harness and 3 nodes", len(rep.ProcessCPU))
	}
}

// realGatewayd skips the test in -short mode; otherwise it returns the
// gatewayd binary and a context that bounds the test's runs.
func realGatewayd(t *testing.T) (string, context.Context) {
	t.Helper()
	if testing.Short() {
		t.Skip("spawns real nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return nodetest.Binary(t), ctx
}
