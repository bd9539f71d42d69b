package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMainUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"bogus"},
		{"run"},
		{"run", "--target", "http://127.0.0.1:1", "--spawn", "1"},
		{"run", "--spawn", "2"},
		{"run", "--spawn", "1", "--merchant-key", "k"},
		{"run", "--target", "http://127.0.0.1:1", "--gatewayd", "/bin/true"},
		{"run", "--target", "http://127.0.0.1:1", "--node-pids", "12,x"},
		{"run", "--target", "http://127.0.0.1:1", "--node-pids", "-4"},
		{"run", "--spawn", "1", "--node-pids", "12"},
		{"run", "--spawn", "1", "--node-pprof", "127.0.0.1:6060", "--profile-dir", "p"},
		{"run", "--target", "http://127.0.0.1:1", "--node-pprof", "127.0.0.1:6060"},
		{"run", "--target", "http://127.0.0.1:1", "--node-pprof", "6060", "--profile-dir", "p"},
		{"layers"},
		{"layers", "--top", "3"},
		{"run", "--spawn", "1", "--leader-only"},
		{"run", "--target", "http://127.0.0.1:1", "--runs", "0"},
		{"run", "--target", "http://127.0.0.1:1", "--leader-only"},
		{"run", "--target", "http://127.0.0.1:1", "--gatewayd-flag", "--log-level=warn"},
		{"run", "--target", "http://10.1.2.3:80", "--workload", "ceiling"},
		{"run", "--target", "http://127.0.0.1:1", "--workload", "nope"},
		{"run", "--target", "http://127.0.0.1:1", "--workload", "mixed", "--mix", "refund=1"},
		{"run", "--target", "http://127.0.0.1:1", "--workload", "ceiling", "--duration", "0s"},
		{"run", "--target", "http://127.0.0.1:1", "--workload", "ceiling", "--rate", "100", "--queue", "0"},
		{"run", "--target", "http://127.0.0.1:1", "--workload", "ceiling", "--rate", "100", "--queue", "-5"},
		{"run", "--target", "http://127.0.0.1:1", "--workload", "ceiling", "--webhook-wait", "0s"},
		{"run", "--target", "http://127.0.0.1:1", "--workload", "ceiling", "--rate", "NaN"},
		{"run", "--target", "http://127.0.0.1:1", "--workload", "ceiling", "--rate", "1e-11"},
		{"run", "--target", "http://127.0.0.1:1", "--workload", "ceiling", "--no-such-flag"},
		{"run", "--target", "http://127.0.0.1:1", "--workload", "ceiling", "extra"},
		{"compare", "one.json"},
		{"run", "--target", "http://127.0.0.1:1", "--workload", "ceiling", "--queue", "10"},
		{"run", "--target", "http://127.0.0.1:1", "--workload", "charge", "--mix", "charge=1"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), args, &stdout, &stderr); code != ExitUsage {
			t.Errorf("%q: exit %d, want %d\n%s", args, code, ExitUsage, stderr.String())
		}
	}
	var stdout bytes.Buffer
	if code := Main(context.Background(), []string{"help"}, &stdout, &stdout); code != ExitOK || !strings.Contains(stdout.String(), "gatewaybench compare A.json B.json") {
		t.Errorf("help: %d %s", code, stdout.String())
	}
}

func TestMainRunAgainstTarget(t *testing.T) {
	g, m := startFake(t)
	out := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"run", "--target", g.url, "--merchant-key", m.APIPK, "--merchant-secret", m.APISK,
		"--workload", "mixed", "--mix", "charge=3,status=1", "--orders", "10", "--concurrency", "2", "--duration", "300ms", "--json", out},
		&stdout, &stderr)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if s := stdout.String(); !strings.Contains(s, "mix charge=3,status=1") || !strings.Contains(s, "errors: none") || strings.Contains(s, "\r") {
		t.Errorf("summary (no progress line when stdout is not a terminal):\n%s", s)
	}
	if reps, err := LoadReports(out); err != nil || reps[0].Mix != "charge=3,status=1" {
		t.Errorf("%+v %v", reps, err)
	}
}

