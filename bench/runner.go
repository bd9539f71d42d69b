package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// lateAfter is how far behind its intended time an open-loop arrival may be
// sent before it counts as late.
const lateAfter = time.Millisecond

// searchPage is the search workload's page, and how many orders of the pool
// each customer gets: a customer's e-mail search finds a full page at any
// pool size.
const searchPage = 20

// customerOf is the customer of the pool's nth order when the pool has
// orders orders: the orders go round the customers in turn, so each
// customer's searchPage orders are spread evenly over the pool's history.
func customerOf(n, orders int) int { return n % customerCount(orders) }

// customerCount is how many customers a pool of orders orders has.
func customerCount(orders int) int { return max(1, orders/searchPage) }

// ErrNotStarted wraps every reason a run could not start; a run that started
// returns a report and no error, however many of its requests failed.
var ErrNotStarted = errors.New("run could not start")

// run is one Run's state.
type run struct {
	cfg      Config
	ctx      context.Context
	clients  []*client
	stats    *stats
	seed     uint64
	idPrefix string
	pool     []string
	// customers is how many customers the pool's orders belong to
	// (customerCount): the search workload picks one of them.
	customers int
	recorder  *orderRecorder // --record-orders
	mixTotal  int
	sink      *webhookSink

	// phase and its counters, for the progress line
	termMu       sync.Mutex   // orders progress-line and log writes on a shared terminal
	phase        atomic.Value // string
	poolMade     atomic.Int64
	measureStart time.Time
	end          time.Time
	hostCPU      *HostCPU      // over the window (Linux); set by measure
	processCPU   []ProcessCPU  // the harness and cfg.Nodes over the window (Linux); set by measure
	nodeCounters *NodeCounters // the targets' /metrics over the window, when they have them; set by measure
	nodeProfiles []NodeProfile // with cfg.ProfileDir; set by measure
	timeline     []Second      // by startTimeline, then cutRest

	// open loop
	scheduled, sent, dropped, late atomic.Int64
	unsent                         atomic.Int64 // handed to a worker, not sent: the run was interrupted
	issued                         atomic.Int64 // measured iterations begun, for Config.Requests
}

// Run drives the configured workload and returns its report. The error is
// non-nil (and wraps ErrNotStarted) only when the run could not start: a bad
// configuration, a target that does not answer, keys it refuses, a pool that
// could not be made. Failures during the run are counted in the report.
// Cancelling ctx ends the run early; the report then covers the part that ran
// and says Interrupted.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotStarted, err)
	}
	r := &run{cfg: cfg, ctx: ctx, stats: newStats(min(cfg.Concurrency, 16))}
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	r.seed = binary.LittleEndian.Uint64(seed[:])
	r.idPrefix = "bench-" + hex.EncodeToString(seed[:4]) + "-"
	for _, e := range cfg.Mix {
		r.mixTotal += e.Weight
	}
	// One connection per worker, plus room for the pool fill and preflight.
	conns := cfg.Concurrency + 4
	for _, t := range cfg.Targets {
		c, err := newClient(t, cfg.MerchantKey, cfg.MerchantSecret, conns, cfg.Timeout)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotStarted, err)
		}
		defer c.close()
		r.clients = append(r.clients, c)
	}
	r.phase.Store("preflight")
	if err := r.preflight(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotStarted, err)
	}
	wl := r.workload()
	if wl.webhooks {
		sink, err := startWebhookSink(cfg.WebhookKey, cfg.WebhookSecret, r.stats.shards[0], r.stats.warm[0])
		if err != nil {
			return nil, fmt.Errorf("%w: webhook receiver: %v", ErrNotStarted, err)
		}
		defer sink.close()
		r.sink = sink
	}
	stopProgress := r.startProgress()
	defer stopProgress()
	if cfg.RecordOrders != "" {
		rec, err := newOrderRecorder(cfg.RecordOrders)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotStarted, err)
		}
		defer rec.close()
		r.recorder = rec
	}
	if wl.pool {
		r.phase.Store("pool")
		fill := r.fillPool
		if cfg.PoolFile != "" {
			fill = r.loadPool
		}
		if err := fill(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotStarted, err)
		}
		r.customers = customerCount(len(r.pool))
		r.logf("order pool: %d orders", len(r.pool))
	}
	startedAt := time.Now()
	window, interrupted := r.measure(wl.iter)
	if r.sink != nil && !interrupted {
		r.phase.Store("webhooks")
		r.sink.wait(ctx, cfg.WebhookWait)
	}
	stopProgress()
	return r.report(startedAt, window, interrupted || ctx.Err() != nil), nil
}

