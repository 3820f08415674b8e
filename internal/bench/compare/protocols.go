package compare

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/rmq-go/rmq/internal/bench"
	"github.com/rmq-go/rmq/internal/bench/child"
)

// ProtocolsOptions configures RunProtocols. The zero value of each field
// but Broker means its default.
type ProtocolsOptions struct {
	// Broker is the broker executable; required.
	Broker string
	// Env is added to the broker's environment.
	Env []string
	// Rounds is the number of runs of each protocol per load; default 3.
	Rounds int
	// Duration is the length of each send run; default 10 s.
	Duration time.Duration
	// Size is each message's body in bytes; default 1024.
	Size int
	// ConsumeCount is the number of messages written, then read back, in
	// each consume run; default 500,000.
	ConsumeCount int64
	// Loads lists the loads to run, by number (1 send, 2 consume);
	// default both.
	Loads []int
	// TempDir is where each broker gets its data directory; default
	// os.TempDir.
	TempDir string
}

// Protocol loads' kinds.
const (
	sendLoad = iota
	consumeLoad
)

// A protocolLoad is one line of RunProtocols' table: the same shape of
// load over both protocols.
type protocolLoad struct {
	id              int
	name            string
	kind            int
	conns, inflight int
	batch           int // messages per send, or per pull and receive
}

// protocolLoads are the loads RunProtocols can run. Catch-up consume
// reads with one puller per queue, 8 over the topic's 8 queues (as
// bench consume does with its defaults); POP gets as many receivers,
// each across every queue.
var protocolLoads = []protocolLoad{
	{id: 1, name: "send, 64 × 1", kind: sendLoad, conns: 64, inflight: 1, batch: 1},
	{id: 2, name: "consume, 8 × batch 32", kind: consumeLoad, conns: 8, inflight: 1, batch: 32},
}

// ProtocolsRow is one load's runs, in round order.
type ProtocolsRow struct {
	Load           int
	Name           string
	Remoting, GRPC []Measure
	// RemotingCmd and GRPCCmd are the load as bench commands.
	RemotingCmd, GRPCCmd string
}

// ProtocolsReport is the outcome of RunProtocols.
type ProtocolsReport struct {
	Rows         []ProtocolsRow
	Rounds       int
	Duration     time.Duration
	Size         int
	ConsumeCount int64
}

// protocolNames are the two sides, remoting first.
var protocolNames = [2]string{bench.ProtocolRemoting, bench.ProtocolGRPC}

