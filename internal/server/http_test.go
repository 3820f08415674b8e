package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// get fetches path from the server's HTTP endpoint and returns the status
// and body.
func get(t *testing.T, s *server.Server, path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.HTTPAddr()+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

func TestHTTPEndpoint(t *testing.T) {
	env := brokertest.Start(t, func(c *server.Config) { c.HTTPListen = "127.0.0.1:0" })
	if env.HTTPAddr() == "" {
		t.Fatal("HTTPAddr is empty with httpListen set")
	}
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/healthz", 200, "ok"},
		{"/readyz", 200, "ready"},
		{"/metrics", 200, "rmq_store_fsyncs_total"},
		{"/metrics", 200, "go_goroutines"},
		{"/debug/pprof/", 404, ""}, // not asked for
		{"/", 200, "Overview"},     // the console
		{"/console/x", 404, ""},
	} {
		code, body := get(t, env.Server, c.path)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("GET %s: %d %q, want %d containing %q", c.path, code, body, c.code, c.want)
		}
	}
	// Not a GET: not served (404 without a console).
	resp, err := http.Post("http://"+env.HTTPAddr()+"/metrics", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /metrics: %d, want 404", resp.StatusCode)
	}

	// Shutdown stops the endpoint with the broker.
	addr := env.HTTPAddr()
	env.Stop(t)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("HTTP endpoint %s still accepts after Shutdown", addr)
	}
}

func TestHTTPOffByDefault(t *testing.T) {
	env := brokertest.Start(t)
	if a := env.HTTPAddr(); a != "" {
		t.Fatalf("HTTPAddr %q with httpListen empty", a)
	}
}

func TestHTTPPprofAndConsole(t *testing.T) {
	console := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "console at "+r.URL.Path) })
	env := brokertest.Start(t, func(c *server.Config) {
		c.HTTPListen, c.HTTPPprof, c.Console = "127.0.0.1:0", true, console
	})
	if code, body := get(t, env.Server, "/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("GET /debug/pprof/: %d %.80q", code, body)
	}
	if code, body := get(t, env.Server, "/topics/x"); code != 200 || body != "console at /topics/x" {
		t.Errorf("GET /topics/x: %d %q, want the console", code, body)
	}
	if code, _ := get(t, env.Server, "/readyz"); code != 200 {
		t.Errorf("GET /readyz: %d; the console must not shadow it", code)
	}
	// One set after Start replaces it; nil takes it away.
	env.SetConsole(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "v2") }))
	if code, body := get(t, env.Server, "/"); code != 200 || body != "v2" {
		t.Errorf("GET / after SetConsole: %d %q", code, body)
	}
	env.SetConsole(nil)
	if code, _ := get(t, env.Server, "/"); code != 404 {
		t.Errorf("GET / after SetConsole(nil): %d, want 404", code)
	}
}

func TestHTTPPprofNeedsLoopback(t *testing.T) {
	_, err := server.Start(server.Config{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTPListen: "0.0.0.0:0", HTTPPprof: true, Logger: brokertest.Logger(),
	})
	if err == nil || !strings.Contains(err.Error(), "httpPprof") {
		t.Fatalf("Start with profiles on every address: %v, want a refusal naming httpPprof", err)
	}
}

// TestReadyz checks that /readyz says 503, with the reason, while the
// broker's name server is unreachable, and 200 once it registered.
func TestReadyz(t *testing.T) {
	// A free port for the name server, which starts later.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nsAddr := ln.Addr().String()
	ln.Close()

	env := brokertest.Start(t, func(c *server.Config) {
		c.HTTPListen, c.NamesrvListen, c.NameServers = "127.0.0.1:0", "", []string{nsAddr}
		c.Broker.RegisterInterval = 50 * time.Millisecond
	})
	if code, body := get(t, env.Server, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "name server") {
		t.Fatalf("GET /readyz without a name server: %d %q, want 503 naming the name server", code, body)
	}
	if code, _ := get(t, env.Server, "/healthz"); code != 200 {
		t.Fatalf("GET /healthz: %d, want 200 while not ready", code)
	}

	ns, err := server.StartNamesrv(server.Config{NamesrvListen: nsAddr, Logger: brokertest.Logger()})
	if err != nil {
		t.Fatalf("name server on %s: %v", nsAddr, err)
	}
	t.Cleanup(func() { ns.Shutdown(context.Background()) })
	brokertest.Eventually(t, 10*time.Second, "/readyz to say ready", func() bool {
		code, _ := get(t, env.Server, "/readyz")
		return code == 200
	})

	// The endpoint stops with the broker.
	env.Stop(t)
	if c, err := net.DialTimeout("tcp", env.HTTPAddr(), time.Second); err == nil {
		c.Close()
		t.Fatal("HTTP endpoint still accepts after Shutdown")
	}
}

// TestHTTPServesConsole checks that the endpoint serves the web console at
// / once the broker runs, without anything configured beyond the listener.
func TestHTTPServesConsole(t *testing.T) {
	env := brokertest.Start(t, func(c *server.Config) { c.HTTPListen = "127.0.0.1:0" })
	code, body := get(t, env.Server, "/")
	if code != 200 || !strings.Contains(body, "<title>Overview · rmq-go</title>") || !strings.Contains(body, env.BrokerAddr) {
		t.Fatalf("GET /: %d\n%s", code, body)
	}
	if code, body := get(t, env.Server, "/topics"); code != 200 || !strings.Contains(body, "RMQ_SYS_TRACE_TOPIC") {
		t.Fatalf("GET /topics: %d\n%s", code, body)
	}
}
