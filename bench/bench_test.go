package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/bench/launch"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in, base string
		ok       bool
	}{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", true},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080", true},
		{"http://127.0.0.1:8080/api/v3/", "http://127.0.0.1:8080", true},
		{"http://localhost:9000", "http://localhost:9000", true},
		{"http://[::1]:9000", "http://[::1]:9000", true},
		{"http://127.1.2.3", "http://127.1.2.3:80", true},
		{"http://10.0.0.1:8080", "", false},
		{"http://example.com:8080", "", false},
		{"https://127.0.0.1:8443", "", false},
		{"http://127.0.0.1:8080/other", "", false},
		{"127.0.0.1:8080", "", false},
	} {
		base, _, err := ParseTarget(tc.in)
		if (err == nil) != tc.ok || base != tc.base {
			t.Errorf("ParseTarget(%q) = %q, %v; want %q, ok=%v", tc.in, base, err, tc.base, tc.ok)
		}
	}
}

func TestParseMix(t *testing.T) {
	m, err := ParseMix("charge=50, status=40,lifecycle=10")
	if err != nil || m.String() != "charge=50,lifecycle=10,status=40" {
		t.Fatalf("ParseMix = %v, %v", m, err)
	}
	for _, bad := range []string{"charge", "charge=x", "charge=-1", "refund=5", "charge=0", "charge=1,charge=2", ""} {
		if _, err := ParseMix(bad); err == nil {
			t.Errorf("ParseMix(%q) accepted", bad)
		}
	}
}

