package compare

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestProtocolsReport(t *testing.T) {
	run := func(rate, cpuUS float64, p99 time.Duration) Measure {
		us := time.Duration(cpuUS * float64(time.Microsecond))
		return Measure{MsgsPerSec: rate, CPUPerMsg: us, ClientCPUPerMsg: 2 * us, P99: p99}
	}
	ms := time.Millisecond
	o := ProtocolsOptions{ConsumeCount: 500_000}
	rep := ProtocolsReport{Rounds: 2, Duration: 10 * time.Second, Size: 1024, ConsumeCount: 500_000, Rows: []ProtocolsRow{
		{Load: 1, Name: protocolLoads[0].name, Remoting: []Measure{run(30_000, 30, 4*ms), run(32_000, 32, 6*ms)},
			GRPC:        []Measure{run(24_000, 45, 8*ms), run(26_000, 45, 10*ms)},
			RemotingCmd: protocolLoads[0].command(o, "remoting"), GRPCCmd: protocolLoads[0].command(o, "grpc")},
		{Load: 2, Name: protocolLoads[1].name, Remoting: []Measure{run(200_000, 5, ms), run(200_000, 5, ms)},
			GRPC:        []Measure{run(100_000, 0, ms), run(100_000, 10, ms)},
			RemotingCmd: protocolLoads[1].command(o, "remoting"), GRPCCmd: protocolLoads[1].command(o, "grpc")},
	}}
	got := rep.String()
	for _, want := range []string{
		"| load                     | remoting msgs/s     | gRPC msgs/s         | ratio | remoting CPU µs/msg | gRPC CPU µs/msg  | ratio | remoting p99 ms  | gRPC p99 ms      | bench CPU µs/msg |\n",
		"| 1. send, 64 × 1          | 31.0k (30.0k–32.0k) | 25.0k (24.0k–26.0k) | 0.81× | 31.0 (30.0–32.0)    | 45.0 (45.0–45.0) | 1.45× | 5.00 (4.00–6.00) | 9.00 (8.00–10.0) | 62.0 / 90.0      |\n",
		// A run without a CPU figure makes the cell n/a; pulls and
		// receives do not time the same thing.
		"| 2. consume, 8 × batch 32 | 200k (200k–200k)    | 100k (100k–100k)    | 0.50× | 5.00 (5.00–5.00)    | n/a              | n/a   | –                | –                | 10.0 / n/a       |\n",
		"Median (min–max) of 2 rounds,",
		"1. remoting: broker bench produce --conns 64 --inflight 1 --batch 1.\n   gRPC: broker bench produce --protocol grpc --conns 64 --inflight 1 --batch 1.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks\n%s\nin\n%s", want, got)
		}
	}
	for _, line := range strings.Split(got, "\n") {
		if !strings.HasPrefix(line, "|") && len([]rune(line)) > 80 {
			t.Errorf("note line over 80 columns: %q", line)
		}
	}
}

func TestProtocolsOptions(t *testing.T) {
	_, err := RunProtocols(context.Background(), ProtocolsOptions{Rounds: -1, Duration: 10 * time.Millisecond, Loads: []int{0, 3}}, nil)
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("RunProtocols with bad options: %v", err)
	}
	for _, want := range []string{"Broker", "rounds -1", "duration 10ms", "load 0", "load 3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
