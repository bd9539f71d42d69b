package node

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/paygate/gateway/bench"
	"github.com/paygate/gateway/node/nodetest"
)

// BenchmarkChargeInProcess drives b.N signed charges (64 workers, the
// harness's own client) through one in-process node: HTTP, the order actor,
// Raft, the FSM and Pebble, the acquirer's answer included. It is the
// yardstick for work per charge that no single package's benchmark sees.
// allocs/op and B/op count the whole process, the harness's client too (a
// constant share), and are the figures to compare; ns/op on this shared
// two-core machine is indicative only: compare runs back to back.
// cpu-ns/op is the process's CPU time (user + system) per charge, the
// harness's included.
func BenchmarkChargeInProcess(b *testing.B) { benchInProcess(b, bench.WorkloadCharge) }

// BenchmarkChargeCallAcquirer is BenchmarkChargeInProcess with the acquirer
// a function call (callAcquirer) instead of the link to the in-process host:
// the two back to back are the link's cost on today's code (issue 35's
// bound; docs/acquirer.md, "What the link costs").
func BenchmarkChargeCallAcquirer(b *testing.B) {
	benchInProcess(b, bench.WorkloadCharge, withCallAcquirer)
}

// BenchmarkLifecycleInProcess and BenchmarkLifecycleCallAcquirer are the
// same pair for the lifecycle workload (charge, poll until authorized,
// settle, refund half, status: b.N lifecycles), whose capture and refund
// are acquirer movements too.
func BenchmarkLifecycleInProcess(b *testing.B) { benchInProcess(b, bench.WorkloadLifecycle) }

func BenchmarkLifecycleCallAcquirer(b *testing.B) {
	benchInProcess(b, bench.WorkloadLifecycle, withCallAcquirer)
}

func withCallAcquirer(c *Config) { c.acquirer = &callAcquirer{} }

// BenchmarkChargeAcquirerd and BenchmarkLifecycleAcquirerd run the link to
// the sandbox host in its own process (cmd/acquirerd, over loopback TCP),
// as a node runs against an acquirer in production: cpu-ns/op is then the
// node's CPU (and the harness's) without the host's, whose decisions and
// ledger (an fsync a movement) are the acquirer's work, not the gateway's.
// Against the *CallAcquirer pair it is the link's cost to the node
// (issue 35's bound; docs/acquirer.md, "What the link costs").
func BenchmarkChargeAcquirerd(b *testing.B) {
	benchInProcess(b, bench.WorkloadCharge, withAcquirerd(b))
}

func BenchmarkLifecycleAcquirerd(b *testing.B) {
	benchInProcess(b, bench.WorkloadLifecycle, withAcquirerd(b))
}

func withAcquirerd(b *testing.B) func(*Config) {
	host := nodetest.StartAcquirerd(b)
	return func(c *Config) { c.AcquirerAddr = host.Listen }
}

// NODE_BENCH_RATE=R runs these benchmarks' harness as an open loop of R
// iterations (charges, lifecycles) a second instead of 64 workers each
// sending its next request as soon as the last is answered. A closed loop
// measures CPU per request at each variant's own saturation, and a variant
// whose answers take longer (a movement waits for the acquirer's durable
// answer) then runs at a lower rate, where the node's per-entry costs
// (fsync, Raft, FSM batch) are shared by fewer requests. At one rate both
// variants carry the same load, so cpu-ns/op compares the work each request
// costs (docs/acquirer.md, "What the link costs", round 9):
//
//	NODE_BENCH_RATE=400 go test -run XXX -bench '^BenchmarkLifecycle(CallAcquirer|Acquirerd)$' -benchtime 2000x ./node/
func benchRate(b *testing.B) float64 {
	v := os.Getenv("NODE_BENCH_RATE")
	if v == "" {
		return 0
	}
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || r <= 0 {
		b.Fatalf("NODE_BENCH_RATE=%q: want a positive number of iterations a second", v)
	}
	return r
}

func benchInProcess(b *testing.B, workload string, options ...func(*Config)) {
	n := startInProcess(b, options...)
	defer n.Shutdown(context.Background())
	key, secret := createBenchMerchant(b, n)
	cfg := bench.Config{
		Targets: []string{"http://" + n.Addr()}, MerchantKey: key, MerchantSecret: secret,
		Workload: workload, Concurrency: 64, Duration: time.Hour,
		Requests: int64(b.N), Timeout: 10 * time.Second, Rate: benchRate(b),
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu, applied, appends := processCPU(), n.raft.FSM.AppliedIndex(), metricCount(b, "gateway_raft_log_append_seconds_count")
	commands := metricCount(b, "gateway_raft_entry_commands_sum")
	rep, err := bench.Run(context.Background(), cfg)
	cpu, applied = processCPU()-cpu, n.raft.FSM.AppliedIndex()-applied
	appends = metricCount(b, "gateway_raft_log_append_seconds_count") - appends
	commands = metricCount(b, "gateway_raft_entry_commands_sum") - commands
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if rep.Errors.Total != 0 {
		b.Fatalf("%d requests failed: %+v", rep.Errors.Total, rep.Errors)
	}
	if ol := rep.OpenLoop; ol != nil {
		if ol.Dropped != 0 {
			b.Fatalf("%d arrivals found the queue full: the node does not keep up with NODE_BENCH_RATE=%g", ol.Dropped, cfg.Rate)
		}
		// Iterations sent late: a share well above 0 says the rate is
		// past what the variant sustains, and the run is a closed loop
		// again in all but name.
		b.ReportMetric(float64(ol.Late)/float64(b.N), "late/op")
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	// Raft log entries a request or lifecycle took: commands, and the
	// batches the FSM applied them in, are where a slower answer shows.
	b.ReportMetric(float64(applied)/float64(b.N), "log-entries/op")
	b.ReportMetric(float64(appends)/float64(b.N), "log-appends/op")
	b.ReportMetric(commands/float64(b.N), "commands/op")
	if workload == bench.WorkloadLifecycle {
		// Status polls until "authorized": more of them when the
		// authorisation is slower, each a request of its own.
		b.ReportMetric(float64(rep.Ops["lifecycle.poll"].Count)/float64(b.N), "polls/op")
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.NumGC), "GCs")
}

// metricCount is the value of one sample of this process's metrics (a
// histogram's _count, say), 0 if there is none.
func metricCount(tb testing.TB, sample string) float64 {
	tb.Helper()
	var page bytes.Buffer
	metrics.WritePrometheus(&page, false)
	for line := range strings.Lines(page.String()) {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				tb.Fatalf("%s: %v", sample, err)
			}
			return f
		}
	}
	return 0
}

// processCPU is the process's CPU time so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// createBenchMerchant makes a merchant with a rate limit no benchmark
// reaches (the development merchant's is 1,000/s) and returns its API keys.
func createBenchMerchant(b testing.TB, n *Node) (key, secret string) {
	req, _ := http.NewRequest("POST", "http://"+n.Addr()+"/admin/v1/merchants",
		strings.NewReader(`{"name":"bench","rate_limit_rps":1000000}`))
	req.Header.Set("Authorization", "Bearer "+DevAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var m struct {
		API struct {
			PublicKey string `json:"public_key"`
			SecretKey string `json:"secret_key"`
		} `json:"api"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.API.PublicKey == "" {
		b.Fatalf("creating the merchant: %d %s (%v)", resp.StatusCode, body, err)
	}
	return m.API.PublicKey, m.API.SecretKey
}
