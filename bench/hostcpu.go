package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// HostCPU is how the host's CPUs spent the measured window, in percent of
// all CPUs' time (Linux, from /proc/stat). Steal is time the hypervisor gave
// to other guests while this machine wanted the CPU: on a shared virtual
// machine it changes from minute to minute, and a run with much of it is not
// comparable with one without. The harness's own work counts as busy.
type HostCPU struct {
	BusyPct   float64 `json:"busy_pct"`
	StealPct  float64 `json:"steal_pct"`
	IOWaitPct float64 `json:"iowait_pct"`
	// DAMONRunning is whether a DAMON monitor (the kernel's memory access
	// monitor, which some hosts run with a page-out scheme) ran at the
	// window's start or end. On the test VM it taxed a node by the memory it
	// holds: a million-order node's searches took 1.4x the CPU and twice the
	// p99 (docs/performance.md, "Order search", twelfth series), so runs
	// with and without it do not compare.
	DAMONRunning bool `json:"damon_running,omitzero"`
}

// stealWarnPct is the steal share above which the summary warns.
const stealWarnPct = 5

// cpuTimes are the aggregate counters of /proc/stat's "cpu" line, in ticks.
type cpuTimes struct {
	busy, idle, iowait, steal uint64
}

// readCPUTimes reads /proc/stat; ok is false where it does not exist.
func readCPUTimes() (t cpuTimes, ok bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return t, false
	}
	t, err = parseCPUTimes(data)
	return t, err == nil
}

// parseCPUTimes reads the "cpu" line: user nice system idle iowait irq
// softirq steal [guest guest_nice]. Guest time is already inside user and
// nice, so it is not added again.
func parseCPUTimes(stat []byte) (cpuTimes, error) {
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "cpu" {
			continue
		}
		if len(fields) < 9 {
			return cpuTimes{}, fmt.Errorf("/proc/stat cpu line has %d fields, want at least 9", len(fields))
		}
		var v [8]uint64
		for i := range v {
			n, err := strconv.ParseUint(fields[i+1], 10, 64)
			if err != nil {
				return cpuTimes{}, fmt.Errorf("/proc/stat cpu field %d: %w", i+1, err)
			}
			v[i] = n
		}
		user, nice, system, idle, iowait, irq, softirq, steal := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
		return cpuTimes{busy: user + nice + system + irq + softirq, idle: idle, iowait: iowait, steal: steal}, nil
	}
	return cpuTimes{}, fmt.Errorf("/proc/stat has no cpu line")
}

// hostCPUBetween is the share of each kind of time from a to b; nil when no
// time passed (or the counters went backwards).
func hostCPUBetween(a, b cpuTimes) *HostCPU {
	d := cpuTimes{busy: b.busy - a.busy, idle: b.idle - a.idle, iowait: b.iowait - a.iowait, steal: b.steal - a.steal}
	total := d.busy + d.idle + d.iowait + d.steal
	if b.busy < a.busy || b.idle < a.idle || b.iowait < a.iowait || b.steal < a.steal || total == 0 {
		return nil
	}
	pct := func(x uint64) float64 { return float64(x) * 100 / float64(total) }
	return &HostCPU{BusyPct: pct(d.busy), StealPct: pct(d.steal), IOWaitPct: pct(d.iowait)}
}

// summary is the report's line about the host's CPU.
func (h *HostCPU) summary() string {
	s := fmt.Sprintf("host CPU during the window: %.0f%% busy, %.0f%% stolen by the hypervisor, %.0f%% waiting for I/O",
		h.BusyPct, h.StealPct, h.IOWaitPct)
	if h.StealPct >= stealWarnPct {
		s += " (with this much steal, figures are not comparable with runs on a quieter host)"
	}
	if h.DAMONRunning {
		s += "; DAMON, the kernel's memory monitor, was running (it slows nodes that hold much memory: docs/operations.md, \"Memory\")"
	}
	return s
}

// damonStates is where the kernel lists its DAMON monitors' states, under
// the file system's root.
const damonStates = "sys/kernel/mm/damon/admin/kdamonds/*/state"

// damonRunning reports whether any DAMON monitor under root is on (false
// where the kernel has none, or the files cannot be read).
func damonRunning(root string) bool {
	paths, _ := filepath.Glob(filepath.Join(root, damonStates))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == "on" {
			return true
		}
	}
	return false
}
