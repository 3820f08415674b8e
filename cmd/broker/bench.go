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
	"runtime/pprof"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/internal/bench"
)

func runBench(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "produce" && args[0] != "consume") {
		fmt.Fprint(stderr, "Usage: broker bench produce|consume [flags]\n")
		return 2
	}
	mode := args[0]
	fs := pflag.NewFlagSet("broker bench "+mode, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var o bench.Options
	fs.StringVar(&o.Broker, "broker", bench.DefaultBroker, "broker address")
	fs.StringVar(&o.Topic, "topic", bench.DefaultTopic, "topic (produce creates it)")
	fs.IntVar(&o.Queues, "queues", bench.DefaultQueues, "queues of the topic")
	fs.StringVar(&o.Group, "group", bench.DefaultGroup, "producer or consumer group")
	fs.IntVar(&o.Conns, "conns", bench.DefaultConns, "TCP connections")
	fs.IntVar(&o.InFlight, "inflight", bench.DefaultInFlight, "requests in flight per connection")
	fs.IntVar(&o.Size, "size", bench.DefaultSize, "message body bytes")
	fs.IntVar(&o.Batch, "batch", bench.DefaultBatch, "messages per send request (>1 sends batches)")
	fs.IntVar(&o.Rate, "rate", 0, "target msgs/s over all connections; 0 = as fast as possible")
	fs.DurationVar(&o.Duration, "duration", 0, "run time (produce default 10s)")
	fs.Int64Var(&o.Count, "count", 0, "stop after this many messages")
	fs.IntVar(&o.PullBatch, "pull-batch", bench.DefaultPullBatch, "messages per pull (consume)")
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
