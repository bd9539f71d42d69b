package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{30, 10, 20}, 20},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5, 5, 1}, 5},
	} {
		in := append([]float64(nil), tc.in...)
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Fatalf("median reordered its input: %v", tc.in)
			}
		}
	}
}

func TestWriteMedians(t *testing.T) {
	run := func(rate float64, p99, nodeUS float64, delivered float64) *Report {
		return &Report{
			Ops: map[string]OpReport{"charge": {Count: 1000, Throughput: rate, P50US: 1000, P90US: 2000, P99US: int64(p99), P999US: 9000, MaxUS: 12000}},
			ProcessCPU: []ProcessCPU{{Name: harnessName, USPerRequest: 40},
				{Name: "node1", USPerRequest: nodeUS}, {Name: "node2", USPerRequest: nodeUS / 2}},
			Webhooks: &WebhookReport{DeliveredPerSec: delivered},
		}
	}
	var out bytes.Buffer
	WriteMedians(&out, []*Report{run(5000, 30_000, 200, 4000), run(7000, 20_000, 100, 4500), run(6000, 50_000, 150, 3000)})
	for _, want := range []string{
		"median of 3 runs",
		"nodes 225µs",  // the nodes summed per run (300, 150, 225), then the median
		"harness 40µs", // every run the same
		"webhooks arrived in the window (median): 4000.0/s",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("medians lack %q:\n%s", want, out.String())
		}
	}
	// op, ops/s, p50, p90, p99, p99.9, max, then each run's rate
	want := []string{"charge", "6000.0", "1.00ms", "2.00ms", "30.0ms", "9.00ms", "12.0ms", "5000.0", "/", "7000.0", "/", "6000.0"}
	var line []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "charge ") {
			line = strings.Fields(l)
		}
	}
	if strings.Join(line, " ") != strings.Join(want, " ") {
		t.Errorf("charge line %q, want %q", line, want)
	}
}

// Profiled runs add, per node, the median of each layer's share over the
// runs (a run without the layer counts as 0) and of the allocation.
func TestWriteMediansLayers(t *testing.T) {
	run := func(alloc float64, layers ...Layer) *Report {
		return &Report{Ops: map[string]OpReport{"charge": {Throughput: 1}},
			NodeProfiles: []NodeProfile{{Node: "node1", AllocBytesPerRequest: alloc, Layers: layers}, {Node: "node2", Error: "refused"}}}
	}
	var out bytes.Buffer
	WriteMedians(&out, []*Report{
		run(15_000, Layer{"HTTP", 0.30}, Layer{"Raft", 0.60}, Layer{otherLayer, 0.10}),
		run(17_000, Layer{"HTTP", 0.50}, Layer{"Raft", 0.50}),
		run(16_000, Layer{"HTTP", 0.40}, Layer{"Raft", 0.55}, Layer{otherLayer, 0.05}),
	})
	want := "node1 layers (median of 3 profiled runs): Raft 55.0% · HTTP 40.0% · other 5.0%; allocated 16.0 KB per request"
	if !strings.Contains(out.String(), want+"\n") {
		t.Errorf("medians lack %q:\n%s", want, out.String())
	}
	if strings.Contains(out.String(), "node2") {
		t.Errorf("a node whose profiles failed has a medians line:\n%s", out.String())
	}
}

// --runs 3 runs the workload three times, each on nodes spawned for it,
// prints the medians and writes the three results as an array.
func TestMainRunRuns(t *testing.T) {
	fakeSpawnOptions(t, 1) // sets the fake mode
	out := filepath.Join(t.TempDir(), "runs.json")
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"run", "--spawn", "1", "--gatewayd", os.Args[0], "--runs", "3",
		"--workload", "charge", "--concurrency", "2", "--duration", "300ms", "--json", out}, &stdout, &stderr)
	if code != ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"run 1 of 3", "run 3 of 3", "median of 3 runs"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	reps, err := LoadReports(out)
	if err != nil || len(reps) != 3 {
		t.Fatalf("%d reports, %v", len(reps), err)
	}
	targets := map[string]bool{}
	for _, r := range reps {
		if r.Ops["charge"].Count == 0 {
			t.Errorf("a run with no charges: %+v", r.Ops)
		}
		targets[r.Target] = true
	}
	if len(targets) != 3 {
		t.Errorf("targets %v: want fresh nodes (new addresses) for every run", targets)
	}
	if strings.Count(stderr.String(), "spawned 1 node(s)") != 3 {
		t.Errorf("want three spawns:\n%s", stderr.String())
	}
}

// TestMedianLeavesOutRunsWithoutLatency: a run with no successful
// operation has no percentiles; its zeros went into the medians as if
// it had answered in 0 µs (two runs, one collapsed: p99 15 ms for a
// run whose p99 was 30 ms). Its rate of 0 still counts.
func TestMedianLeavesOutRunsWithoutLatency(t *testing.T) {
	collapsed := OpReport{Errors: 500}
	ok := OpReport{Count: 1000, Throughput: 5000, InWindow: 1000, P50US: 1000, P90US: 2000, P99US: 30_000, P999US: 40_000, MaxUS: 50_000, MeanUS: 1500}
	m := medianOp([]OpReport{collapsed, ok})
	want := ok
	want.Throughput, want.Errors = 2500, 500
	if m != want {
		t.Errorf("median %+v\nwant   %+v", m, want)
	}
	if m := medianOp([]OpReport{collapsed, collapsed}); m.Count != 0 || m.P99US != 0 || m.Errors != 1000 {
		t.Errorf("median of two collapsed runs %+v", m)
	}
	var out bytes.Buffer
	WriteMedians(&out, []*Report{{Ops: map[string]OpReport{"charge": collapsed}}, {Ops: map[string]OpReport{"charge": ok}}})
	if !strings.Contains(out.String(), "30.0ms") {
		t.Errorf("medians do not give the p99 of the run that had one:\n%s", out.String())
	}
}

// TestMediansCountRunsWithoutTheOperation: an operation missing from a run
// (a lifecycle whose every settle failed before the refund) did nothing
// there. WriteMedians went by the first run's operations and left out one
// it lacked; it and compare took the median rate of the runs that had it
// (400/s over three runs where one did none, instead of 300/s).
func TestMediansCountRunsWithoutTheOperation(t *testing.T) {
	run := func(refunds float64) *Report {
		r := &Report{Workload: WorkloadLifecycle, Loop: "closed", Ops: map[string]OpReport{"lifecycle.settle": {Count: 10, Throughput: 500, P99US: 1000}}}
		if refunds > 0 {
			r.Ops["lifecycle.refund"] = OpReport{Count: 10, Throughput: refunds, P99US: 2000}
		}
		return r
	}
	reps := []*Report{run(0), run(300), run(500)}
	var out bytes.Buffer
	WriteMedians(&out, reps)
	if !strings.Contains(out.String(), "0.0 / 300.0 / 500.0") {
		t.Errorf("the refund's median is not over the three runs:\n%s", out.String())
	}
	var b []Report
	for _, r := range reps {
		b = append(b, *r)
	}
	rows, _ := Compare(b, b)
	for _, r := range rows {
		if r.OpB == "lifecycle.refund" && (r.B.Throughput != 300 || r.B.P99US != 2000) {
			t.Errorf("compare's refund row %+v: want the median rate of 0, 300 and 500", r)
		}
	}
}
