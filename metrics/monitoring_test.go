package metrics

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ironflow/ironflow/workflows"
)

// monitoring/ holds the alert rules, their fixture tests and the Grafana
// dashboard operators load (docs/metrics.md).
const (
	alertRules     = "../monitoring/alerts.yml"
	alertRuleTests = "../monitoring/alerts_test.yml"
	dashboard      = "../monitoring/grafana-dashboard.json"
)

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("SKIPPED: promtool is missing: scripts/install-deps.sh test installs Debian's prometheus")
	}
	return p
}

// promtool check rules: every rule parses and its expression is valid.
func TestAlertRulesPassPromtoolCheck(t *testing.T) {
	if out, err := exec.Command(promtool(t), "check", "rules", alertRules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

// promtool test rules: each alert fires on its fixture series, with the
// labels and text an operator reads, and not before its time.
func TestAlertRulesFireOnTheirFixtures(t *testing.T) {
	out, err := exec.Command(promtool(t), "test", "rules", alertRuleTests).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	// Every rule has a fixture.
	rules, _ := os.ReadFile(alertRules)
	tests, _ := os.ReadFile(alertRuleTests)
	for _, m := range regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllStringSubmatch(string(rules), -1) {
		if !strings.Contains(string(tests), "alertname: "+m[1]+"\n") {
			t.Errorf("alert %s has no test in %s", m[1], alertRuleTests)
		}
	}
}

// knownNames are the metric names ironflow exports: this package's, the
// node collector's and the workflows'.
func knownNames() map[string]bool {
	names := map[string]bool{}
	ch := make(chan *prometheus.Desc, 100)
	go func() {
		for _, c := range append(ironflowCollectors, &NodeCollector{}) {
			c.Describe(ch)
		}
		close(ch)
	}()
	for d := range ch {
		names[descName(d)] = true
	}
	for n := range workflows.MetricHelp {
		names[n] = true
	}
	return names
}

// descName reads the fully-qualified name from a Desc's string form.
func descName(d *prometheus.Desc) string {
	s := d.String()
	const key = `fqName: "`
	i := strings.Index(s, key)
	if i < 0 {
		return ""
	}
	s = s[i+len(key):]
	return s[:strings.IndexByte(s, '"')]
}

var ironflowName = regexp.MustCompile(`\bironflow_[a-z_]+`)

// usedNames are the ironflow_* series an expression reads, a histogram's
// _bucket, _sum and _count read as the histogram.
func usedNames(expr string) []string {
	var out []string
	for _, n := range ironflowName.FindAllString(expr, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if strings.HasSuffix(n, suffix) && strings.HasSuffix(strings.TrimSuffix(n, suffix), "_seconds") {
				n = strings.TrimSuffix(n, suffix)
			}
		}
		out = append(out, n)
	}
	return out
}

// The alerts and the dashboard read only series ironflow exports: a
// renamed metric fails here, not silently on an operator's screen.
func TestAlertsAndDashboardReadExportedSeries(t *testing.T) {
	known := knownNames()
	rules, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range usedNames(string(rules)) {
		if !known[n] {
			t.Errorf("%s reads %s, which ironflow does not export", alertRules, n)
		}
	}
	raw, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	if len(d.Panels) == 0 {
		t.Fatalf("%s has no panels", dashboard)
	}
	byVendor := false
	for _, p := range d.Panels {
		if p.Title == "BMC errors by vendor" {
			for _, tg := range p.Targets {
				byVendor = byVendor || strings.Contains(tg.Expr, "ironflow_bmc_calls_total") && strings.Contains(tg.Expr, "by (vendor")
			}
		}
		for _, tg := range p.Targets {
			for _, n := range usedNames(tg.Expr) {
				if !known[n] {
					t.Errorf("dashboard panel %q reads %s, which ironflow does not export", p.Title, n)
				}
			}
		}
	}
	if !byVendor {
		t.Error(`the dashboard has no panel "BMC errors by vendor" summing ironflow_bmc_calls_total by vendor`)
	}
}