// logf writes a line to cfg.Log, first clearing a progress line that the
// terminal may be showing.
func (r *run) logf(format string, args ...any) {
	if r.cfg.Log == nil {
		return
	}
	r.termMu.Lock()
	defer r.termMu.Unlock()
	if r.cfg.Progress != nil {
		fmt.Fprint(r.cfg.Progress, clearLine)
	}
	fmt.Fprintf(r.cfg.Log, format+"\n", args...)
}

// clearLine returns to the start of the line and erases it (ANSI; the
// progress line is only written to terminals).
const clearLine = "\r\033[K"

// preflight checks that every target answers /healthz and, for the merchant
// workloads, that it accepts the keys: a status request for an order that does
// not exist must answer 404 (code 2.05), not 401.
func (r *run) preflight() error {
	for _, c := range r.clients {
		if a := c.get("healthz"); !a.ok() {
			return fmt.Errorf("%s/healthz: %s", c.base, describe(a))
		}
		if r.cfg.Workload == WorkloadCeiling {
			continue
		}
		a := c.post(opStatus, appendStatusBody(nil, r.idPrefix+"preflight"), "", false)
		if a.status != 404 && !a.ok() {
			return fmt.Errorf("%s: status of an unknown order answered %s, want 404 (are the merchant keys right?)", c.base, describe(a))
		}
	}
	return nil
}

// describe is a failed answer in words.
func describe(a answer) string {
	switch {
	case a.status == 0:
		return "no answer (" + a.kind + ")"
	case a.code != "":
		return fmt.Sprintf("HTTP %d, code %s", a.status, a.code)
	}
	return fmt.Sprintf("HTTP %d", a.status)
}