// --node-pprof with --profile-dir: each run's node profiles land in a
// folder of its own, and the report and its summary carry the breakdown.
func TestMainRunNodePprof(t *testing.T) {
	g, m := startFake(t)
	cpu, _ := cpuProfile().encoded(t)
	allocs, _ := allocProfile().encoded(t)
	pprofSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/debug/pprof/profile":
			w.Write(cpu)
		case "/debug/pprof/allocs":
			w.Write(allocs)
		}
	}))
	defer pprofSrv.Close()
	addr := strings.TrimPrefix(pprofSrv.URL, "http://")
	dir := filepath.Join(t.TempDir(), "profiles")
	out := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"run", "--target", g.url, "--merchant-key", m.APIPK, "--merchant-secret", m.APISK,
		"--workload", "charge", "--concurrency", "2", "--duration", "300ms", "--runs", "2",
		"--node-pprof", addr, "--profile-dir", dir, "--json", out}, &stdout, &stderr)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	reps, err := LoadReports(out)
	if err != nil || len(reps) != 2 {
		t.Fatalf("%d reports, %v", len(reps), err)
	}
	for i, r := range reps {
		if len(r.NodeProfiles) != 1 {
			t.Fatalf("run %d: node profiles %+v", i+1, r.NodeProfiles)
		}
		np := r.NodeProfiles[0]
		runDir := filepath.Join(dir, fmt.Sprintf("run%d", i+1))
		if np.Node != "pprof "+addr || np.Error != "" || filepath.Dir(np.CPUFile) != runDir || len(np.Layers) == 0 {
			t.Fatalf("run %d: %+v", i+1, np)
		}
	}
	if s := stdout.String(); strings.Count(s, "pprof "+addr+" profile (1s") != 2 || !strings.Contains(s, "allocation and GC 30.0%") {
		t.Fatalf("summary:\n%s", s)
	}
}

// The layers command reads profiles taken by hand.
func TestMainLayers(t *testing.T) {
	cpu, _ := cpuProfile().encoded(t)
	path := filepath.Join(t.TempDir(), "cpu.pb.gz")
	if err := os.WriteFile(path, cpu, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"layers", path}, &stdout, &stderr); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"0.1s of CPU sampled over 8s; system calls 25.0%", " 30.0%  allocation and GC", "  5.0%  other"} {
		if !strings.Contains(stdout.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	allocs, _ := allocProfile().encoded(t)
	if err := os.WriteFile(path, allocs, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := Main(context.Background(), []string{"layers", path}, &stdout, &stderr); code != ExitNotStarted {
		t.Fatalf("an allocation profile: exit %d, want %d", code, ExitNotStarted)
	}
}

// TestMainRunCPUProfile checks that --cpu-profile leaves a pprof file: a
// gzipped protobuf that names the harness's own functions.
func TestMainRunCPUProfile(t *testing.T) {
	g, m := startFake(t)
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"run", "--target", g.url, "--merchant-key", m.APIPK, "--merchant-secret", m.APISK,
		"--workload", "charge", "--concurrency", "4", "--duration", "500ms", "--cpu-profile", path}, &stdout, &stderr)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("not a gzipped profile: %v", err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(body, []byte("github.com/paygate/gateway/bench.")) {
		t.Errorf("profile (%d bytes) names no function of the bench package", len(body))
	}
}

func TestMainRunNotStarted(t *testing.T) {
	g, m := startFake(t)
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"run", "--target", g.url, "--merchant-key", m.APIPK, "--merchant-secret", "wrong",
		"--duration", "1s"}, &stdout, &stderr)
	if code != ExitNotStarted || !strings.Contains(stderr.String(), "1.01") {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
}

