package bench

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// Stall analysis of a Go execution trace of a node (gatewayd --pprof-addr,
// then GET /debug/pprof/trace?seconds=N during a run).
//
// Latency histograms hide a stall that stops every request for 50 ms once
// every few seconds, and a CPU profile shows what the CPU did, not what
// waited. The trace is cut into fixed slices; for each, it sums what each
// kind of goroutine ran, what it spent in system calls, and how long
// goroutines sat runnable without a CPU. The slices with the most
// runnable waiting are where queues built up, and what ran in them (or
// sat in a system call) is the cause. System calls longer than a bound are
// listed with their stacks, for stalls such as an fdatasync on the write
// path.

// TraceSlice is one slice of the trace.
type TraceSlice struct {
	Start time.Duration // from the trace's first event
	// Running and Syscall are the time each goroutine kind spent running
	// on a CPU, and blocked in a system call, inside the slice.
	Running map[string]time.Duration
	Syscall map[string]time.Duration
	// RunnableWait is the time goroutines spent runnable without a CPU,
	// counted in the slice where each wait began.
	RunnableWait time.Duration
}

// LongSyscall is one system call longer than the analysis's bound.
type LongSyscall struct {
	At, Duration time.Duration
	Kind         string   // the goroutine's kind
	Stack        []string // innermost frame first
}

// TraceAnalysis is a trace cut into slices.
type TraceAnalysis struct {
	Slice    time.Duration
	Slices   []TraceSlice
	Syscalls []LongSyscall // in trace order
}

// AnalyzeTrace reads a Go execution trace and cuts it into slices of the
// given length, listing system calls of at least syscallOver.
func AnalyzeTrace(r io.Reader, slice, syscallOver time.Duration) (*TraceAnalysis, error) {
	if slice <= 0 {
		return nil, errors.New("slice must be positive")
	}
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("read trace: %w", err)
	}
	a := &TraceAnalysis{Slice: slice}
	goroutines := map[trace.GoID]*tracedGoroutine{}
	var t0 trace.Time
	at := func(t trace.Time) time.Duration { return time.Duration(t - t0) }
	sliceAt := func(d time.Duration) *TraceSlice {
		i := int(d / slice)
		for len(a.Slices) <= i {
			a.Slices = append(a.Slices, TraceSlice{
				Start:   time.Duration(len(a.Slices)) * slice,
				Running: map[string]time.Duration{}, Syscall: map[string]time.Duration{},
			})
		}
		return &a.Slices[i]
	}
	// spread adds [from, to) to each slice it overlaps.
	spread := func(from, to trace.Time, kind string, syscall bool) {
		for d, end := at(from), at(to); d < end; {
			s := sliceAt(d)
			next := min(s.Start+slice, end)
			if syscall {
				s.Syscall[kind] += next - d
			} else {
				s.Running[kind] += next - d
			}
			d = next
		}
	}
	for {
		ev, err := tr.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read trace: %w", err)
		}
		if t0 == 0 {
			t0 = ev.Time()
		}
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		id := st.Resource.Goroutine()
		g := goroutines[id]
		if g == nil {
			g = &tracedGoroutine{}
			goroutines[id] = g
		}
		// The goroutine's own stack at this transition: the transition's
		// (a new goroutine's start function), or the event's when the
		// goroutine made the event itself. An event made by another
		// goroutine (one that woke this one) carries the waker's stack.
		own := st.Stack
		if own == trace.NoStack && ev.Goroutine() == id {
			own = ev.Stack()
		}
		if g.kind == "" {
			// Any stack of the goroutine ends in its start function (unless
			// deeper than the tracer records: then in its deepest frame).
			g.kind = goroutineKind(own)
		}
		from, to := st.Goroutine()
		now := ev.Time()
		switch from {
		case trace.GoRunning:
			if g.running != 0 {
				spread(g.running, now, g.kindOr(), false)
			}
			g.running = 0
		case trace.GoRunnable:
			if g.runnable != 0 {
				sliceAt(at(g.runnable)).RunnableWait += time.Duration(now - g.runnable)
			}
			g.runnable = 0
		case trace.GoSyscall:
			if g.inSyscall != 0 && g.kind != signalKind {
				spread(g.inSyscall, now, g.kindOr(), true)
				if d := time.Duration(now - g.inSyscall); d >= syscallOver {
					a.Syscalls = append(a.Syscalls, LongSyscall{At: at(g.inSyscall), Duration: d, Kind: g.kindOr(), Stack: frames(g.syscallStack)})
				}
			}
			g.inSyscall = 0
		}
		switch to {
		case trace.GoRunning:
			g.running = now
		case trace.GoRunnable:
			g.runnable = now
		case trace.GoSyscall:
			g.inSyscall, g.syscallStack = now, own
		}
	}
	return a, nil
}

// signalKind is os/signal's goroutine, which waits for signals in what
// the trace records as one long system call: it is left out of the
// system-call figures, where it would fill every slice.
const signalKind = "os/signal"

