package bench

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
)

// Errors of this package.
var (
	// ErrInvalidOptions is returned, wrapped with every problem found, when
	// Options do not describe a run. Nothing is sent.
	ErrInvalidOptions = errors.New("bench: invalid options")
	// ErrRefused is returned when the broker answers a setup request
	// (creating the topic, reading a queue's offsets) with a code other than
	// SUCCESS, or with a header that does not parse. The run does not start.
	ErrRefused = errors.New("bench: broker refused")
	// ErrTimeout is recorded for a request that got no response within
	// Options.Timeout. It counts as an error of the run, which goes on.
	ErrTimeout = errors.New("bench: no response in time")
)

// Defaults of Options.
const (
	DefaultBroker    = "127.0.0.1:10911"
	DefaultTopic     = "BenchTopic"
	DefaultQueues    = 8
	DefaultGroup     = "bench"
	DefaultConns     = 64
	DefaultInFlight  = 1
	DefaultSize      = 1024
	DefaultBatch     = 1
	DefaultDuration  = 10 * time.Second
	DefaultPullBatch = 32
	DefaultProgress  = time.Second // the CLI's; a zero Options.Progress means none
	DefaultTimeout   = 3 * time.Second
	// DefaultGRPCBroker is Broker's default under ProtocolGRPC: the
	// broker command's gRPC address.
	DefaultGRPCBroker = "127.0.0.1:8081"
	// DefaultAdminPort is the port of Admin's default: the broker
	// command's remoting port, on Broker's host.
	DefaultAdminPort = "10911"
)

// Protocols a run speaks.
const (
	// ProtocolRemoting is RocketMQ 4.x's remoting protocol: SEND_MESSAGE,
	// SEND_BATCH_MESSAGE and PULL_MESSAGE on core/remoting clients.
	ProtocolRemoting = "remoting"
	// ProtocolGRPC is RocketMQ 5's gRPC protocol (apache.rocketmq.v2):
	// SendMessage, and POP consumption with ReceiveMessage and
	// AckMessage.
	ProtocolGRPC = "grpc"
)

// Broker limits the options are checked against.
const (
	// maxMessageSize is RocketMQ's default maxMessageSize: the largest body
	// of one message, and of one batch request.
	maxMessageSize = 4 << 20
	// maxReceiveBatch is the largest batch_size the broker's gRPC receive
	// honours.
	maxReceiveBatch = 1024
)

// Options configures a run of Produce or Consume. The zero value of each
// field means its default, so Options{} benchmarks the local broker.
type Options struct {
	// Protocol is what the run speaks to Broker: ProtocolRemoting (the
	// default) or ProtocolGRPC.
	Protocol string
	// Broker is the broker's address; default "127.0.0.1:10911", or
	// DefaultGRPCBroker under ProtocolGRPC.
	Broker string
	// Admin is the broker's remoting address under ProtocolGRPC, which
	// has no request that creates a topic: Produce creates Topic there
	// first. Default Broker's host with port DefaultAdminPort. Unused
	// under ProtocolRemoting and by Consume.
	Admin string
	// Topic is the topic to write and read; default "BenchTopic". Produce
	// first creates it (or updates it) with Queues read and write queues.
	Topic string
	// Queues is the topic's queue count; default 8. Produce spreads
	// requests over the queues round robin; Consume reads every one.
	Queues int
	// Group is the producer group of sends and the consumer group of pulls;
	// default "bench".
	Group string
	// Conns is the number of TCP connections; default 64. Each has its own
	// remoting.Client, since a Client keeps one connection per address,
	// or its own gRPC ClientConn and client id.
	Conns int
	// InFlight is the number of requests outstanding on each connection;
	// default 1. Produce keeps Conns×InFlight requests in flight. Consume
	// pulls each queue one request at a time, so at most Queues; over
	// gRPC it keeps Conns×InFlight receives going, each across every
	// queue.
	InFlight int
	// Size is the body length of each message in bytes; default 1024, at
	// most 4 MiB.
	Size int
	// Batch is the number of messages per send request; default 1. One is
	// sent as SEND_MESSAGE (10), more as SEND_BATCH_MESSAGE (320); over
	// gRPC each SendMessage carries Batch messages. A batch body may not
	// exceed 4 MiB.
	Batch int
	// Rate is the target number of messages per second over all
	// connections; 0 (the default) sends as fast as responses come back.
	Rate int
	// Duration bounds the run. Produce defaults to 10 s when Count is 0 and
	// to no limit otherwise; Consume defaults to no limit (it stops when it
	// has caught up).
	Duration time.Duration
	// Count stops Produce after this many messages have been sent (answered
	// or failed) and Consume after this many have been read; 0 means no
	// count limit.
	Count int64
	// PullBatch is the maxMsgNums of each pull, or the batch_size of each
	// gRPC receive (at most 1024, the broker's largest); default 32.
	PullBatch int
	// Progress is the interval between progress lines; 0 means none.
	// Unlike the other fields its zero turns the feature off: a program
	// that embeds a run gets no periodic output unless it asks. The CLI
	// asks for DefaultProgress.
	Progress time.Duration
	// Timeout bounds each request; default 3 s (the clients' send timeout).
	// A request unanswered for about that long is abandoned and counted as
	// an error.
	Timeout time.Duration
	// BrokerPID is the broker's process id when it runs on this machine;
	// 0 (the default) means unknown. When set, the summary reports the
	// broker's CPU time over the measured run, read from /proc (Linux
	// only), and the run fails at setup if /proc cannot tell it.
	BrokerPID int
}

