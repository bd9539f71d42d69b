package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Ratio compares one operation of run B with the same operation of run A.
// The ratios are B/A: throughput above 1 means B did more per second,
// latency below 1 means B was faster. A ratio is NaN (printed "-") when
// A's value is 0 or when either side has no latency (no success).
type Ratio struct {
	Workload   string
	OpA, OpB   string // the same unless B is set against a ceiling run's healthz
	A, B       OpReport
	Throughput float64
	P50        float64
	P99        float64
}

// Compare pairs the operations of a and b:
//   - in general by workload and operation name;
//   - when each side is a single run, by operation name alone, so that a
//     workload's operations can be set against the same operations inside
//     another (charge alone against charge within mixed);
//   - when A holds only ceiling runs and B none, every operation of B is
//     set against A's healthz: the ceiling is the reference of what the same
//     client and server do with no work at all.
//
// Several runs of one workload on a side (run --runs N writes them) are
// taken together: each figure is their median.
//
// The note says which rule applied when it was not the first, and when
// medians were taken.
func Compare(a, b []Report) (rows []Ratio, note string) {
	if len(a) == 1 && len(b) == 1 {
		ra, rb := a[0], b[0]
		if ref, ok := ra.Ops["healthz"]; ok && ra.Workload == WorkloadCeiling && rb.Workload != WorkloadCeiling {
			for _, op := range rb.sortedOps() {
				rows = append(rows, ratio(rb.Workload, "healthz", op, ref, rb.Ops[op]))
			}
			return rows, fmt.Sprintf("A is a ceiling run: every operation of B (%s) is set against its healthz", rb.Workload)
		}
		for _, op := range rb.sortedOps() {
			if oa, ok := ra.Ops[op]; ok {
				rows = append(rows, ratio(rb.Workload, op, op, oa, rb.Ops[op]))
			}
		}
		if ra.Workload != rb.Workload {
			note = fmt.Sprintf("A is workload %s, B is workload %s: operations paired by name", ra.Workload, rb.Workload)
		}
		return rows, note
	}
	runsA, _ := runsByOp(a)
	runsB, order := runsByOp(b)
	if ref, ok := runsA[[2]string{WorkloadCeiling, "healthz"}]; ok && len(runsA) == 1 && !hasWorkload(b, WorkloadCeiling) {
		// Ceiling runs against runs of other workloads, as above, with
		// the medians of each side's runs (run --runs N).
		refOp := medianOp(ref)
		for _, k := range order {
			rows = append(rows, ratio(k[0], "healthz", k[1], refOp, medianOp(runsB[k])))
		}
		sort.SliceStable(rows, func(i, j int) bool { return rows[i].Workload < rows[j].Workload })
		return rows, "A is ceiling runs: every operation of B is set against their healthz (medians of the runs on each side)"
	}
	several := false
	for _, k := range order {
		as, ok := runsA[k]
		if !ok {
			continue
		}
		bs := runsB[k]
		several = several || len(as) > 1 || len(bs) > 1
		rows = append(rows, ratio(k[0], k[1], k[1], medianOp(as), medianOp(bs)))
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Workload < rows[j].Workload })
	if several {
		note = "several runs of a workload on a side: the medians of their figures are compared"
	}
	return rows, note
}

// hasWorkload reports whether one of rs ran workload w.
func hasWorkload(rs []Report, w string) bool {
	for _, r := range rs {
		if r.Workload == w {
			return true
		}
	}
	return false
}

// runsByOp groups every run's figures by workload and operation, keys in
// the order they first appear. A run of the workload that lacks the
// operation did nothing of it: it counts as a run with none (a rate of 0).
func runsByOp(rs []Report) (map[[2]string][]OpReport, [][2]string) {
	m := map[[2]string][]OpReport{}
	var order [][2]string
	runs := map[string]int{}
	for _, r := range rs {
		runs[r.Workload]++
		for _, op := range r.sortedOps() {
			k := [2]string{r.Workload, op}
			if _, ok := m[k]; !ok {
				order = append(order, k)
			}
			m[k] = append(m[k], r.Ops[op])
		}
	}
	for k := range m {
		for len(m[k]) < runs[k[0]] {
			m[k] = append(m[k], OpReport{})
		}
	}
	return m, order
}

