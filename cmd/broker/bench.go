package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/internal/bench"
	"github.com/rmq-go/rmq/internal/bench/compare"
	"github.com/rmq-go/rmq/internal/bench/memory"
)

func runBench(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "compare" {
		return runBenchCompare(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "memory" {
		return runBenchMemory(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "hostile" {
		return runBenchHostile(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "replication" {
		return runBenchReplication(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "protocols" {
		return runBenchProtocols(args[1:], stdout, stderr)
	}
	if len(args) == 0 || (args[0] != "produce" && args[0] != "consume") {
		fmt.Fprint(stderr, "Usage: broker bench produce|consume|compare|memory|hostile|replication|protocols [flags]\n")
		return 2
	}
	mode := args[0]
	fs := pflag.NewFlagSet("broker bench "+mode, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var o bench.Options
	fs.StringVar(&o.Protocol, "protocol", bench.ProtocolRemoting, "remoting (RocketMQ 4.x) or grpc (RocketMQ 5: SendMessage; POP receive and ack)")
	fs.StringVar(&o.Broker, "broker", "", fmt.Sprintf("broker address (default %s, with --protocol grpc %s)", bench.DefaultBroker, bench.DefaultGRPCBroker))
	fs.StringVar(&o.Admin, "admin", "", fmt.Sprintf("with --protocol grpc, the broker's remoting address, where produce creates the topic (default --broker's host, port %s)", bench.DefaultAdminPort))
	fs.StringVar(&o.Topic, "topic", bench.DefaultTopic, "topic (produce creates it)")
	fs.IntVar(&o.Queues, "queues", bench.DefaultQueues, "queues of the topic")
	fs.StringVar(&o.Group, "group", bench.DefaultGroup, "producer or consumer group")
	fs.IntVar(&o.Conns, "conns", bench.DefaultConns, "TCP connections (gRPC: clients)")
	fs.IntVar(&o.InFlight, "inflight", bench.DefaultInFlight, "requests in flight per connection (gRPC consume: receives)")
	fs.IntVar(&o.Size, "size", bench.DefaultSize, "message body bytes")
	fs.IntVar(&o.Batch, "batch", bench.DefaultBatch, "messages per send request (>1 sends batches)")
	fs.IntVar(&o.Rate, "rate", 0, "target msgs/s over all connections; 0 = as fast as possible")
	fs.DurationVar(&o.Duration, "duration", 0, "run time (produce default 10s)")
	fs.Int64Var(&o.Count, "count", 0, "stop after this many messages")
	fs.IntVar(&o.PullBatch, "pull-batch", bench.DefaultPullBatch, "messages per pull, or per gRPC receive (consume)")
	fs.DurationVar(&o.Progress, "progress", bench.DefaultProgress, "progress line interval; 0 disables")
	cpuProfile := fs.String("cpuprofile", "", "write the load generator's CPU profile to this file")
	brokerPID := fs.Int("broker-pid", 0, "broker process id, to report its CPU per message (Linux); 0 finds the process listening on a loopback --broker, -1 reports none")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "broker bench %s: unexpected argument %q\n", mode, fs.Arg(0))
		return 2
	}
	if o.Protocol != bench.ProtocolRemoting && o.Protocol != bench.ProtocolGRPC {
		fmt.Fprintf(stderr, "broker bench %s: --protocol %q: want %s or %s\n", mode, o.Protocol, bench.ProtocolRemoting, bench.ProtocolGRPC)
		return 2
	}
	if o.Broker == "" {
		o.Broker = bench.DefaultBroker
		if o.Protocol == bench.ProtocolGRPC {
			o.Broker = bench.DefaultGRPCBroker
		}
	}
	switch {
	case *brokerPID > 0:
		o.BrokerPID = *brokerPID
	case *brokerPID == 0:
		pid, err := localBrokerPID(o.Broker)
		if err != nil {
			fmt.Fprintln(stderr, "broker bench: broker CPU not reported:", err)
		}
		o.BrokerPID = pid
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "broker bench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "broker bench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := bench.Produce
	if mode == "consume" {
		run = bench.Consume
	}
	sum, err := run(ctx, o, stdout)
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "broker bench:", err)
		return 1
	}
	fmt.Fprint(stdout, sum.String())
	if sum.Errors > 0 {
		return 1
	}
	return 0
}

// localBrokerPID finds the process listening on addr when addr is a
// loopback address, so that a broker on this machine has its CPU per
// message reported without asking; it returns 0 and no error for any
// other address.
func localBrokerPID(addr string) (int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, nil // the run reports the bad address
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return 0, nil
	}
	return bench.ListenerPID(net.JoinHostPort(host, port))
}

// brokerMain is the import path of this command, which compare checks the
// running executable against before it starts copies of it as brokers.
const brokerMain = "github.com/rmq-go/rmq/cmd/broker"

func runBenchCompare(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("broker bench compare", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: broker bench compare [flags]\n\n"+
			"Runs this broker and NATS JetStream side by side on this machine under the\n"+
			"same loads and prints one table (progress goes to stderr, the table to stdout).\n"+
			"Pairings: 1 request/response, 2 pipelined (fsync before ack vs lazy),\n"+
			"3 pipelined (both lazy), 4 fsync before every ack, 5 batched produce,\n"+
			"6 catch-up consume, 7 latency at half of 1's rate.\n\nFlags:\n%s", fs.FlagUsages())
	}
	var o compare.Options
	fs.BoolVar(&o.Quick, "quick", false, fmt.Sprintf("a smoke run: %d round of %v runs, %d messages for catch-up, unless given", compare.QuickRounds, compare.QuickDuration, compare.QuickConsumeCount))
	fs.IntVar(&o.Rounds, "rounds", 0, fmt.Sprintf("runs of each system per pairing (default %d)", compare.DefaultRounds))
	fs.DurationVar(&o.Duration, "duration", 0, fmt.Sprintf("length of each produce run (default %v)", compare.DefaultDuration))
	fs.IntVar(&o.Size, "size", compare.DefaultSize, "message body bytes")
	fs.Int64Var(&o.ConsumeCount, "consume-count", 0, fmt.Sprintf("messages written and read back in the catch-up pairing (default %d)", compare.DefaultConsumeCount))
	fs.IntSliceVar(&o.Pairings, "pairings", nil, "pairings to run, e.g. 1,2,7 (default all; 7 brings 1)")
	fs.StringVar(&o.CacheDir, "cache-dir", "", "where nats-server and the nats CLI are installed (default rmq-go/bench in the user cache directory)")
	fs.StringVar(&o.Broker, "broker-bin", "", "broker executable to measure (default this one)")
	return runChild(fs, args, "broker bench compare", &o.Broker, stdout, stderr, func(ctx context.Context) (fmt.Stringer, error) {
		return compare.Run(ctx, o, stderr)
	})
}

func runBenchReplication(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("broker bench replication", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: broker bench replication [flags]\n\n"+
			"Runs one broker and a replicated set side by side on this machine under the\n"+
			"same synchronous loads (1 request/response 64 × 1, 2 pipelined 4 × 128) and\n"+
			"prints one table: acknowledged msgs/s, p99, bytes written to disk per body\n"+
			"byte and CPU per message (progress to stderr, the table to stdout).\n\nFlags:\n%s", fs.FlagUsages())
	}
	var o compare.ReplicationOptions
	sideFlags(fs, "runs of each side per load", "length of each run", &o.Rounds, &o.Duration, &o.Size, &o.Loads, &o.Broker)
	fs.IntVar(&o.Members, "members", 3, "members of the set")
	return runChild(fs, args, "broker bench replication", &o.Broker, stdout, stderr, func(ctx context.Context) (fmt.Stringer, error) {
		return compare.RunReplication(ctx, o, stderr)
	})
}

func runBenchProtocols(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("broker bench protocols", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: broker bench protocols [flags]\n\n"+
			"Runs the same loads over the remoting protocol (RocketMQ 4.x) and over gRPC\n"+
			"(RocketMQ 5) against this broker on this machine, a fresh broker per run, and\n"+
			"prints one table: 1 sends, 64 × 1; 2 catch-up pull against POP receive and\n"+
			"ack, 8 × batch 32. msgs/s, broker CPU per message and p99, with gRPC's ratio\n"+
			"to remoting (progress to stderr, the table to stdout).\n\nFlags:\n%s", fs.FlagUsages())
	}
	var o compare.ProtocolsOptions
	sideFlags(fs, "runs of each protocol per load", "length of each send run", &o.Rounds, &o.Duration, &o.Size, &o.Loads, &o.Broker)
	fs.Int64Var(&o.ConsumeCount, "consume-count", 0, fmt.Sprintf("messages written and read back in each consume run (default %d)", compare.DefaultConsumeCount))
	return runChild(fs, args, "broker bench protocols", &o.Broker, stdout, stderr, func(ctx context.Context) (fmt.Stringer, error) {
		return compare.RunProtocols(ctx, o, stderr)
	})
}

// sideFlags defines the flags bench replication and bench protocols
// share.
func sideFlags(fs *pflag.FlagSet, roundsHelp, durationHelp string, rounds *int, duration *time.Duration, size *int, loads *[]int, broker *string) {
	fs.IntVar(rounds, "rounds", 0, fmt.Sprintf("%s (default %d)", roundsHelp, compare.DefaultRounds))
	fs.DurationVar(duration, "duration", 0, fmt.Sprintf("%s (default %v)", durationHelp, compare.DefaultDuration))
	fs.IntVar(size, "size", compare.DefaultSize, "message body bytes")
	fs.IntSliceVar(loads, "loads", nil, "loads to run, e.g. 1 (default 1,2)")
	fs.StringVar(broker, "broker-bin", "", "broker executable to measure (default this one)")
}

// runChild parses the flags of a bench command that starts brokers as
// child processes (compare, memory), fills in the broker executable
// (default this one), runs it until done or interrupted, and prints its
// report to stdout; it returns the exit code.
func runChild(fs *pflag.FlagSet, args []string, name string, broker *string, stdout, stderr io.Writer, run func(context.Context) (fmt.Stringer, error)) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", name, fs.Arg(0))
		return 2
	}
	if *broker == "" {
		exe, err := selfBroker()
		if err != nil {
			fmt.Fprintln(stderr, name+":", err)
			return 2
		}
		*broker = exe
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx)
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return 1
	}
	fmt.Fprint(stdout, rep.String())
	return 0
}

