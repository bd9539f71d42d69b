package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/profile"
)

// Node profiles: with Config.ProfileDir set, a run takes a CPU profile and
// an allocation profile of every node that serves pprof
// (NodeProcess.PprofAddr, gatewayd --pprof-addr) over the measured window,
// keeps them in the directory, and reports where each node's CPU went by
// layer of the gateway (HTTP, order actors, Raft, the FSM, Pebble, ...)
// and how much it allocated per request. The layers are what
// docs/performance.md's "Where the time goes" is written in; the files
// are there for `go tool pprof` when a layer needs a closer look.

// NodeProfile is one node's profiles over the window.
type NodeProfile struct {
	Node       string  `json:"node"`
	CPUFile    string  `json:"cpu_file,omitzero"`
	AllocsFile string  `json:"allocs_file,omitzero"`
	Seconds    float64 `json:"seconds"`     // the profiles' span, from the window's start
	CPUSeconds float64 `json:"cpu_seconds"` // CPU time the profile sampled
	Layers     []Layer `json:"layers,omitzero"`
	// SyscallShare is the part of the sampled CPU spent inside system
	// calls, whatever layer made them.
	SyscallShare float64 `json:"syscall_share"`
	// Requests is what the harness completed in the profiles' span; the
	// allocation figures are per one of them.
	Requests               int64   `json:"requests"`
	AllocBytesPerRequest   float64 `json:"alloc_bytes_per_request,omitzero"`
	AllocObjectsPerRequest float64 `json:"alloc_objects_per_request,omitzero"`
	// Error says why a profile is missing or was not read.
	Error string `json:"error,omitzero"`
}

// Layer is one layer's share of a node's sampled CPU.
type Layer struct {
	Name  string  `json:"name"`
	Share float64 `json:"share"` // of the sampled CPU, 0..1
}

// layerRule assigns a sample to a layer when any frame of its stack starts
// with one of prefixes. Rules are tried in order and the first match wins,
// so the more specific come first: allocation inside the FSM is
// allocation, a proposal made by an order actor is Raft, the card vault
// called by an order actor is the vault.
type layerRule struct {
	name     string
	prefixes []string
}

const (
	gw     = "github.com/paygate/gateway/"
	pebble = "github.com/cockroachdb/pebble/v2"
)

// otherLayer holds the samples no rule claimed.
const otherLayer = "other"

// bench/README.md says what each layer covers.
var layerRules = []layerRule{
	{"allocation and GC", []string{"runtime.mallocgc", "runtime.gcBgMarkWorker", "runtime.bgsweep",
		"runtime.bgscavenge", "runtime.gcAssistAlloc", "runtime.gcStart", "runtime.gcMarkDone",
		"runtime.gcMarkTermination"}},
	{"Pebble background", []string{pebble + ".(*DB).flush", pebble + ".(*DB).compact",
		pebble + ".(*DB).runCompaction", pebble + "/record.(*LogWriter).flushLoop", pebble + ".(*cleanupManager)"}},
	{"FSM: Pebble memtable", []string{pebble + ".(*Batch).Commit", pebble + ".(*DB).Apply"}},
	{"FSM: state machine", []string{gw + "cluster.(*FSM)"}},
	{"Raft log append", []string{gw + "cluster.timedLogStore", "github.com/hashicorp/raft-wal"}},
	{"Raft", []string{"github.com/hashicorp/raft.", gw + "cluster."}},
	{"webhook delivery", []string{gw + "transport/webhook."}}, // dispatcher, its actors and the client
	{"acquirer", []string{gw + "transport/acquirer"}},         // the link, the codec and an in-process host
	{"card vault", []string{gw + "persistence/vault."}},
	{"order actors", []string{gw + "actors.", "github.com/asynkron/protoactor-go"}},
	{"store reads", []string{gw + "persistence.", pebble}},
	{"HTTP", []string{"github.com/valyala/fasthttp", gw + "transport/", gw + "order."}},
	{"Go scheduler", []string{"runtime.schedule", "runtime.findRunnable", "runtime.mcall",
		"runtime.park_m", "runtime.goexit0", "runtime.netpoll", "runtime.sysmon", "runtime.(*timers)",
		"runtime.morestack", "runtime.newstack", "runtime.mstart", "runtime.exitsyscall", "runtime.entersyscall"}},
}

