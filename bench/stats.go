package bench

import (
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram geometry: microseconds from 1 µs to 60 s, 3 significant figures.
// One histogram is about 130 KiB, so they live in a few shards shared by
// workers rather than one per worker and operation.
const (
	histLowestUS  = 1
	histHighestUS = 60_000_000
	histSigFigs   = 3
)

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histLowestUS, histHighestUS, histSigFigs)
}

// The timeline's histograms cover one second each and are cut once a
// second: 2 significant figures (about 30 KiB each) are enough for it.
func newIntervalHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histLowestUS, histHighestUS, 2)
}

// recordUS records d in microseconds, clamped into the histogram's range so
// that an outlier is kept as the largest trackable value instead of lost. It
// reports whether d was clamped: the report says so, since such a maximum is
// a floor.
func recordUS(h *hdrhistogram.Histogram, d time.Duration) (clamped bool) {
	us := d.Microseconds()
	if us < 0 {
		us = 0
	}
	if us > histHighestUS {
		us, clamped = histHighestUS, true
	}
	_ = h.RecordValue(us) // cannot fail: the value is in range
	return clamped
}

// stats collects a run's measurements. Workers record into shards (one
// mutex each); the report merges the shards once the run is over.
//
// Each worker has two shards: one for the iterations intended inside the
// measured window, whose latencies and failures the report gives, and one
// for the rest (the warmup's), which only counts successes that end inside
// the window. Throughput is what ended inside the window, whenever it was
// intended: counting the window's iterations instead, an open loop that
// the server cannot keep up with would report the rate it offered, since
// the queue's arrivals are all served after the window ends.
type stats struct {
	shards []*shard // the window's iterations
	warm   []*shard // iterations intended outside it
	live   live
	// start and end bound the measured window; set by setWindow before
	// any worker records. end is moved earlier by endWindow, while
	// notifications may still be recorded: hence atomic (Unix nanoseconds).
	start time.Time
	end   atomic.Int64
	// second is the second of the window the timeline cuts next: what
	// ends in a later one waits in the shards' ahead until its own cut,
	// however late this one's timer fires.
	second atomic.Int64
}

// live are the counters the progress line reads while the run goes on.
type live struct {
	ops, errors atomic.Int64
}

func newStats(n int) *stats {
	s := &stats{shards: make([]*shard, n), warm: make([]*shard, n)}
	for i := range s.shards {
		s.shards[i] = s.newShard(true)
		s.warm[i] = s.newShard(false)
	}
	return s
}

func (s *stats) newShard(measured bool) *shard {
	return &shard{
		stats:    s,
		measured: measured,
		ops:      map[string]*opStats{},
		interval: map[string]*opStats{},
		ahead:    map[int]map[string]*opStats{},
		after:    map[string]*opStats{},
		byStatus: map[string]int64{},
		byCode:   map[string]int64{},
		other:    map[string]int64{},
	}
}

// setWindow fixes the measured window; called before the load starts.
func (s *stats) setWindow(start, end time.Time) {
	s.start = start
	s.end.Store(end.UnixNano())
}

// endWindow ends the window at t when the load stopped before its planned
// end (--requests reached, or interrupted): what ends after t, a
// notification still on its way for instance, is not counted in it, since
// rates divide by the window as it was.
func (s *stats) endWindow(t time.Time) {
	if t.UnixNano() < s.end.Load() {
		s.end.Store(t.UnixNano())
	}
}

// inWindow reports whether t falls inside the measured window.
func (s *stats) inWindow(t time.Time) bool {
	return !t.Before(s.start) && t.UnixNano() < s.end.Load()
}