func TestChargeBodyIsValidJSON(t *testing.T) {
	var v map[string]any
	for _, b := range [][]byte{
		appendChargeBody(nil, "o-1", "", 1), appendChargeBody(nil, "o-1", "http://127.0.0.1:1/hook", 7),
		appendAmountBody(nil, "o-1", 510), appendStatusBody(nil, "o-1"), appendSearchBody(nil, 12),
	} {
		if err := json.Unmarshal(b, &v); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
	if v := map[string]any{}; json.Unmarshal(appendChargeBody(nil, "o-1", "http://h/hook", 1), &v) != nil || v["callback_url"] != "http://h/hook" {
		t.Errorf("callback_url missing: %v", v)
	}
	var charge struct {
		Customer struct {
			UserID string `json:"user_id"`
			Email  string `json:"email"`
		} `json:"customer"`
	}
	if err := json.Unmarshal(appendChargeBody(nil, "o-1", "", 42), &charge); err != nil ||
		charge.Customer.UserID != "u42" || charge.Customer.Email != "u42@example.com" {
		t.Errorf("customer 42: %+v %v", charge, err)
	}
	var search struct {
		Email string `json:"email"`
		Limit int    `json:"limit"`
	}
	if err := json.Unmarshal(appendSearchBody(nil, 42), &search); err != nil || search.Email != "u42@example.com" || search.Limit != searchPage {
		t.Errorf("search of customer 42: %+v %v", search, err)
	}
}

// baseConfig is a tiny run against the fake.
func baseConfig(g *fakeGateway, m *fakeMerchant, workload string) Config {
	return Config{
		Targets: []string{g.url}, MerchantKey: m.APIPK, MerchantSecret: m.APISK,
		WebhookKey: m.WebhookPK, WebhookSecret: m.WebhookSK,
		Workload: workload, Concurrency: 2, Duration: time.Second, Orders: 20,
		Timeout: 2 * time.Second, WebhookWait: 5 * time.Second,
	}
}

// lifecycle counts a step whose 200 answer does not show the order where
// the step leaves it as a failure, not a success.
func TestLifecycleChecksWhatEachStepDid(t *testing.T) {
	g, m := startFake(t)
	g.ignoreRefunds.Store(true)
	rep, err := Run(context.Background(), baseConfig(g, m, WorkloadLifecycle))
	if err != nil {
		t.Fatal(err)
	}
	if o := rep.Ops["lifecycle"]; o.Count != 0 {
		t.Fatalf("%d lifecycles counted as done with refunds that did nothing", o.Count)
	}
	kinds := fmt.Sprint(rep.Errors.Other)
	if rep.Ops["lifecycle.refund"].Errors == 0 || !strings.Contains(kinds, "unexpected_order_settled_settled_1020_refunded_0") {
		t.Fatalf("refund errors %d, kinds %s", rep.Ops["lifecycle.refund"].Errors, kinds)
	}
	if o := rep.Ops["lifecycle.settle"]; o.Count == 0 || o.Errors != 0 {
		t.Fatalf("settle: %+v", o)
	}
}

// TestWorkloads runs every workload for about a second against the fake and
// checks that each expected operation succeeded and the JSON report's shape.
func TestWorkloads(t *testing.T) {
	mix, _ := ParseMix("charge=1,status=1,lifecycle=1")
	for _, tc := range []struct {
		workload string
		ops      []string
		tweak    func(*Config)
	}{
		{WorkloadCharge, []string{"charge"}, nil},
		{WorkloadLifecycle, []string{"lifecycle", "lifecycle.charge", "lifecycle.poll", "lifecycle.authorize",
			"lifecycle.settle", "lifecycle.refund", "lifecycle.status"}, nil},
		{WorkloadStatus, []string{"status"}, nil},
		{WorkloadMixed, []string{"charge", "status", "lifecycle", "lifecycle.settle"}, func(c *Config) { c.Mix = mix }},
		{WorkloadCeiling, []string{"healthz"}, func(c *Config) { c.MerchantKey, c.MerchantSecret = "", "" }},
		{WorkloadWebhooks, []string{"charge", "webhook"}, nil},
		{"charge-open-loop", []string{"charge"}, func(c *Config) { c.Workload, c.Rate = WorkloadCharge, 200 }},
		{"lifecycle-with-warmup", []string{"lifecycle"}, func(c *Config) {
			c.Workload, c.Warmup, c.Duration = WorkloadLifecycle, 300*time.Millisecond, 700*time.Millisecond
		}},
	} {
		t.Run(tc.workload, func(t *testing.T) {
			t.Parallel()
			g, m := startFake(t)
			cfg := baseConfig(g, m, tc.workload)
			if tc.tweak != nil {
				tc.tweak(&cfg)
			}
			rep, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			var summary bytes.Buffer
			rep.WriteSummary(&summary)
			t.Logf("\n%s", summary.String())
			for _, op := range tc.ops {
				if o := rep.Ops[op]; o.Count == 0 || o.Throughput <= 0 || o.P50US > o.P99US || o.P99US > o.MaxUS {
					t.Errorf("op %s: %+v", op, o)
				}
			}
			if rep.Errors.Total != 0 || g.badAuth.Load() != 0 {
				t.Errorf("errors %+v, refused signatures %d", rep.Errors, g.badAuth.Load())
			}
			if h := rep.HostCPU; runtime.GOOS == "linux" && (h == nil || h.BusyPct <= 0 || h.BusyPct+h.StealPct+h.IOWaitPct > 100.001) {
				t.Errorf("host CPU %+v", h)
			}
			if rep.Duration != cfg.Duration.Seconds() || rep.Interrupted {
				t.Errorf("duration %v interrupted %v", rep.Duration, rep.Interrupted)
			}
			if cfg.Workload == WorkloadWebhooks {
				wh := rep.Webhooks
				if wh == nil || wh.Delivered == 0 || wh.Delivered != wh.Expected || wh.Undelivered != 0 || wh.BadSignature != 0 ||
					wh.Duplicates != 0 || wh.Unmatched != 0 ||
					wh.Delivered != rep.Ops["webhook"].Count {
					t.Errorf("webhooks %+v", wh)
				}
				// Both count a notification in the window by when it arrived.
				if o := rep.Ops["webhook"]; o.InWindow != wh.DeliveredInWindow {
					t.Errorf("the webhook row has %d in the window, delivered_in_window %d", o.InWindow, wh.DeliveredInWindow)
				}
			}
			if cfg.Rate > 0 {
				ol := rep.OpenLoop
				if ol == nil || ol.Scheduled == 0 || ol.Scheduled != ol.Sent+ol.Dropped || rep.Loop != "open" {
					t.Errorf("open loop %+v", ol)
				}
			}
			checkTimelineAddsUp(t, rep)
			checkReportJSON(t, rep, tc.ops)
		})
	}
}

// checkTimelineAddsUp: every operation the window counted is in exactly one
// second of the timeline, errors included.
func checkTimelineAddsUp(t *testing.T, rep *Report) {
	t.Helper()
	if len(rep.Timeline) == 0 {
		t.Error("no timeline")
	}
	for name, o := range rep.Ops {
		var count, errs int64
		for _, sec := range rep.Timeline {
			count, errs = count+sec.Ops[name].Count, errs+sec.Ops[name].Errors
		}
		if count != o.Count || errs != o.Errors {
			t.Errorf("op %s: the timeline holds %d ops and %d errors, the window %d and %d", name, count, errs, o.Count, o.Errors)
		}
	}
}

// checkReportJSON writes the report and reads it back as plain JSON to check
// the documented field names.
func checkReportJSON(t *testing.T, rep *Report, ops []string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.json")
	if err := rep.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"workload", "target", "concurrency", "rate", "duration", "started_at", "machine", "ops", "errors"} {
		if _, ok := v[k]; !ok {
			t.Errorf("report JSON lacks %q", k)
		}
	}
	machine, _ := v["machine"].(map[string]any)
	for _, k := range []string{"cpus", "go_version", "os"} {
		if _, ok := machine[k]; !ok {
			t.Errorf("machine lacks %q", k)
		}
	}
	errs, _ := v["errors"].(map[string]any)
	for _, k := range []string{"total", "by_status", "by_code", "other"} {
		if _, ok := errs[k]; !ok {
			t.Errorf("errors lacks %q", k)
		}
	}
	opsJSON, _ := v["ops"].(map[string]any)
	for _, op := range ops {
		o, _ := opsJSON[op].(map[string]any)
		for _, k := range []string{"count", "errors", "throughput", "p50_us", "p90_us", "p99_us", "p999_us", "max_us"} {
			if _, ok := o[k].(float64); !ok {
				t.Errorf("ops.%s lacks number %q", op, k)
			}
		}
	}
	back, err := LoadReports(path)
	if err != nil || len(back) != 1 || back[0].Ops[ops[0]].Count != rep.Ops[ops[0]].Count {
		t.Errorf("LoadReports: %v, %+v", err, back)
	}
}