// syscallLeaves are the functions a sample's innermost frame is in while
// the thread is inside a system call.
var syscallLeaves = []string{"internal/runtime/syscall", "syscall.RawSyscall", "syscall.Syscall",
	"syscall.rawSyscall", "runtime.futex", "runtime.epollwait", "runtime.usleep", "runtime.madvise",
	"runtime.mmap", "runtime.munmap", "runtime.osyield", "runtime.write1", "runtime.read", "runtime.nanosleep"}

// CPUBreakdown is a CPU profile cut into layers.
type CPUBreakdown struct {
	CPUSeconds   float64
	Layers       []Layer // largest first, otherLayer last
	SyscallShare float64
}

// BreakDownCPU assigns every sample of a CPU profile to a layer.
func BreakDownCPU(p *profile.Profile) (CPUBreakdown, error) {
	vi := sampleIndex(p, "cpu")
	if vi < 0 {
		return CPUBreakdown{}, fmt.Errorf("not a CPU profile (sample types %s)", sampleTypes(p))
	}
	byLayer := make([]int64, len(layerRules)+1) // the last is otherLayer
	var total, syscalls int64
	for _, s := range p.Sample {
		v := s.Value[vi]
		total += v
		byLayer[classify(s)] += v
		if inSyscall(s) {
			syscalls += v
		}
	}
	var b CPUBreakdown
	if total == 0 {
		return b, nil
	}
	b.CPUSeconds = time.Duration(total).Seconds()
	b.SyscallShare = float64(syscalls) / float64(total)
	for i, v := range byLayer {
		if v > 0 {
			name := otherLayer
			if i < len(layerRules) {
				name = layerRules[i].name
			}
			b.Layers = append(b.Layers, Layer{Name: name, Share: float64(v) / float64(total)})
		}
	}
	sortLayers(b.Layers)
	return b, nil
}

// sortLayers puts the largest share first and otherLayer last; equal
// shares go by name, so that a report reads the same every time.
func sortLayers(layers []Layer) {
	slices.SortFunc(layers, func(x, y Layer) int {
		switch {
		case (x.Name == otherLayer) != (y.Name == otherLayer):
			if x.Name == otherLayer {
				return 1
			}
			return -1
		case x.Share > y.Share:
			return -1
		case x.Share < y.Share:
			return 1
		}
		return strings.Compare(x.Name, y.Name)
	})
}

// medianProfileLines give, for each node the runs profiled, the median
// over the runs of each layer's share (a run without the layer counts as
// 0) and of the allocation per request.
func medianProfileLines(reps []*Report) []string {
	var nodes []string
	shares := map[string]map[string][]float64{}
	alloc := map[string][]float64{}
	runs := map[string]int{}
	for _, r := range reps {
		for _, np := range r.NodeProfiles {
			if len(np.Layers) == 0 {
				continue
			}
			if shares[np.Node] == nil {
				shares[np.Node] = map[string][]float64{}
				nodes = append(nodes, np.Node)
			}
			for _, l := range np.Layers {
				shares[np.Node][l.Name] = append(shares[np.Node][l.Name], l.Share)
			}
			runs[np.Node]++
			if np.AllocBytesPerRequest > 0 {
				alloc[np.Node] = append(alloc[np.Node], np.AllocBytesPerRequest)
			}
		}
	}
	lines := make([]string, 0, len(nodes))
	for _, node := range nodes {
		layers := make([]Layer, 0, len(shares[node]))
		for name, xs := range shares[node] {
			for len(xs) < runs[node] {
				xs = append(xs, 0)
			}
			layers = append(layers, Layer{Name: name, Share: median(xs)})
		}
		sortLayers(layers)
		line := fmt.Sprintf("%s layers (median of %d profiled runs): %s", node, runs[node], formatLayers(layers))
		if a := alloc[node]; len(a) > 0 {
			line += fmt.Sprintf("; allocated %.1f KB per request", median(a)/1e3)
		}
		lines = append(lines, line)
	}
	return lines
}