// Ctrl-C before the window (here while the order pool fills) is an
// interruption, 130, not a run that could not start.
func TestMainRunInterruptedBeforeTheWindow(t *testing.T) {
	g, m := startFake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := Main(ctx, []string{"run", "--target", g.url, "--merchant-key", m.APIPK, "--merchant-secret", m.APISK,
		"--workload", "status", "--orders", "1000000", "--duration", "1s", "--timeout", "2s"}, &stdout, &stderr)
	if code != ExitInterrupted {
		t.Errorf("exit %d, want %d: %s", code, ExitInterrupted, stderr.String())
	}
}

func writeReports(t *testing.T, reps ...Report) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.json")
	if len(reps) == 1 {
		if err := reps[0].WriteJSON(path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	var b bytes.Buffer
	b.WriteString("[")
	for i := range reps {
		p := filepath.Join(t.TempDir(), "one.json")
		if err := reps[i].WriteJSON(p); err != nil {
			t.Fatal(err)
		}
		one, _ := os.ReadFile(p)
		if i > 0 {
			b.WriteString(",")
		}
		b.Write(one)
	}
	b.WriteString("]")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func report(workload string, ops map[string]OpReport) Report {
	return Report{Workload: workload, Target: "http://127.0.0.1:1", Loop: "closed", Concurrency: 1, Duration: 1,
		StartedAt: time.Unix(0, 0).UTC(), Machine: machine(), Ops: ops}
}

func TestCompare(t *testing.T) {
	a := writeReports(t,
		report("charge", map[string]OpReport{"charge": {Count: 1000, Throughput: 1000, P50US: 500, P99US: 2000}}),
		report("status", map[string]OpReport{"status": {Count: 3000, Throughput: 3000, P50US: 100, P99US: 400}}))
	b := writeReports(t,
		report("charge", map[string]OpReport{"charge": {Count: 2000, Throughput: 2000, P50US: 250, P99US: 3000}}),
		report("status", map[string]OpReport{"status": {Count: 1500, Throughput: 1500, P50US: 200, P99US: 400},
			"only-in-b": {Count: 1, Throughput: 1}}))
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"compare", a, b}, &stdout, &stderr); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(stdout.String(), "\n")
	want := map[string][]string{
		"charge": {"2.00x", "0.50x", "1.50x"}, // throughput doubled, p50 halved, p99 up half
		"status": {"0.50x", "2.00x", "1.00x"},
	}
	for op, ratios := range want {
		found := false
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) == 13 && f[1] == op {
				found = true
				if got := []string{f[4], f[7], f[10]}; strings.Join(got, " ") != strings.Join(ratios, " ") {
					t.Errorf("%s ratios %v, want %v", op, got, ratios)
				}
			}
		}
		if !found {
			t.Errorf("no row for %s in\n%s", op, stdout.String())
		}
	}
	if strings.Contains(stdout.String(), "only-in-b") {
		t.Errorf("unpaired op compared:\n%s", stdout.String())
	}
	if strings.Contains(stdout.String(), "CPU per request") {
		t.Errorf("a CPU line without CPU figures:\n%s", stdout.String())
	}
}

