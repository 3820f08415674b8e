package main

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestHealthcheck asks a broker in a child process through "broker
// healthcheck", as a container's HEALTHCHECK does, and a port where
// nothing listens.
func TestHealthcheck(t *testing.T) {
	_, _, _, logs := startChild(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0")
	m := httpLine.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no HTTP address in the log:\n%s", logs.String())
	}
	httpAddr := m[1]
	var out string
	brokertest.Eventually(t, 10*time.Second, "the broker to be ready", func() bool {
		code, stdout, _ := runCmd("healthcheck", "--addr", httpAddr)
		out = stdout
		return code == 0
	})
	if !strings.Contains(out, "200 ready") {
		t.Fatalf("healthcheck printed %q", out)
	}
	if code, _, errs := runCmd("healthcheck", "--addr", httpAddr, "--path", "/no-such-path"); code != 1 {
		t.Fatalf("a path answering 404: exit %d, %s", code, errs)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if code, _, errs := runCmd("healthcheck", "--addr", closed, "--timeout", "2s"); code != 1 || !strings.Contains(errs, "refused") {
		t.Fatalf("nothing listening: exit %d, %q", code, errs)
	}
}