func runBenchMemory(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("broker bench memory", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: broker bench memory [flags]\n\n"+
			"Starts a broker on a fresh temporary directory and prints its resident memory\n"+
			"(VmRSS, VmHWM) at each stage: 1 idle, 2 idle connections (then closed),\n"+
			"3 a backlog stored (then the broker restarted on it), 4 held long-polls.\n"+
			"Linux only. Progress goes to stderr, the table to stdout.\n\nFlags:\n%s", fs.FlagUsages())
	}
	var o memory.Options
	fs.BoolVar(&o.Quick, "quick", false, fmt.Sprintf("a smoke run: %d connections, %d messages, %d polls, unless given", memory.QuickConns, memory.QuickMessages, memory.QuickPolls))
	fs.IntVar(&o.Conns, "conns", 0, fmt.Sprintf("idle connections (default %d)", memory.DefaultConns))
	fs.Int64Var(&o.Messages, "messages", 0, fmt.Sprintf("messages in the backlog (default %d)", memory.DefaultMessages))
	fs.IntVar(&o.Size, "size", memory.DefaultSize, "backlog message body bytes")
	fs.IntVar(&o.Polls, "polls", 0, fmt.Sprintf("held long-polls (default %d)", memory.DefaultPolls))
	fs.DurationVar(&o.Settle, "settle", 0, fmt.Sprintf("wait before each reading (default %v)", memory.DefaultSettle))
	fs.StringVar(&o.Broker, "broker-bin", "", "broker executable to measure (default this one)")
	return runChild(fs, args, "broker bench memory", &o.Broker, stdout, stderr, func(ctx context.Context) (fmt.Stringer, error) {
		return memory.Run(ctx, o, stderr)
	})
}

