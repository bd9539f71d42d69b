package node_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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
}