// medianOp is one operation's figures over several runs: the median of
// each, the counts summed. The latencies are the median over the runs
// that had a success: a run without one has no percentiles, and its zeros
// would read as answers in 0 µs. Its rate of 0 is a rate.
func medianOp(runs []OpReport) OpReport {
	if len(runs) == 1 {
		return runs[0]
	}
	var out OpReport
	var measured []OpReport
	for _, o := range runs {
		out.Count += o.Count
		out.Errors += o.Errors
		out.InWindow += o.InWindow
		out.Clamped += o.Clamped
		if o.Count > 0 {
			measured = append(measured, o)
		}
	}
	out.Throughput = median(figures(runs, func(o OpReport) float64 { return o.Throughput }))
	pick := func(f func(OpReport) float64) float64 { return median(figures(measured, f)) }
	out.P50US = int64(pick(func(o OpReport) float64 { return float64(o.P50US) }))
	out.P90US = int64(pick(func(o OpReport) float64 { return float64(o.P90US) }))
	out.P99US = int64(pick(func(o OpReport) float64 { return float64(o.P99US) }))
	out.P999US = int64(pick(func(o OpReport) float64 { return float64(o.P999US) }))
	out.MaxUS = int64(pick(func(o OpReport) float64 { return float64(o.MaxUS) }))
	out.MeanUS = pick(func(o OpReport) float64 { return o.MeanUS })
	return out
}

// figures is f of each of runs.
func figures(runs []OpReport, f func(OpReport) float64) []float64 {
	xs := make([]float64, len(runs))
	for i, o := range runs {
		xs[i] = f(o)
	}
	return xs
}

func ratio(workload, opA, opB string, a, b OpReport) Ratio {
	r := Ratio{
		Workload: workload, OpA: opA, OpB: opB, A: a, B: b,
		Throughput: div(b.Throughput, a.Throughput),
		P50:        math.NaN(),
		P99:        math.NaN(),
	}
	if a.Count > 0 && b.Count > 0 {
		r.P50 = div(float64(b.P50US), float64(a.P50US))
		r.P99 = div(float64(b.P99US), float64(a.P99US))
	}
	return r
}

// div is b/a, NaN when a is 0: "no reference", which a real 0 (B collapsed)
// must not be confused with.
func div(b, a float64) float64 {
	if a == 0 {
		return math.NaN()
	}
	return b / a
}

// droppedNote warns when open-loop runs on either side dropped arrivals:
// their percentiles leave out what the queue could not hold.
func droppedNote(a, b []Report) string {
	most := func(rs []Report) float64 {
		share := 0.0
		for _, r := range rs {
			share = max(share, r.OpenLoop.droppedShare())
		}
		return share
	}
	da, db := most(a), most(b)
	if da == 0 && db == 0 {
		return ""
	}
	return fmt.Sprintf("open-loop arrivals dropped: up to %.1f%% in A, %.1f%% in B; the percentiles of a side that dropped are a lower bound", 100*da, 100*db)
}

// loadNote says when the two sides ran under different loads (closed or
// open loop, rate, concurrency): their ratios then compare the loads as
// much as the code.
func loadNote(a, b []Report) string {
	load := func(rs []Report) string {
		seen := map[string]bool{}
		var out []string
		for _, r := range rs {
			l := fmt.Sprintf("closed loop, concurrency %d", r.Concurrency)
			if r.Loop == "open" {
				l = fmt.Sprintf("open loop at %g/s, concurrency %d", r.Rate, r.Concurrency)
			}
			if !seen[l] {
				seen[l] = true
				out = append(out, l)
			}
		}
		sort.Strings(out)
		return strings.Join(out, "; ")
	}
	la, lb := load(a), load(b)
	if la == lb {
		return ""
	}
	return fmt.Sprintf("the sides ran under different loads: A %s; B %s", la, lb)
}