// RunProtocols runs each load over the remoting protocol and over gRPC
// against the same broker executable, Rounds times, alternating which
// protocol goes first, each run on a fresh broker process with both
// ports open and an empty directory. The load generator (internal/bench)
// runs in this process. It writes a line per run to log (which may be
// nil).
func RunProtocols(ctx context.Context, o ProtocolsOptions, log io.Writer) (ProtocolsReport, error) {
	so := sideOptions{&o.Broker, &o.Rounds, &o.Duration, &o.Size, &o.Loads, &o.TempDir}
	so.defaults(len(protocolLoads))
	if o.ConsumeCount == 0 {
		o.ConsumeCount = DefaultConsumeCount
	}
	var extra []string
	if o.ConsumeCount < 0 {
		extra = append(extra, fmt.Sprintf("consume count %d: want at least 0", o.ConsumeCount))
	}
	if err := so.check(len(protocolLoads), extra...); err != nil {
		return ProtocolsReport{}, err
	}
	if log == nil {
		log = io.Discard
	}
	rep := ProtocolsReport{Rounds: o.Rounds, Duration: o.Duration, Size: o.Size, ConsumeCount: o.ConsumeCount}
	for _, id := range o.Loads {
		l := protocolLoads[id-1]
		row := ProtocolsRow{Load: id, Name: l.name, RemotingCmd: l.command(o, bench.ProtocolRemoting), GRPCCmd: l.command(o, bench.ProtocolGRPC)}
		for round := range o.Rounds {
			for i := range 2 {
				side := (i + round) % 2 // 0 remoting, 1 gRPC
				m, err := runProtocolSide(ctx, o, l, protocolNames[side])
				if err != nil {
					return rep, fmt.Errorf("load %d (%s), round %d, %s: %w", id, l.name, round+1, protocolNames[side], err)
				}
				fmt.Fprintf(log, "%d %-22s round %d/%d  %-8s %s\n", id, l.name, round+1, o.Rounds, protocolNames[side], m)
				if side == 0 {
					row.Remoting = append(row.Remoting, m)
				} else {
					row.GRPC = append(row.GRPC, m)
				}
			}
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// brokerGRPC finds the broker's gRPC address in its "broker started"
// line.
var brokerGRPC = regexp.MustCompile(`msg="broker started" .* grpc=(\S+)`)

// runProtocolSide measures one run of one protocol on a fresh broker.
func runProtocolSide(ctx context.Context, o ProtocolsOptions, l protocolLoad, protocol string) (Measure, error) {
	dir, err := os.MkdirTemp(o.TempDir, "rmq-protocols-*")
	if err != nil {
		return Measure{}, err
	}
	argv := []string{o.Broker, "--data-dir", dir, "--listen", "127.0.0.1:0", "--namesrv-listen", "", "--http-listen", "",
		"--grpc-listen", "127.0.0.1:0", "--flush", "sync"}
	p, err := child.Start(ctx, child.Options{Name: "broker", Argv: argv, Dir: dir, Env: o.Env, Ready: child.BrokerReady})
	if err != nil {
		os.RemoveAll(dir)
		return Measure{}, err
	}
	srv := &server{Process: p, dir: dir}
	defer srv.stop()
	m := brokerGRPC.FindStringSubmatch(srv.LogTail())
	if m == nil || m[1] == "off" {
		return Measure{}, fmt.Errorf("%w: the broker did not log its gRPC address: %s", ErrRun, srv.LogTail())
	}
	remotingAddr, grpcAddr := srv.Addr(), m[1]
	pid := srv.PID()
	if _, err := bench.ProcessCPU(pid); err != nil {
		pid = 0 // no /proc: no CPU figure
	}
	opts := bench.Options{Protocol: protocol, Broker: remotingAddr, Admin: remotingAddr, Size: o.Size,
		Conns: l.conns, InFlight: l.inflight, BrokerPID: pid}
	if protocol == bench.ProtocolGRPC {
		opts.Broker = grpcAddr
	}
	var sum bench.Summary
	// The load generator's CPU, this process's over the measured call.
	var (
		cpu0   time.Duration
		cpuErr error
	)
	switch l.kind {
	case sendLoad:
		opts.Batch, opts.Duration = l.batch, o.Duration
		cpu0, cpuErr = bench.ProcessCPU(os.Getpid())
		sum, err = bench.Produce(ctx, opts, nil)
	case consumeLoad:
		// The backlog goes in over remoting, the same way for both.
		fill, err := bench.Produce(ctx, bench.Options{Broker: remotingAddr, Size: o.Size, Count: o.ConsumeCount,
			Conns: 4, InFlight: 4, Batch: 32}, nil)
		if err == nil && fill.Errors > 0 {
			err = fmt.Errorf("%w: %d of the requests writing the backlog failed: %v", ErrRun, fill.Errors, fill.ErrorSamples)
		}
		if err != nil {
			return Measure{}, err
		}
		opts.Count, opts.PullBatch = o.ConsumeCount, l.batch
		cpu0, cpuErr = bench.ProcessCPU(os.Getpid())
		sum, err = bench.Consume(ctx, opts, nil)
	}
	if err != nil {
		return Measure{}, err
	}
	cpu1, cpuErr1 := bench.ProcessCPU(os.Getpid())
	if sum.Messages == 0 {
		return Measure{}, fmt.Errorf("%w: no message moved; %d errors: %v", ErrRun, sum.Errors, sum.ErrorSamples)
	}
	res := Measure{MsgsPerSec: sum.MsgsPerSec, Messages: sum.Messages, Elapsed: sum.Elapsed,
		CPUPerMsg: sum.BrokerCPUPerMsg, P50: sum.P50, P99: sum.P99, Errors: sum.Errors}
	if cpuErr == nil && cpuErr1 == nil {
		res.ClientCPUPerMsg = (cpu1 - cpu0) / time.Duration(sum.Messages)
	}
	return res, nil
}

// command describes l over protocol as the bench commands that make it.
func (l protocolLoad) command(o ProtocolsOptions, protocol string) string {
	proto := ""
	if protocol == bench.ProtocolGRPC {
		proto = " --protocol grpc"
	}
	if l.kind == consumeLoad {
		return fmt.Sprintf("broker bench produce --count %d --conns 4 --inflight 4 --batch 32, then broker bench consume%s --count %d --conns %d --inflight %d --pull-batch %d",
			o.ConsumeCount, proto, o.ConsumeCount, l.conns, l.inflight, l.batch)
	}
	return fmt.Sprintf("broker bench produce%s --conns %d --inflight %d --batch %d", proto, l.conns, l.inflight, l.batch)
}

// String tabulates r: per load, each protocol's median with its range,
// and gRPC's over remoting's.
func (r ProtocolsReport) String() string {
	header := []string{"load", "remoting msgs/s", "gRPC msgs/s", "ratio", "remoting CPU µs/msg", "gRPC CPU µs/msg", "ratio",
		"remoting p99 ms", "gRPC p99 ms", "bench CPU µs/msg"}
	rows := [][]string{header}
	p99s := func(ms []Measure) []float64 {
		v := make([]float64, len(ms))
		for i, m := range ms {
			v[i] = float64(m.P99)
		}
		return v
	}
	for _, row := range r.Rows {
		rem, grpc := row.Remoting, row.GRPC
		cells := []string{
			fmt.Sprintf("%d. %s", row.Load, row.Name),
			spread(rates(rem), fmtRate), spread(rates(grpc), fmtRate), medianRatio(rates(grpc), rates(rem)),
			spread(cpus(rem), fmtMicros), spread(cpus(grpc), fmtMicros), medianRatio(cpus(grpc), cpus(rem)),
			"–", "–",
			clientCPUs(rem) + " / " + clientCPUs(grpc),
		}
		// A pull and a receive with its ack are different requests; only
		// single sends time the same thing on both sides.
		if protocolLoads[row.Load-1].kind == sendLoad {
			cells[7], cells[8] = spread(p99s(rem), fmtMillis), spread(p99s(grpc), fmtMillis)
		}
		rows = append(rows, cells)
	}
	var b strings.Builder
	bench.WriteTable(&b, rows)
	b.WriteString("\n")
	b.WriteString(bench.Wrap(fmt.Sprintf("Median (min–max) of %d round%s, each run on a fresh broker process (--flush sync, "+
		"remoting and gRPC ports open) with an empty data directory, the protocol going first alternating by round; "+
		"%d-byte messages, send runs of %v, consume runs reading back %d messages written over remoting. "+
		"CPU: the broker process's user+system time over the measured run, from /proc, per message; "+
		"bench CPU: the load generator's, this process's, remoting / gRPC. Ratios: gRPC over remoting.",
		r.Rounds, plural(r.Rounds), r.Size, r.Duration, r.ConsumeCount), 80, ""))
	for _, row := range r.Rows {
		b.WriteString("\n")
		b.WriteString(bench.Wrap(fmt.Sprintf("%d. remoting: %s.", row.Load, row.RemotingCmd), 80, "   "))
		b.WriteString(bench.Wrap(fmt.Sprintf("   gRPC: %s.", row.GRPCCmd), 80, "   "))
		for i, side := range [][]Measure{row.Remoting, row.GRPC} {
			var errs int64
			for _, m := range side {
				errs += m.Errors
			}
			if errs > 0 {
				fmt.Fprintf(&b, "   %s: %d failed requests.\n", protocolNames[i], errs)
			}
		}
	}
	return b.String()
}

// medianRatio is the ratio of the medians of a and b, or n/a when either
// has no values (a run without the figure).
func medianRatio(a, b []float64) string {
	if len(a) == 0 || len(b) == 0 {
		return "n/a"
	}
	return fmtRatio(median(a), median(b))
}

// clientCPUs is the median load generator CPU per message of the runs in
// microseconds, or n/a when a run lacks it.
func clientCPUs(ms []Measure) string {
	v := make([]float64, len(ms))
	for i, m := range ms {
		if m.ClientCPUPerMsg <= 0 {
			return "n/a"
		}
		v[i] = micros(m.ClientCPUPerMsg)
	}
	return fmtMicros(median(v))
}