// fillPool creates cfg.Orders orders for the reads and searches, outside the
// measured window, with cfg.Concurrency workers, and records them with
// --record-orders (so that a later run can read the same pool with
// --pool-file). The nth order belongs to customer customerOf(n).
func (r *run) fillPool() error {
	ctx, cancel := context.WithCancelCause(r.ctx)
	defer cancel(nil)
	go r.watchPoolProgress(ctx, cancel)
	ids := make([]string, r.cfg.Orders)
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for i := range min(r.cfg.Concurrency, r.cfg.Orders) {
		w := r.newWorker(i)
		wg.Go(func() {
			for ctx.Err() == nil {
				n := next.Add(1) - 1
				if n >= int64(len(ids)) {
					return
				}
				id := w.nextOrderID("p")
				w.buf = appendChargeBody(w.buf[:0], id, "", customerOf(int(n), len(ids)))
				if a := w.c.post(opCharge, w.buf, id, false); a.ok() {
					ids[n] = id
					r.poolMade.Add(1)
					if r.recorder != nil {
						r.recorder.add(id)
					}
				} else {
					firstErr.CompareAndSwap(nil, describe(a))
				}
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != "" {
			r.pool = append(r.pool, id)
		}
	}
	if err := r.ctx.Err(); err != nil {
		return err
	}
	if err := context.Cause(ctx); err != nil && err != context.Canceled {
		return fmt.Errorf("%w (first failure: %v)", err, firstErr.Load())
	}
	if len(r.pool) == 0 {
		return fmt.Errorf("no order of the pool could be created (first failure: %v)", firstErr.Load())
	}
	return nil
}

// watchPoolProgress cancels the pool's fill when no order has been
// acknowledged for Config.PoolStall.
func (r *run) watchPoolProgress(ctx context.Context, cancel context.CancelCauseFunc) {
	stall := r.cfg.PoolStall
	tick := time.NewTicker(min(time.Second, stall/4))
	defer tick.Stop()
	made, since := r.poolMade.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if m := r.poolMade.Load(); m != made {
				made, since = m, now
			} else if now.Sub(since) >= stall {
				cancel(fmt.Errorf("no order of the pool acknowledged for %v (%d made)", stall, made))
				return
			}
		}
	}
}

// measure runs the warmup and the measured window, closed or open loop. It
// returns the window's length (shorter than configured when the run was
// interrupted or reached Config.Requests) and whether ctx ended it.
func (r *run) measure(iter iteration) (time.Duration, bool) {
	start := time.Now()
	r.measureStart = start.Add(r.cfg.Warmup)
	r.end = r.measureStart.Add(r.cfg.Duration)
	r.stats.setWindow(r.measureStart, r.end)
	r.phase.Store("load")
	type cpuSample struct {
		t        cpuTimes
		ok       bool
		procs    processSample
		requests int64
		nodes    NodeCounters
		nodesOK  bool
		damon    bool
	}
	sampleCPU := func() cpuSample {
		t, ok := readCPUTimes()
		s := cpuSample{t: t, ok: ok, procs: sampleProcesses(r.cfg.Nodes), requests: r.completed(), damon: damonRunning("/")}
		s.nodes, s.nodesOK = scrapeNodeCounters(r.cfg.Targets) // after the CPU times: it takes a request
		return s
	}
	cpuAtStart := make(chan cpuSample, 1)
	profiles := make(chan func() []NodeProfile, 1)
	cpuTimer := time.AfterFunc(r.cfg.Warmup, func() {
		profiles <- startNodeProfiles(r.ctx, r.cfg.Nodes, r.cfg.ProfileDir, profileSpan(r.cfg.Duration), r.completed)
		cpuAtStart <- sampleCPU()
	})
	stopTimeline := r.startTimeline()
	var early bool
	if r.cfg.Rate > 0 {
		early = r.openLoop(iter)
	} else {
		early = r.closedLoop(iter)
	}
	// The window ends with the load, not after the samples and profiles
	// below: a run cut short by --requests waits for its node profiles,
	// which span the whole --duration.
	loadEnd := time.Now()
	cutShort := early || r.ctx.Err() != nil
	if cutShort {
		r.stats.endWindow(loadEnd)
	}
	stopTimeline(cutShort)
	select {
	case start := <-cpuAtStart: // not read if the run ended during the warmup
		end := sampleCPU()
		if start.ok && end.ok {
			r.hostCPU = hostCPUBetween(start.t, end.t)
		}
		if r.hostCPU != nil {
			r.hostCPU.DAMONRunning = start.damon || end.damon
		}
		r.processCPU = processCPUBetween(start.procs, end.procs, r.cfg.Nodes,
			time.Since(r.measureStart).Seconds(), end.requests-start.requests)
		if start.nodesOK && end.nodesOK {
			r.nodeCounters = nodeCountersBetween(start.nodes, end.nodes)
		}
		r.nodeProfiles = (<-profiles)()
	default:
		cpuTimer.Stop()
	}
	interrupted := r.ctx.Err() != nil
	if !early && !interrupted {
		return r.cfg.Duration, false
	}
	window := loadEnd.Sub(r.measureStart)
	return max(0, min(window, r.cfg.Duration)), interrupted
}

// completed is how many requests the clients have finished so far.
func (r *run) completed() int64 {
	var n int64
	for _, c := range r.clients {
		n += c.completed.Load()
	}
	return n
}

// startTimeline cuts the measurements into r.timeline once a second from
// the window's start, and once more at its end (a shorter last second when
// the window is not whole seconds). The returned function waits for the
// cut at the window's end, or with cutShort (the load stopped early) stops
// the cuts at once. What ends after the last cut is added by cutRest,
// marked after the window.
func (r *run) startTimeline() func(cutShort bool) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		timer := time.NewTimer(time.Hour)
		defer timer.Stop()
		for n := 0; ; n++ {
			from := r.measureStart.Add(time.Duration(n) * time.Second)
			if !from.Before(r.end) {
				return
			}
			to := from.Add(time.Second)
			if to.After(r.end) {
				to = r.end
			}
			timer.Reset(time.Until(to))
			select {
			case <-done:
				return
			case <-timer.C:
			}
			sec := Second{T: n, Ops: r.stats.cut(n)}
			if span := to.Sub(from); span < time.Second {
				sec.Span = span.Seconds()
			}
			r.timeline = append(r.timeline, sec)
		}
	}()
	return func(cutShort bool) {
		// A load that ran its whole window may still end before the cut
		// at its end (an open loop's last arrival, done early) or at the
		// same instant: the cut is waited for, so that neither loses it.
		if cutShort {
			close(done)
		}
		<-finished
	}
}

