package grpcserver_test

import (
	"context"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
	"github.com/rmq-go/rmq/internal/server"
)

// createLiteTopic creates a LITE topic and a FIFO group to consume it.
func (e *env) createLiteTopic(t *testing.T, topic, group string) {
	t.Helper()
	if err := e.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6, MessageType: broker.MessageTypeLite}); err != nil {
		t.Fatal(err)
	}
	if err := e.Broker.PutGroupConfig(broker.SubscriptionGroupConfig{GroupName: group, ConsumeEnable: true, RetryQueueNums: 1, RetryMaxTimes: 16, ConsumeMessageOrderly: true}); err != nil {
		t.Fatal(err)
	}
}

// TestNodeLite: the official Node producer sends to lite topics and its
// LitePushConsumer gets the messages of the lite topics it subscribes
// to, each in order, from where its offset option says (e2e.js, case
// lite).
func TestNodeLite(t *testing.T) {
	e := start(t, func(c *server.Config) { c.GRPC.LongPolling = 2 * time.Second })
	topic, group := brokertest.Name("NodeLite"), brokertest.Name("nodelite")
	e.createLiteTopic(t, topic, group)
	out := runNode(t, e, "lite", "RMQ_TOPIC="+topic, "RMQ_GROUP="+group)
	if !strings.Contains(out, `"ok":true`) {
		t.Fatalf("node output: %s", out)
	}
}

// liteMsg is a message of lite topic lite of topic, whose body is id.
func liteMsg(topic, lite, id string) *pb.Message {
	m := msg(topic, id, "t", id)
	m.SystemProperties.MessageType, m.SystemProperties.LiteTopic = pb.MessageType_LITE, &lite
	return m
}

// liteClient opens a lite push consumer's session of group on topic with
// client id id and returns its context.
func (e *env) liteClient(t *testing.T, id, group, topic string) context.Context {
	t.Helper()
	c := ctx(t, "x-mq-client-id", id)
	r := telemetry(t, e, c, &pb.Settings{ClientType: pb.ClientType_LITE_PUSH_CONSUMER.Enum(), PubSub: &pb.Settings_Subscription{Subscription: &pb.Subscription{
		Group: res(group), Subscriptions: []*pb.SubscriptionEntry{{Topic: res(topic), Expression: &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "*"}}},
	}}})
	if r.Status.GetCode() != pb.Code_OK || r.GetSettings().GetSubscription().GetLiteSubscriptionQuota() <= 0 || r.GetSettings().GetSubscription().GetMaxLiteTopicSize() != broker.MaxLiteTopicLen {
		t.Fatalf("lite consumer settings: %v", r)
	}
	return c
}

// syncLite sends a SyncLiteSubscription and returns its code.
func (e *env) syncLite(t *testing.T, c context.Context, group, topic string, action pb.LiteSubscriptionAction, offset *pb.OffsetOption, lites ...string) pb.Code {
	t.Helper()
	r, err := e.cl.SyncLiteSubscription(c, &pb.SyncLiteSubscriptionRequest{Action: action, Topic: res(topic), Group: res(group), LiteTopicSet: lites, OffsetOption: offset})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.GetCode()
}

// receiveLite receives once as the client of c and returns the messages.
func (e *env) receiveLite(t *testing.T, c context.Context, group, topic string, poll time.Duration) []*pb.Message {
	t.Helper()
	st, err := e.cl.ReceiveMessage(c, &pb.ReceiveMessageRequest{
		Group: res(group), MessageQueue: &pb.MessageQueue{Topic: res(topic)}, FilterExpression: &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "*"},
		BatchSize: 32, InvisibleDuration: durationpb.New(30 * time.Second), LongPollingTimeout: durationpb.New(poll),
	})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*pb.Message
	for {
		r, err := st.Recv()
		if err == io.EOF {
			return msgs
		}
		if err != nil {
			t.Fatal(err)
		}
		switch x := r.Content.(type) {
		case *pb.ReceiveMessageResponse_Message:
			msgs = append(msgs, x.Message)
		case *pb.ReceiveMessageResponse_Status:
			if x.Status.Code != pb.Code_OK && x.Status.Code != pb.Code_MESSAGE_NOT_FOUND {
				t.Fatalf("receive: %v", x.Status)
			}
		}
	}
}

// bodies names each message as lite:body.
func bodies(msgs []*pb.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.GetSystemProperties().GetLiteTopic()+":"+string(m.Body))
	}
	return out
}

// TestLiteTopics: lite messages go to their lite topic's queue; a lite
// consumer receives those of the lite topics it subscribes to, in order,
// acknowledges them naming the lite topic, and a FIFO group's next
// messages of a lite topic wait for those in flight.
func TestLiteTopics(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Lite"), brokertest.Name("lite")
	e.createLiteTopic(t, topic, group)
	for i, l := range []string{"a", "b", "a", "c", "b", "a"} {
		e.send(t, liteMsg(topic, l, l+itoa(int32(i))))
	}
	c := e.liteClient(t, "lite-1", group, topic)
	if code := e.syncLite(t, c, group, topic, pb.LiteSubscriptionAction_PARTIAL_ADD, nil, "a", "b"); code != pb.Code_OK {
		t.Fatalf("sync: %v", code)
	}
	got := e.receiveLite(t, c, group, topic, time.Second)
	if g := bodies(got); !sameSet(g, []string{"a:a0", "a:a2", "a:a5", "b:b1", "b:b4"}) || !inOrder(g) {
		t.Fatalf("first receive: %v", g)
	}
	for _, m := range got {
		if m.GetTopic().GetName() != topic || m.GetSystemProperties().GetMessageType() != pb.MessageType_LITE {
			t.Fatalf("delivered as %v", m)
		}
	}
	if g := bodies(e.receiveLite(t, c, group, topic, 100*time.Millisecond)); len(g) != 0 {
		t.Fatalf("received while the lite topics' messages are in flight: %v", g)
	}
	var entries []*pb.AckMessageEntry
	for _, m := range got {
		if m.SystemProperties.GetLiteTopic() == "a" {
			entries = append(entries, &pb.AckMessageEntry{MessageId: m.SystemProperties.MessageId, ReceiptHandle: m.SystemProperties.GetReceiptHandle(), LiteTopic: m.SystemProperties.LiteTopic})
		}
	}
	r, err := e.cl.AckMessage(c, &pb.AckMessageRequest{Group: res(group), Topic: res(topic), Entries: entries})
	if err != nil || r.Status.GetCode() != pb.Code_OK {
		t.Fatalf("ack: %v %v", r, err)
	}
	e.send(t, liteMsg(topic, "a", "a6"))
	if g := bodies(e.receiveLite(t, c, group, topic, time.Second)); !slices.Equal(g, []string{"a:a6"}) {
		t.Fatalf("after the acks of a: %v", g)
	}
}

// inOrder reports whether each lite topic's bodies (lite:lite<n>) come
// in the order of n.
func inOrder(g []string) bool {
	last := map[string]int{}
	for _, s := range g {
		l, body, _ := strings.Cut(s, ":")
		n, _ := strconv.Atoi(body[len(l):])
		if p, ok := last[l]; ok && n <= p {
			return false
		}
		last[l] = n
	}
	return true
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