// shard is one lock's worth of measurements. A nil *shard discards what it is
// given (the order pool's charges); a shard that is not measured only counts
// the successes that end inside the window.
type shard struct {
	mu       sync.Mutex
	stats    *stats
	measured bool
	ops      map[string]*opStats
	interval map[string]*opStats         // ended in the window since the timeline's last cut
	ahead    map[int]map[string]*opStats // ended in a second after the one cut next, by second
	after    map[string]*opStats         // ended after the window (the timeline's last entry)
	byStatus map[string]int64            // HTTP status of failed answers
	byCode   map[string]int64            // error.code of failed answers
	other    map[string]int64            // failures that are not an HTTP error answer
}

// measures reports whether s records the window's iterations.
func (s *shard) measures() bool { return s != nil && s.measured }

type opStats struct {
	hist     *hdrhistogram.Histogram // successful operations only
	errors   int64
	inWindow int64 // successes that ended inside the window, whenever intended
	clamped  int64 // latencies above the histogram's range, recorded as its top
}

// opIn returns m's stats for name, made with a histogram from newHist the
// first time.
func opIn(m map[string]*opStats, name string, newHist func() *hdrhistogram.Histogram) *opStats {
	o := m[name]
	if o == nil {
		o = &opStats{hist: newHist()}
		m[name] = o
	}
	return o
}

// foldInto adds o to dst's stats for name.
func foldInto(dst map[string]*opStats, name string, o *opStats, newHist func() *hdrhistogram.Histogram) {
	d := opIn(dst, name, newHist)
	d.hist.Merge(o.hist)
	d.errors += o.errors
	d.inWindow += o.inWindow
	d.clamped += o.clamped
}

func (s *shard) op(name string) *opStats { return opIn(s.ops, name, newHistogram) }

// timelineOp returns name's stats for the timeline entry of an operation
// that ends at t: the current interval, a later second's, or the entry
// after the window. It goes by the time the operation ended, not by when
// the timeline is next cut, which may come a little late (a timer on a
// busy machine).
func (s *shard) timelineOp(name string, t time.Time) *opStats {
	if t.UnixNano() >= s.stats.end.Load() {
		return opIn(s.after, name, newIntervalHistogram)
	}
	if n := int(t.Sub(s.stats.start) / time.Second); int64(n) > s.stats.second.Load() {
		if s.ahead[n] == nil {
			s.ahead[n] = map[string]*opStats{}
		}
		return opIn(s.ahead[n], name, newIntervalHistogram)
	}
	return opIn(s.interval, name, newIntervalHistogram)
}

// addError counts a failed operation, in the window and in the timeline.
func (s *shard) addError(name string) {
	s.op(name).errors++
	s.timelineOp(name, time.Now()).errors++
}

// ok records a successful operation that took d and ends now.
func (s *shard) ok(name string, d time.Duration) { s.okAt(name, d, time.Now()) }

// okAt records a successful operation that took d and ended at end: a
// notification is matched with its charge's answer after it arrived, and
// counts in the window by its arrival, as delivered_in_window does.
func (s *shard) okAt(name string, d time.Duration, end time.Time) {
	if s == nil {
		return
	}
	inWindow := s.stats.inWindow(end)
	if !s.measured && !inWindow {
		return
	}
	s.mu.Lock()
	o := s.op(name)
	if inWindow {
		o.inWindow++
	}
	if s.measured {
		if recordUS(o.hist, d) {
			o.clamped++
		}
		recordUS(s.timelineOp(name, end).hist, d)
	}
	s.mu.Unlock()
	if s.measured {
		s.stats.live.ops.Add(1)
	}
}

// fail records a failed request: by HTTP status and error code when an answer
// arrived, else by transport failure kind.
func (s *shard) fail(name string, a answer) {
	if !s.measures() {
		return
	}
	s.mu.Lock()
	s.addError(name)
	if a.status == 0 {
		s.other[a.kind]++
	} else {
		s.byStatus[strconv.Itoa(a.status)]++
		if a.code != "" {
			s.byCode[a.code]++
		}
	}
	s.mu.Unlock()
	s.stats.live.errors.Add(1)
}