// stealNote says how much CPU the hypervisor took during each side's runs
// (the most of any run on that side), when either side took notable steal:
// ratios between such runs say more about the host than about the code.
func stealNote(a, b []Report) string {
	most := func(rs []Report) (pct float64, known bool) {
		for _, r := range rs {
			if r.HostCPU != nil {
				pct, known = max(pct, r.HostCPU.StealPct), true
			}
		}
		return pct, known
	}
	sa, ka := most(a)
	sb, kb := most(b)
	if !ka || !kb || max(sa, sb) < stealWarnPct {
		return ""
	}
	return fmt.Sprintf("host CPU stolen by the hypervisor: up to %.0f%% in A, %.0f%% in B; ratios also measure the host", sa, sb)
}

// damonNote says when a DAMON memory monitor ran during one side's runs and
// not the other's: on a node that holds much memory it moves latency and
// CPU by more than most changes do (HostCPU.DAMONRunning).
func damonNote(a, b []Report) string {
	ran := func(rs []Report) (on, known bool) {
		for _, r := range rs {
			if r.HostCPU != nil {
				on, known = on || r.HostCPU.DAMONRunning, true
			}
		}
		return on, known
	}
	oa, ka := ran(a)
	ob, kb := ran(b)
	if !ka || !kb || oa == ob {
		return ""
	}
	side := func(on bool) string {
		if on {
			return "running"
		}
		return "not running"
	}
	return fmt.Sprintf("DAMON, the kernel's memory monitor, was %s in A's runs and %s in B's; ratios also measure the host", side(oa), side(ob))
}

// cpuLines compare the CPU per request of the runs that carry it, one line
// per workload found on both sides, e.g. "CPU per request, charge: nodes
// 164µs → 150µs (0.91x), harness 34µs → 33µs (0.97x)". Where the rates
// moved with the host, this is the comparison that still says which build
// does less work. The nodes' page faults per request follow when both sides
// counted some (results from before the harness read them have none). A
// workload that appears several times on a side is averaged over its runs.
func cpuLines(a, b []Report) []string {
	type perRequest struct{ nodes, harness, faults, runs float64 }
	collect := func(rs []Report) map[string]*perRequest {
		m := map[string]*perRequest{}
		for _, r := range rs {
			harness, nodes := harnessAndNodes(r.ProcessCPU)
			if harness == nil || len(nodes) == 0 {
				continue
			}
			pr := m[r.Workload]
			if pr == nil {
				pr = &perRequest{}
				m[r.Workload] = pr
			}
			pr.nodes += nodesUSPerRequest(nodes)
			pr.harness += harness.USPerRequest
			for _, n := range nodes {
				pr.faults += n.FaultsPerRequest
			}
			pr.runs++
		}
		return m
	}
	ma, mb := collect(a), collect(b)
	workloads := inBoth(ma, mb)
	sort.Strings(workloads)
	lines := make([]string, 0, len(workloads))
	for _, w := range workloads {
		pa, pb := ma[w], mb[w]
		na, nb := pa.nodes/pa.runs, pb.nodes/pb.runs
		ha, hb := pa.harness/pa.runs, pb.harness/pb.runs
		line := fmt.Sprintf("CPU per request, %s: nodes %s → %s (%s), harness %s → %s (%s)", w,
			fmtUS(int64(na)), fmtUS(int64(nb)), fmtRatio(div(nb, na)),
			fmtUS(int64(ha)), fmtUS(int64(hb)), fmtRatio(div(hb, ha)))
		if fa, fb := pa.faults/pa.runs, pb.faults/pb.runs; fa > 0 && fb > 0 {
			line += fmt.Sprintf("; nodes' page faults %.2f → %.2f per request (%s)", fa, fb, fmtRatio(div(fb, fa)))
		}
		lines = append(lines, line)
	}
	return lines
}