func runBenchHostile(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("broker bench hostile", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: broker bench hostile [flags]\n\n"+
			"Starts a broker on a fresh temporary directory and attacks it, one attack at a\n"+
			"time: stalled large frames, pulls whose answers are never read, a trickled\n"+
			"frame, idle connections. Prints the broker's peak resident memory (VmHWM) in\n"+
			"each, and the p99 of a well-behaved sender before and during it. Linux only.\n\nFlags:\n%s", fs.FlagUsages())
	}
	var o memory.HostileOptions
	fs.IntVar(&o.StalledFrames, "stalled-frames", memory.DefaultStalledFrames, "connections that stall in a large frame")
	fs.IntVar(&o.UnreadPulls, "unread-pulls", memory.DefaultUnreadPulls, "pulls sent on one connection that reads nothing")
	fs.IntVar(&o.IdleConns, "idle-conns", memory.DefaultIdleConns, "idle connections")
	fs.DurationVar(&o.Hold, "hold", memory.DefaultHold, "how long each attack stays in place")
	fs.StringVar(&o.Broker, "broker-bin", "", "broker executable to attack (default this one)")
	return runChild(fs, args, "broker bench hostile", &o.Broker, stdout, stderr, func(ctx context.Context) (fmt.Stringer, error) {
		return memory.Hostile(ctx, o, stderr)
	})
}

// selfBroker returns the path of the running executable when it is this
// command, as it is under go build, go install and go run, so compare
// measures the code it was built from. A test binary of this package
// reports the same import path but is no broker.
func selfBroker() (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok || info.Path != brokerMain || testing.Testing() {
		return "", fmt.Errorf("this executable is not %s; give the broker with --broker-bin", brokerMain)
	}
	return os.Executable()
}
