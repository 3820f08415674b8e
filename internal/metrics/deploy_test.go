package metrics_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/metrics"
	"github.com/rmq-go/rmq/internal/server"
)

// The monitoring files of deploy/ must name only series the broker
// exports; these tests read them and compare.

const (
	dashboardFile = "../../deploy/grafana/rmq-dashboard.json"
	alertsFile    = "../../deploy/prometheus/rmq-alerts.yaml"
)

// exportedNames returns the metric names a broker's /metrics can carry:
// every series the collector describes (some appear only with plugins,
// a replicated set or the NATS bridge), and what a running broker's
// endpoint serves besides (the client library's go_* and process_*).
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	c := metrics.New(metrics.Options{Source: func() (*store.Store, *broker.Broker) { return nil, nil }})
	ch := make(chan *prometheus.Desc, 256)
	c.Describe(ch)
	close(ch)
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		names[m[1]] = true
	}
	env := brokertest.Start(t, func(c *server.Config) { c.HTTPListen = "127.0.0.1:0" })
	fams, _ := scrape(t, env)
	for name := range fams {
		names[name] = true
	}
	// The disk gauges the dashboard and the rules compare.
	used, n := value(fams, "rmq_store_disk_used_ratio")
	high, m := value(fams, "rmq_store_disk_high_water_ratio")
	if n != 1 || m != 1 || used <= 0 || used > 1 || high != store.DefaultDiskHighWater {
		t.Fatalf("rmq_store_disk_used_ratio %v (%d series), rmq_store_disk_high_water_ratio %v (%d series)", used, n, high, m)
	}
	return names
}

// metricRef finds metric names in a PromQL expression: the names the
// broker's series use (rmq_, go_, process_).
var metricRef = regexp.MustCompile(`\b((?:rmq|go|process)_[a-zA-Z0-9_]+)\b`)

// unknownNames returns the metric names expr uses that the broker does
// not export; a histogram's _bucket, _sum and _count count as its name.
func unknownNames(expr string, names map[string]bool) []string {
	var out []string
	for _, m := range metricRef.FindAllStringSubmatch(expr, -1) {
		n := m[1]
		base := n
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			base = strings.TrimSuffix(base, suf)
		}
		if !names[n] && !names[base] {
			out = append(out, n)
		}
	}
	return out
}

type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestMonitoringNamesExported checks every expression of the Grafana
// dashboard and of the alert rules against the names the broker
// exports, and that the dashboard and the rules cover what an operator
// watches.
func TestMonitoringNamesExported(t *testing.T) {
	names := exportedNames(t)

	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var dashExprs []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			dashExprs = append(dashExprs, tg.Expr)
			if bad := unknownNames(tg.Expr, names); len(bad) > 0 {
				t.Errorf("dashboard panel %q (%s) uses %v, which the broker does not export", p.Title, tg.RefID, bad)
			}
		}
	}
	all := strings.Join(dashExprs, "\n")
	for _, want := range []string{
		"rmq_topic_messages_in_total", "rmq_topic_messages_out_total", "rmq_send_duration_seconds_bucket",
		"rmq_pull_duration_seconds_bucket", "rmq_store_fsync_duration_seconds_bucket", "rmq_store_disk_used_ratio",
		"rmq_store_disk_high_water_ratio", "rmq_consumer_lag_messages", "rmq_cluster_leader", "rmq_cluster_term",
		"rmq_dead_letters_total", "rmq_plugin_errors_total", "rmq_remoting_queued_response_bytes",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the dashboard does not show %s", want)
		}
	}

	data, err = os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var alerts []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %q: an alert needs a name, an expression, a severity and a summary", r.Alert)
			}
			if bad := unknownNames(r.Expr, names); len(bad) > 0 {
				t.Errorf("alert %s uses %v, which the broker does not export", r.Alert, bad)
			}
		}
	}
	for _, want := range []string{"RmqConsumerLagGrowing", "RmqDiskPastHighWater", "RmqFsyncP99High", "RmqLeaderChanges", "RmqDeadLettersGrowing", "RmqPluginErrors"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s in %s", want, alertsFile)
		}
	}
}

// TestMonitoringPromtool runs promtool check rules on the alert rules, and
// on the dashboard's expressions made into recording rules, so that
// every query parses as PromQL.
func TestMonitoringPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil && os.Getenv("RMQ_REQUIRE_PROMTOOL") == "1" {
		t.Fatal("RMQ_REQUIRE_PROMTOOL=1, but promtool is not on PATH")
	}
	if err != nil {
		t.Skip("promtool is not installed (Debian package prometheus): the rules' and dashboard's PromQL is not parsed")
	}
	if out, err := exec.Command(promtool, "check", "rules", alertsFile).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", alertsFile, err, out)
	}

	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	// Grafana's variables, as Grafana would fill them in.
	vars := strings.NewReplacer("$__rate_interval", "1m", "$instance", ".*")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			n++
			expr, _ := json.Marshal(vars.Replace(tg.Expr)) // a JSON string is a YAML string
			fmt.Fprintf(&b, "      - record: dashboard:panel_%d\n        expr: %s\n", n, expr)
		}
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("the dashboard's queries do not parse: %v\n%s", err, out)
	}
}