// WriteComparison prints the ratios as a table.
func WriteComparison(w io.Writer, rows []Ratio, note string) {
	if note != "" {
		fmt.Fprintln(w, note)
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "nothing to compare: no operation appears on both sides")
		return
	}
	wlWidth, opWidth := len("workload"), len("op")
	ops := make([]string, len(rows))
	for i, r := range rows {
		ops[i] = r.OpB
		if r.OpA != r.OpB {
			ops[i] = r.OpB + " vs " + r.OpA
		}
		wlWidth, opWidth = max(wlWidth, len(r.Workload)), max(opWidth, len(ops[i]))
	}
	fmt.Fprintf(w, "%-*s  %-*s %10s %10s %7s %9s %9s %7s %9s %9s %7s %8s %8s\n", wlWidth, "workload", opWidth, "op",
		"ops/s A", "ops/s B", "B/A", "p50 A", "p50 B", "B/A", "p99 A", "p99 B", "B/A", "errors A", "errors B")
	for i, r := range rows {
		fmt.Fprintf(w, "%-*s  %-*s %10.1f %10.1f %7s %9s %9s %7s %9s %9s %7s %8d %8d\n", wlWidth, r.Workload, opWidth, ops[i],
			r.A.Throughput, r.B.Throughput, fmtRatio(r.Throughput),
			fmtLatency(r.A, r.A.P50US), fmtLatency(r.B, r.B.P50US), fmtRatio(r.P50),
			fmtLatency(r.A, r.A.P99US), fmtLatency(r.B, r.B.P99US), fmtRatio(r.P99),
			r.A.Errors, r.B.Errors)
	}
}

// fmtRatio prints a ratio, "-" when there is none (NaN).
func fmtRatio(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf("%.2fx", x)
}

// fmtLatency prints one of o's percentiles, "-" when o had no success to
// measure.
func fmtLatency(o OpReport, us int64) string {
	if o.Count == 0 {
		return "-"
	}
	return fmtUS(us)
}

// layerLines compare where each node's CPU per request went, for the
// workloads and nodes both sides profiled (--profile-dir): per layer, the
// mean over the runs of its share times the profile's CPU per request,
// A against B, largest first; then the allocation per request.
func layerLines(a, b []Report) []string {
	type key struct{ workload, node string }
	type sums struct {
		us          map[string]float64 // per layer, summed over runs
		alloc, runs float64
	}
	collect := func(rs []Report) map[key]*sums {
		m := map[key]*sums{}
		for _, r := range rs {
			for _, np := range r.NodeProfiles {
				if np.Requests <= 0 || len(np.Layers) == 0 {
					continue
				}
				k := key{r.Workload, np.Node}
				s := m[k]
				if s == nil {
					s = &sums{us: map[string]float64{}}
					m[k] = s
				}
				perRequest := np.CPUSeconds * 1e6 / float64(np.Requests)
				for _, l := range np.Layers {
					s.us[l.Name] += l.Share * perRequest
				}
				s.alloc += np.AllocBytesPerRequest
				s.runs++
			}
		}
		return m
	}
	ma, mb := collect(a), collect(b)
	keys := inBoth(ma, mb)
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].workload != keys[j].workload {
			return keys[i].workload < keys[j].workload
		}
		return keys[i].node < keys[j].node
	})
	var lines []string
	for _, k := range keys {
		sa, sb := ma[k], mb[k]
		names := make([]string, 0, len(sa.us)+len(sb.us))
		seen := map[string]bool{}
		for _, s := range []*sums{sa, sb} {
			for name := range s.us {
				if !seen[name] {
					seen[name] = true
					names = append(names, name)
				}
			}
		}
		mean := func(s *sums, name string) float64 { return s.us[name] / s.runs }
		sort.Slice(names, func(i, j int) bool {
			return mean(sa, names[i])+mean(sb, names[i]) > mean(sa, names[j])+mean(sb, names[j])
		})
		lines = append(lines, fmt.Sprintf("where %s's CPU per request went, %s (profiles; A → B):", k.node, k.workload))
		for _, name := range names {
			ua, ub := mean(sa, name), mean(sb, name)
			if ua < 1 && ub < 1 {
				continue
			}
			lines = append(lines, fmt.Sprintf("  %-22s %8.1fµs → %8.1fµs  %+7.1fµs", name, ua, ub, ub-ua))
		}
		if aa, ab := sa.alloc/sa.runs, sb.alloc/sb.runs; aa > 0 && ab > 0 {
			lines = append(lines, fmt.Sprintf("  allocated per request %.1f KB → %.1f KB (%s)", aa/1e3, ab/1e3, fmtRatio(div(ab, aa))))
		}
	}
	return lines
}

// inBoth lists, in no order, the keys of b that a holds too.
func inBoth[K comparable, V any](a, b map[K]*V) []K {
	var keys []K
	for k := range b {
		if a[k] != nil {
			keys = append(keys, k)
		}
	}
	return keys
}
