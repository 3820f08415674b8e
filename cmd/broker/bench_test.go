package main

import (
	"strings"
	"testing"

	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// TestBenchGRPCFlags runs `broker bench produce|consume --protocol grpc`
// against a broker in-process and checks that bad flags are refused with
// a message naming them.
func TestBenchGRPCFlags(t *testing.T) {
	if code, _, errs := runCmd("bench", "produce", "--protocol", "http"); code != 2 || !strings.Contains(errs, `--protocol "http"`) {
		t.Errorf("unknown protocol: exit %d, %q", code, errs)
	}
	if code, _, errs := runCmd("bench", "consume", "--protocol", "grpc", "--pull-batch", "5000", "--broker-pid", "-1"); code != 1 || !strings.Contains(errs, "PullBatch 5000") {
		t.Errorf("receive batch over the broker's: exit %d, %q", code, errs)
	}
	if code, _, errs := runCmd("bench", "produce", "extra"); code != 2 || !strings.Contains(errs, `unexpected argument "extra"`) {
		t.Errorf("a stray argument: exit %d, %q", code, errs)
	}

	e := brokertest.Start(t, func(c *server.Config) { c.GRPCListen = "127.0.0.1:0"; c.NamesrvListen = "" })
	topic := brokertest.Name("BenchCLI")
	code, out, errs := runCmd("bench", "produce", "--protocol", "grpc", "--broker", e.GRPCAddr, "--admin", e.BrokerAddr,
		"--topic", topic, "--count", "64", "--conns", "2", "--inflight", "2", "--batch", "4", "--progress", "0", "--broker-pid", "-1")
	if code != 0 || !strings.Contains(out, "messages  64 ") || !strings.Contains(out, "requests  16, 0 errors") {
		t.Fatalf("gRPC produce: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCmd("bench", "consume", "--protocol", "grpc", "--broker", e.GRPCAddr, "--topic", topic,
		"--group", brokertest.Name("cli"), "--conns", "2", "--pull-batch", "8", "--progress", "0", "--broker-pid", "-1")
	if code != 0 || !strings.Contains(out, "messages  64 ") || !strings.Contains(out, "over gRPC (POP)") {
		t.Fatalf("gRPC consume: exit %d\n%s%s", code, out, errs)
	}
}