// failKind records a failure that is not a request's answer (an order
// declined, authorisation not seen in time, a notification never delivered).
func (s *shard) failKind(name, kind string) {
	if !s.measures() {
		return
	}
	s.mu.Lock()
	s.addError(name)
	s.other[kind]++
	s.mu.Unlock()
	s.stats.live.errors.Add(1)
}

// incomplete counts a failure of a composite operation (a lifecycle that a
// failed step cut short) whose cause its step has already recorded: it adds
// to the operation's errors but not to the error totals.
func (s *shard) incomplete(name string) {
	if !s.measures() {
		return
	}
	s.mu.Lock()
	s.addError(name)
	s.mu.Unlock()
}

// merged is every shard folded into one.
type merged struct {
	ops      map[string]*opStats
	byStatus map[string]int64
	byCode   map[string]int64
	other    map[string]int64
}

func (s *stats) merge() merged {
	m := merged{ops: map[string]*opStats{}, byStatus: map[string]int64{}, byCode: map[string]int64{}, other: map[string]int64{}}
	for _, sh := range append(s.shards[:len(s.shards):len(s.shards)], s.warm...) {
		sh.mu.Lock()
		for name, o := range sh.ops {
			foldInto(m.ops, name, o, newHistogram)
		}
		addCounts(m.byStatus, sh.byStatus)
		addCounts(m.byCode, sh.byCode)
		addCounts(m.other, sh.other)
		sh.mu.Unlock()
	}
	return m
}

// cut folds into one summary per operation what ended in second n of the
// window (and what ended earlier but was recorded after its own cut), and
// starts new intervals: what ended in a later second waits for its cut.
func (s *stats) cut(n int) map[string]SecondOp {
	sum := s.foldThrough(n)
	s.second.Store(int64(n + 1))
	return summarize(sum)
}

// cutIntervals folds what ended in the window and no cut has taken,
// without summarising it.
func (s *stats) cutIntervals() map[string]*opStats { return s.foldThrough(math.MaxInt) }

// foldThrough folds and resets every shard's interval and takes its
// seconds ahead up to second n.
func (s *stats) foldThrough(n int) map[string]*opStats {
	sum := s.fold(func(sh *shard) map[string]*opStats { return sh.interval })
	for _, sh := range s.shards {
		sh.mu.Lock()
		for k, ops := range sh.ahead {
			if k <= n {
				for name, o := range ops {
					foldInto(sum, name, o, newIntervalHistogram)
				}
				delete(sh.ahead, k)
			}
		}
		sh.mu.Unlock()
	}
	return sum
}

// cutAfter folds what ended after the window, as cut does the intervals.
func (s *stats) cutAfter() map[string]*opStats {
	return s.fold(func(sh *shard) map[string]*opStats { return sh.after })
}

// fold sums one map of every shard and resets what it took.
func (s *stats) fold(of func(*shard) map[string]*opStats) map[string]*opStats {
	sum := map[string]*opStats{}
	for _, sh := range s.shards {
		sh.mu.Lock()
		for name, iv := range of(sh) {
			foldInto(sum, name, iv, newIntervalHistogram)
			iv.hist.Reset()
			iv.errors = 0
		}
		sh.mu.Unlock()
	}
	return sum
}

// summarize is a timeline entry's numbers of each operation it holds.
func summarize(sum map[string]*opStats) map[string]SecondOp {
	out := make(map[string]SecondOp, len(sum))
	for name, o := range sum {
		if n := o.hist.TotalCount(); n > 0 || o.errors > 0 {
			out[name] = SecondOp{Count: n, Errors: o.errors,
				P50US: o.hist.ValueAtQuantile(50), P99US: o.hist.ValueAtQuantile(99), MaxUS: o.hist.Max()}
		}
	}
	return out
}

func addCounts(dst, src map[string]int64) {
	for k, v := range src {
		dst[k] += v
	}
}
