package bench

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// profileBuilder makes small pprof profiles from stacks of function names.
type profileBuilder struct {
	p     *profile.Profile
	funcs map[string]*profile.Function
}

func newProfileBuilder(types ...[2]string) *profileBuilder {
	b := &profileBuilder{p: &profile.Profile{DurationNanos: int64(8 * time.Second)}, funcs: map[string]*profile.Function{}}
	for _, t := range types {
		b.p.SampleType = append(b.p.SampleType, &profile.ValueType{Type: t[0], Unit: t[1]})
	}
	return b
}

func (b *profileBuilder) function(name string) *profile.Function {
	f, ok := b.funcs[name]
	if !ok {
		f = &profile.Function{ID: uint64(len(b.funcs) + 1), Name: name}
		b.funcs[name] = f
		b.p.Function = append(b.p.Function, f)
	}
	return f
}

// sample adds a sample whose stack is frames, innermost first. A frame
// "a|b" is one location where a was inlined into b.
func (b *profileBuilder) sample(values []int64, frames ...string) {
	s := &profile.Sample{Value: values}
	for _, frame := range frames {
		loc := &profile.Location{ID: uint64(len(b.p.Location) + 1)}
		for _, name := range strings.Split(frame, "|") {
			loc.Line = append(loc.Line, profile.Line{Function: b.function(name)})
		}
		b.p.Location = append(b.p.Location, loc)
		s.Location = append(s.Location, loc)
	}
	b.p.Sample = append(b.p.Sample, s)
}

// encoded writes the profile as gatewayd's pprof endpoint does and reads it
// back, so that the tests go through the parser too.
func (b *profileBuilder) encoded(t *testing.T) ([]byte, *profile.Profile) {
	t.Helper()
	var buf bytes.Buffer
	if err := b.p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), p
}

var cpuTypes = [][2]string{{"samples", "count"}, {"cpu", "nanoseconds"}}

// cpuProfile is a CPU profile of 100 ms with one sample of each kind the
// layer rules must tell apart.
func cpuProfile() *profileBuilder {
	b := newProfileBuilder(cpuTypes...)
	ms := func(n int64) []int64 { return []int64{n, n * int64(time.Millisecond)} }
	// Allocation wins over the FSM it happened in.
	b.sample(ms(30), "runtime.mallocgc", gw+"persistence.(*Batch).applyOrder", gw+"cluster.(*FSM).ApplyBatch", "runtime.goexit")
	// Pebble's commit under the FSM is the memtable, not the FSM's own work.
	b.sample(ms(20), pebble+"/internal/arenaskl.(*Skiplist).findSpliceForLevel", pebble+".(*DB).Apply",
		gw+"persistence.(*Batch).Commit", gw+"cluster.(*FSM).ApplyBatch", "runtime.goexit")
	// A write system call of the HTTP server: HTTP, and a system call.
	b.sample(ms(25), "internal/runtime/syscall/linux.Syscall6", "syscall.write", "net.(*conn).Write",
		"github.com/valyala/fasthttp.(*Server).serveConn", "runtime.goexit")
	// An order actor run inline by an HTTP handler, proposing: Raft.
	b.sample(ms(10), gw+"cluster.(*collector).propose", gw+"cluster.(*Node).Propose",
		gw+"actors.(*orderActor).Receive", "github.com/valyala/fasthttp.(*Server).serveConn", "runtime.goexit")
	// The vault called by an order actor: the vault.
	b.sample(ms(5), "crypto/aes.(*aesCipher).Encrypt", gw+"persistence/vault.(*Vault).Seal",
		gw+"actors.(*orderActor).sealNewCard", "runtime.goexit")
	// A function inlined into an order actor's: the inlined frame counts.
	b.sample(ms(5), gw+"order.applyCreate|"+gw+"actors.(*orderActor).create", "runtime.goexit")
	// Nothing known on the stack.
	b.sample(ms(5), "main.somethingElse", "runtime.goexit")
	return b
}

