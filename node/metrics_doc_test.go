package node_test

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/node"
	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/transport/exposition"
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

	body := scrapeBusyNode(t)
	exposed := map[string]bool{}
	for name := range exposedFamilies(body) {
		if strings.HasPrefix(name, "gateway_") {
			exposed[name] = true
		}
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
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (gateway_\w+) (\w+)$`).FindAllStringSubmatch(body, -1) {
		typed[m[1]] = m[2]
	}
	for name := range exposed {
		if typed[name] == "" {
			t.Errorf("/metrics has no # TYPE line for %s", name)
		}
	}
	if strings.Contains(body, "vmrange=") {
		t.Errorf("/metrics has a histogram with vmrange buckets, which Prometheus cannot use:\n%s",
			regexp.MustCompile(`(?m)^.*vmrange=.*$`).FindString(body))
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
		bounds := bucketBounds(body, h.name)
		if len(bounds) == 0 || bounds[0] > h.min || bounds[len(bounds)-1] < h.max {
			t.Errorf("%s buckets %v: want the first at most %g and the last at least %g", h.name, bounds, h.min, h.max)
		}
	}
	// Each default retry offset is a bound: deliveries on the k-th retry
	// are those between the k-th and the next.
	delivery := map[float64]bool{}
	for _, b := range bucketBounds(body, "gateway_webhook_delivery_seconds") {
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

// scrapeBusyNode starts a node, has it take a charge and deliver its
// notification (so the families made on first use exist), and returns its
// /metrics page.
func scrapeBusyNode(t *testing.T) string {
	t.Helper()
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 1000)
	hooks := newReceiver(t)
	chargeWithCallback(m, t, hooks.URL())
	hooks.waitCalls(1, 10*time.Second)
	return n.Metrics(t)
}

// exposedFamilies names the metric families of a /metrics page, a
// histogram's name_bucket, name_sum and name_count as name.
func exposedFamilies(body string) map[string]bool {
	out := map[string]bool{}
	for name := range nodetest.SampleNames(body) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			name = strings.TrimSuffix(name, suffix)
		}
		out[name] = true
	}
	return out
}

// Every family a busy node exposes, the gateway's and the runtime's, has
// help text from transport/exposition's table, and Prometheus' own lint
// (promtool check metrics, from Debian's prometheus package) finds nothing
// to report: no missing help, no counter without _total, no gauge typed as
// a counter.
func TestMetricsLint(t *testing.T) {
	body := scrapeBusyNode(t)
	for name := range exposedFamilies(body) {
		if !exposition.Described(name) {
			t.Errorf("/metrics exposes %s, which transport/exposition/help.go does not describe", name)
		}
	}
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok && !strings.Contains(rest, " ") {
			t.Errorf("no help text: %q", line)
		}
	}
	for _, name := range exposition.Dropped() {
		if exposedFamilies(body)[name] {
			t.Errorf("/metrics shows %s, which the table drops", name)
		}
	}

	promtool := nodetest.Tool(t, "promtool")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
