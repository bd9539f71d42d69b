package bench

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// iteration is one unit of a workload. intended is when it was due: the
// actual start in a closed loop, the scheduled arrival in an open loop, so
// that the first operation's latency includes any wait for a free worker.
// rec is the worker's measured shard for an iteration intended inside the
// window, its unmeasured one otherwise (see stats).
type iteration func(w *worker, intended time.Time, rec *shard)

// workload is what a workload name selects.
type workload struct {
	iter     iteration
	pool     bool // needs a pool of existing orders before the window
	webhooks bool // needs the notification receiver
}

func (r *run) workload() workload {
	switch r.cfg.Workload {
	case WorkloadCharge:
		return workload{iter: func(w *worker, t time.Time, rec *shard) { w.charge(WorkloadCharge, t, rec, "") }}
	case WorkloadLifecycle:
		return workload{iter: (*worker).lifecycle}
	case WorkloadStatus:
		return workload{iter: (*worker).status, pool: true}
	case WorkloadMixed:
		return workload{iter: (*worker).mixed, pool: r.cfg.Mix.has(WorkloadStatus)}
	case WorkloadCeiling:
		return workload{iter: (*worker).ceiling}
	case WorkloadWebhooks:
		return workload{iter: (*worker).webhook, webhooks: true}
	case WorkloadSearch:
		return workload{iter: (*worker).search, pool: true}
	}
	panic("unknown workload " + r.cfg.Workload) // Validate refuses it first
}

// worker is one goroutine's state: its node, its random source, its buffer.
// Nothing in it is shared.
type worker struct {
	id   int
	r    *run
	c    *client
	rng  *rand.Rand
	rec  *shard // where the window's iterations record
	warm *shard // where the others do: successes ending in the window are counted
	buf  []byte
	seq  int64
}

func (r *run) newWorker(id int) *worker {
	return &worker{
		id:   id,
		r:    r,
		c:    r.clients[id%len(r.clients)],
		rng:  rand.New(rand.NewPCG(uint64(id), r.seed)),
		rec:  r.stats.shards[id%len(r.stats.shards)],
		warm: r.stats.warm[id%len(r.stats.warm)],
		buf:  make([]byte, 0, 1024),
	}
}

// nextOrderID is unique across the run: run prefix, worker, sequence.
func (w *worker) nextOrderID(kind string) string {
	w.seq++
	return w.r.idPrefix + kind + strconv.Itoa(w.id) + "-" + strconv.FormatInt(w.seq, 10)
}

// charge sends one charge and records it as op. It returns the order id and
// the time the 200 answer was read, or "" when the charge failed.
func (w *worker) charge(op string, intended time.Time, rec *shard, callbackURL string) (string, time.Time) {
	id := w.nextOrderID("c")
	w.buf = appendChargeBody(w.buf[:0], id, callbackURL, 1)
	a := w.c.post(opCharge, w.buf, id, false)
	now := time.Now()
	if !a.ok() {
		rec.fail(op, a)
		return "", now
	}
	rec.ok(op, now.Sub(intended))
	if w.r.recorder != nil {
		w.r.recorder.add(id)
	}
	return id, now
}

// status reads a random order of the pool.
func (w *worker) status(intended time.Time, rec *shard) {
	id := w.r.pool[w.rng.IntN(len(w.r.pool))]
	w.buf = appendStatusBody(w.buf[:0], id)
	if a := w.c.post(opStatus, w.buf, id, false); !a.ok() {
		rec.fail(WorkloadStatus, a)
		return
	}
	rec.ok(WorkloadStatus, time.Since(intended))
}

// search sends one list-orders request: a page of a random customer's
// orders by e-mail, "find this customer's payment". The pool gave every
// customer searchPage orders spread evenly over the whole history (see
// customerOf), so each page holds searchPage orders whatever the store's
// size, most of them far from the newest: what grows with a larger store is
// the cost of finding and reading them, not the size of the answer. A page
// with fewer orders is a failure, "short_page": the pool was not made that
// way (a pool file of another workload's orders, say), and the figures would
// not measure what they claim.
func (w *worker) search(intended time.Time, rec *shard) {
	w.buf = appendSearchBody(w.buf[:0], w.rng.IntN(w.r.customers))
	a := w.c.post(opListOrders, w.buf, "", false)
	switch {
	case !a.ok():
		rec.fail(WorkloadSearch, a)
		return
	case a.listed < searchPage:
		rec.failKind(WorkloadSearch, "short_page")
		return
	}
	rec.ok(WorkloadSearch, time.Since(intended))
}

// ceiling is GET /healthz: the same client and server doing no work.
func (w *worker) ceiling(intended time.Time, rec *shard) {
	if a := w.c.get("healthz"); !a.ok() {
		rec.fail("healthz", a)
		return
	}
	rec.ok("healthz", time.Since(intended))
}