// TestCompareCPUPerRequest: runs that carry their processes' CPU compare it
// per workload, averaged over a side's runs of that workload, nodes summed.
func TestCompareCPUPerRequest(t *testing.T) {
	withCPU := func(r Report, harness float64, nodes ...float64) Report {
		r.ProcessCPU = []ProcessCPU{{Name: harnessName, USPerRequest: harness}}
		for i, n := range nodes {
			r.ProcessCPU = append(r.ProcessCPU, ProcessCPU{Name: fmt.Sprintf("node%d", i+1), USPerRequest: n})
		}
		return r
	}
	charge := report("charge", map[string]OpReport{"charge": {Count: 1000, Throughput: 1000}})
	status := report("status", map[string]OpReport{"status": {Count: 1000, Throughput: 1000}})
	a := []Report{withCPU(charge, 40, 200), withCPU(charge, 30, 100), withCPU(status, 10, 20), charge}
	b := []Report{withCPU(charge, 35, 60, 30, 30), status}
	got := cpuLines(a, b)
	want := []string{"CPU per request, charge: nodes 150µs → 120µs (0.80x), harness 35µs → 35µs (1.00x)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got %q\nwant %q", got, want)
	}

	// With page faults on both sides they follow, summed over the nodes.
	withFaults := func(r Report, faults ...float64) Report {
		r.ProcessCPU = append([]ProcessCPU(nil), r.ProcessCPU...)
		for i, f := range faults {
			r.ProcessCPU[i+1].FaultsPerRequest = f
		}
		return r
	}
	a = []Report{withFaults(withCPU(charge, 40, 200), 1.5), withFaults(withCPU(charge, 30, 100), 0.5)}
	b = []Report{withFaults(withCPU(charge, 35, 60, 30, 30), 0.1, 0.1, 0.05)}
	got = cpuLines(a, b)
	want = []string{"CPU per request, charge: nodes 150µs → 120µs (0.80x), harness 35µs → 35µs (1.00x); nodes' page faults 1.00 → 0.25 per request (0.25x)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// TestCompareLayers: runs with node profiles compare each node's CPU per
// request layer by layer (share × the profile's CPU per request), averaged
// over a side's runs, largest first; a layer under 1 µs on both sides and
// nodes or workloads only one side profiled are left out.
func TestCompareLayers(t *testing.T) {
	withProfile := func(r Report, node string, cpuSeconds float64, requests int64, alloc float64, layers ...Layer) Report {
		r.NodeProfiles = append(append([]NodeProfile(nil), r.NodeProfiles...), NodeProfile{Node: node,
			CPUSeconds: cpuSeconds, Requests: requests, AllocBytesPerRequest: alloc, Layers: layers})
		return r
	}
	charge := report("charge", map[string]OpReport{"charge": {Count: 1000, Throughput: 1000}})
	status := report("status", map[string]OpReport{"status": {Count: 1000, Throughput: 1000}})
	// A: two runs of 200 and 100 µs per request; B: one of 150 µs.
	a := []Report{
		withProfile(charge, "node1", 2, 10_000, 16_000, Layer{"HTTP", 0.5}, Layer{"Raft", 0.4995}, Layer{"other", 0.0005}),
		withProfile(charge, "node1", 1, 10_000, 14_000, Layer{"HTTP", 0.5}, Layer{"Raft", 0.5}),
		withProfile(status, "node1", 1, 10_000, 500, Layer{"HTTP", 1}),
	}
	b := []Report{
		withProfile(withProfile(charge, "node1", 1.5, 10_000, 12_000, Layer{"HTTP", 0.6}, Layer{"FSM: state machine", 0.4}),
			"node2", 1, 10_000, 1_000, Layer{"FSM: state machine", 1}),
		status,
	}
	got := strings.Join(layerLines(a, b), "\n")
	want := strings.Join([]string{
		"where node1's CPU per request went, charge (profiles; A → B):",
		"  HTTP                       75.0µs →     90.0µs    +15.0µs",
		"  Raft                       75.0µs →      0.0µs    -75.0µs",
		"  FSM: state machine          0.0µs →     60.0µs    +60.0µs",
		"  allocated per request 15.0 KB → 12.0 KB (0.80x)",
	}, "\n")
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestCompareAgainstCeiling: a ceiling run and a charge run share no
// operation, so each charge operation is set against the ceiling's healthz.
func TestCompareAgainstCeiling(t *testing.T) {
	a := []Report{report("ceiling", map[string]OpReport{"healthz": {Count: 40000, Throughput: 40000, P50US: 25, P99US: 100}})}
	b := []Report{report("charge", map[string]OpReport{"charge": {Count: 10000, Throughput: 10000, P50US: 100, P99US: 1000}})}
	rows, note := Compare(a, b)
	if len(rows) != 1 || note == "" || rows[0].OpA != "healthz" || rows[0].Throughput != 0.25 || rows[0].P50 != 4 || rows[0].P99 != 10 {
		t.Fatalf("rows %+v note %q", rows, note)
	}
	var out bytes.Buffer
	WriteComparison(&out, rows, note)
	if !strings.Contains(out.String(), "charge vs healthz") || !strings.Contains(out.String(), "0.25x") {
		t.Errorf("%s", out.String())
	}
}

// With several runs on a side (--runs N), ceiling runs are still the
// reference: the median of their healthz against the median of each
// operation of B.
func TestCompareRunsAgainstCeiling(t *testing.T) {
	ceil := func(tp float64) Report {
		return report("ceiling", map[string]OpReport{"healthz": {Count: 1, Throughput: tp, P50US: 25, P99US: 100}})
	}
	charge := func(tp float64) Report {
		return report("charge", map[string]OpReport{"charge": {Count: 1, Throughput: tp, P50US: 100, P99US: 1000}})
	}
	for _, c := range []struct {
		name string
		a, b []Report
	}{
		{"one ceiling, three charges", []Report{ceil(40000)}, []Report{charge(9000), charge(10000), charge(12000)}},
		{"three of each", []Report{ceil(30000), ceil(40000), ceil(50000)}, []Report{charge(9000), charge(10000), charge(12000)}},
	} {
		rows, note := Compare(c.a, c.b)
		if len(rows) != 1 || rows[0].OpA != "healthz" || rows[0].OpB != "charge" || rows[0].Throughput != 0.25 || !strings.Contains(note, "ceiling") {
			t.Errorf("%s: rows %+v note %q", c.name, rows, note)
		}
	}
}

// TestCompareSingleRunsByOpName: two single runs of different workloads pair
// their operations by name (charge alone against charge inside mixed).
func TestCompareSingleRunsByOpName(t *testing.T) {
	a := []Report{report("charge", map[string]OpReport{"charge": {Count: 100, Throughput: 100, P50US: 1000, P99US: 4000}})}
	b := []Report{report("mixed", map[string]OpReport{
		"charge": {Count: 50, Throughput: 50, P50US: 2000, P99US: 4000},
		"status": {Count: 50, Throughput: 50, P50US: 100, P99US: 400},
	})}
	rows, note := Compare(a, b)
	if len(rows) != 1 || rows[0].OpA != "charge" || rows[0].Throughput != 0.5 || rows[0].P50 != 2 || rows[0].P99 != 1 ||
		!strings.Contains(note, "paired by name") {
		t.Fatalf("rows %+v note %q", rows, note)
	}
	if rows, _ := Compare(a, []Report{report("status", map[string]OpReport{"status": {Count: 1}})}); len(rows) != 0 {
		t.Errorf("unrelated runs paired: %+v", rows)
	}
}

// TestCompareRunsByMedian: several runs of a workload on a side (--runs)
// are compared by their medians, one row per operation.
func TestCompareRunsByMedian(t *testing.T) {
	charge := func(rate float64, p99 int64) Report {
		return report("charge", map[string]OpReport{"charge": {Count: 10, Throughput: rate, P50US: 100, P99US: p99}})
	}
	a := []Report{charge(1000, 4000), charge(3000, 1000), charge(2000, 2000)}
	b := []Report{charge(3000, 1000), charge(5000, 3000)}
	rows, note := Compare(a, b)
	if len(rows) != 1 || !strings.Contains(note, "medians") {
		t.Fatalf("rows %+v note %q", rows, note)
	}
	r := rows[0]
	// A: rate 2000, p99 2000; B: rate 4000, p99 2000 (the mean of the middle two).
	if r.A.Throughput != 2000 || r.B.Throughput != 4000 || r.Throughput != 2 || r.P99 != 1 || r.A.Count != 30 || r.B.Count != 20 {
		t.Errorf("row %+v", r)
	}
}

// TestCompareCollapsedSide: a side with no success is a ratio of 0.00x, not
// "no ratio"; its latencies are "-", not 0 µs; both sides' errors show; a
// side whose open loop dropped arrivals is named in a note.
func TestCompareCollapsedSide(t *testing.T) {
	ra := report("charge", map[string]OpReport{"charge": {Count: 1000, Throughput: 1000, P50US: 900, P99US: 5000}})
	rb := report("charge", map[string]OpReport{"charge": {Errors: 10000}})
	rb.OpenLoop = &OpenLoopReport{Scheduled: 12000, Sent: 5258, Dropped: 6742, Queue: 160}
	a, b := writeReports(t, ra), writeReports(t, rb)
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"compare", a, b}, &stdout, &stderr); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var row []string
	for _, l := range strings.Split(stdout.String(), "\n") {
		if f := strings.Fields(l); len(f) == 13 && f[1] == "charge" {
			row = f
		}
	}
	want := []string{"charge", "charge", "1000.0", "0.0", "0.00x", "900µs", "-", "-", "5.00ms", "-", "-", "0", "10000"}
	if strings.Join(row, " ") != strings.Join(want, " ") {
		t.Errorf("row %q, want %q\n%s", row, want, stdout.String())
	}
	if !strings.Contains(stdout.String(), "open-loop arrivals dropped: up to 0.0% in A, 56.2% in B") {
		t.Errorf("no note on the dropped arrivals:\n%s", stdout.String())
	}
	if note := droppedNote([]Report{ra}, []Report{ra}); note != "" {
		t.Errorf("closed loops on both sides: %q", note)
	}
}

