package bench

import (
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
// that an outlier is kept as the largest trackable value instead of lost.
func recordUS(h *hdrhistogram.Histogram, d time.Duration) {
	us := d.Microseconds()
	if us < 0 {
		us = 0
	}
	if us > histHighestUS {
		us = histHighestUS
	}
	_ = h.RecordValue(us) // cannot fail: the value is in range
}

// stats collects a run's measurements. Workers record into shards (one
// mutex each); the report merges the shards once the run is over.
type stats struct {
	shards []*shard
	live   live
}

// live are the counters the progress line reads while the run goes on.
type live struct {
	ops, errors atomic.Int64
}

func newStats(n int) *stats {
	s := &stats{shards: make([]*shard, n)}
	for i := range s.shards {
		s.shards[i] = &shard{
			live:     &s.live,
			ops:      map[string]*opStats{},
			interval: map[string]*opStats{},
			byStatus: map[string]int64{},
			byCode:   map[string]int64{},
			other:    map[string]int64{},
		}
	}
	return s
}

// shard is one lock's worth of measurements. A nil *shard discards what it is
// given: it is what work outside the measured window records into.
type shard struct {
	mu       sync.Mutex
	live     *live
	ops      map[string]*opStats
	interval map[string]*opStats // since the timeline's last cut
	byStatus map[string]int64    // HTTP status of failed answers
	byCode   map[string]int64    // error.code of failed answers
	other    map[string]int64    // failures that are not an HTTP error answer
}

type opStats struct {
	hist   *hdrhistogram.Histogram // successful operations only
	errors int64
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
}

func (s *shard) op(name string) *opStats { return opIn(s.ops, name, newHistogram) }

func (s *shard) intervalOp(name string) *opStats {
	return opIn(s.interval, name, newIntervalHistogram)
}

// addError counts a failed operation, in the window and in the interval.
func (s *shard) addError(name string) {
	s.op(name).errors++
	s.intervalOp(name).errors++
}

// ok records a successful operation that took d.
func (s *shard) ok(name string, d time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	recordUS(s.op(name).hist, d)
	recordUS(s.intervalOp(name).hist, d)
	s.mu.Unlock()
	s.live.ops.Add(1)
}

// fail records a failed request: by HTTP status and error code when an answer
// arrived, else by transport failure kind.
func (s *shard) fail(name string, a answer) {
	if s == nil {
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
	s.live.errors.Add(1)
}

// failKind records a failure that is not a request's answer (an order
// declined, authorisation not seen in time, a notification never delivered).
func (s *shard) failKind(name, kind string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.addError(name)
	s.other[kind]++
	s.mu.Unlock()
	s.live.errors.Add(1)
}

// incomplete counts a failure of a composite operation (a lifecycle that a
// failed step cut short) whose cause its step has already recorded: it adds
// to the operation's errors but not to the error totals.
func (s *shard) incomplete(name string) {
	if s == nil {
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
	for _, sh := range s.shards {
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

// cut folds every shard's interval into one summary per operation (the
// operations that ended since the last cut) and starts new intervals.
func (s *stats) cut() map[string]SecondOp {
	sum := map[string]*opStats{}
	for _, sh := range s.shards {
		sh.mu.Lock()
		for name, iv := range sh.interval {
			foldInto(sum, name, iv, newIntervalHistogram)
			iv.hist.Reset()
			iv.errors = 0
		}
		sh.mu.Unlock()
	}
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
