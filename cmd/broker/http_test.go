package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/internal/server"
)

// TestHTTPFlags checks the HTTP endpoint's settings: on at
// DefaultHTTPListen unless told otherwise, from the file or the flags,
// the flags winning.
func TestHTTPFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broker.yaml")
	if err := os.WriteFile(path, []byte("httpListen: 127.0.0.1:9100\nhttpPprof: true\nmetricsMaxTopics: 50\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args   []string
		listen string
		pprof  bool
	}{
		{nil, server.DefaultHTTPListen, false},
		{[]string{"--http-listen", ""}, "", false},
		{[]string{"--http-listen", "127.0.0.1:0", "--http-pprof"}, "127.0.0.1:0", true},
		{[]string{"--config", path}, "127.0.0.1:9100", true},
		{[]string{"--config", path, "--http-listen", "", "--http-pprof=false"}, "", false},
	} {
		cfg, _, code := brokerConfig(c.args, io.Discard)
		if code != -1 || cfg.HTTPListen != c.listen || cfg.HTTPPprof != c.pprof {
			t.Errorf("%q: exit %d, httpListen %q pprof %v; want %q %v", c.args, code, cfg.HTTPListen, cfg.HTTPPprof, c.listen, c.pprof)
		}
	}
	if cfg, _, _ := brokerConfig([]string{"--config", path}, io.Discard); cfg.MetricsMaxTopics != 50 {
		t.Errorf("metricsMaxTopics %d, want 50", cfg.MetricsMaxTopics)
	}
}

// TestPluginMetrics loads a filter plugin, matches a record with it and
// checks its series on /metrics.
func TestPluginMetrics(t *testing.T) {
	module, _ := jsonfieldModule(t)
	dir := t.TempDir()
	copyFile(t, module, filepath.Join(dir, "jsonfield.wasm"))
	path := writeFile(t, dir, "broker.yaml", fmt.Sprintf(jsonClassConfig, sha256File(t, module), 2)+"httpListen: 127.0.0.1:0\n")
	env := startWithConfig(t, path)
	f, err := env.PluginRegistry().Plugin("jsonclass").Filter("region=eu")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := message.AppendRecord(nil, &message.Message{Topic: "T", Body: []byte(`{"region":"eu"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var out [1]bool
	if err := f.Match([]message.Record{rec}, out[:]); err != nil || !out[0] {
		t.Fatalf("Match: %v %v", out, err)
	}
	resp, err := http.Get("http://" + env.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	calls := regexp.MustCompile(`(?m)^rmq_plugin_calls_total\{kind="filter",plugin="jsonclass"\} (\S+)$`).FindSubmatch(body)
	if calls == nil {
		t.Fatalf("no rmq_plugin_calls_total for jsonclass in:\n%s", body)
	}
	n, _ := strconv.ParseFloat(string(calls[1]), 64)
	count := regexp.MustCompile(`(?m)^rmq_plugin_call_duration_seconds_count\{kind="filter",plugin="jsonclass"\} (\S+)$`).FindSubmatch(body)
	if count == nil || string(count[1]) == "0" {
		t.Fatalf("plugin latency histogram empty or missing: %q", count)
	}
	if n < 1 {
		t.Errorf("rmq_plugin_calls_total = %v, want the self-test's calls", n)
	}
	for _, name := range []string{"rmq_plugin_errors_total", "rmq_plugin_traps_total", "rmq_plugin_timeouts_total", "rmq_plugin_rejected_total", "rmq_plugin_disabled"} {
		if !regexp.MustCompile(`(?m)^` + name + `\{kind="filter",plugin="jsonclass"\} 0$`).Match(body) {
			t.Errorf("%s is not 0 for jsonclass", name)
		}
	}
}