// webhook is a charge whose notification the sink awaits.
func (w *worker) webhook(intended time.Time, rec *shard) {
	if id, answered := w.charge(WorkloadCharge, intended, rec, w.r.sink.url); id != "" {
		w.r.sink.expect(id, answered, rec.measures())
	}
}

// mixed draws one kind by weight.
func (w *worker) mixed(intended time.Time, rec *shard) {
	n := w.rng.IntN(w.r.mixTotal)
	for _, e := range w.r.cfg.Mix {
		if n >= e.Weight {
			n -= e.Weight
			continue
		}
		switch e.Name {
		case WorkloadCharge:
			w.charge(WorkloadCharge, intended, rec, "")
		case WorkloadStatus:
			w.status(intended, rec)
		case WorkloadLifecycle:
			w.lifecycle(intended, rec)
		}
		return
	}
}

// Polling for the charge's outcome: first at once, then with a doubling
// pause capped at pollPauseMax; never more than pollMax polls and never
// longer than the request timeout.
const (
	pollPauseMin = time.Millisecond
	pollPauseMax = 10 * time.Millisecond
	pollMax      = 1000
)

// lifecycle is charge → poll status until authorized → settle the full amount
// → refund half → status. Each step is its own operation ("lifecycle.charge",
// "lifecycle.poll" per status poll, "lifecycle.authorize" from the charge's
// answer to the poll that saw "authorized", "lifecycle.settle",
// "lifecycle.refund", "lifecycle.status"), and "lifecycle" is the whole, from
// the intended start. A failed step ends the iteration; it counts as an error
// of its step and of "lifecycle".
func (w *worker) lifecycle(intended time.Time, rec *shard) {
	if !w.lifecycleSteps(intended, rec) {
		if w.r.ctx.Err() == nil { // one cut short by the end of the run is no failure
			rec.incomplete(WorkloadLifecycle)
		}
		return
	}
	rec.ok(WorkloadLifecycle, time.Since(intended))
}

// lifecycleSteps follow the authorisation: settle all, refund half, read;
// each answer must show the order where the step leaves it.
var lifecycleSteps = []struct {
	op, path string
	amount   int64
	// what the answer must show
	status            string
	settled, refunded int64
}{
	{"lifecycle.settle", opSettle, chargeAmount, "settled", chargeAmount, 0},
	{"lifecycle.refund", opRefund, refundAmount, "settled", chargeAmount, refundAmount},
	{"lifecycle.status", opStatus, 0, "settled", chargeAmount, refundAmount},
}

func (w *worker) lifecycleSteps(intended time.Time, rec *shard) bool {
	id, answered := w.charge("lifecycle.charge", intended, rec, "")
	if id == "" || !w.awaitAuthorized(id, answered, rec) {
		return false
	}
	for _, s := range lifecycleSteps {
		if s.path == opStatus {
			w.buf = appendStatusBody(w.buf[:0], id)
		} else {
			w.buf = appendAmountBody(w.buf[:0], id, s.amount)
		}
		start := time.Now()
		a := w.c.post(s.path, w.buf, id, true)
		if !a.ok() {
			rec.fail(s.op, a)
			return false
		}
		if a.orderStatus != s.status || a.settled != s.settled || a.refunded != s.refunded {
			// A 200 that did not do what was asked is no success.
			rec.failKind(s.op, fmt.Sprintf("unexpected_order_%s_settled_%d_refunded_%d", a.orderStatus, a.settled, a.refunded))
			return false
		}
		rec.ok(s.op, time.Since(start))
	}
	return true
}

// awaitAuthorized polls the order's status until it is authorized.
func (w *worker) awaitAuthorized(id string, answered time.Time, rec *shard) bool {
	const op = "lifecycle.authorize"
	deadline := answered.Add(w.c.timeout)
	pause := pollPauseMin
	for i := 0; i < pollMax; i++ {
		if w.r.ctx.Err() != nil {
			return false
		}
		w.buf = appendStatusBody(w.buf[:0], id)
		start := time.Now()
		a := w.c.post(opStatus, w.buf, id, true)
		if a.ok() {
			rec.ok("lifecycle.poll", time.Since(start))
			switch a.orderStatus {
			case "authorized":
				rec.ok(op, time.Since(answered))
				return true
			case "processing":
			case "":
				rec.failKind(op, "order_status_unreadable")
				return false
			default: // declined, or anything a fresh approved charge should not reach
				rec.failKind(op, "order_"+a.orderStatus)
				return false
			}
		} else {
			rec.fail("lifecycle.poll", a)
		}
		if time.Now().Add(pause).After(deadline) {
			break
		}
		time.Sleep(pause)
		pause = min(2*pause, pollPauseMax)
	}
	rec.failKind(op, "authorize_timeout")
	return false
}