// classify is the index in layerRules of the first rule one of the
// sample's frames matches, or len(layerRules) for none.
func classify(s *profile.Sample) int {
	for i, rule := range layerRules {
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				for _, prefix := range rule.prefixes {
					if strings.HasPrefix(line.Function.Name, prefix) {
						return i
					}
				}
			}
		}
	}
	return len(layerRules)
}

// inSyscall reports whether the sample's innermost frame is a system call.
// A location's first line is its innermost inlined function.
func inSyscall(s *profile.Sample) bool {
	if len(s.Location) == 0 || len(s.Location[0].Line) == 0 || s.Location[0].Line[0].Function == nil {
		return false
	}
	leaf := s.Location[0].Line[0].Function.Name
	for _, prefix := range syscallLeaves {
		if strings.HasPrefix(leaf, prefix) {
			return true
		}
	}
	return false
}

// AllocTotals sums an allocation profile: bytes and objects allocated.
func AllocTotals(p *profile.Profile) (bytes, objects int64, err error) {
	bi, oi := sampleIndex(p, "alloc_space"), sampleIndex(p, "alloc_objects")
	if bi < 0 || oi < 0 {
		return 0, 0, fmt.Errorf("not an allocation profile (sample types %s)", sampleTypes(p))
	}
	for _, s := range p.Sample {
		bytes += s.Value[bi]
		objects += s.Value[oi]
	}
	return bytes, objects, nil
}

func sampleIndex(p *profile.Profile, typ string) int {
	for i, st := range p.SampleType {
		if st.Type == typ {
			return i
		}
	}
	return -1
}

func sampleTypes(p *profile.Profile) string {
	names := make([]string, len(p.SampleType))
	for i, st := range p.SampleType {
		names[i] = st.Type + "/" + st.Unit
	}
	return strings.Join(names, ", ")
}

// profileSpan is how long the node profiles run: the window, in the whole
// seconds pprof takes, at least one.
func profileSpan(window time.Duration) time.Duration {
	return max(time.Second, window.Round(time.Second))
}

// profileFetchSlack bounds a profile request beyond its own span.
const profileFetchSlack = 30 * time.Second

// startNodeProfiles asks every node with a pprof address for a CPU and an
// allocation profile of span, from now, written into dir. requestsNow
// reads the harness's completed requests; the returned function waits
// for the profiles and reads them.
func startNodeProfiles(ctx context.Context, nodes []NodeProcess, dir string, span time.Duration,
	requestsNow func() int64) func() []NodeProfile {
	var withPprof []NodeProcess
	for _, n := range nodes {
		if n.PprofAddr != "" {
			withPprof = append(withPprof, n)
		}
	}
	if len(withPprof) == 0 || dir == "" {
		return func() []NodeProfile { return nil }
	}
	client := &http.Client{Timeout: span + profileFetchSlack}
	secs := int(span / time.Second)
	startRequests := requestsNow()
	out := make([]NodeProfile, len(withPprof))
	var wg sync.WaitGroup
	for i, n := range withPprof {
		out[i] = NodeProfile{Node: n.Name, Seconds: span.Seconds()}
		np := &out[i]
		var mu sync.Mutex
		fail := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if np.Error == "" {
				np.Error = err.Error()
			}
		}
		base := "http://" + n.PprofAddr + "/debug/pprof/"
		for _, p := range []struct {
			endpoint, suffix string
			file             *string
		}{{"profile", ".cpu.pb.gz", &np.CPUFile}, {"allocs", ".allocs.pb.gz", &np.AllocsFile}} {
			wg.Go(func() {
				path := filepath.Join(dir, safeFileName(n.Name)+p.suffix)
				if err := fetchProfile(ctx, client, fmt.Sprintf("%s%s?seconds=%d", base, p.endpoint, secs), path); err != nil {
					fail(err)
					return
				}
				*p.file = path
			})
		}
	}
	// The requests are read as the profiles end, not when the run asks
	// for them after its load: a window longer than the span (1.4 s,
	// profiled for 1 s) would count requests the profiles did not see.
	// The profiles end span after they began even when the load ended
	// sooner; the requests are those completed until then.
	spanRequests := make(chan int64, 1)
	go func() {
		wg.Wait()
		spanRequests <- requestsNow() - startRequests
	}()
	return func() []NodeProfile {
		requests := <-spanRequests
		for i := range out {
			out[i].Requests = requests
			readNodeProfile(&out[i])
		}
		return out
	}
}