func TestBreakDownCPU(t *testing.T) {
	_, p := cpuProfile().encoded(t)
	got, err := BreakDownCPU(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []Layer{
		{"allocation and GC", 0.30},
		{"HTTP", 0.25},
		{"FSM: Pebble memtable", 0.20},
		{"Raft", 0.10},
		{"card vault", 0.05},
		{"order actors", 0.05},
		{otherLayer, 0.05},
	}
	if len(got.Layers) != len(want) {
		t.Fatalf("layers %+v, want %+v", got.Layers, want)
	}
	for i, l := range want {
		g := got.Layers[i]
		if g.Name != l.Name || math.Abs(g.Share-l.Share) > 1e-9 {
			t.Fatalf("layer %d: %+v, want %+v (all: %+v)", i, g, l, got.Layers)
		}
	}
	if math.Abs(got.SyscallShare-0.25) > 1e-9 {
		t.Fatalf("system calls %.3f, want 0.25", got.SyscallShare)
	}
	if math.Abs(got.CPUSeconds-0.1) > 1e-9 {
		t.Fatalf("CPU %.3fs, want 0.1s", got.CPUSeconds)
	}
}

// Every layer rule names a layer once; a second rule of the same name
// would split it in the report.
func TestLayerRulesNamedOnce(t *testing.T) {
	seen := map[string]bool{otherLayer: true}
	for _, r := range layerRules {
		if seen[r.name] || len(r.prefixes) == 0 {
			t.Fatalf("layer %q: repeated or without prefixes", r.name)
		}
		seen[r.name] = true
	}
}

var allocTypes = [][2]string{{"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"inuse_objects", "count"}, {"inuse_space", "bytes"}}

func allocProfile() *profileBuilder {
	b := newProfileBuilder(allocTypes...)
	b.sample([]int64{10, 4000, 1, 100}, gw+"order.NewView", "runtime.goexit")
	b.sample([]int64{5, 1000, 0, 0}, gw+"cluster.EncodeEntry", "runtime.goexit")
	return b
}

func TestAllocTotals(t *testing.T) {
	_, p := allocProfile().encoded(t)
	bytes, objects, err := AllocTotals(p)
	if err != nil || bytes != 5000 || objects != 15 {
		t.Fatalf("AllocTotals = %d bytes, %d objects, %v; want 5000, 15", bytes, objects, err)
	}
	// Each reader refuses the other kind of profile.
	if _, err := BreakDownCPU(p); err == nil {
		t.Fatal("BreakDownCPU read an allocation profile")
	}
	_, cpu := cpuProfile().encoded(t)
	if _, _, err := AllocTotals(cpu); err == nil {
		t.Fatal("AllocTotals read a CPU profile")
	}
}

// The run's node profiles: both profiles asked for over the span, kept in
// the directory, read into the breakdown and divided by the requests the
// harness completed meanwhile; a node that fails its profile says why and
// does not hide the others'.
func TestStartNodeProfiles(t *testing.T) {
	cpu, _ := cpuProfile().encoded(t)
	allocs, _ := allocProfile().encoded(t)
	var asked atomic.Value
	running := make(chan struct{}) // the profiles end once the test's requests are done
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Store(r.URL.RawQuery)
		<-running
		switch r.URL.Path {
		case "/debug/pprof/profile":
			w.Write(cpu)
		case "/debug/pprof/allocs":
			w.Write(allocs)
		default:
			http.NotFound(w, r)
		}
	}))
	defer good.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "profiling busy", http.StatusInternalServerError)
	}))
	defer bad.Close()

	dir := t.TempDir()
	var requests atomic.Int64
	requests.Store(1000)
	nodes := []NodeProcess{
		{Name: "node1", PID: 1, PprofAddr: strings.TrimPrefix(good.URL, "http://")},
		{Name: "node2", PID: 2}, // no pprof: not profiled
		{Name: "pprof bad", PprofAddr: strings.TrimPrefix(bad.URL, "http://")},
	}
	wait := startNodeProfiles(context.Background(), nodes, dir, profileSpan(1200*time.Millisecond), requests.Load)
	requests.Add(50) // completed while the profiles ran
	close(running)
	got := wait()
	if len(got) != 2 {
		t.Fatalf("profiles of %d nodes, want the 2 with pprof: %+v", len(got), got)
	}
	if q, _ := asked.Load().(string); q != "seconds=1" {
		t.Fatalf("asked for %q, want seconds=1 (1.2 s rounds to 1)", q)
	}
	n1 := got[0]
	if n1.Node != "node1" || n1.Error != "" || n1.Requests != 50 {
		t.Fatalf("node1: %+v", n1)
	}
	for _, f := range []string{n1.CPUFile, n1.AllocsFile} {
		if !strings.HasPrefix(f, dir) {
			t.Fatalf("profile file %q not in %s", f, dir)
		}
		if b, err := os.ReadFile(f); err != nil || len(b) == 0 {
			t.Fatalf("profile file %s: %v", f, err)
		}
	}
	if len(n1.Layers) == 0 || n1.Layers[0].Name != "allocation and GC" || math.Abs(n1.SyscallShare-0.25) > 1e-9 {
		t.Fatalf("node1 breakdown: %+v", n1)
	}
	if n1.AllocBytesPerRequest != 100 || n1.AllocObjectsPerRequest != 0.3 {
		t.Fatalf("node1 allocation per request: %v bytes, %v objects; want 100 and 0.3", n1.AllocBytesPerRequest, n1.AllocObjectsPerRequest)
	}
	line := n1.summary()
	for _, part := range []string{"node1 profile (1s", "allocation and GC 30.0%", "HTTP 25.0%", "system calls 25.0%", "allocated 0.1 KB"} {
		if !strings.Contains(line, part) {
			t.Fatalf("summary %q lacks %q", line, part)
		}
	}
	if b := got[1]; !strings.Contains(b.Error, "HTTP 500") || !strings.Contains(b.Error, "profiling busy") || len(b.Layers) != 0 {
		t.Fatalf("failed node: %+v", b)
	}
	if !strings.Contains(got[1].summary(), "HTTP 500") {
		t.Fatalf("the summary hides the failure: %q", got[1].summary())
	}
}

