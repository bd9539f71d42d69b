package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// NodeProcess is a gateway process on this machine whose CPU time a run
// counts.
type NodeProcess struct {
	Name string // how the report names it: the node id, "pid N" or "pprof ADDR"
	PID  int    // 0 when only its profiles are taken (--node-pprof)
	// PprofAddr is where the node serves net/http/pprof (host:port), for
	// the run's node profiles (Config.ProfileDir); empty for none.
	PprofAddr string
}

// ProcessCPU is the CPU time (user and system) one process spent in the
// measured window, and the page faults it took (Linux, /proc/<pid>/stat).
// The faults say how much of that time went into first touches of memory:
// a fresh node faults in its heap and Pebble's memtables as it grows, at
// ~9 µs a page on a paravirtualised guest (docs/performance.md).
//
// Per request divides both by the HTTP requests the harness completed in
// the window (notifications its receiver took are not requests): under
// `charge` the nodes' figure is the node CPU per charge, under `webhooks`
// per notification (one charge each), under `lifecycle` per step. On two
// shared cores the CPU per request is the figure that compares across
// minutes, where rates move with the host.
type ProcessCPU struct {
	Name         string  `json:"name"` // harnessName for gatewaybench itself
	PID          int     `json:"pid"`
	Seconds      float64 `json:"cpu_seconds"`
	Cores        float64 `json:"cores"` // Seconds over the window's length
	USPerRequest float64 `json:"us_per_request"`
	PageFaults   uint64  `json:"page_faults"` // minor and major, in the window
	// FaultsPerRequest divides PageFaults as USPerRequest divides Seconds.
	FaultsPerRequest float64 `json:"page_faults_per_request"`
}

// harnessName names gatewaybench's own entry in a report's ProcessCPU.
const harnessName = "harness"

// userHZ is the unit of /proc's CPU times: USER_HZ, 100 on every Linux
// architecture Go supports.
const userHZ = 100

// processCounters are a process's cumulative counters at one moment.
type processCounters struct {
	ticks  uint64 // user plus system time
	faults uint64 // minor plus major page faults
}

// readProcessCounters reads a process's counters from /proc/<pid>/stat; ok
// is false where it cannot (not Linux, or the process is gone).
func readProcessCounters(pid int) (c processCounters, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return processCounters{}, false
	}
	c, err = parseProcessStat(data)
	return c, err == nil
}

// parseProcessStat reads minflt and majflt, the 10th and 12th fields, and
// utime and stime, the 14th and 15th. The second field is the command in
// parentheses and may itself hold spaces and parentheses, so fields are
// counted from after its last ')'.
func parseProcessStat(stat []byte) (processCounters, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return processCounters{}, fmt.Errorf("/proc stat has no command field")
	}
	fields := strings.Fields(string(stat[end+1:]))
	// fields[0] is the 3rd field (state).
	const minflt, majflt, utime, stime = 10 - 3, 12 - 3, 14 - 3, 15 - 3
	if len(fields) <= stime {
		return processCounters{}, fmt.Errorf("/proc stat has %d fields after the command, want more than %d", len(fields), stime)
	}
	sum := func(a, b int) (uint64, error) {
		var total uint64
		for _, i := range []int{a, b} {
			n, err := strconv.ParseUint(fields[i], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc stat field %d: %w", i+3, err)
			}
			total += n
		}
		return total, nil
	}
	var c processCounters
	var err error
	if c.ticks, err = sum(utime, stime); err != nil {
		return processCounters{}, err
	}
	if c.faults, err = sum(minflt, majflt); err != nil {
		return processCounters{}, err
	}
	return c, nil
}

// processSample is the counters of the harness and of each node at one
// moment, by pid; a process that could not be read is missing from it.
type processSample map[int]processCounters

// sampleProcesses reads the harness's and the nodes' counters.
func sampleProcesses(nodes []NodeProcess) processSample {
	s := make(processSample, len(nodes)+1)
	read := func(pid int) {
		if c, ok := readProcessCounters(pid); ok {
			s[pid] = c
		}
	}
	read(os.Getpid())
	for _, n := range nodes {
		read(n.PID)
	}
	return s
}

// processCPUBetween is each process's CPU between two samples, the harness
// first; a process missing from either sample is left out.
func processCPUBetween(a, b processSample, nodes []NodeProcess, windowSecs float64, requests int64) []ProcessCPU {
	named := append([]NodeProcess{{Name: harnessName, PID: os.Getpid()}}, nodes...)
	var out []ProcessCPU
	for _, p := range named {
		c0, ok0 := a[p.PID]
		c1, ok1 := b[p.PID]
		if !ok0 || !ok1 || c1.ticks < c0.ticks || c1.faults < c0.faults {
			continue
		}
		pc := ProcessCPU{Name: p.Name, PID: p.PID, Seconds: float64(c1.ticks-c0.ticks) / userHZ,
			PageFaults: c1.faults - c0.faults}
		if windowSecs > 0 {
			pc.Cores = pc.Seconds / windowSecs
		}
		if requests > 0 {
			pc.USPerRequest = pc.Seconds * 1e6 / float64(requests)
			pc.FaultsPerRequest = float64(pc.PageFaults) / float64(requests)
		}
		out = append(out, pc)
	}
	return out
}

// processCPUSummary is the report's line about the processes' CPU, e.g.
// "CPU per request: harness 41µs, nodes 205µs (n1 205µs); cores used:
// harness 0.31, nodes 1.52; nodes' page faults 99054 (1.40 per request)".
// The nodes' page faults follow only when there are nodes.
func processCPUSummary(ps []ProcessCPU) string {
	if len(ps) == 0 {
		return ""
	}
	harness, nodes := harnessAndNodes(ps)
	var per, cores []string
	var faults string
	if harness != nil {
		per = append(per, "harness "+fmtUS(int64(harness.USPerRequest)))
		cores = append(cores, fmt.Sprintf("harness %.2f", harness.Cores))
	}
	if len(nodes) > 0 {
		var sumUS, sumCores, sumFaultsPer float64
		var sumFaults uint64
		each := make([]string, len(nodes))
		for i, n := range nodes {
			sumUS += n.USPerRequest
			sumCores += n.Cores
			sumFaults += n.PageFaults
			sumFaultsPer += n.FaultsPerRequest
			each[i] = n.Name + " " + fmtUS(int64(n.USPerRequest))
		}
		per = append(per, "nodes "+fmtUS(int64(sumUS))+" ("+strings.Join(each, ", ")+")")
		cores = append(cores, fmt.Sprintf("nodes %.2f", sumCores))
		faults = fmt.Sprintf("; nodes' page faults %d (%.2f per request)", sumFaults, sumFaultsPer)
	}
	return "CPU per request: " + strings.Join(per, ", ") + "; cores used: " + strings.Join(cores, ", ") + faults
}

// nodesUSPerRequest is the nodes' CPU per request, summed over the nodes.
func nodesUSPerRequest(nodes []ProcessCPU) float64 {
	var sum float64
	for _, n := range nodes {
		sum += n.USPerRequest
	}
	return sum
}

// harnessAndNodes splits a report's ProcessCPU into the harness's entry
// (nil when absent) and the nodes'.
func harnessAndNodes(ps []ProcessCPU) (harness *ProcessCPU, nodes []ProcessCPU) {
	for i := range ps {
		if ps[i].Name == harnessName {
			harness = &ps[i]
		} else {
			nodes = append(nodes, ps[i])
		}
	}
	return harness, nodes
}