// withDefaults returns a copy of o with zero fields set to their defaults
// for Produce (consume false) or Consume.
func (o Options) withDefaults(consume bool) Options {
	if o.Protocol == "" {
		o.Protocol = ProtocolRemoting
	}
	if o.Broker == "" {
		o.Broker = DefaultBroker
		if o.Protocol == ProtocolGRPC {
			o.Broker = DefaultGRPCBroker
		}
	}
	if o.Admin == "" && o.Protocol == ProtocolGRPC {
		host, _, err := net.SplitHostPort(o.Broker)
		if err != nil {
			host = "127.0.0.1" // validate reports the bad Broker
		}
		o.Admin = net.JoinHostPort(host, DefaultAdminPort)
	}
	if o.Topic == "" {
		o.Topic = DefaultTopic
	}
	if o.Queues == 0 {
		o.Queues = DefaultQueues
	}
	if o.Group == "" {
		o.Group = DefaultGroup
	}
	if o.Conns == 0 {
		o.Conns = DefaultConns
	}
	if o.InFlight == 0 {
		o.InFlight = DefaultInFlight
	}
	if o.Size == 0 {
		o.Size = DefaultSize
	}
	if o.Batch == 0 {
		o.Batch = DefaultBatch
	}
	if o.Duration == 0 && o.Count == 0 && !consume {
		o.Duration = DefaultDuration
	}
	if o.PullBatch == 0 {
		o.PullBatch = DefaultPullBatch
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

// validate reports every problem of o, which has its defaults filled in,
// in one error wrapping ErrInvalidOptions.
func (o *Options) validate() error {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if o.Protocol != ProtocolRemoting && o.Protocol != ProtocolGRPC {
		bad("Protocol %q is neither %q nor %q", o.Protocol, ProtocolRemoting, ProtocolGRPC)
	}
	if _, _, err := net.SplitHostPort(o.Broker); err != nil {
		bad("Broker %q is not host:port: %v", o.Broker, err)
	}
	if o.Protocol == ProtocolGRPC && o.PullBatch > maxReceiveBatch {
		bad("PullBatch %d exceeds %d, the most a gRPC receive returns", o.PullBatch, maxReceiveBatch)
	}
	if err := remoting.ValidateTopicName(o.Topic); err != nil {
		bad("Topic: %v", err)
	}
	if err := remoting.ValidateTopicName(o.Group); err != nil {
		bad("Group: %v", err)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"Queues", o.Queues}, {"Conns", o.Conns}, {"InFlight", o.InFlight}, {"Size", o.Size}, {"Batch", o.Batch}, {"PullBatch", o.PullBatch}} {
		if f.v < 0 {
			bad("%s %d is negative", f.name, f.v)
		}
	}
	if o.Size > maxMessageSize {
		bad("Size %d exceeds the broker's 4 MiB message limit", o.Size)
	}
	if o.Size > 0 && o.Batch > 0 && int64(o.Size)*int64(o.Batch) > maxMessageSize {
		bad("a batch of %d × %d bytes exceeds the broker's 4 MiB message limit", o.Batch, o.Size)
	}
	if o.Rate < 0 {
		bad("Rate %d is negative", o.Rate)
	}
	if o.Duration < 0 {
		bad("Duration %v is negative", o.Duration)
	}
	if o.Count < 0 {
		bad("Count %d is negative", o.Count)
	}
	if o.Progress < 0 {
		bad("Progress %v is negative", o.Progress)
	}
	if o.Timeout < 0 {
		bad("Timeout %v is negative", o.Timeout)
	}
	if o.BrokerPID < 0 {
		bad("BrokerPID %d is negative", o.BrokerPID)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, strings.Join(problems, "; "))
	}
	return nil
}