// cutRest adds to the timeline what its cuts have not taken: when the
// window ended early (interrupted, or --requests reached), the window's
// last, shorter second; then an entry marked after the window, with the
// operations begun in the window that ended after it and, for the webhooks
// workload, the notifications received while it waited and those never
// received.
func (r *run) cutRest(window time.Duration) {
	rest, after := r.stats.cutIntervals(), r.stats.cutAfter()
	n := len(r.timeline)
	left := window - time.Duration(n)*time.Second
	if left <= 0 {
		// The window is cut to its end: what an interval still holds was
		// recorded just after that cut, and ended at its very end.
		for name, o := range rest {
			foldInto(after, name, o, newIntervalHistogram)
		}
		rest = nil
	}
	if ops := summarize(rest); len(ops) > 0 {
		sec := Second{T: n, Ops: ops}
		if left < time.Second {
			sec.Span = left.Seconds()
		}
		r.timeline = append(r.timeline, sec)
		n++
	}
	if ops := summarize(after); len(ops) > 0 {
		r.timeline = append(r.timeline, Second{T: n, AfterWindow: true, Ops: ops})
	}
}

// inWindow reports whether an iteration intended at t is measured.
func (r *run) inWindow(t time.Time) bool {
	return !t.Before(r.measureStart) && t.Before(r.end)
}

// admit counts a measured iteration against Config.Requests; false means the
// limit is reached.
func (r *run) admit() bool {
	return r.cfg.Requests == 0 || r.issued.Add(1) <= r.cfg.Requests
}

// closedLoop runs cfg.Concurrency workers, each starting its next iteration
// as soon as the last one ends, until the window ends. It reports whether the
// request limit stopped it early.
func (r *run) closedLoop(iter iteration) bool {
	var limited atomic.Bool
	var wg sync.WaitGroup
	for i := range r.cfg.Concurrency {
		w := r.newWorker(i)
		wg.Go(func() {
			for r.ctx.Err() == nil {
				now := time.Now()
				if !now.Before(r.end) {
					return
				}
				rec := w.warm
				if r.inWindow(now) {
					if !r.admit() {
						limited.Store(true)
						return
					}
					rec = w.rec
				}
				iter(w, now, rec)
			}
		})
	}
	wg.Wait()
	return limited.Load()
}

// openLoop schedules arrivals at cfg.Rate per second from the start of the
// warmup to the end of the window, whatever the server does. cfg.Concurrency
// workers take them from a queue of cfg.Queue places; an arrival that finds
// the queue full is dropped and counted. Each iteration's latency runs from
// its intended arrival time, so a stall delays, and shows in, every arrival
// due during it (no coordinated omission). It reports whether the request
// limit stopped it early.
func (r *run) openLoop(iter iteration) bool {
	jobs := make(chan time.Time, r.cfg.Queue)
	var wg sync.WaitGroup
	for i := range r.cfg.Concurrency {
		w := r.newWorker(i)
		wg.Go(func() {
			for t := range jobs {
				if r.ctx.Err() != nil {
					if r.inWindow(t) {
						r.unsent.Add(1)
					}
					continue // drain without sending
				}
				rec := w.warm
				if r.inWindow(t) {
					rec = w.rec
					if time.Since(t) > lateAfter {
						r.late.Add(1)
					}
				}
				iter(w, t, rec)
			}
		})
	}
	limited := r.schedule(jobs)
	close(jobs)
	wg.Wait()
	return limited
}

