package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Report is the result of one run, as written by --json. Latencies are in
// microseconds; throughput in operations per second of the measured window.
type Report struct {
	Workload    string    `json:"workload"`
	Target      string    `json:"target"` // comma-separated when several nodes were driven
	Loop        string    `json:"loop"`   // "closed" or "open"
	Concurrency int       `json:"concurrency"`
	Rate        float64   `json:"rate"`     // arrivals per second (open loop); 0 for closed loop
	Duration    float64   `json:"duration"` // seconds of the measured window
	Warmup      float64   `json:"warmup"`   // seconds of unrecorded load before it
	StartedAt   time.Time `json:"started_at"`
	Interrupted bool      `json:"interrupted,omitzero"`
	Mix         string    `json:"mix,omitzero"`
	Machine     Machine   `json:"machine"`
	HostCPU     *HostCPU  `json:"host_cpu,omitzero"` // Linux only
	// ProcessCPU is the harness's CPU and that of the nodes it was told
	// of (Config.Nodes), Linux only.
	ProcessCPU []ProcessCPU `json:"process_cpu,omitzero"`
	// Nodes is what the targets' /metrics counted over the window: where
	// order reads were served from, Pebble's flushes and compactions.
	Nodes *NodeCounters `json:"node_counters,omitzero"`
	// NodeProfiles are the nodes' CPU and allocation profiles over the
	// window (--profile-dir): where each node's CPU went, by layer.
	NodeProfiles []NodeProfile       `json:"node_profiles,omitzero"`
	Ops          map[string]OpReport `json:"ops"`
	Errors       ErrorReport         `json:"errors"`
	OpenLoop     *OpenLoopReport     `json:"open_loop,omitzero"`
	Webhooks     *WebhookReport      `json:"webhooks,omitzero"`
	// Timeline is the window second by second, so that a stall shows when
	// it happened and how long it lasted, not only in the percentiles.
	Timeline []Second `json:"timeline,omitzero"`
}

// Second is one second of the measured window: the operations that ended
// in it. T counts from the window's start; Span is the length of the
// window's last second when it is shorter. A last entry past the window
// (AfterWindow) holds the operations that began in it and ended after it.
type Second struct {
	T           int                 `json:"t"`
	Span        float64             `json:"span_s,omitzero"`
	AfterWindow bool                `json:"after_window,omitempty"`
	Ops         map[string]SecondOp `json:"ops"`
}

// SecondOp is one operation's numbers in a Second.
type SecondOp struct {
	Count  int64 `json:"count"`
	Errors int64 `json:"errors"`
	P50US  int64 `json:"p50_us"`
	P99US  int64 `json:"p99_us"`
	MaxUS  int64 `json:"max_us"`
}

// Machine describes where the harness ran.
type Machine struct {
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
}

// OpReport is one operation's numbers. Count and the percentiles cover the
// successful operations intended inside the window, however late they
// ended; Errors counts the failed ones. Throughput is InWindow, the
// successes that ended inside the window whenever they were intended, over
// the window's length: what the server did in the window.
type OpReport struct {
	Count      int64   `json:"count"`
	Errors     int64   `json:"errors"`
	InWindow   int64   `json:"in_window"`
	Throughput float64 `json:"throughput"`
	// Clamped counts latencies above the histogram's range (60 s), recorded
	// as its top: the maximum is then a floor.
	Clamped int64   `json:"clamped,omitzero"`
	P50US   int64   `json:"p50_us"`
	P90US   int64   `json:"p90_us"`
	P99US   int64   `json:"p99_us"`
	P999US  int64   `json:"p999_us"`
	MaxUS   int64   `json:"max_us"`
	MeanUS  float64 `json:"mean_us"`
}

// ErrorReport counts failures: HTTP error answers by status and by the
// error.code of their body, and everything else (transport failures, declined
// orders, notifications not delivered) by kind. Total is the sum of ByStatus
// and Other; ByCode breaks down the same answers as ByStatus. Arrivals an open
// loop dropped are not here but in OpenLoopReport: they were never sent.
type ErrorReport struct {
	Total    int64            `json:"total"`
	ByStatus map[string]int64 `json:"by_status"`
	ByCode   map[string]int64 `json:"by_code"`
	Other    map[string]int64 `json:"other"`
}