func TestNoNodeProfilesWithoutDirOrPprof(t *testing.T) {
	nodes := []NodeProcess{{Name: "node1", PprofAddr: "127.0.0.1:1"}}
	if got := startNodeProfiles(context.Background(), nodes, "", time.Second, func() int64 { return 0 })(); got != nil {
		t.Fatalf("profiles without a directory: %+v", got)
	}
	if got := startNodeProfiles(context.Background(), []NodeProcess{{Name: "n", PID: 1}}, t.TempDir(), time.Second, func() int64 { return 0 })(); got != nil {
		t.Fatalf("profiles without a pprof address: %+v", got)
	}
}

// slowPprofServer serves the test profiles after the seconds asked for, as
// a node's pprof endpoint does.
func slowPprofServer(t *testing.T) *httptest.Server {
	cpu, _ := cpuProfile().encoded(t)
	allocs, _ := allocProfile().encoded(t)
	pprof := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secs, _ := strconv.Atoi(r.URL.Query().Get("seconds"))
		time.Sleep(time.Duration(secs) * time.Second) // as a real profile does
		if r.URL.Path == "/debug/pprof/profile" {
			w.Write(cpu)
		} else {
			w.Write(allocs)
		}
	}))
	t.Cleanup(pprof.Close)
	return pprof
}

// A run ended by --requests is measured over the load, not over the node
// profiles it waits for, which span the whole --duration.
func TestRequestsWindowIgnoresTheProfilesWait(t *testing.T) {
	pprof := slowPprofServer(t)
	g, m := startFake(t)
	cfg := baseConfig(g, m, WorkloadCharge)
	cfg.Duration, cfg.Requests, cfg.ProfileDir = 3*time.Second, 50, t.TempDir()
	cfg.Nodes = []NodeProcess{{Name: "node1", PID: os.Getpid(), PprofAddr: strings.TrimPrefix(pprof.URL, "http://")}}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o := rep.Ops[WorkloadCharge]; o.Count != 50 || rep.Duration >= 1.5 {
		t.Fatalf("50 charges over a window of %.2f s (%d counted): the window must end with the load", rep.Duration, o.Count)
	}
}

// TestNodeProfileRequestsAreThoseOfItsSpan: a window of 1.4 s is profiled
// for 1 s (whole seconds). The requests the allocation is divided by were
// read when the run collected the profiles, after the load, so they were
// the whole window's (~1.4 s of requests over 1 s of allocation, 30 % too
// few bytes per request); they are read when the profiles end.
func TestNodeProfileRequestsAreThoseOfItsSpan(t *testing.T) {
	pprof := slowPprofServer(t)
	g, m := startFake(t)
	cfg := baseConfig(g, m, WorkloadCharge)
	cfg.Duration, cfg.ProfileDir = 1400*time.Millisecond, t.TempDir()
	cfg.Nodes = []NodeProcess{{Name: "node1", PID: os.Getpid(), PprofAddr: strings.TrimPrefix(pprof.URL, "http://")}}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.NodeProfiles) != 1 || rep.NodeProfiles[0].Seconds != 1 {
		t.Fatalf("node profiles %+v: want one of 1 s", rep.NodeProfiles)
	}
	// A closed loop against the fake goes at an even pace: 1 s of the
	// window's 1.4 s holds about 71 % of its charges.
	n, all := rep.NodeProfiles[0].Requests, rep.Ops[WorkloadCharge].Count
	if share := float64(n) / float64(all); share < 0.6 || share > 0.85 {
		t.Errorf("the 1 s profiles counted %d requests, the 1.4 s window %d charges (%.2f): want about 0.71", n, all, share)
	}
}