// TestOpenLoopCountsStallFromIntendedTime stalls the whole server for 200 ms
// once. The open loop keeps its arrival schedule, so every arrival due during
// the stall waits, and its latency from its intended send time shows it: the
// stall fills the top percentiles rather than the handful of requests that
// happened to be in flight.
func TestOpenLoopCountsStallFromIntendedTime(t *testing.T) {
	g, m := startFake(t)
	cfg := baseConfig(g, m, WorkloadCharge)
	cfg.Rate, cfg.Concurrency, cfg.Queue, cfg.Duration = 200, 4, 1000, 1200*time.Millisecond
	const stall = 200 * time.Millisecond
	g.stall(time.Now().Add(400*time.Millisecond), stall)
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	o := rep.Ops["charge"]
	t.Logf("charge %+v, open loop %+v", o, *rep.OpenLoop)
	// Arrivals every 5 ms during the stall wait 200 ms down to 0: about 40 of
	// about 240, spread evenly, so the top 1 % all waited more than 100 ms.
	if o.MaxUS < 190_000 || o.P999US < 190_000 {
		t.Errorf("max %dµs p99.9 %dµs: the 200 ms stall is missing", o.MaxUS, o.P999US)
	}
	if o.P99US < 100_000 {
		t.Errorf("p99 %dµs: arrivals queued behind the stall were not measured from their intended time", o.P99US)
	}
	if o.P50US > 50_000 {
		t.Errorf("p50 %dµs: outside the stall the server answers at once", o.P50US)
	}
	if rep.OpenLoop.Late < 10 || rep.OpenLoop.Dropped != 0 {
		t.Errorf("late %d dropped %d: want the stalled arrivals late, none dropped with a deep queue", rep.OpenLoop.Late, rep.OpenLoop.Dropped)
	}
}

