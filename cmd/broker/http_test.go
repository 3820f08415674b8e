package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

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
