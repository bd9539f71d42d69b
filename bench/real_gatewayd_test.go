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