// tracedGoroutine is what the analysis tracks of one goroutine.
type tracedGoroutine struct {
	kind string
	// when the current state began; 0: not in it (or since before the trace)
	running, runnable, inSyscall trace.Time
	syscallStack                 trace.Stack
}

func (g *tracedGoroutine) kindOr() string { return cmp.Or(g.kind, "unknown") }

// goroutineKind names a goroutine by its outermost frame (its start
// function), without the module path: "pebble/v2.(*DB).flush.func1".
// Goroutines of the runtime's GC workers are "GC"; "" when the stack is
// empty.
func goroutineKind(st trace.Stack) string {
	var outer string
	for f := range st.Frames() {
		if f.Func != "runtime.goexit" {
			outer = f.Func
		}
	}
	switch {
	case outer == "":
		return ""
	case strings.HasPrefix(outer, "runtime.gcBgMarkWorker"):
		return "GC"
	case outer == "os/signal.loop":
		return signalKind
	}
	return shortFunc(outer)
}

// shortFunc drops a function name's path up to its last two elements:
// "github.com/cockroachdb/pebble/v2.(*DB).flush" → "pebble/v2.(*DB).flush".
func shortFunc(fn string) string {
	// Only the name before any type arguments: those hold paths too.
	name, typeArgs, _ := strings.Cut(fn, "[")
	parts := strings.Split(name, "/")
	if len(parts) <= 2 {
		return fn
	}
	keep := 2
	if len(parts) > 3 && isMajorVersion(parts[len(parts)-2]) {
		keep = 3 // pebble/v2/sstable.…, not v2/sstable.…
	}
	short := strings.Join(parts[len(parts)-keep:], "/")
	if typeArgs != "" {
		short += "[…]"
	}
	return short
}

// isMajorVersion reports whether a path element is a module's major
// version suffix, such as "v2".
func isMajorVersion(elem string) bool {
	if len(elem) < 2 || elem[0] != 'v' {
		return false
	}
	for _, c := range elem[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// frames is a stack's function names, innermost first.
func frames(st trace.Stack) []string {
	var out []string
	for f := range st.Frames() {
		out = append(out, f.Func)
	}
	return out
}

// Worst is the n slices with the most runnable waiting, worst first.
func (a *TraceAnalysis) Worst(n int) []TraceSlice {
	worst := slices.Clone(a.Slices)
	slices.SortStableFunc(worst, func(x, y TraceSlice) int { return cmp.Compare(y.RunnableWait, x.RunnableWait) })
	return worst[:min(n, len(worst))]
}

// WriteStalls prints the analysis: the median slice for reference, the
// worst slices by runnable waiting with what ran and what sat in system
// calls in them, and the long system calls with their stacks.
func (a *TraceAnalysis) WriteStalls(w io.Writer, top int) {
	if len(a.Slices) == 0 {
		fmt.Fprintln(w, "the trace has no goroutine events")
		return
	}
	waits := make([]time.Duration, len(a.Slices))
	for i, s := range a.Slices {
		waits[i] = s.RunnableWait
	}
	slices.Sort(waits)
	fmt.Fprintf(w, "%d slices of %v; runnable waiting per slice: median %v, p90 %v, max %v\n",
		len(a.Slices), a.Slice, waits[len(waits)/2].Round(time.Microsecond),
		waits[len(waits)*9/10].Round(time.Microsecond), waits[len(waits)-1].Round(time.Microsecond))
	fmt.Fprintf(w, "\nworst %d slices by runnable waiting (at: waiting | running | in system calls, largest first):\n", top)
	for _, s := range a.Worst(top) {
		fmt.Fprintf(w, "%8v: waiting %v | %s | %s\n", s.Start, s.RunnableWait.Round(time.Microsecond),
			largest(s.Running, 3), largest(s.Syscall, 2))
	}
	fmt.Fprintf(w, "\n%d system calls over the bound:\n", len(a.Syscalls))
	for _, c := range a.Syscalls {
		fmt.Fprintf(w, "%8v: %v in %s\n", c.At.Round(time.Millisecond), c.Duration.Round(10*time.Microsecond), c.Kind)
		for _, fn := range callers(c.Stack, 12) {
			fmt.Fprintf(w, "            %s\n", fn)
		}
	}
}

// callers is up to n frames of a system call's stack, innermost first,
// after the standard library's plumbing between the caller and the kernel
// (syscall, os, internal/poll, x/sys/unix), which every such stack shares.
func callers(stack []string, n int) []string {
	i := 0
	for i < len(stack)-1 && isSyscallPlumbing(stack[i]) {
		i++
	}
	var out []string
	for _, fn := range stack[i:min(i+n, len(stack))] {
		out = append(out, shortFunc(fn))
	}
	return out
}

func isSyscallPlumbing(fn string) bool {
	for _, p := range []string{"syscall.", "os.", "internal/", "runtime.", "golang.org/x/sys/"} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

// largest formats the n largest entries of m, e.g. "GC 4.1ms, http 2ms".
func largest(m map[string]time.Duration, n int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int {
		if c := cmp.Compare(m[y], m[x]); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	var parts []string
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, fmt.Sprintf("%s %v", k, m[k].Round(10*time.Microsecond)))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