// TestTimelineShowsWhenTheStallWas stalls the server for 300 ms in the
// second second of the window: the timeline puts the slow operations in
// that second, and its seconds add up to the window's totals.
func TestTimelineShowsWhenTheStallWas(t *testing.T) {
	g, m := startFake(t)
	cfg := baseConfig(g, m, WorkloadCharge)
	cfg.Rate, cfg.Concurrency, cfg.Queue, cfg.Duration = 200, 4, 1000, 3*time.Second
	g.stall(time.Now().Add(1300*time.Millisecond), 300*time.Millisecond)
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rep.Timeline); n < 3 || n > 4 {
		t.Fatalf("%d seconds in the timeline of a 3 s window: %+v", n, rep.Timeline)
	}
	for i, sec := range rep.Timeline {
		o := sec.Ops["charge"]
		t.Logf("t=%d %+v", sec.T, o)
		if sec.T != i {
			t.Errorf("second %d is numbered %d", i, sec.T)
		}
		switch {
		case i == 1 && o.P99US < 150_000:
			t.Errorf("second 1: p99 %dµs, but the 300 ms stall ended in it", o.P99US)
		case i != 1 && i < 3 && o.P99US > 100_000:
			t.Errorf("second %d: p99 %dµs, but the stall was in second 1", i, o.P99US)
		}
	}
	checkTimelineAddsUp(t, rep)
	if out := summaryOf(rep); !strings.Contains(out, "slowest second: charge p99") || !strings.Contains(out, " at 1s ") {
		t.Errorf("the summary does not name second 1 as the slowest:\n%s", out)
	}
}

// TestOpenLoopDropsWhenQueueFull: with one worker and one queue place, the
// arrivals due during a stall are dropped and counted, not silently delayed.
func TestOpenLoopDropsWhenQueueFull(t *testing.T) {
	g, m := startFake(t)
	cfg := baseConfig(g, m, WorkloadCharge)
	cfg.Rate, cfg.Concurrency, cfg.Queue, cfg.Duration = 500, 1, 1, 600*time.Millisecond
	g.stall(time.Now().Add(100*time.Millisecond), 200*time.Millisecond)
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ol := rep.OpenLoop
	if ol.Dropped < 50 || ol.Scheduled != ol.Sent+ol.Dropped || rep.Ops["charge"].Count == 0 {
		t.Errorf("open loop %+v, charge %+v", ol, rep.Ops["charge"])
	}
	if rep.Errors.Total != 0 {
		t.Errorf("drops are not request errors: %+v", rep.Errors)
	}
	if ol.Queue != 1 {
		t.Errorf("open loop reports a queue of %d, want 1", ol.Queue)
	}
	if out := summaryOf(rep); !strings.Contains(out, "of the arrivals were dropped") || !strings.Contains(out, "lower bound") {
		t.Errorf("the summary does not warn that dropped arrivals leave the percentiles a lower bound:\n%s", out)
	}
}

// TestOpenLoopDefaultQueueHoldsASecond: the default queue holds a second of
// arrivals (at least 10 per worker), so a stall shorter than that is
// measured, each waiting arrival with its wait, instead of dropped.
func TestOpenLoopDefaultQueueHoldsASecond(t *testing.T) {
	for _, tc := range []struct {
		rate        float64
		concurrency int
		want        int
	}{{0, 16, 160}, {100, 16, 160}, {2000, 4, 2000}, {2000.5, 4, 2001}, {rateMax, 4, queueMax}} {
		c := Config{Rate: tc.rate, Concurrency: tc.concurrency}.withDefaults()
		if c.Queue != tc.want {
			t.Errorf("rate %g, concurrency %d: queue %d, want %d", tc.rate, tc.concurrency, c.Queue, tc.want)
		}
	}
	g, m := startFake(t)
	cfg := baseConfig(g, m, WorkloadCharge)
	cfg.Rate, cfg.Concurrency, cfg.Duration = 500, 1, 600*time.Millisecond
	g.stall(time.Now().Add(100*time.Millisecond), 200*time.Millisecond)
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ol := rep.OpenLoop; ol.Dropped != 0 || ol.Queue != 500 {
		t.Errorf("open loop %+v: a 200 ms stall at 500/s should fit the default queue", ol)
	}
	if p99 := rep.Ops["charge"].P99US; p99 < 100_000 {
		t.Errorf("charge p99 %dµs: the 200 ms stall is not in it", p99)
	}
}

// TestTinyRateEnds: a rate so low that its second arrival falls far past
// the window ends the run after the first one; the offset must not wrap
// around into the past and flood the target.
func TestTinyRateEnds(t *testing.T) {
	g, m := startFake(t)
	cfg := baseConfig(g, m, WorkloadCharge)
	cfg.Duration = 300 * time.Millisecond
	cfg.Rate = rateMin
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil || rep.OpenLoop.Scheduled != 1 || rep.Ops["charge"].Count != 1 {
		t.Errorf("open loop %+v, charge %+v, context %v", rep.OpenLoop, rep.Ops["charge"], ctx.Err())
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), rateMin / 2, 1e-11, -1} {
		c := cfg
		c.Rate = bad
		if err := c.Validate(); err == nil {
			t.Errorf("rate %g accepted", bad)
		}
	}
}

