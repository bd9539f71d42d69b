package bench_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/paygate/gateway/bench"
	"github.com/paygate/gateway/node/nodetest"
)

// Every workload runs for a moment against the real gatewayd, spawned by
// the harness itself (what `gatewaybench run --spawn 1` does): a smoke run
// with no thresholds, to keep the harness and the node in step.
func TestWorkloadsAgainstRealGatewayd(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns real nodes")
	}
	bin := nodetest.Binary(t)
	for _, w := range bench.Workloads {
		t.Run(w, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), w+".json")
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			args := []string{"run", "--spawn", "1", "--gatewayd", bin, "--workload", w,
				"--concurrency", "4", "--duration", "1s", "--orders", "20", "--webhook-wait", "5s", "--json", out}
			if code := bench.Main(ctx, args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
			}
			reports, err := bench.LoadReports(out)
			if err != nil || len(reports) != 1 {
				t.Fatalf("report: %v %d", err, len(reports))
			}
			r := reports[0]
			var count int64
			for _, op := range r.Ops {
				count += op.Count
			}
			if count == 0 {
				t.Fatalf("no operation completed:\n%s", stdout.String())
			}
			if r.Errors.Total != 0 {
				t.Fatalf("errors against the real node: %+v\n%s", r.Errors, stdout.String())
			}
			if w == bench.WorkloadWebhooks && (r.Webhooks == nil || r.Webhooks.Delivered == 0 || r.Webhooks.Duplicates != 0) {
				t.Fatalf("webhooks: %+v", r.Webhooks)
			}
		})
	}
}

// A charge run records its order ids; a status run reads exactly those.
func TestRecordedOrdersFeedStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns real nodes")
	}
	bin := nodetest.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := bench.Spawn(ctx, bench.SpawnOptions{Binary: bin, Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := c.CreateMerchant(ctx, "bench")
	if err != nil {
		t.Fatal(err)
	}
	ids := filepath.Join(t.TempDir(), "ids.txt")
	base := []string{"--target", c.Targets()[0], "--merchant-key", m.API.PublicKey, "--merchant-secret", m.API.SecretKey,
		"--concurrency", "2", "--json", filepath.Join(t.TempDir(), "r.json")}
	var out bytes.Buffer
	if code := bench.Main(ctx, append([]string{"run", "--workload", "charge", "--requests", "30", "--record-orders", ids}, base...), &out, &out); code != 0 {
		t.Fatalf("charge run: %s", out.String())
	}
	if code := bench.Main(ctx, append([]string{"run", "--workload", "status", "--duration", "1s", "--pool-file", ids}, base...), &out, &out); code != 0 {
		t.Fatalf("status run: %s", out.String())
	}
	if !bytes.Contains(out.Bytes(), []byte("order pool: 30 orders")) {
		t.Fatalf("status did not read the 30 recorded orders:\n%s", out.String())
	}
}
