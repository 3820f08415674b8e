package grpcserver_test

import (
	"context"
	"io"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
	"github.com/rmq-go/rmq/internal/server"
)

// env is a broker with its gRPC endpoint and a client of it.
type env struct {
	*brokertest.Env
	cl   pb.MessagingServiceClient
	conn *grpc.ClientConn
}

// start runs a broker serving gRPC on a free port, with mutate applied
// to its config.
func start(t testing.TB, mutate ...func(*server.Config)) *env {
	t.Helper()
	e := brokertest.Start(t, append([]func(*server.Config){func(c *server.Config) {
		c.GRPCListen = "127.0.0.1:0"
	}}, mutate...)...)
	return connect(t, e)
}

func connect(t testing.TB, e *brokertest.Env) *env {
	t.Helper()
	conn, err := grpc.NewClient(e.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &env{Env: e, cl: pb.NewMessagingServiceClient(conn), conn: conn}
}

// ctx returns a context carrying a client id, canceled when the test ends.
func ctx(t testing.TB, kv ...string) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(c, append([]string{"x-mq-client-id", "test-client", "x-mq-protocol", "v2"}, kv...)...)
}

func res(name string) *pb.Resource { return &pb.Resource{Name: name} }

// createTopic makes a topic with n queues.
func (e *env) createTopic(t testing.TB, topic string, n int) {
	t.Helper()
	if err := e.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: n, WriteQueueNums: n, Perm: 6}); err != nil {
		t.Fatal(err)
	}
}

// msg builds a message of topic.
func msg(topic, id, tag string, body string) *pb.Message {
	return &pb.Message{
		Topic: res(topic), Body: []byte(body),
		SystemProperties: &pb.SystemProperties{MessageId: id, Tag: &tag, MessageType: pb.MessageType_NORMAL, BornTimestamp: timestamppb.Now(), BornHost: "127.0.0.1"},
	}
}

// send sends one message and requires OK.
func (e *env) send(t *testing.T, m *pb.Message) *pb.SendResultEntry {
	t.Helper()
	r, err := e.cl.SendMessage(ctx(t), &pb.SendMessageRequest{Messages: []*pb.Message{m}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status.GetCode() != pb.Code_OK || len(r.Entries) != 1 {
		t.Fatalf("send: %v", r)
	}
	return r.Entries[0]
}

// sendDelayed sends a DELAY message of topic, id and body id, due at at.
func (e *env) sendDelayed(t *testing.T, topic, id string, at time.Time) *pb.SendResultEntry {
	t.Helper()
	m := msg(topic, id, "t", id)
	m.SystemProperties.MessageType, m.SystemProperties.DeliveryTimestamp = pb.MessageType_DELAY, timestamppb.New(at)
	return e.send(t, m)
}

// receive runs one ReceiveMessage and returns its status and messages.
func (e *env) receive(t *testing.T, group, topic string, filter *pb.FilterExpression, batch int32, invisible, poll time.Duration) (*pb.Status, []*pb.Message) {
	t.Helper()
	if filter == nil {
		filter = &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "*"}
	}
	st, err := e.cl.ReceiveMessage(ctx(t), &pb.ReceiveMessageRequest{
		Group: res(group), MessageQueue: &pb.MessageQueue{Topic: res(topic), Id: 0}, FilterExpression: filter,
		BatchSize: batch, InvisibleDuration: durationpb.New(invisible), LongPollingTimeout: durationpb.New(poll),
	})
	if err != nil {
		t.Fatal(err)
	}
	var status *pb.Status
	var msgs []*pb.Message
	for {
		r, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		switch c := r.Content.(type) {
		case *pb.ReceiveMessageResponse_Status:
			if status == nil {
				status = c.Status
			}
		case *pb.ReceiveMessageResponse_Message:
			msgs = append(msgs, c.Message)
		}
	}
	if status == nil {
		t.Fatal("receive: no status")
	}
	return status, msgs
}

func (e *env) ack(t *testing.T, group, topic string, m *pb.Message, handle string) pb.Code {
	t.Helper()
	r, err := e.cl.AckMessage(ctx(t), &pb.AckMessageRequest{Group: res(group), Topic: res(topic),
		Entries: []*pb.AckMessageEntry{{MessageId: m.GetSystemProperties().GetMessageId(), ReceiptHandle: handle}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Entries) != 1 || r.Entries[0].Status.GetCode() != r.Status.GetCode() {
		t.Fatalf("ack answer: %v", r)
	}
	return r.Status.GetCode()
}

func (e *env) change(t *testing.T, group, topic, handle string, d time.Duration) (*pb.Status, string) {
	t.Helper()
	r, err := e.cl.ChangeInvisibleDuration(ctx(t), &pb.ChangeInvisibleDurationRequest{Group: res(group), Topic: res(topic), ReceiptHandle: handle, InvisibleDuration: durationpb.New(d)})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status, r.ReceiptHandle
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// pollWaiting reports whether a receive is waiting on the endpoint.
func pollWaiting(e *env) bool { return e.GRPC.Waiting() > 0 }

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func startB(b *testing.B) *env { return start(b) }

func ctxB(b *testing.B) context.Context { return ctx(b) }

func (e *env) createTopicB(b *testing.B, topic string, n int) { e.createTopic(b, topic, n) }

// receiveB receives a batch of 32 for a benchmark.
func receiveB(b *testing.B, e *env, c context.Context, group, topic string) []*pb.Message {
	s, err := e.cl.ReceiveMessage(c, &pb.ReceiveMessageRequest{
		Group: res(group), MessageQueue: &pb.MessageQueue{Topic: res(topic)}, BatchSize: 32,
		InvisibleDuration: durationpb.New(time.Minute), LongPollingTimeout: durationpb.New(time.Second),
	})
	if err != nil {
		b.Fatal(err)
	}
	var msgs []*pb.Message
	for {
		r, err := s.Recv()
		if err == io.EOF {
			return msgs
		}
		if err != nil {
			b.Fatal(err)
		}
		if m := r.GetMessage(); m != nil {
			msgs = append(msgs, m)
		}
	}
}
