package helm_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// ruleGroups is a Prometheus rule file.
type ruleGroups struct {
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

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	UID    string `json:"uid"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func readRules(t *testing.T) ruleGroups {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "files", "prometheus-rules.yaml"))
	require.NoError(t, err)
	var r ruleGroups
	require.NoError(t, yaml.Unmarshal(b, &r))
	return r
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "files", "grafana-dashboard.json"))
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(b, &d))
	return d
}

var metricName = regexp.MustCompile(`\bax_[a-z_]+\b`)

// definedMetrics returns the names of the metrics ax exports, read from the
// sources that define them.
func definedMetrics(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, glob := range []string{"../../jobs/*.go", "../../api/*.go", "../../service/metrics/*.go"} {
		files, err := filepath.Glob(glob)
		require.NoError(t, err)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, m := range regexp.MustCompile(`"(ax_[a-z_]+)"`).FindAllStringSubmatch(string(b), -1) {
				names = append(names, m[1])
			}
		}
	}
	require.Contains(t, names, "ax_missed_slots_total", "found the metric definitions")
	return names
}

// TestMonitoringNamesMetricsAxExports: every metric the alert rules and the
// dashboard query is one ax exports (a histogram's _bucket, _sum and
// _count series included), so neither silently shows nothing after a
// rename; every rule has a severity and a summary, every panel a query.
func TestMonitoringNamesMetricsAxExports(t *testing.T) {
	t.Parallel()
	defined := definedMetrics(t)
	exported := func(name string) bool {
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(defined, base) {
				return true
			}
		}
		return false
	}
	var exprs []string
	rules := readRules(t)
	require.Len(t, rules.Groups, 1)
	var alerts []string
	for _, r := range rules.Groups[0].Rules {
		alerts = append(alerts, r.Alert)
		require.NotEmpty(t, r.Labels["severity"], r.Alert)
		require.NotEmpty(t, r.Annotations["summary"], r.Alert)
		exprs = append(exprs, r.Expr)
	}
	sort.Strings(alerts)
	require.Equal(t, []string{
		"AxAPIErrors", "AxDeliveryBacklog", "AxDeliveryBatchFailures", "AxFiringLate",
		"AxMissedSlots", "AxReconciledExecutions", "AxReplicaDeclaredDead", "AxSLAMissed",
	}, alerts)
	d := readDashboard(t)
	require.Equal(t, "ax-overview", d.UID)
	require.NotEmpty(t, d.Panels)
	for _, p := range d.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, e := range exprs {
		names := metricName.FindAllString(e, -1)
		require.NotEmpty(t, names, "%q queries no ax metric", e)
		for _, n := range names {
			require.True(t, exported(n), "%q queries %s, which ax does not export", e, n)
		}
	}
}

// TestMonitoringResources: the rules and the dashboard are optional chart
// resources, off by default; on, they carry the files as they are.
func TestMonitoringResources(t *testing.T) {
	t.Parallel()
	m := render(t)
	require.False(t, m.has("PrometheusRule", "ax"))
	require.False(t, m.has("ConfigMap", "ax-dashboard"))

	m = render(t, "--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.prometheusRule.labels.release=prom",
		"--set", "metrics.grafanaDashboard.enabled=true", "--set", "metrics.grafanaDashboard.namespace=grafana")
	rule := m.get(t, "PrometheusRule", "ax")
	require.Equal(t, "monitoring.coreos.com/v1", rule.APIVersion)
	require.Equal(t, "prom", rule.Metadata.Labels["release"])
	var spec struct {
		Spec ruleGroups `yaml:"spec"`
	}
	require.NoError(t, rule.node.Decode(&spec))
	require.Equal(t, readRules(t), spec.Spec, "the rules as the file has them")

	cm := m.get(t, "ConfigMap", "ax-dashboard")
	require.Equal(t, "1", cm.Metadata.Labels["grafana_dashboard"])
	var data struct {
		Metadata struct {
			Namespace string `yaml:"namespace"`
		} `yaml:"metadata"`
		Data map[string]string `yaml:"data"`
	}
	require.NoError(t, cm.node.Decode(&data))
	require.Equal(t, "grafana", data.Metadata.Namespace)
	var d dashboard
	require.NoError(t, json.Unmarshal([]byte(data.Data["ax.json"]), &d))
	require.Equal(t, readDashboard(t), d)
}