// TestSlowestSecondIsInTheWindow: the timeline's entry past the window (the
// operations that ended after it) is never named as the slowest second,
// but its p99 is given beside it when higher: a stall near the window's end
// holds up iterations that end there.
func TestSlowestSecondIsInTheWindow(t *testing.T) {
	r := report("charge", map[string]OpReport{"charge": {Count: 30}})
	r.Timeline = []Second{
		{T: 0, Ops: map[string]SecondOp{"charge": {Count: 10, P99US: 2000, MaxUS: 2100}}},
		{T: 1, Ops: map[string]SecondOp{"charge": {Count: 10, P99US: 3000, MaxUS: 3100}}},
		{T: 2, AfterWindow: true, Ops: map[string]SecondOp{"charge": {Count: 1, P99US: 90000, MaxUS: 90000}}},
	}
	if got := r.slowestSecond(); !strings.Contains(got, "p99 3.00ms") || !strings.Contains(got, " at 1s ") ||
		!strings.Contains(got, "ended after the window: p99 90.0ms") {
		t.Errorf("slowest second %q, want second 1, and the later p99", got)
	}
	r.Timeline = r.Timeline[1:]
	if got := r.slowestSecond(); got != "" {
		t.Errorf("a one-second window named a slowest second: %q", got)
	}
}

