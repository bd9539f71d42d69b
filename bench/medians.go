package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Several runs of one workload (run --runs N). On a shared machine rates
// move between minutes, so a figure is the median of a few runs, not one
// run; docs/performance.md gives every figure that way.

// median is the middle value of xs, or the mean of the two middle ones
// when there is an even number; 0 for none. xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return (s[mid-1] + s[mid]) / 2
}

// WriteMedians writes, for reports of the same workload, the median over
// the runs of each operation's rate and latency percentiles (with every
// run's rate beside it), of the harness's and the nodes' CPU per request,
// of the notifications that arrived in the window, and of each profiled
// node's layers (--profile-dir).
func WriteMedians(w io.Writer, reps []*Report) {
	if len(reps) == 0 {
		return
	}
	fmt.Fprintf(w, "median of %d runs\n", len(reps))
	fmt.Fprintf(w, "%-20s %10s %9s %9s %9s %9s %9s  %s\n", "op", "ops/s", "p50", "p90", "p99", "p99.9", "max", "ops/s of each run")
	// Every run's operations: one a run lacks did nothing in it, a rate of
	// 0 that its median counts (and no latency, which medianOp leaves out).
	seen := map[string]bool{}
	var names []string
	for _, r := range reps {
		for name := range r.Ops {
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	for _, name := range sortOps(names) {
		var runs []OpReport
		var each []string
		for _, r := range reps {
			o := r.Ops[name]
			runs = append(runs, o)
			each = append(each, fmt.Sprintf("%.1f", o.Throughput))
		}
		m := medianOp(runs)
		fmt.Fprintf(w, "%-20s %10.1f %9s %9s %9s %9s %9s  %s\n", name, m.Throughput,
			fmtUS(m.P50US), fmtUS(m.P90US), fmtUS(m.P99US), fmtUS(m.P999US), fmtUS(m.MaxUS), strings.Join(each, " / "))
	}
	var harness, nodes, delivered []float64
	for _, r := range reps {
		h, ns := harnessAndNodes(r.ProcessCPU)
		if h != nil {
			harness = append(harness, h.USPerRequest)
		}
		if len(ns) > 0 {
			nodes = append(nodes, nodesUSPerRequest(ns))
		}
		if r.Webhooks != nil {
			delivered = append(delivered, r.Webhooks.DeliveredPerSec)
		}
	}
	var cpu []string
	if len(harness) > 0 {
		cpu = append(cpu, "harness "+fmtUS(int64(median(harness))))
	}
	if len(nodes) > 0 {
		cpu = append(cpu, "nodes "+fmtUS(int64(median(nodes))))
	}
	if len(cpu) > 0 {
		fmt.Fprintf(w, "CPU per request (median): %s\n", strings.Join(cpu, ", "))
	}
	if len(delivered) > 0 {
		fmt.Fprintf(w, "webhooks arrived in the window (median): %.1f/s\n", median(delivered))
	}
	for _, line := range medianProfileLines(reps) {
		fmt.Fprintln(w, line)
	}
}

// WriteReportsJSON writes reports as an indented JSON array, which
// LoadReports and compare read.
func WriteReportsJSON(path string, reps []*Report) error { return writeJSONFile(path, reps) }
