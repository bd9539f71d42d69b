package node

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/bench"
)

// BenchmarkChargeInProcess drives b.N signed charges (64 workers, the
// harness's own client) through one in-process node: HTTP, the order actor,
// Raft, the FSM and Pebble, the acquirer's answer included. It is the
// yardstick for work per charge that no single package's benchmark sees.
// allocs/op and B/op count the whole process, the harness's client too (a
// constant share), and are the figures to compare; ns/op on this shared
// two-core machine is indicative only: compare runs back to back.
func BenchmarkChargeInProcess(b *testing.B) {
	n := startInProcess(b)
	defer n.Shutdown(context.Background())
	key, secret := createBenchMerchant(b, n)
	cfg := bench.Config{
		Targets: []string{"http://" + n.Addr()}, MerchantKey: key, MerchantSecret: secret,
		Workload: bench.WorkloadCharge, Concurrency: 64, Duration: time.Hour,
		Requests: int64(b.N), Timeout: 10 * time.Second,
	}
	b.ReportAllocs()
	b.ResetTimer()
	rep, err := bench.Run(context.Background(), cfg)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if rep.Errors.Total != 0 {
		b.Fatalf("%d charges failed: %+v", rep.Errors.Total, rep.Errors)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.NumGC), "GCs")
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