func TestRequestsLimit(t *testing.T) {
	g, m := startFake(t)
	cfg := baseConfig(g, m, WorkloadCharge)
	cfg.Requests, cfg.Duration = 50, 10*time.Second
	start := time.Now()
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Ops["charge"].Count; n != 50 {
		t.Errorf("count %d, want 50", n)
	}
	if time.Since(start) > 5*time.Second || rep.Duration >= 10 {
		t.Errorf("the request limit did not end the run: %s, window %.1fs", time.Since(start), rep.Duration)
	}
}

func TestInterruptedRunReportsWhatRan(t *testing.T) {
	g, m := startFake(t)
	cfg := baseConfig(g, m, WorkloadCharge)
	cfg.Duration = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Interrupted || rep.Ops["charge"].Count == 0 || rep.Duration > 5 {
		t.Errorf("interrupted %v count %d duration %.1f", rep.Interrupted, rep.Ops["charge"].Count, rep.Duration)
	}
}

func TestRunNotStarted(t *testing.T) {
	g, m := startFake(t)
	// Nothing listens on a port just released.
	ports, err := launch.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]Config{
		"no server":    {Targets: []string{"http://127.0.0.1:" + strconv.Itoa(ports[0])}, Workload: WorkloadCeiling, Duration: time.Second},
		"wrong keys":   {Targets: []string{g.url}, MerchantKey: m.APIPK, MerchantSecret: "wrong", Workload: WorkloadCharge, Duration: time.Second},
		"no keys":      {Targets: []string{g.url}, Workload: WorkloadCharge, Duration: time.Second},
		"not local":    {Targets: []string{"http://192.0.2.1:80"}, Workload: WorkloadCeiling, Duration: time.Second},
		"bad workload": {Targets: []string{g.url}, Workload: "refunds", Duration: time.Second},
	} {
		rep, err := Run(context.Background(), cfg)
		if !errors.Is(err, ErrNotStarted) || rep != nil {
			t.Errorf("%s: %v, %v", name, rep, err)
		}
	}
	if _, err := Run(context.Background(), Config{Targets: []string{g.url}, MerchantKey: m.APIPK, MerchantSecret: "wrong",
		Workload: WorkloadCharge, Duration: time.Second}); err == nil || !strings.Contains(err.Error(), "1.01") {
		t.Errorf("wrong keys: %v, want the 401's code in the message", err)
	}
}

// A pool fill that stops making progress ends the run's start with an
// error naming the stall, instead of waiting out every remaining order's
// timeout (a million of them, for a search pool).
func TestPoolFillStopsWhenNoOrderIsAcknowledged(t *testing.T) {
	g, m := startFake(t)
	cfg := baseConfig(g, m, WorkloadStatus)
	cfg.Orders, cfg.Timeout, cfg.PoolStall = 1_000_000, 300*time.Millisecond, 400*time.Millisecond
	g.stall(time.Now().Add(150*time.Millisecond), 3*time.Second)
	start := time.Now()
	rep, err := Run(context.Background(), cfg)
	if !errors.Is(err, ErrNotStarted) || rep != nil || !strings.Contains(err.Error(), "no order of the pool acknowledged for 400ms") {
		t.Fatalf("%v, %v", rep, err)
	}
	// Made orders, then none: the bound is the stall, not the fill.
	if elapsed := time.Since(start); elapsed > 2500*time.Millisecond {
		t.Errorf("the fill ended after %v", elapsed)
	}
}

func TestProgressLine(t *testing.T) {
	g, m := startFake(t)
	cfg := baseConfig(g, m, WorkloadCharge)
	cfg.Duration = 1200 * time.Millisecond
	var progress bytes.Buffer
	cfg.Progress = &progress
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	out := progress.String()
	if !strings.Contains(out, clearLine+"charge 1s/1.2s  ops ") || !strings.HasSuffix(out, clearLine) || strings.Contains(out, "\n") {
		t.Errorf("progress output %q", out)
	}
}

