package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const procStatSample = `cpu  1596423 22337 584546 2587502 158159 0 105446 65127 0 0
cpu0 798000 11000 292000 1293000 79000 0 52000 32000 0 0
intr 123 4 5
`

func TestParseCPUTimes(t *testing.T) {
	got, err := parseCPUTimes([]byte(procStatSample))
	want := cpuTimes{busy: 1596423 + 22337 + 584546 + 0 + 105446, idle: 2587502, iowait: 158159, steal: 65127}
	if err != nil || got != want {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	for name, stat := range map[string]string{
		"no cpu line":      "cpu0 1 2 3 4 5 6 7 8\nintr 1\n",
		"too few fields":   "cpu  1 2 3 4 5 6 7\n",
		"not a number":     "cpu  1 2 x 4 5 6 7 8\n",
		"negative counter": "cpu  1 2 -3 4 5 6 7 8\n",
	} {
		if _, err := parseCPUTimes([]byte(stat)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestHostCPUBetween(t *testing.T) {
	a := cpuTimes{busy: 1000, idle: 1000, iowait: 100, steal: 50}
	b := cpuTimes{busy: 1500, idle: 1200, iowait: 200, steal: 250} // +500 busy, +200 idle, +100 iowait, +200 steal
	h := hostCPUBetween(a, b)
	if h == nil || h.BusyPct != 50 || h.StealPct != 20 || h.IOWaitPct != 10 {
		t.Fatalf("got %+v, want 50 %% busy, 20 %% steal, 10 %% iowait", h)
	}
	if !strings.Contains(h.summary(), "20% stolen") || !strings.Contains(h.summary(), "not comparable") {
		t.Errorf("summary %q", h.summary())
	}
	quiet := hostCPUBetween(a, cpuTimes{busy: 1500, idle: 1500, iowait: 100, steal: 51})
	if quiet == nil || strings.Contains(quiet.summary(), "not comparable") {
		t.Errorf("quiet host: %+v %q", quiet, quiet.summary())
	}
	if h := hostCPUBetween(a, a); h != nil {
		t.Errorf("no time passed: %+v", h)
	}
	if h := hostCPUBetween(b, a); h != nil {
		t.Errorf("counters went backwards: %+v", h)
	}
}

func TestStealNote(t *testing.T) {
	with := func(steal float64) Report {
		r := report("charge", map[string]OpReport{"charge": {Count: 1, Throughput: 1}})
		r.HostCPU = &HostCPU{BusyPct: 50, StealPct: steal}
		return r
	}
	unknown := report("charge", map[string]OpReport{"charge": {Count: 1, Throughput: 1}})
	for _, tc := range []struct {
		name string
		a, b []Report
		want string
	}{
		{"both quiet", []Report{with(1)}, []Report{with(2)}, ""},
		{"B stolen", []Report{with(1)}, []Report{with(3), with(40)}, "up to 1% in A, 40% in B"},
		{"A unknown", []Report{unknown}, []Report{with(40)}, ""},
	} {
		if got := stealNote(tc.a, tc.b); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDAMONRunning(t *testing.T) {
	root := t.TempDir()
	state := func(n, s string) {
		dir := filepath.Join(root, "sys/kernel/mm/damon/admin/kdamonds", n)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "state"), []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if damonRunning(root) {
		t.Fatal("a kernel without DAMON reads as running")
	}
	state("0", "off")
	if damonRunning(root) {
		t.Fatal("a monitor that is off reads as running")
	}
	state("1", "on")
	if !damonRunning(root) {
		t.Fatal("the second monitor, on, is not seen")
	}
	h := &HostCPU{BusyPct: 10, DAMONRunning: true}
	if !strings.Contains(h.summary(), "DAMON") {
		t.Errorf("summary hides the monitor: %q", h.summary())
	}
	if h.DAMONRunning = false; strings.Contains(h.summary(), "DAMON") {
		t.Errorf("summary names a monitor that did not run: %q", h.summary())
	}
}

func TestDAMONNote(t *testing.T) {
	with := func(on bool) Report {
		r := report("search", map[string]OpReport{"search": {Count: 1, Throughput: 1}})
		r.HostCPU = &HostCPU{BusyPct: 50, DAMONRunning: on}
		return r
	}
	unknown := report("search", map[string]OpReport{"search": {Count: 1, Throughput: 1}})
	for _, tc := range []struct {
		name string
		a, b []Report
		want string
	}{
		{"neither", []Report{with(false)}, []Report{with(false)}, ""},
		{"both", []Report{with(true)}, []Report{with(true), with(true)}, ""},
		{"A only, in one of its runs", []Report{with(false), with(true)}, []Report{with(false)}, "running in A's runs and not running in B's"},
		{"B only", []Report{with(false)}, []Report{with(true)}, "not running in A's runs and running in B's"},
		{"A unknown", []Report{unknown}, []Report{with(true)}, ""},
	} {
		if got := damonNote(tc.a, tc.b); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
