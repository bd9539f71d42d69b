package bench

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseProcessStat(t *testing.T) {
	// The command may hold spaces and parentheses; minflt 500 and majflt 7
	// are the 10th and 12th fields, utime 1200 and stime 345 the 14th and
	// 15th (the 11th and 13th, 90 and 3, are the children's faults).
	stat := "4242 (gate (way) d) S 1 4242 4242 0 -1 4194560 500 90 7 3 1200 345 0 0 20 0 12 0 9999 1000000 2000 18446744073709551615\n"
	got, err := parseProcessStat([]byte(stat))
	if want := (processCounters{ticks: 1545, faults: 507}); err != nil || got != want {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	for name, bad := range map[string]string{
		"no command":    "4242 S 1 2 3 4 5 6 7 8 9 10 11 12 13 14\n",
		"too short":     "4242 (x) S 1 4242 4242 0 -1 4194560 500 0 0 0 1200\n",
		"not a number":  "4242 (x) S 1 4242 4242 0 -1 4194560 500 0 0 0 12x0 345 0\n",
		"negative time": "4242 (x) S 1 4242 4242 0 -1 4194560 500 0 0 0 -1 345 0\n",
		"bad faults":    "4242 (x) S 1 4242 4242 0 -1 4194560 5x0 0 0 0 1200 345 0\n",
	} {
		if _, err := parseProcessStat([]byte(bad)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestProcessCPUBetween(t *testing.T) {
	self := os.Getpid()
	nodes := []NodeProcess{{Name: "n1", PID: 101}, {Name: "n2", PID: 102}, {Name: "gone", PID: 103}}
	a := processSample{self: {1000, 10}, 101: {5000, 100}, 102: {7000, 9}, 103: {1, 1}}
	b := processSample{self: {1050, 10}, 101: {5200, 20_100}, 102: {7000, 5_009}} // 103 exited in the window
	got := processCPUBetween(a, b, nodes, 2, 10_000)
	want := []ProcessCPU{
		{Name: "harness", PID: self, Seconds: 0.5, Cores: 0.25, USPerRequest: 50},
		{Name: "n1", PID: 101, Seconds: 2, Cores: 1, USPerRequest: 200, PageFaults: 20_000, FaultsPerRequest: 2},
		{Name: "n2", PID: 102, Seconds: 0, Cores: 0, USPerRequest: 0, PageFaults: 5_000, FaultsPerRequest: 0.5},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	line := processCPUSummary(got)
	if line != "CPU per request: harness 50µs, nodes 200µs (n1 200µs, n2 0µs); cores used: harness 0.25, nodes 1.00; nodes' page faults 25000 (2.50 per request)" {
		t.Errorf("summary %q", line)
	}
	if processCPUSummary(nil) != "" {
		t.Error("a summary line without processes")
	}
}

// The harness reads its own CPU time from /proc, so the figure is real: a
// busy loop in this process shows.
func TestSampleProcessesCountsThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	a := sampleProcesses(nil)
	if _, ok := a[os.Getpid()]; !ok {
		t.Fatal("this process was not sampled")
	}
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for i := 0; ; i++ {
		x += i % 7
		if i%1_000_000 != 0 {
			continue
		}
		if b := sampleProcesses(nil); b[os.Getpid()].ticks >= a[os.Getpid()].ticks+5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s of busy loop did not show as 50 ms of CPU time (%d)", x)
		}
	}
	if got := sampleProcesses([]NodeProcess{{Name: "none", PID: 1 << 30}}); len(got) != 1 {
		t.Errorf("a process that does not exist was sampled: %v", got)
	}
	if !strings.HasPrefix(processCPUSummary(processCPUBetween(a, sampleProcesses(nil), nil, 1, 1)), "CPU per request: harness ") {
		t.Error("no harness figure")
	}
}

// Only the harness: no line about the nodes' page faults.
func TestProcessCPUSummaryHarnessOnly(t *testing.T) {
	line := processCPUSummary([]ProcessCPU{{Name: harnessName, USPerRequest: 40, Cores: 0.3, PageFaults: 12}})
	if line != "CPU per request: harness 40µs; cores used: harness 0.30" {
		t.Errorf("summary %q", line)
	}
}