// TestWebhookSinkMatching feeds the receiver's bookkeeping directly: a
// notification may come before the charge's answer is read, may be repeated,
// may never come, may come after the window, or may be for an order this
// run does not know. The rate counts only first arrivals inside the window.
func TestWebhookSinkMatching(t *testing.T) {
	st := newStats(1)
	s := &webhookSink{pending: map[string]*pendingHook{}, rec: st.shards[0], warm: st.warm[0]}
	t0 := time.Now()
	s.expect("a", t0, true) // answer, then notification 5 ms later
	s.notified("a", "authorized", true, t0.Add(5*time.Millisecond), time.Time{})
	s.notified("b", "authorized", true, t0, time.Time{}) // notification before the answer
	s.expect("b", t0.Add(time.Millisecond), true)
	s.notified("a", "authorized", true, t0.Add(time.Second), time.Time{}) // a repeat
	s.notified("a", "settled", true, t0.Add(time.Second), time.Time{})    // another status: received, nothing else
	s.expect("c", t0, true)                                               // never notified
	s.expect("w", t0, false)                                              // a warmup charge
	s.notified("w", "authorized", false, t0, time.Time{})                 // with a bad signature
	s.expect("v", t0, false)                                              // another warmup charge
	s.notified("v", "authorized", true, t0.Add(time.Millisecond), time.Time{})
	s.notified("x", "authorized", true, t0, time.Time{}) // unknown order
	s.expect("d", t0, true)                              // notified during the wait after the window
	s.notified("d", "authorized", true, t0.Add(1500*time.Millisecond), time.Time{})
	// A node that says when the status changed is measured from then.
	s.expect("e", t0.Add(15*time.Millisecond), true)
	s.notified("e", "authorized", true, t0.Add(20*time.Millisecond), t0.Add(12*time.Millisecond).Round(0))
	if n := s.outstanding(); n != 1 {
		t.Errorf("outstanding %d, want 1 (c)", n)
	}
	r := s.report(t0, time.Second) // a window of one second from t0
	want := WebhookReport{Expected: 5, Delivered: 4, DeliveredInWindow: 5, DeliveredPerSec: 5, Undelivered: 1,
		Received: 9, Duplicates: 1, Unmatched: 1, BadSignature: 1, LatencyFrom: "mixed"} // in the window: a, b, e, w and v
	if *r != want {
		t.Errorf("report %+v\nwant   %+v", *r, want)
	}
	m := st.merge()
	if h := m.ops["webhook"].hist; h.TotalCount() != 4 || h.Max() < 1490000 || h.Max() > 1510000 ||
		h.ValueAtQuantile(75) < 7990 || h.ValueAtQuantile(75) > 8010 { // 0, 5 ms, 8 ms, 1.5 s
		t.Errorf("webhook latencies: n=%d max=%dµs, want 4 with max 1.5 s (the early one counts 0) and e's 8 ms", h.TotalCount(), h.Max())
	}
	if m.other["webhook_undelivered"] != 1 || m.other["webhook_bad_signature"] != 1 {
		t.Errorf("other %v", m.other)
	}
}

// TestOpenLoopThroughputIsWhatTheServerDid: a server that stalls from late
// in the window until after it serves the window's arrivals after the
// window ends. They are measured (from their intended times), but the
// throughput is what ended inside the window: counting the window's
// arrivals instead reported the offered 200/s whatever the server did.
func TestOpenLoopThroughputIsWhatTheServerDid(t *testing.T) {
	g, m := startFake(t)
	cfg := baseConfig(g, m, WorkloadCharge)
	cfg.Rate, cfg.Concurrency, cfg.Queue, cfg.Duration = 200, 1, 5000, 1500*time.Millisecond
	g.stall(time.Now().Add(1000*time.Millisecond), 1200*time.Millisecond)
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	o := rep.Ops["charge"]
	t.Logf("charge %+v, open loop %+v", o, *rep.OpenLoop)
	// About 200 arrivals answered before the stall, about 100 after it.
	if o.Count < 250 || o.InWindow > o.Count-50 {
		t.Errorf("count %d, in window %d: want the stalled arrivals measured, but not in the window", o.Count, o.InWindow)
	}
	if o.Throughput > 170 {
		t.Errorf("throughput %.1f/s: the server answered about 200 in the 1.5 s window", o.Throughput)
	}
	last := rep.Timeline[len(rep.Timeline)-1]
	if !last.AfterWindow || last.Ops["charge"].Count < 50 {
		t.Errorf("last timeline entry %+v: want the stalled arrivals after the window", last)
	}
	if w := rep.Timeline[1]; w.AfterWindow || w.Span < 0.45 || w.Span > 0.55 {
		t.Errorf("second 1 %+v: want the window's last half second", w)
	}
	if out := summaryOf(rep); !strings.Contains(out, "slowest second: charge") || !strings.Contains(out, "ended after the window: p99") {
		t.Errorf("the summary does not point at the late iterations:\n%s", out)
	}
}