// OpenLoopReport is the scheduler's account of the arrivals of an open-loop run.
type OpenLoopReport struct {
	Scheduled int64 `json:"scheduled"` // arrivals due in the measured window
	Sent      int64 `json:"sent"`      // of those, handed to a worker
	Dropped   int64 `json:"dropped"`   // of those, refused because the queue was full
	Late      int64 `json:"late"`      // sent more than lateAfter after their intended time
	// Unsent are arrivals handed to a worker that were never sent, because
	// the run was interrupted while they waited.
	Unsent int64 `json:"unsent,omitzero"`
	Queue  int   `json:"queue"` // places for arrivals waiting for a worker (--queue)
}

// droppedShare is the share of the window's arrivals that were dropped, 0
// for a closed loop.
func (ol *OpenLoopReport) droppedShare() float64 {
	if ol == nil || ol.Scheduled == 0 {
		return 0
	}
	return float64(ol.Dropped) / float64(ol.Scheduled)
}

// WebhookReport is the webhooks workload's account of notifications.
type WebhookReport struct {
	CallbackURL string `json:"callback_url"`
	Expected    int64  `json:"expected"`  // acknowledged charges in the window
	Delivered   int64  `json:"delivered"` // of those, authorised notifications received
	// DeliveredInWindow counts the authorised notifications (repeats left
	// out) that arrived inside the window, for any charge of this run, the
	// warmup's included; DeliveredPerSec is that over the window's length.
	DeliveredInWindow int64   `json:"delivered_in_window"`
	DeliveredPerSec   float64 `json:"delivered_per_s"`
	Undelivered       int64   `json:"undelivered"` // expected but not received by the end of the wait
	Received          int64   `json:"received"`    // every notification, any status, any order
	Duplicates        int64   `json:"duplicates"`  // authorised notifications repeated for an order already notified
	Unmatched         int64   `json:"unmatched"`   // authorised notifications for no acknowledged charge of this run
	BadSignature      int64   `json:"bad_signature"`
	// LatencyFrom says where the webhook latencies start: "status_change"
	// (the notification's Notification-Created-At header), "charge_answer"
	// (the charge's 200 answer, for a node that sends no such header),
	// "mixed", or "" when none was recorded.
	LatencyFrom string `json:"latency_from,omitzero"`
}

func machine() Machine {
	return Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
}

func buildOps(m merged, window time.Duration) map[string]OpReport {
	secs := window.Seconds()
	out := make(map[string]OpReport, len(m.ops))
	for name, o := range m.ops {
		h := o.hist
		r := OpReport{Count: h.TotalCount(), Errors: o.errors, InWindow: o.inWindow, Clamped: o.clamped}
		if secs > 0 {
			r.Throughput = float64(r.InWindow) / secs
		}
		if r.Count > 0 {
			r.P50US = h.ValueAtQuantile(50)
			r.P90US = h.ValueAtQuantile(90)
			r.P99US = h.ValueAtQuantile(99)
			r.P999US = h.ValueAtQuantile(99.9)
			r.MaxUS = h.Max()
			r.MeanUS = h.Mean()
		}
		out[name] = r
	}
	return out
}

func buildErrors(m merged) ErrorReport {
	e := ErrorReport{ByStatus: m.byStatus, ByCode: m.byCode, Other: map[string]int64{}}
	for _, v := range m.byStatus {
		e.Total += v
	}
	for k, v := range m.other {
		e.Other[k] = v
		e.Total += v
	}
	return e
}

// WriteJSON writes the report, indented, to path.
func (r *Report) WriteJSON(path string) error { return writeJSONFile(path, r) }

