package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"runtime/trace"
	"strings"
	"syscall"
	"testing"
	"time"
)

// traceTestSleeper blocks in one system call for d.
func traceTestSleeper(d time.Duration, done chan<- struct{}) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
	done <- struct{}{}
}

// traceTestSpinner keeps a CPU busy for d.
func traceTestSpinner(d time.Duration, done chan<- struct{}) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
	done <- struct{}{}
}

// traceTestWaiter waits for wake, then keeps a CPU busy for d.
func traceTestWaiter(wake <-chan struct{}, d time.Duration, done chan<- struct{}) {
	<-wake
	traceTestSpinner(d, done)
}

// traceTestWaker wakes n waiters, one at a time.
func traceTestWaker(wake chan<- struct{}, n int) {
	for range n {
		time.Sleep(2 * time.Millisecond)
		wake <- struct{}{}
	}
}

// recordTestTrace traces two spinners sharing one P (so each waits
// runnable while the other runs), a goroutine in a 40 ms system call, and
// a waiter started before the trace that a goroutine started during it
// wakes (its first event in the trace is made by the waker).
func recordTestTrace(t *testing.T) []byte {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const waiters = 4
	done := make(chan struct{}, 3+waiters)
	wake := make(chan struct{})
	for range waiters {
		go traceTestWaiter(wake, 5*time.Millisecond, done)
	}
	time.Sleep(time.Millisecond) // the waiters block before the trace starts
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("cannot trace (another trace running?): %v", err)
	}
	go traceTestSleeper(40*time.Millisecond, done)
	go traceTestSpinner(60*time.Millisecond, done)
	go traceTestSpinner(60*time.Millisecond, done)
	go traceTestWaker(wake, waiters)
	for range 3 + waiters {
		<-done
	}
	trace.Stop()
	return buf.Bytes()
}

func TestAnalyzeTraceFindsRunningWaitingAndSyscalls(t *testing.T) {
	data := recordTestTrace(t)
	a, err := AnalyzeTrace(bytes.NewReader(data), 10*time.Millisecond, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	const spinner, sleeper = "gateway/bench.traceTestSpinner", "gateway/bench.traceTestSleeper"
	const waiter, waker = "gateway/bench.traceTestWaiter", "gateway/bench.traceTestWaker"
	var spun, waited, waiterRan, wakerRan, unknownRan time.Duration
	for i, s := range a.Slices {
		if s.Start != time.Duration(i)*10*time.Millisecond {
			t.Fatalf("slice %d starts at %v", i, s.Start)
		}
		for kind, d := range s.Running {
			if d > 10*time.Millisecond {
				t.Errorf("slice %d: %s ran %v, longer than the slice", i, kind, d)
			}
		}
		spun += s.Running[spinner]
		waited += s.RunnableWait
		waiterRan += s.Running[waiter]
		wakerRan += s.Running[waker]
		unknownRan += s.Running["unknown"]
	}
	// Two spinners, each busy for 60 ms of wall time, take turns on one
	// P with the waiters' 20 ms: together they run for much of those ~60
	// ms (38–67 ms in 25 runs under the race detector, the machine's other
	// work taking the rest), and each waits runnable while the other runs.
	// (The waiters' total is not bounded by their 20 ms: a trace counts a
	// goroutine running while it holds the P, and when the OS takes the
	// thread away mid-spin, that time counts too: under a CPU hog, in a
	// full run of the package, the waiters ran 91 ms in all.)
	if spun < 25*time.Millisecond {
		t.Errorf("spinners ran %v in all (waiters %v, unknown %v), want much of 60ms", spun, waiterRan, unknownRan)
	}
	if waited < 20*time.Millisecond {
		t.Errorf("runnable waiting %v in all, want the spinners' turns (tens of ms)", waited)
	}
	// The waiters' spinning is not their waker's: the waker's stack is on
	// each waiter's first event in the trace (the wake-up), and taking it
	// for the waiter's own put the waiters' running time under the waker.
	// A waiter that never shows a stack of its own is "unknown".
	if waiterRan+unknownRan+wakerRan < time.Millisecond {
		t.Fatalf("waiters and waker ran %v in all: the waiters did not spin in the trace", waiterRan+unknownRan+wakerRan)
	}
	// Up to 0.7 ms under the race detector; taken for the waiters' it
	// would be their 20 ms.
	if wakerRan >= 5*time.Millisecond {
		t.Errorf("the waker ran %v, its waiters %v (unknown %v): want well under a millisecond for a sleep-and-send loop", wakerRan, waiterRan, unknownRan)
	}
	var found *LongSyscall
	for i, c := range a.Syscalls {
		if c.Kind == sleeper {
			found = &a.Syscalls[i]
		}
		if c.Duration < 20*time.Millisecond {
			t.Errorf("system call of %v listed, under the 20ms bound", c.Duration)
		}
	}
	if found == nil {
		t.Fatalf("the sleeper's 40 ms system call is not listed: %+v", a.Syscalls)
	}
	if found.Duration < 35*time.Millisecond || !strings.Contains(strings.Join(found.Stack, " "), "syscall.Nanosleep") {
		t.Errorf("sleeper's call: %v, stack %v", found.Duration, found.Stack)
	}
	worst := a.Worst(3)
	if len(worst) == 0 || worst[0].RunnableWait == 0 {
		t.Fatalf("worst slices %+v", worst)
	}
	for i := 1; i < len(worst); i++ {
		if worst[i].RunnableWait > worst[i-1].RunnableWait {
			t.Errorf("worst slices out of order: %v before %v", worst[i-1].RunnableWait, worst[i].RunnableWait)
		}
	}
}

func TestMainStalls(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.out")
	if err := os.WriteFile(path, recordTestTrace(t), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := Main(t.Context(), []string{"stalls", "--top", "2", "--syscall-over", "20ms", path}, &out, &errOut); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"slices of 10ms", "worst 2 slices by runnable waiting", "system calls over the bound", "ms in gateway/bench.traceTestSleeper"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"stalls"}, ExitUsage},
		{[]string{"stalls", "--slice", "0s", path}, ExitUsage},
		{[]string{"stalls", filepath.Join(t.TempDir(), "missing")}, ExitNotStarted},
		{[]string{"stalls", os.Args[0]}, ExitNotStarted}, // not a trace
	} {
		if code := Main(t.Context(), tc.args, &out, &errOut); code != tc.code {
			t.Errorf("%v: exit %d, want %d", tc.args, code, tc.code)
		}
	}
}

func TestShortFunc(t *testing.T) {
	for fn, want := range map[string]string{
		"github.com/cockroachdb/pebble/v2.(*DB).flush":               "pebble/v2.(*DB).flush",
		"github.com/cockroachdb/pebble/v2/sstable.(*Writer).Close":   "pebble/v2/sstable.(*Writer).Close",
		"github.com/paygate/gateway/cluster.(*collector).send.func2": "gateway/cluster.(*collector).send.func2",
		"os/signal.loop": "os/signal.loop",
		"main.main":      "main.main",
		"github.com/a/b/c.F[go.shape.struct { x github.com/d/e.T }]": "b/c.F[…]",
	} {
		if got := shortFunc(fn); got != want {
			t.Errorf("shortFunc(%q) = %q, want %q", fn, got, want)
		}
	}
}
