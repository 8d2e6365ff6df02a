package metrics_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/jejakhq/jejak/internal/metrics"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

var metricRef = regexp.MustCompile(`\bjejak_[a-z0-9_]+`)

// TestPrometheusRulesNameExportedMetrics parses the shipped rule file and
// checks that every metric it names is one /metrics exports (histogram
// series by their family), so a renamed metric cannot silently break an
// operator's alerts.
func TestPrometheusRulesNameExportedMetrics(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../deploy/prometheus/jejak-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("parse rules: %v", err)
	}
	reg := metrics.New(metrics.Options{Snapshot: nil, Pools: nil})
	names := map[string]bool{}
	for _, n := range reg.Names() {
		names[n] = true
	}
	// The snapshot and pool collectors are described whatever the options.
	for _, must := range []string{"jejak_jobs_enqueued_total", "jejak_jobs_finished_total", "jejak_job_wait_seconds",
		"jejak_job_run_seconds", "jejak_jobs", "jejak_queue_oldest_pending_age_seconds", "jejak_outbox_messages",
		"jejak_outbox_oldest_pending_age_seconds", "jejak_webhook_deliveries_total", "jejak_db_pool_connections"} {
		if !names[must] {
			t.Errorf("metric %s is not registered", must)
		}
	}
	rules := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			rules++
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" || r.Annotations["summary"] == "" || r.Annotations["runbook"] == "" {
				t.Errorf("rule %q lacks alert, expr, summary or runbook", r.Alert)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("rule %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			refs := metricRef.FindAllString(r.Expr, -1)
			if len(refs) == 0 {
				t.Errorf("rule %s names no Jejak metric", r.Alert)
			}
			for _, m := range refs {
				base := m
				for _, suf := range []string{"_bucket", "_count", "_sum"} {
					if !names[base] && strings.HasSuffix(base, suf) {
						base = strings.TrimSuffix(base, suf)
					}
				}
				if !names[base] {
					t.Errorf("rule %s names %s, which /metrics does not export", r.Alert, m)
				}
			}
		}
	}
	// The Grafana dashboard beside the rules names exported metrics too.
	dash, err := os.ReadFile("../../deploy/prometheus/jejak-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metricRef.FindAllString(string(dash), -1) {
		base := m
		for _, suf := range []string{"_bucket", "_count", "_sum"} {
			if !names[base] && strings.HasSuffix(base, suf) {
				base = strings.TrimSuffix(base, suf)
			}
		}
		if !names[base] {
			t.Errorf("dashboard names %s, which /metrics does not export", m)
		}
	}
	if rules < 7 {
		t.Errorf("only %d rules; every in-process rule needs its PromQL twin", rules)
	}
}