// writeJSONFile writes v to path as indented JSON with a final newline. It
// writes a temporary file beside path and renames it, so path holds either
// the earlier file or the whole result, never a part of one.
func writeJSONFile(path string, v any) error {
	b, err := json.Marshal(v, json.Deterministic(true), jsontext.WithIndent("  "))
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".gatewaybench-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails once renamed
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil { // CreateTemp makes it 0600
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// checkWritable reports whether a result can be written at path: its
// folder exists and takes a new file.
func checkWritable(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a folder", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".gatewaybench-*.json")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// LoadReports reads a file holding one report or a JSON array of reports.
func LoadReports(path string) ([]Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	trimmed := strings.TrimSpace(string(b))
	var rs []Report
	if strings.HasPrefix(trimmed, "[") {
		if err := json.Unmarshal([]byte(trimmed), &rs); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
	} else {
		var r Report
		if err := json.Unmarshal([]byte(trimmed), &r); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		rs = []Report{r}
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%s: no result in it", path)
	}
	for i, r := range rs {
		// What a run always writes: a file without it is not a result, and
		// its missing figures would read as zeros (infinitely fast).
		if r.Workload == "" || (r.Loop != "closed" && r.Loop != "open") || r.Ops == nil {
			return nil, fmt.Errorf("%s: result %d is not a gatewaybench run result (workload, loop and ops are required)", path, i+1)
		}
	}
	return rs, nil
}

// sortedOps lists the report's operation names: the workload's own operation
// first, then the rest alphabetically.
func (r *Report) sortedOps() []string {
	names := make([]string, 0, len(r.Ops))
	for n := range r.Ops {
		names = append(names, n)
	}
	return sortOps(names)
}

// sortOps sorts operation names as sortedOps does, in place.
func sortOps(names []string) []string {
	sort.Slice(names, func(i, j int) bool {
		pi, pj := opRank(names[i]), opRank(names[j])
		if pi != pj {
			return pi < pj
		}
		return names[i] < names[j]
	})
	return names
}

// opRank orders the lifecycle's steps as they happen.
func opRank(name string) int {
	for i, n := range []string{"lifecycle", "lifecycle.charge", "lifecycle.poll", "lifecycle.authorize",
		"lifecycle.settle", "lifecycle.refund", "lifecycle.status"} {
		if n == name {
			return i
		}
	}
	return 100
}

// WriteSummary writes the human summary table.
func (r *Report) WriteSummary(w io.Writer) {
	loop := "closed loop"
	if r.Loop == "open" {
		loop = fmt.Sprintf("open loop at %g/s", r.Rate)
	}
	fmt.Fprintf(w, "workload %s  target %s\n", r.Workload, r.Target)
	fmt.Fprintf(w, "%s, concurrency %d, window %.1fs (warmup %.1fs), %d CPUs, %s",
		loop, r.Concurrency, r.Duration, r.Warmup, r.Machine.CPUs, r.Machine.GoVersion)
	if r.Mix != "" {
		fmt.Fprintf(w, ", mix %s", r.Mix)
	}
	if r.Interrupted {
		fmt.Fprint(w, "  (interrupted)")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-20s %9s %10s %7s %9s %9s %9s %9s %9s\n", "op", "count", "ops/s", "errors", "p50", "p90", "p99", "p99.9", "max")
	for _, name := range r.sortedOps() {
		o := r.Ops[name]
		fmt.Fprintf(w, "%-20s %9d %10.1f %7d %9s %9s %9s %9s %9s\n", name, o.Count, o.Throughput, o.Errors,
			fmtUS(o.P50US), fmtUS(o.P90US), fmtUS(o.P99US), fmtUS(o.P999US), fmtUS(o.MaxUS))
	}
	if line := r.slowestSecond(); line != "" {
		fmt.Fprintln(w, line)
	}
	for _, name := range r.sortedOps() {
		if n := r.Ops[name].Clamped; n > 0 {
			fmt.Fprintf(w, "%s: %d latencies over the histogram's %ds were recorded as %ds: its maximum is a floor\n",
				name, n, histHighestUS/1_000_000, histHighestUS/1_000_000)
		}
	}
	if n := r.Errors.Other["timeout"]; n > 0 {
		fmt.Fprintf(w, "%d requests timed out: the latencies above are of successes only, so a stall longer than the timeout shows in the errors, not in the percentiles\n", n)
	}
	if ol := r.OpenLoop; ol != nil {
		fmt.Fprintf(w, "open loop: %d scheduled, %d sent, %d dropped (queue of %d full), %d late (>%s after intended time)\n",
			ol.Scheduled, ol.Sent, ol.Dropped, ol.Queue, ol.Late, lateAfter)
		if ol.Unsent > 0 {
			fmt.Fprintf(w, "open loop: %d of the arrivals handed to a worker were never sent: the run was interrupted while they waited\n", ol.Unsent)
		}
		if ol.Dropped > 0 {
			fmt.Fprintf(w, "open loop: %.1f%% of the arrivals were dropped: the node did not keep up with the rate, and the percentiles above are a lower bound\n",
				100*ol.droppedShare())
		}
	}
	if r.HostCPU != nil {
		fmt.Fprintln(w, r.HostCPU.summary())
	}
	if line := processCPUSummary(r.ProcessCPU); line != "" {
		fmt.Fprintln(w, line)
	}
	if r.Nodes != nil {
		fmt.Fprintln(w, r.Nodes.summary())
	}
	for _, np := range r.NodeProfiles {
		fmt.Fprintln(w, np.summary())
	}
	if wh := r.Webhooks; wh != nil {
		fmt.Fprintf(w, "webhooks: %d/%d delivered, %d undelivered; %d arrived in the window (%.1f/s); %d received in all, %d duplicates, %d unmatched, %d bad signatures\n",
			wh.Delivered, wh.Expected, wh.Undelivered, wh.DeliveredInWindow, wh.DeliveredPerSec, wh.Received, wh.Duplicates, wh.Unmatched, wh.BadSignature)
		switch wh.LatencyFrom {
		case "status_change":
			fmt.Fprintln(w, "webhooks: latency from the status change (the node's Notification-Created-At) to arrival")
		case "charge_answer", "mixed":
			fmt.Fprintln(w, "webhooks: latency from the charge's 200 answer to arrival for notifications without Notification-Created-At: it includes the authorisation")
		}
	}
	if r.Errors.Total == 0 {
		fmt.Fprintln(w, "errors: none")
		return
	}
	fmt.Fprintf(w, "errors: %d", r.Errors.Total)
	for _, part := range []struct {
		label  string
		counts map[string]int64
	}{{"HTTP", r.Errors.ByStatus}, {"code", r.Errors.ByCode}, {"other", r.Errors.Other}} {
		if len(part.counts) > 0 {
			fmt.Fprintf(w, "  %s %s", part.label, fmtCounts(part.counts))
		}
	}
	fmt.Fprintln(w)
}

// slowestSecond names the second of the timeline with the highest p99 of
// the workload's first operation, when the window has more than one. The
// entry past the window is not a second of it, but the window's iterations
// that a stall near its end held up end there: when its p99 is higher, the
// line says so too.
func (r *Report) slowestSecond() string {
	names := r.sortedOps()
	if len(names) == 0 {
		return ""
	}
	op := names[0]
	seconds, worst, late := 0, -1, -1
	for i, sec := range r.Timeline {
		o, ok := sec.Ops[op]
		if sec.AfterWindow {
			if ok && o.Count > 0 {
				late = i
			}
			continue
		}
		seconds++
		if ok && o.Count > 0 && (worst < 0 || o.P99US > r.Timeline[worst].Ops[op].P99US) {
			worst = i
		}
	}
	if seconds < 2 || worst < 0 {
		return ""
	}
	o := r.Timeline[worst].Ops[op]
	line := fmt.Sprintf("slowest second: %s p99 %s, max %s at %ds (%d ops)",
		op, fmtUS(o.P99US), fmtUS(o.MaxUS), r.Timeline[worst].T, o.Count)
	if late >= 0 {
		if l := r.Timeline[late].Ops[op]; l.P99US > o.P99US {
			line += fmt.Sprintf("; ended after the window: p99 %s, max %s (%d ops)", fmtUS(l.P99US), fmtUS(l.MaxUS), l.Count)
		}
	}
	return line + "; the timeline is in the JSON"
}

func fmtCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s×%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// fmtUS writes a latency in µs with a unit that keeps three digits.
func fmtUS(us int64) string {
	switch {
	case us < 1000:
		return fmt.Sprintf("%dµs", us)
	case us < 10_000:
		return fmt.Sprintf("%.2fms", float64(us)/1e3)
	case us < 1_000_000:
		return fmt.Sprintf("%.1fms", float64(us)/1e3)
	default:
		return fmt.Sprintf("%.2fs", float64(us)/1e6)
	}
}