// TestTimeoutsAreCalledOut: a stall longer than --timeout turns the
// iterations it holds up into errors, and the percentiles of the successes
// no longer show it; the summary says so.
func TestTimeoutsAreCalledOut(t *testing.T) {
	g, m := startFake(t)
	cfg := baseConfig(g, m, WorkloadCharge)
	cfg.Rate, cfg.Concurrency, cfg.Duration, cfg.Timeout = 100, 20, 1500*time.Millisecond, 200*time.Millisecond
	g.stall(time.Now().Add(300*time.Millisecond), 600*time.Millisecond)
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Errors.Other["timeout"] == 0 {
		t.Fatalf("no timeouts counted: %+v", rep.Errors)
	}
	if out := summaryOf(rep); !strings.Contains(out, "requests timed out: the latencies above are of successes only") {
		t.Errorf("the summary does not warn about the timeouts:\n%s", out)
	}
}

// summaryOf is the report's human summary.
func summaryOf(rep *Report) string {
	var out bytes.Buffer
	rep.WriteSummary(&out)
	return out.String()
}

// TestRequestsLimitEndsTheWindowForNotifications: --requests ends the
// window when its last charge is answered; notifications arriving after
// that (the sandbox authorises 300 ms later) are outside it. The webhook
// row counted them in the shortened window, reporting a rate of
// thousands a second for 20 notifications that all came after it.
func TestRequestsLimitEndsTheWindowForNotifications(t *testing.T) {
	g, m := startFake(t)
	g.authDelay = 300 * time.Millisecond
	cfg := baseConfig(g, m, WorkloadWebhooks)
	cfg.Requests, cfg.Duration = 20, 10*time.Second
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	o := rep.Ops["webhook"]
	if rep.Duration >= 0.3 {
		t.Fatalf("window %.3fs: the 20 charges should end it well before their notifications", rep.Duration)
	}
	if o.Count != 20 || o.InWindow != rep.Webhooks.DeliveredInWindow || o.InWindow != 0 || o.Throughput != 0 {
		t.Errorf("webhook row: %d delivered, %d in the window (%.1f/s); delivered_in_window %d: want 20, 0, 0",
			o.Count, o.InWindow, o.Throughput, rep.Webhooks.DeliveredInWindow)
	}
	last := rep.Timeline[len(rep.Timeline)-1]
	if !last.AfterWindow || last.Ops["webhook"].Count != 20 {
		t.Errorf("the timeline's last entry %+v: want the 20 notifications after the window", last)
	}
	checkTimelineAddsUp(t, rep)
}

// TestTimelineOpenLoopDoneEarlyKeepsWholeSeconds: an open loop at a low
// rate has nothing in flight well before its window's end. Stopping the
// timeline then lost its cut at the end, and the last whole second was
// written as a shorter one (span_s 1).
func TestTimelineOpenLoopDoneEarlyKeepsWholeSeconds(t *testing.T) {
	g, m := startFake(t)
	cfg := baseConfig(g, m, WorkloadCharge)
	cfg.Rate, cfg.Duration = 4, 2*time.Second
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Timeline) != 2 {
		t.Fatalf("timeline %+v: want the window's two seconds", rep.Timeline)
	}
	for i, sec := range rep.Timeline {
		if sec.T != i || sec.Span != 0 || sec.AfterWindow || sec.Ops["charge"].Count == 0 {
			t.Errorf("second %d: %+v, want a whole second of the window with its charges", i, sec)
		}
	}
	checkTimelineAddsUp(t, rep)
}

// TestTimelineClosedLoopLastIterationsAfterTheWindow: in a closed loop the
// last iteration of each worker begins before the window's end and ends
// after it. The timeline's last cut, made when its timer fired, took those
// that ended before the timer did into the window's last second; they are
// now placed by the time they ended.
func TestTimelineClosedLoopLastIterationsAfterTheWindow(t *testing.T) {
	for i := range 5 {
		g, m := startFake(t)
		cfg := baseConfig(g, m, WorkloadCharge)
		cfg.Concurrency, cfg.Duration = 1, 500*time.Millisecond
		// The worker's charge in flight at the window's end straddles it
		// for certain: requests arriving from 400 ms on wait until 800 ms
		// (a 34 µs charge on a busy machine may otherwise end just before
		// the window does, and no iteration is left after it).
		g.stall(time.Now().Add(400*time.Millisecond), 400*time.Millisecond)
		rep, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		last := rep.Timeline[len(rep.Timeline)-1]
		if !last.AfterWindow || last.Ops["charge"].Count != 1 {
			t.Errorf("run %d: the timeline's last entry %+v: want the worker's last charge, after the window", i, last)
		}
		checkTimelineAddsUp(t, rep)
	}
}

