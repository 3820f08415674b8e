package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rmq-go/rmq/core/message"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// Values of the gRPC requests that never change.
const (
	// popInvisible is the invisible duration of every receive: long
	// enough that a message is acknowledged before it could come again.
	popInvisible = 30 * time.Second
	// clientVersion is the x-mq-client-version the bench sends.
	clientVersion = "rmq-go-bench"
)

// grpcConn is one gRPC connection of a run: its ClientConn, the client id
// its requests carry, and the Telemetry stream that keeps its session.
type grpcConn struct {
	conn *grpc.ClientConn
	cl   pb.MessagingServiceClient
	// ctx carries the connection's metadata; every request's context
	// derives from it. cancel ends the Telemetry stream.
	ctx    context.Context
	cancel context.CancelFunc
	hist   *lockedHistogram // where its requests' latencies go
	// reading is closed when the goroutine reading the Telemetry stream
	// has ended; nil when none was started.
	reading chan struct{}
}

// close ends the connection and waits for its Telemetry reader.
func (c *grpcConn) close() {
	c.cancel()
	_ = c.conn.Close()
	if c.reading != nil {
		<-c.reading
	}
}

// clientIDs numbers the client ids of this process's connections.
var clientIDs atomic.Int64

// dialGRPC opens s's connections in parallel and does what a RocketMQ 5
// client does before its first send or receive, before the clock starts:
// open the Telemetry stream and send its Settings (a producer of the
// topic, or a simple consumer of the group), wait for the answer, and
// query the topic's route. A failure of any ends the run.
func dialGRPC(s *session, consumer bool) error {
	o := &s.opts
	typ := pb.ClientType_PRODUCER
	settings := &pb.Settings{
		ClientType:     &typ,
		RequestTimeout: durationpb.New(o.Timeout),
		PubSub:         &pb.Settings_Publishing{Publishing: &pb.Publishing{Topics: []*pb.Resource{{Name: o.Topic}}}},
	}
	if consumer {
		typ = pb.ClientType_SIMPLE_CONSUMER
		settings.PubSub = &pb.Settings_Subscription{Subscription: &pb.Subscription{
			Group:         &pb.Resource{Name: o.Group},
			Subscriptions: []*pb.SubscriptionEntry{{Topic: &pb.Resource{Name: o.Topic}, Expression: everyTag()}},
		}}
	}
	host, _ := os.Hostname()
	s.addHistograms(o.Conns * o.InFlight)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for i := range o.Conns {
		conn, err := grpc.NewClient(o.Broker, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return fmt.Errorf("bench: gRPC client of %s: %w", o.Broker, err)
		}
		id := fmt.Sprintf("%s@%d#bench-%d", host, os.Getpid(), clientIDs.Add(1))
		ctx, cancel := context.WithCancel(s.ctx)
		ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", id, "x-mq-protocol", "v2",
			"x-mq-language", "GOLANG", "x-mq-client-version", clientVersion)
		c := &grpcConn{conn: conn, cl: pb.NewMessagingServiceClient(conn), ctx: ctx, cancel: cancel, hist: s.hists[i%len(s.hists)]}
		s.grpc = append(s.grpc, c)
		wg.Go(func() {
			if err := c.handshake(o, settings); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// handshake sends Settings on a new Telemetry stream, which stays open
// until the connection closes, and queries the topic's route.
func (c *grpcConn) handshake(o *Options, settings *pb.Settings) error {
	stream, err := c.cl.Telemetry(c.ctx)
	if err != nil {
		return fmt.Errorf("bench: gRPC Telemetry: %w", err)
	}
	// The answer is bounded by Timeout: past it the stream, and the
	// connection's context with it, is cancelled.
	timer := time.AfterFunc(o.Timeout, c.cancel)
	err = stream.Send(&pb.TelemetryCommand{Command: &pb.TelemetryCommand_Settings{Settings: settings}})
	var answer *pb.TelemetryCommand
	if err == nil {
		answer, err = stream.Recv()
	}
	if !timer.Stop() {
		return fmt.Errorf("%w: no answer to Settings in %v", ErrTimeout, o.Timeout)
	}
	if err != nil {
		return fmt.Errorf("bench: gRPC Settings: %w", err)
	}
	if code := answer.GetStatus().GetCode(); code != pb.Code_OK {
		return fmt.Errorf("%w Settings with %v: %s", ErrRefused, code, answer.GetStatus().GetMessage())
	}
	// Commands the broker sends on the stream (none to a bench client)
	// are read and dropped, so they never hold up the connection.
	c.reading = make(chan struct{})
	go func() {
		defer close(c.reading)
		for {
			if _, err := stream.Recv(); err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(c.ctx, o.Timeout)
	defer cancel()
	route, err := c.cl.QueryRoute(ctx, &pb.QueryRouteRequest{Topic: &pb.Resource{Name: o.Topic}})
	if err != nil {
		return fmt.Errorf("bench: gRPC QueryRoute: %w", err)
	}
	if code := route.GetStatus().GetCode(); code != pb.Code_OK {
		return fmt.Errorf("%w QueryRoute of %s with %v: %s", ErrRefused, o.Topic, code, route.GetStatus().GetMessage())
	}
	return nil
}

func everyTag() *pb.FilterExpression {
	return &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "*"}
}

// statusError is the error of a Status other than OK.
func statusError(rpc string, st *pb.Status) error {
	return fmt.Errorf("%s: %v: %s", rpc, st.GetCode(), st.GetMessage())
}

// callError is the error of a gRPC call that got no answer: ErrTimeout
// when its deadline passed. timedOut reports which.
func callError(rpc string, err error, timeout time.Duration) (e error, timedOut bool) {
	if status.Code(err) == codes.DeadlineExceeded {
		return fmt.Errorf("%w: %s unanswered after %v", ErrTimeout, rpc, timeout), true
	}
	return fmt.Errorf("%s: %w", rpc, err), false
}

// produceGRPC is Produce under ProtocolGRPC.
func produceGRPC(ctx context.Context, opts Options, out io.Writer, clk clock) (Summary, error) {
	// One remoting client, to create the topic at Admin.
	s := newSession(ctx, opts, out, clk, 1, 0)
	defer s.close()
	if _, err := s.brokerCPU(); err != nil {
		return Summary{}, err
	}
	if err := createTopic(s); err != nil {
		return Summary{}, err
	}
	if err := dialGRPC(s, false); err != nil {
		return Summary{}, err
	}
	fmt.Fprintln(s.out, produceHeader(&opts))

	p := newProducer(s)
	s.runLoops(func() {
		if opts.Rate > 0 {
			p.pacer = newPacer(clk, opts.Rate, s.start)
		}
	}, opts.Conns*opts.InFlight, func(i int) { p.loopGRPC(s.grpc[i%opts.Conns]) })
	return s.summary(), ctx.Err()
}

// loopGRPC is one outstanding SendMessage call, made again and again on c
// until the run is over. gRPC's unary calls block, so each call in flight
// has a goroutine of its own.
func (p *producer) loopGRPC(c *grpcConn) {
	s := p.s
	o := &s.opts
	tag := benchTag
	host := s.bornHost()
	topic := &pb.Resource{Name: o.Topic}
	// The request is rebuilt in place: SendMessage has encoded it by the
	// time it returns.
	req := &pb.SendMessageRequest{}
	msgs := make([]pb.Message, o.Batch)
	props := make([]pb.SystemProperties, o.Batch)
	for i := range msgs {
		props[i] = pb.SystemProperties{Tag: &tag, MessageType: pb.MessageType_NORMAL, BornHost: host}
		msgs[i] = pb.Message{Topic: topic, Body: p.payload, SystemProperties: &props[i]}
	}
	failed := false
	for {
		if failed {
			failed = false
			if !s.backoff() {
				return
			}
		}
		n := p.claim()
		if n == 0 || !p.wait(n) {
			return
		}
		born := timestamppb.Now()
		req.Messages = req.Messages[:0]
		for i := range n {
			props[i].MessageId = message.NewUniqID()
			props[i].BornTimestamp = born
			req.Messages = append(req.Messages, &msgs[i])
		}
		ctx, cancel := context.WithTimeout(c.ctx, o.Timeout)
		t0 := s.clk.now()
		resp, err := c.cl.SendMessage(ctx, req)
		lat := s.clk.now() - t0
		cancel()
		if err != nil && s.ctx.Err() != nil {
			return // the run was stopped; this request does not count
		}
		s.requests.Add(1)
		if err != nil {
			var timedOut bool
			err, timedOut = callError("SendMessage", err, o.Timeout)
			failed = !timedOut
			s.failed(nil, err)
			continue
		}
		c.hist.record(lat)
		var ok int64
		for _, e := range resp.GetEntries() {
			if e.GetStatus().GetCode() == pb.Code_OK {
				ok++
			}
		}
		ok = min(ok, int64(n))
		s.messages.Add(ok)
		s.bytes.Add(ok * int64(o.Size))
		if ok < int64(n) {
			s.failed(nil, statusError("SendMessage", resp.GetStatus()))
		}
	}
}

// bornHost is the born_host of the messages a run sends.
func (s *session) bornHost() string {
	if h, err := os.Hostname(); err == nil {
		return h
	}
	return "localhost"
}

// consumeGRPC is Consume under ProtocolGRPC.
func consumeGRPC(ctx context.Context, opts Options, out io.Writer, clk clock) (Summary, error) {
	s := newSession(ctx, opts, out, clk, 0, 0)
	defer s.close()
	if _, err := s.brokerCPU(); err != nil {
		return Summary{}, err
	}
	if err := dialGRPC(s, true); err != nil {
		return Summary{}, err
	}
	c := &popConsumer{consumer: consumer{s: s}}
	fmt.Fprintln(s.out, c.header())
	c.remaining.Store(opts.Count)
	s.runLoops(nil, opts.Conns*opts.InFlight, func(i int) { c.loop(s.grpc[i%opts.Conns]) })
	return s.summary(), ctx.Err()
}

// popConsumer is the shared state of a Consume run's receivers over gRPC;
// it uses consumer's Count budget.
type popConsumer struct {
	consumer
}

func (c *popConsumer) header() string {
	o := &c.s.opts
	until := "caught up"
	if o.Count > 0 {
		until += fmt.Sprintf(" or %d messages", o.Count)
	}
	if o.Duration > 0 {
		until += fmt.Sprintf(" or %v", o.Duration)
	}
	return fmt.Sprintf("consume from %s topic %s as group %s over gRPC (POP): %d conns × %d receives, %d per receive, each acknowledged, until %s",
		o.Broker, o.Topic, o.Group, o.Conns, o.InFlight, o.PullBatch, until)
}

// loop is one receiver: receive up to PullBatch messages, acknowledge
// them in one AckMessage, again, until a receive finds nothing (the group
// has caught up), the budget or the time is used, or the run ends. A
// receive and its ack are one request of the summary, timed from the
// receive to the ack's answer.
func (c *popConsumer) loop(conn *grpcConn) {
	s := c.s
	o := &s.opts
	group, topic := &pb.Resource{Name: o.Group}, &pb.Resource{Name: o.Topic}
	recv := &pb.ReceiveMessageRequest{
		Group:              group,
		MessageQueue:       &pb.MessageQueue{Topic: topic},
		FilterExpression:   everyTag(),
		InvisibleDuration:  durationpb.New(popInvisible),
		LongPollingTimeout: durationpb.New(0), // nothing new: answer at once
	}
	ack := &pb.AckMessageRequest{Group: group, Topic: topic}
	failures := 0
	fail := func(err error) bool {
		s.failed(nil, err)
		if failures++; failures >= maxPullFailures {
			return false
		}
		return s.backoff()
	}
	for !c.stopped.Load() && s.ctx.Err() == nil {
		if s.pastDeadline(s.clk.now()) {
			c.stopped.Store(true)
			return
		}
		want := c.take(int64(o.PullBatch))
		if want == 0 {
			c.stopped.Store(true)
			return
		}
		recv.BatchSize = int32(want)
		ctx, cancel := context.WithTimeout(conn.ctx, o.Timeout)
		t0 := s.clk.now()
		rpc := "ReceiveMessage"
		msgs, st, err := receive(ctx, conn.cl, recv)
		if err == nil && st.GetCode() == pb.Code_OK && len(msgs) > 0 {
			ack.Entries = ack.Entries[:0]
			for _, m := range msgs {
				sp := m.GetSystemProperties()
				ack.Entries = append(ack.Entries, &pb.AckMessageEntry{MessageId: sp.GetMessageId(), ReceiptHandle: sp.GetReceiptHandle()})
			}
			rpc = "AckMessage"
			var answer *pb.AckMessageResponse
			if answer, err = conn.cl.AckMessage(ctx, ack); err == nil {
				st = answer.GetStatus()
				msgs = acknowledged(msgs, answer)
			}
		}
		if err != nil {
			err, _ = callError(rpc, err, o.Timeout)
		}
		lat := s.clk.now() - t0
		cancel()
		if err != nil && s.ctx.Err() != nil {
			c.giveBack(want)
			return // the run was stopped; this request does not count
		}
		s.requests.Add(1)
		if err != nil {
			c.giveBack(want)
			if !fail(err) {
				return
			}
			continue
		}
		conn.hist.record(lat)
		got := min(int64(len(msgs)), want)
		var bytes int64
		for _, m := range msgs[:got] {
			bytes += int64(len(m.GetBody()))
		}
		s.messages.Add(got)
		s.bytes.Add(bytes)
		c.giveBack(want - got)
		switch st.GetCode() {
		case pb.Code_OK:
			failures = 0
		case pb.Code_MESSAGE_NOT_FOUND:
			return // caught up
		case pb.Code_MULTIPLE_RESULTS:
			// Some acknowledgements failed; they are counted as errors.
			s.failed(nil, statusError(rpc, st))
		default:
			if !fail(statusError(rpc, st)) {
				return
			}
		}
	}
}

// receive makes one ReceiveMessage call and returns its messages and
// status. A stream that ends without a status is an error.
func receive(ctx context.Context, cl pb.MessagingServiceClient, req *pb.ReceiveMessageRequest) ([]*pb.Message, *pb.Status, error) {
	stream, err := cl.ReceiveMessage(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	var (
		st   *pb.Status
		msgs []*pb.Message
	)
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		switch x := r.GetContent().(type) {
		case *pb.ReceiveMessageResponse_Status:
			if st == nil {
				st = x.Status
			}
		case *pb.ReceiveMessageResponse_Message:
			msgs = append(msgs, x.Message)
		}
	}
	if st == nil {
		return nil, nil, errors.New("the stream ended without a status")
	}
	return msgs, st, nil
}

// acknowledged returns the messages of msgs whose acknowledgement
// succeeded.
func acknowledged(msgs []*pb.Message, answer *pb.AckMessageResponse) []*pb.Message {
	if answer.GetStatus().GetCode() == pb.Code_OK {
		return msgs
	}
	ok := map[string]bool{}
	for _, e := range answer.GetEntries() {
		if e.GetStatus().GetCode() == pb.Code_OK {
			ok[e.GetReceiptHandle()] = true
		}
	}
	var out []*pb.Message
	for _, m := range msgs {
		if ok[m.GetSystemProperties().GetReceiptHandle()] {
			out = append(out, m)
		}
	}
	return out
}