// readNodeProfile fills the breakdown and the allocation figures from the
// profile files np names.
func readNodeProfile(np *NodeProfile) {
	note := func(err error) {
		if np.Error == "" {
			np.Error = err.Error()
		}
	}
	if np.CPUFile != "" {
		if p, err := readProfileFile(np.CPUFile); err != nil {
			note(err)
		} else if b, err := BreakDownCPU(p); err != nil {
			note(fmt.Errorf("%s: %v", np.CPUFile, err))
		} else {
			np.CPUSeconds, np.Layers, np.SyscallShare = b.CPUSeconds, b.Layers, b.SyscallShare
		}
	}
	if np.AllocsFile != "" && np.Requests > 0 {
		if p, err := readProfileFile(np.AllocsFile); err != nil {
			note(err)
		} else if bytes, objects, err := AllocTotals(p); err != nil {
			note(fmt.Errorf("%s: %v", np.AllocsFile, err))
		} else {
			np.AllocBytesPerRequest = float64(bytes) / float64(np.Requests)
			np.AllocObjectsPerRequest = float64(objects) / float64(np.Requests)
		}
	}
}

// fetchProfile GETs url into path.
func fetchProfile(ctx context.Context, client *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("profile: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("profile %s: HTTP %d: %s", url, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile %s: %v", url, err)
	}
	return f.Close()
}

func readProfileFile(path string) (*profile.Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return p, nil
}

// safeFileName keeps a node's name usable as a file name ("pid 123").
func safeFileName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == os.PathSeparator {
			return '-'
		}
		return r
	}, name)
}

// summaryLayerFloor hides layers under half a percent from the summary
// line (they stay in the JSON).
const summaryLayerFloor = 0.005

// summary is the report's line for one node's profiles.
func (np NodeProfile) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s profile (%gs, %.1fs of CPU sampled):", np.Node, np.Seconds, np.CPUSeconds)
	if len(np.Layers) > 0 {
		b.WriteString(" ")
		b.WriteString(formatLayers(np.Layers))
		fmt.Fprintf(&b, "; system calls %.1f%%", 100*np.SyscallShare)
	}
	if np.AllocBytesPerRequest > 0 {
		fmt.Fprintf(&b, "; allocated %.1f KB (%.0f objects) per request", np.AllocBytesPerRequest/1e3, np.AllocObjectsPerRequest)
	}
	if np.Error != "" {
		fmt.Fprintf(&b, "; %s", np.Error)
	}
	return b.String()
}

// formatLayers writes the layers over summaryLayerFloor, largest first.
func formatLayers(layers []Layer) string {
	parts := make([]string, 0, len(layers))
	for _, l := range layers {
		if l.Share >= summaryLayerFloor {
			parts = append(parts, fmt.Sprintf("%s %.1f%%", l.Name, 100*l.Share))
		}
	}
	return strings.Join(parts, " · ")
}