// A --json that cannot be written is found before the load, not after it.
func TestMainRunChecksTheJSONPathFirst(t *testing.T) {
	g, m := startFake(t)
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"run", "--target", g.url, "--merchant-key", m.APIPK, "--merchant-secret", m.APISK,
		"--workload", "charge", "--concurrency", "1", "--duration", "5s", "--json", filepath.Join(t.TempDir(), "no", "r.json")},
		&stdout, &stderr)
	g.mu.Lock()
	charged := len(g.orders)
	g.mu.Unlock()
	if code != ExitNotStarted || !strings.Contains(stderr.String(), "--json") || charged != 0 {
		t.Errorf("exit %d after %d charges: %s", code, charged, stderr.String())
	}
}

// compare refuses a file that is not a run's result, and says when the
// sides ran under different loads.
func TestCompareRefusesWhatIsNotAResult(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"empty.json": `{}`, "none.json": `[]`, "partial.json": `{"ops":{"charge":{"count":10}}}`} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadReports(path); err == nil {
			t.Errorf("%s %s: read as a result", name, body)
		}
	}
	closed := report("charge", map[string]OpReport{"charge": {Count: 10}})
	closed.Concurrency = 64
	open := closed
	open.Loop, open.Rate = "open", 4000
	if note := loadNote([]Report{closed}, []Report{open}); !strings.Contains(note, "A closed loop, concurrency 64; B open loop at 4000/s") {
		t.Errorf("note %q", note)
	}
	if note := loadNote([]Report{closed}, []Report{closed}); note != "" {
		t.Errorf("same loads: note %q", note)
	}
}