// schedule emits the arrivals into jobs. Arrival i is due at start + i/rate;
// when the scheduler wakes late it emits every arrival already due, each with
// its own intended time.
func (r *run) schedule(jobs chan<- time.Time) bool {
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for i := int64(0); ; i++ {
		// The offset is compared before it becomes a Duration, which a
		// far offset (a tiny rate) would overflow into the past.
		off := float64(i) * float64(time.Second) / r.cfg.Rate
		if off >= float64(r.end.Sub(start)) {
			return false
		}
		t := start.Add(time.Duration(off))
		if d := time.Until(t); d > 0 {
			timer.Reset(d)
			select {
			case <-r.ctx.Done():
				return false
			case <-timer.C:
			}
		} else if r.ctx.Err() != nil {
			return false
		}
		measured := r.inWindow(t)
		if measured {
			if !r.admit() {
				return true
			}
			r.scheduled.Add(1)
		}
		select {
		case jobs <- t:
			if measured {
				r.sent.Add(1)
			}
		default:
			if measured {
				r.dropped.Add(1)
			}
		}
	}
}

func (r *run) report(startedAt time.Time, window time.Duration, interrupted bool) *Report {
	var webhooks *WebhookReport
	if r.sink != nil {
		webhooks = r.sink.report(r.measureStart, window) // records undelivered notifications: before the merge
	}
	r.cutRest(window)
	m := r.stats.merge()
	rep := &Report{
		Workload:     r.cfg.Workload,
		Target:       strings.Join(r.cfg.Targets, ","),
		Loop:         "closed",
		Concurrency:  r.cfg.Concurrency,
		Rate:         r.cfg.Rate,
		Duration:     window.Seconds(),
		Warmup:       r.cfg.Warmup.Seconds(),
		StartedAt:    startedAt.UTC(),
		Interrupted:  interrupted,
		Machine:      machine(),
		Ops:          buildOps(m, window),
		Errors:       buildErrors(m),
		Webhooks:     webhooks,
		HostCPU:      r.hostCPU,
		ProcessCPU:   r.processCPU,
		Nodes:        r.nodeCounters,
		NodeProfiles: r.nodeProfiles,
		Timeline:     r.timeline,
	}
	if r.cfg.Workload == WorkloadMixed {
		rep.Mix = r.cfg.Mix.String()
	}
	if r.cfg.Rate > 0 {
		rep.Loop = "open"
		rep.OpenLoop = &OpenLoopReport{
			Scheduled: r.scheduled.Load(), Sent: r.sent.Load(), Dropped: r.dropped.Load(), Late: r.late.Load(),
			Unsent: r.unsent.Load(), Queue: r.cfg.Queue,
		}
	}
	return rep
}

// startProgress writes the one-line progress display once a second to
// cfg.Progress, if set. The returned function stops it and clears the line;
// calling it again does nothing.
func (r *run) startProgress() func() {
	out := r.cfg.Progress
	if out == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var lastOps int64
		for {
			select {
			case <-done:
				r.termMu.Lock()
				fmt.Fprint(out, clearLine)
				r.termMu.Unlock()
				return
			case <-tick.C:
			}
			ops := r.stats.live.ops.Load()
			line := r.progressLine(ops, ops-lastOps)
			lastOps = ops
			r.termMu.Lock()
			fmt.Fprint(out, clearLine+line)
			r.termMu.Unlock()
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-finished
		})
	}
}

func (r *run) progressLine(ops, perSec int64) string {
	phase, _ := r.phase.Load().(string)
	now := time.Now()
	switch {
	case phase == "pool":
		return fmt.Sprintf("creating order pool: %d/%d", r.poolMade.Load(), r.cfg.Orders)
	case phase == "webhooks":
		return fmt.Sprintf("waiting for notifications: %d outstanding", r.sink.outstanding())
	case phase == "load" && now.Before(r.measureStart):
		return fmt.Sprintf("warmup %s/%s", now.Sub(r.measureStart.Add(-r.cfg.Warmup)).Round(time.Second), r.cfg.Warmup)
	case phase == "load":
		line := fmt.Sprintf("%s %s/%s  ops %d  %d/s  errors %d", r.cfg.Workload,
			min(now.Sub(r.measureStart), r.cfg.Duration).Round(time.Second), r.cfg.Duration,
			ops, perSec, r.stats.live.errors.Load())
		if r.cfg.Rate > 0 {
			line += fmt.Sprintf("  dropped %d  late %d", r.dropped.Load(), r.late.Load())
		}
		return line
	}
	return phase
}
