// Package deploy_test checks the deployment files beside it against the
// real binaries: the dashboard and alert rules against the metrics a node
// exports, the Dockerfile, compose file and systemd unit against the flags
// gatewayd takes. docs/operations.md says how to use them.
package deploy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/paygate/gateway/node/nodetest"
)

func TestMain(m *testing.M) { os.Exit(nodetest.Run(m)) }

// plannedMetrics are names the dashboard or the alert rules use that no node
// exports yet, each with the work that will export it. The test fails when a
// planned name appears on /metrics (take it off this list) and when nothing
// refers to it any more, so the list says exactly what is missing.
var plannedMetrics = map[string]string{}

// prometheusOwn are series Prometheus makes itself for every target.
var prometheusOwn = map[string]bool{"up": true}

// Every metric the dashboard and the alert rules name is one a node
// exports (or one of the few planned above): a renamed metric breaks this
// test, not an operator's pager at night.
func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	refs := map[string][]string{} // metric → where it is used
	for _, q := range dashboardQueries(t) {
		for _, name := range metricNames(q.expr) {
			refs[name] = append(refs[name], "deploy/grafana/gateway.json: "+q.where)
		}
	}
	for _, r := range alertRules(t) {
		for _, name := range metricNames(r.Expr) {
			refs[name] = append(refs[name], "deploy/prometheus/alerts.yaml: "+r.Alert)
		}
	}
	if len(refs) < 20 {
		t.Fatalf("found only %d metric names in the dashboard and the rules: %v", len(refs), refs)
	}

	// A node that has answered a merchant request, so the request
	// families (made on first use) are on its page.
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 100)
	if r := m.Post(t, "status", map[string]any{"order_id": "no-such-order"}); r.Status != 404 {
		t.Fatalf("status of an unknown order: %d %s", r.Status, r.Body)
	}
	exported := nodetest.SampleNames(n.Metrics(t))

	var names []string
	for name := range refs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !exported[name] && !prometheusOwn[name] && plannedMetrics[name] == "" {
			t.Errorf("%s is not on a node's /metrics; used by %v", name, refs[name])
		}
	}
	for name, by := range plannedMetrics {
		if exported[name] {
			t.Errorf("%s, planned for %s, is now exported: take it off plannedMetrics", name, by)
		}
		if len(refs[name]) == 0 {
			t.Errorf("%s is planned but nothing uses it: take it off plannedMetrics", name)
		}
	}
}

type query struct{ where, expr string }

// dashboardQueries reads every PromQL query of the dashboard: the panels'
// targets and the template variables' label_values.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	data, err := os.ReadFile("grafana/gateway.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("grafana/gateway.json: %v", err)
	}
	if dash.UID == "" {
		t.Error("the dashboard has no uid: every import would make a new copy")
	}
	var out []query
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, query{p.Title, tg.Expr})
		}
	}
	labelValues := regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,`)
	for _, v := range dash.Templating.List {
		if m := labelValues.FindStringSubmatch(v.Definition); m != nil {
			out = append(out, query{"variable " + v.Name, m[1]})
		}
	}
	return out
}

type alertRule struct {
	Alert string `yaml:"alert"`
	Expr  string `yaml:"expr"`
}

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	data, err := os.ReadFile("prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("prometheus/alerts.yaml: %v", err)
	}
	var out []alertRule
	for _, g := range doc.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

var (
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promMatchers = regexp.MustCompile(`\{[^{}]*\}`)
	promRanges   = regexp.MustCompile(`\[[^\[\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords = map[string]bool{
		"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true,
		"on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true,
	}
)

// metricNames lists the metric names a PromQL expression selects: the
// identifiers left once strings, label matchers, ranges and grouping
// clauses are taken out, other than functions, aggregations (followed by
// a parenthesis) and keywords.
func metricNames(expr string) []string {
	e := promStrings.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, " ")
	e = promRanges.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range promIdent.FindAllStringIndex(e, -1) {
		if loc[0] > 0 && strings.ContainsRune("0123456789.$", rune(e[loc[0]-1])) {
			continue // a number's exponent or unit, or a dashboard variable
		}
		name := e[loc[0]:loc[1]]
		if promKeywords[strings.ToLower(name)] || strings.HasPrefix(strings.TrimLeft(e[loc[1]:], " \n\t"), "(") {
			continue
		}
		out = append(out, name)
	}
	return out
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string]string{
		`max by (job) (gateway_raft_has_leader) == 0`:                                                           "gateway_raft_has_leader",
		`max by (job) (a_commit) - on (job) group_right b_applied{job="$job"} > 1000`:                           "a_commit b_applied",
		`histogram_quantile(0.99, sum by (op, le) (rate(x_bucket{code!~"2..",op="charge"}[$__rate_interval])))`: "x_bucket",
		`predict_linear(free[6h], 24 * 3600) < 0 and free < 0.2 * size offset 5m`:                               "free free size",
		`sum(rate(c_total{result="error"}[5m]) or rate(c_total{code="6.02"}[5m])) > 1e3`:                        "c_total c_total",
		`time() - max(up)`: "up",
	} {
		if got := strings.Join(metricNames(expr), " "); got != want {
			t.Errorf("metricNames(%s) = %q, want %q", expr, got, want)
		}
	}
}

// The rules are valid to Prometheus, and they fire on what they are meant
// for and stay quiet on a healthy cluster (prometheus/alerts_test.yaml, run
// by promtool test rules); prometheus.yaml, the compose file's Prometheus
// configuration, is valid too.
func TestAlertRules(t *testing.T) {
	promtool := nodetest.Tool(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yaml"},
		{"test", "rules", "alerts_test.yaml"},
		{"check", "config", "prometheus.yaml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
