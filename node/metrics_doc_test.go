package node_test

import (
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/node"
	"github.com/paygate/gateway/node/nodetest"
)

// The operator's guide (docs/cluster.md, "Metrics") and a node's /metrics
// list the same gateway_ metrics, once the node has taken a charge and
// delivered its notification: a renamed, removed or undocumented metric
// fails here, not on an operator's dashboard.
func TestDocumentedMetricsExist(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "cluster.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(doc), "\n## Metrics\n")
	if !found {
		t.Fatal("docs/cluster.md has no Metrics section")
	}
	section, _, _ = strings.Cut(section, "\n## ") // up to the next section
	var documented []string
	for _, m := range regexp.MustCompile("`(gateway_[a-z_]+)").FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}
	if len(documented) < 10 {
		t.Fatalf("found only %d metric names in the Metrics section: %v", len(documented), documented)
	}

	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 1000)
	hooks := newReceiver(t)
	chargeWithCallback(m, t, hooks.URL())
	hooks.waitCalls(1, 10*time.Second)

	resp, err := http.Get(n.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	// A histogram shows as name_bucket, name_sum and name_count.
	exposed := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		if !strings.HasPrefix(name, "gateway_") {
			continue
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			name = strings.TrimSuffix(name, suffix)
		}
		exposed[name] = true
	}
	isDocumented := map[string]bool{}
	for _, name := range documented {
		isDocumented[name] = true
		if !exposed[name] {
			t.Errorf("docs/cluster.md lists %s, which /metrics does not expose", name)
		}
	}
	for name := range exposed {
		if !isDocumented[name] {
			t.Errorf("/metrics exposes %s, which docs/cluster.md does not list", name)
		}
	}

	// Every family says its type, so a scraper knows a counter from a
	// gauge, and every histogram is a Prometheus one (le buckets):
	// histogram_quantile cannot read VictoriaMetrics' vmrange buckets.
	typed := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (gateway_\w+) (\w+)$`).FindAllStringSubmatch(string(body), -1) {
		typed[m[1]] = m[2]
	}
	for name := range exposed {
		if typed[name] == "" {
			t.Errorf("/metrics has no # TYPE line for %s", name)
		}
	}
	if strings.Contains(string(body), "vmrange=") {
		t.Errorf("/metrics has a histogram with vmrange buckets, which Prometheus cannot use:\n%s",
			regexp.MustCompile(`(?m)^.*vmrange=.*$`).FindString(string(body)))
	}
	lastRetry := node.DefaultRetryDelays[len(node.DefaultRetryDelays)-1]
	for _, h := range []struct {
		name     string
		min, max float64 // the first bucket at most min, the last at least max
	}{
		// From 1 command an entry to past the collector's cap (256).
		{"gateway_raft_entry_commands", 1, 256},
		// Fine under a second for a first attempt, and past the last
		// retry so retried deliveries do not all land in +Inf.
		{"gateway_webhook_delivery_seconds", 0.01, lastRetry.Seconds()},
	} {
		if typed[h.name] != "histogram" {
			t.Errorf("%s is typed %q, want histogram", h.name, typed[h.name])
		}
		bounds := bucketBounds(string(body), h.name)
		if len(bounds) == 0 || bounds[0] > h.min || bounds[len(bounds)-1] < h.max {
			t.Errorf("%s buckets %v: want the first at most %g and the last at least %g", h.name, bounds, h.min, h.max)
		}
	}
	// Each default retry offset is a bound: deliveries on the k-th retry
	// are those between the k-th and the next.
	delivery := map[float64]bool{}
	for _, b := range bucketBounds(string(body), "gateway_webhook_delivery_seconds") {
		delivery[b] = true
	}
	for _, d := range node.DefaultRetryDelays {
		if !delivery[d.Seconds()] {
			t.Errorf("gateway_webhook_delivery_seconds has no bucket at the retry offset %s", d)
		}
	}
}

// bucketBounds lists a histogram's finite le bounds as /metrics shows them.
func bucketBounds(body, name string) []float64 {
	var out []float64
	re := regexp.MustCompile(`(?m)^` + name + `_bucket\{le="([^"]+)"\} `)
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		if v, err := strconv.ParseFloat(m[1], 64); err == nil && !math.IsInf(v, 1) {
			out = append(out, v)
		}
	}
	return out
}
