package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/internal/bench/compare"
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

// TestBenchProtocolsSmoke runs `broker bench protocols`' pairing once,
// briefly, with this test binary as the broker: each load moves messages
// over both protocols without a failed request, and the consume runs read
// back exactly the backlog.
func TestBenchProtocolsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four brokers")
	}
	if code, _, errs := runCmd("bench", "protocols", "--broker-bin", os.Args[0], "--loads", "3", "--rounds", "-1"); code != 1 ||
		!strings.Contains(errs, "load 3 does not exist") || !strings.Contains(errs, "rounds -1") {
		t.Fatalf("bench protocols with bad options: exit %d, %q", code, errs)
	}
	var log strings.Builder
	rep, err := compare.RunProtocols(t.Context(), compare.ProtocolsOptions{
		Broker: os.Args[0], Env: []string{"RMQ_BROKER_CHILD=1"}, Rounds: 1, Duration: time.Second,
		ConsumeCount: 3000, TempDir: t.TempDir(),
	}, &log)
	t.Logf("\n%s\n%s", log.String(), rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rep.Rows))
	}
	for _, row := range rep.Rows {
		for side, ms := range map[string][]compare.Measure{"remoting": row.Remoting, "gRPC": row.GRPC} {
			if len(ms) != 1 || ms[0].Messages == 0 || ms[0].Errors != 0 {
				t.Errorf("%s over %s: %+v, want one run that moved messages without errors", row.Name, side, ms)
				continue
			}
			if row.Load == 2 && ms[0].Messages != 3000 {
				t.Errorf("%s over %s read %d messages, want the 3000 written", row.Name, side, ms[0].Messages)
			}
		}
	}
	if s := rep.String(); !strings.Contains(s, "| 1. send, 64 × 1") || !strings.Contains(s, "consume --protocol grpc --count 3000") {
		t.Errorf("the report lacks its rows or commands:\n%s", s)
	}
}

// TestBenchReplicationSmoke runs bench replication for a second a side:
// a broker and a set of three as child processes, sends acknowledged on
// both, and a table with the set's ratios.
func TestBenchReplicationSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four brokers")
	}
	if code, _, errs := runCmd("bench", "replication", "--broker-bin", os.Args[0], "--loads", "3", "--members", "-1"); code != 1 ||
		!strings.Contains(errs, "load 3 does not exist") || !strings.Contains(errs, "members -1") {
		t.Fatalf("bench replication with bad options: exit %d, %q", code, errs)
	}
	var log strings.Builder
	rep, err := compare.RunReplication(t.Context(), compare.ReplicationOptions{
		Broker: os.Args[0], Env: []string{"RMQ_BROKER_CHILD=1"}, Rounds: 1, Duration: time.Second,
		Loads: []int{1}, TempDir: t.TempDir(),
	}, &log)
	t.Logf("\n%s\n%s", log.String(), rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 {
		t.Fatalf("%d rows, want 1", len(rep.Rows))
	}
	for side, ms := range map[string][]compare.SetMeasure{"single": rep.Rows[0].Single, "set": rep.Rows[0].Set} {
		if len(ms) != 1 || ms[0].Messages == 0 || ms[0].Errors != 0 {
			t.Errorf("%s: %+v, want one run that moved messages without errors", side, ms)
		}
	}
	if s := rep.String(); !strings.Contains(s, "| 1. request/response, 64 × 1") {
		t.Errorf("the report lacks its row:\n%s", s)
	}
}