// TestWebhookSinkBooksCloseWithItsReport: the receiver keeps serving while
// the report is made (an interrupted run does not wait at all). A
// notification arriving after the report had counted its charge
// undelivered was recorded too, as a success of the webhook row: one
// charge counted both delivered and undelivered, and the row's count
// disagreed with delivered.
func TestWebhookSinkBooksCloseWithItsReport(t *testing.T) {
	st := newStats(1)
	t0 := time.Now()
	st.setWindow(t0, t0.Add(time.Second))
	s := &webhookSink{pending: map[string]*pendingHook{}, rec: st.shards[0], warm: st.warm[0]}
	s.expect("a", t0, true)
	r := s.report(t0, time.Second)
	s.notified("a", "authorized", true, t0.Add(1500*time.Millisecond), time.Time{}) // while the report is made
	o := st.merge().ops["webhook"]
	if r.Undelivered != 1 || r.Delivered != 0 || o.hist.TotalCount() != int64(r.Delivered) || o.errors != 1 {
		t.Errorf("webhooks %+v; the webhook row has %d delivered and %d errors: want 0 and the 1 undelivered",
			*r, o.hist.TotalCount(), o.errors)
	}
}

// TestWebhookBadSignatureInTheWarmupIsNotAnError: the warmup is
// unrecorded, but a notification failing verification during it was
// counted in the measured errors (webhook row, errors.other) like one of
// the window's. The webhooks section still counts every one.
func TestWebhookBadSignatureInTheWarmupIsNotAnError(t *testing.T) {
	st := newStats(1)
	t0 := time.Now()
	st.setWindow(t0, t0.Add(time.Second))
	s := &webhookSink{pending: map[string]*pendingHook{}, rec: st.shards[0], warm: st.warm[0]}
	s.expect("w", t0.Add(-200*time.Millisecond), false)
	s.notified("w", "authorized", false, t0.Add(-100*time.Millisecond), time.Time{}) // in the warmup
	s.expect("a", t0.Add(100*time.Millisecond), true)
	s.notified("a", "authorized", false, t0.Add(200*time.Millisecond), time.Time{}) // in the window
	r := s.report(t0, time.Second)
	m := st.merge()
	if r.BadSignature != 2 || m.other["webhook_bad_signature"] != 1 || m.ops["webhook"].errors != 1 {
		t.Errorf("bad signatures: %d in the webhooks section, %d in the errors, %d on the webhook row; want 2, 1, 1",
			r.BadSignature, m.other["webhook_bad_signature"], m.ops["webhook"].errors)
	}
}

// TestTimelineSecondsGoByWhenOperationsEnded: a cut of the timeline that
// comes late (its timer on a busy machine) took what ended after its
// second into it; the README says each goes by the second it ended in.
func TestTimelineSecondsGoByWhenOperationsEnded(t *testing.T) {
	st := newStats(2)
	t0 := time.Now().Add(-1100 * time.Millisecond)
	st.setWindow(t0, t0.Add(2*time.Second))
	st.shards[0].okAt("charge", time.Millisecond, t0.Add(500*time.Millisecond))
	st.shards[1].okAt("charge", time.Millisecond, t0.Add(1050*time.Millisecond)) // in second 1, before the late cut
	st.shards[1].failKind("charge", "timeout")                                   // now: in second 1
	sec0 := st.cut(0)
	st.shards[0].okAt("charge", time.Millisecond, t0.Add(1500*time.Millisecond))
	sec1 := st.cut(1)
	if sec0["charge"].Count != 1 || sec0["charge"].Errors != 0 || sec1["charge"].Count != 2 || sec1["charge"].Errors != 1 {
		t.Errorf("second 0 %+v, second 1 %+v: want 1 charge, then 2 and the error", sec0["charge"], sec1["charge"])
	}
}
