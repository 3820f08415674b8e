package grpcserver_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/outbox"
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
	return e.liteClientOf(t, pb.ClientType_LITE_PUSH_CONSUMER, id, group, topic)
}

// liteClientOf opens a session of a lite consumer of type typ.
func (e *env) liteClientOf(t *testing.T, typ pb.ClientType, id, group, topic string) context.Context {
	t.Helper()
	c := clientCtx(t, id)
	r := telemetry(t, e, c, &pb.Settings{ClientType: typ.Enum(), PubSub: &pb.Settings_Subscription{Subscription: &pb.Subscription{
		Group: res(group), Subscriptions: []*pb.SubscriptionEntry{{Topic: res(topic), Expression: &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "*"}}},
	}}})
	if r.Status.GetCode() != pb.Code_OK || r.GetSettings().GetSubscription().GetLiteSubscriptionQuota() <= 0 || r.GetSettings().GetSubscription().GetMaxLiteTopicSize() != broker.MaxLiteTopicLen {
		t.Fatalf("lite consumer settings: %v", r)
	}
	return c
}

// clientCtx is ctx for the client id.
func clientCtx(t *testing.T, id string) context.Context {
	return metadata.NewOutgoingContext(ctx(t), metadata.Pairs("x-mq-client-id", id, "x-mq-protocol", "v2"))
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
	return e.receiveLiteFrom(t, c, group, &pb.MessageQueue{Topic: res(topic)}, poll)
}

// receiveLiteFrom receives once from mq, as a simple consumer does (no
// auto renewal, an invisible time of 30 s).
func (e *env) receiveLiteFrom(t *testing.T, c context.Context, group string, mq *pb.MessageQueue, poll time.Duration) []*pb.Message {
	t.Helper()
	st, err := e.cl.ReceiveMessage(c, &pb.ReceiveMessageRequest{
		Group: res(group), MessageQueue: mq, FilterExpression: &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "*"},
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

// sendCode sends one message and returns the code of its entry.
func (e *env) sendCode(t *testing.T, m *pb.Message) pb.Code {
	t.Helper()
	r, err := e.cl.SendMessage(ctx(t), &pb.SendMessageRequest{Messages: []*pb.Message{m}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Entries) != 1 {
		t.Fatalf("send: %v", r)
	}
	return r.Entries[0].Status.GetCode()
}

// TestLiteMessageChecks: a lite message goes only to a LITE topic that
// exists, with a good name and nothing of another kind; a LITE topic
// takes only lite messages, from RocketMQ 5 clients; no client writes a
// lite topic's queue directly.
func TestLiteMessageChecks(t *testing.T) {
	e := start(t)
	topic, normal, unknown, group := brokertest.Name("LiteChk"), brokertest.Name("NotLite"), brokertest.Name("NoSuch"), brokertest.Name("litechk")
	e.createLiteTopic(t, topic, group)
	e.createTopic(t, normal, 2)
	grouped := liteMsg(topic, "s1", "g")
	grouped.SystemProperties.MessageGroup = proto.String("g1")
	noLite := liteMsg(topic, "s1", "nolite")
	noLite.SystemProperties.LiteTopic = nil
	for _, c := range []struct {
		name string
		m    *pb.Message
		want pb.Code
	}{
		{"lite to a NORMAL topic", liteMsg(normal, "s1", "x"), pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"lite to no topic", liteMsg(unknown, "s1", "x"), pb.Code_TOPIC_NOT_FOUND},
		{"NORMAL to a LITE topic", msg(topic, "n", "t", "n"), pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"LITE without a lite topic", noLite, pb.Code_ILLEGAL_LITE_TOPIC},
		{"lite with a message group", grouped, pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"a name with a space", liteMsg(topic, "a b", "x"), pb.Code_ILLEGAL_LITE_TOPIC},
		{"a name of 65 characters", liteMsg(topic, strings.Repeat("x", 65), "x"), pb.Code_ILLEGAL_LITE_TOPIC},
		{"a name of 64 characters", liteMsg(topic, strings.Repeat("x", 64), "x"), pb.Code_OK},
	} {
		if got := e.sendCode(t, c.m); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if _, ok := e.Broker.Topic(unknown); ok {
		t.Error("a refused lite send created its topic")
	}
	// The official 4.x producer's send to a LITE topic is refused.
	if _, err := e.Producer(t).SendSync(context.Background(), primitive.NewMessage(topic, []byte("4.x"))); err == nil {
		t.Error("a 4.x send to a LITE topic stored")
	}
	// A lite topic's queue is no topic a send may name (nor create).
	queue := broker.LiteQueueTopic(topic, "s1")
	if r := e.Broker.SendLocalBatch([]broker.LocalSend{{Topic: queue, QueueID: -1, Body: []byte("x")}}); !errors.Is(r[0].Err, broker.ErrNoPermission) {
		t.Errorf("a send naming the lite queue %s: %v", queue, r[0].Err)
	}
	if _, ok := e.Broker.Topic(queue); ok {
		t.Errorf("a send created the lite queue %s as a topic", queue)
	}
	if err := e.Broker.CreateTopic(broker.TopicConfig{TopicName: strings.Repeat("L", broker.MaxLiteParentLen+1), ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6, MessageType: broker.MessageTypeLite}); err == nil {
		t.Error("a LITE topic whose lite queues' names would not fit was created")
	}
}

// TestLiteTopicQuota: past maxLiteTopics a new lite topic is refused with
// LITE_TOPIC_QUOTA_EXCEEDED while known ones take messages; one whose
// messages retention removed no longer counts; a restarted broker counts
// those its store holds.
func TestLiteTopicQuota(t *testing.T) {
	var skew atomic.Int64 // the broker's clock runs ahead by this
	e := start(t, func(c *server.Config) {
		c.Broker.MaxLiteTopics = 2
		c.Broker.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	topic, group := brokertest.Name("LiteQ"), brokertest.Name("liteq")
	e.createLiteTopic(t, topic, group)
	for _, l := range []string{"q1", "q2", "q1"} {
		if code := e.sendCode(t, liteMsg(topic, l, l)); code != pb.Code_OK {
			t.Fatalf("send to %s: %v", l, code)
		}
	}
	if code := e.sendCode(t, liteMsg(topic, "q3", "q3")); code != pb.Code_LITE_TOPIC_QUOTA_EXCEEDED {
		t.Fatalf("third lite topic: %v", code)
	}
	if got := e.Broker.View().LiteTopics(topic); !slices.Equal(got, []string{"q1", "q2"}) {
		t.Fatalf("lite topics %v", got)
	}
	if err := e.Store.TrimQueue(broker.LiteQueueTopic(topic, "q2"), 0, 1); err != nil {
		t.Fatal(err)
	}
	if code := e.sendCode(t, liteMsg(topic, "q3", "q3")); code != pb.Code_LITE_TOPIC_QUOTA_EXCEEDED {
		t.Fatalf("a new lite topic within a second of the last walk over them: %v", code)
	}
	skew.Store(int64(2 * time.Second)) // the walks over the lite topics at the bound are a second apart
	if code := e.sendCode(t, liteMsg(topic, "q3", "q3")); code != pb.Code_OK {
		t.Fatalf("after q2's messages went: %v", code)
	}
	e2 := connect(t, e.Restart(t))
	if code := e2.sendCode(t, liteMsg(topic, "q4", "q4")); code != pb.Code_LITE_TOPIC_QUOTA_EXCEEDED {
		t.Fatalf("after a restart, a third lite topic: %v", code)
	}
	if got := e2.Broker.View().LiteTopics(topic); !slices.Equal(got, []string{"q1", "q3"}) {
		t.Fatalf("lite topics after a restart %v", got)
	}
}

// TestLiteSubscriptionChecks: a subscription names good lite topics of a
// LITE topic, within the quota the settings told; a LITE topic is
// received from only by lite consumers, and they only from LITE topics.
func TestLiteSubscriptionChecks(t *testing.T) {
	e := start(t, func(c *server.Config) { c.GRPC.LiteSubscriptionQuota = 2 })
	topic, normal, group := brokertest.Name("LiteSub"), brokertest.Name("NotLiteSub"), brokertest.Name("litesub")
	e.createLiteTopic(t, topic, group)
	e.createTopic(t, normal, 1)
	c := e.liteClient(t, "lite-sub", group, topic)
	add := pb.LiteSubscriptionAction_PARTIAL_ADD
	for _, x := range []struct {
		name  string
		topic string
		lites []string
		want  pb.Code
	}{
		{"a bad name", topic, []string{"a/b"}, pb.Code_ILLEGAL_LITE_TOPIC},
		{"more names than the quota", topic, []string{"x", "y", "z"}, pb.Code_LITE_SUBSCRIPTION_QUOTA_EXCEEDED},
		{"a topic not LITE", normal, []string{"a"}, pb.Code_BAD_REQUEST},
		{"within the quota", topic, []string{"a", "b"}, pb.Code_OK},
		{"past the quota", topic, []string{"c"}, pb.Code_LITE_SUBSCRIPTION_QUOTA_EXCEEDED},
	} {
		if got := e.syncLite(t, c, group, x.topic, add, nil, x.lites...); got != x.want {
			t.Errorf("%s: %v, want %v", x.name, got, x.want)
		}
	}
	if got := e.syncLite(t, c, group, topic, pb.LiteSubscriptionAction_PARTIAL_REMOVE, nil, "a"); got != pb.Code_OK {
		t.Fatalf("remove: %v", got)
	}
	if got := e.syncLite(t, c, group, topic, add, nil, "c"); got != pb.Code_OK {
		t.Fatalf("add after a remove: %v", got)
	}
	// A SimpleConsumer may not receive from a LITE topic, nor a lite
	// consumer from another.
	plain := clientCtx(t, "plain-1")
	telemetry(t, e, plain, &pb.Settings{ClientType: pb.ClientType_SIMPLE_CONSUMER.Enum(), PubSub: &pb.Settings_Subscription{Subscription: &pb.Subscription{Group: res(group)}}})
	for _, x := range []struct {
		c     context.Context
		topic string
	}{{plain, topic}, {c, normal}} {
		st, err := e.cl.ReceiveMessage(x.c, &pb.ReceiveMessageRequest{Group: res(group), MessageQueue: &pb.MessageQueue{Topic: res(x.topic)}, BatchSize: 1, LongPollingTimeout: durationpb.New(time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		r, err := st.Recv()
		if err != nil || r.GetStatus().GetCode() != pb.Code_BAD_REQUEST {
			t.Errorf("receive from %s: %v %v, want BAD_REQUEST", x.topic, r, err)
		}
	}
}

// TestLiteSimpleConsumer makes the requests of RocketMQ 5's
// LiteSimpleConsumer (the Java client's LiteSimpleConsumerImpl, a simple
// consumer of client type LITE_SIMPLE_CONSUMER): it receives from the
// first readable queue of its topic's route, without auto renewal, acks
// naming the lite topic, and its changeInvisibleDuration always suspends
// (suspend=true with the lite topic), so the message comes back after the
// time asked at the same attempt, under the receipt handle the change
// answered with.
func TestLiteSimpleConsumer(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("LiteSimple"), brokertest.Name("litesimple")
	e.createLiteTopic(t, topic, group)
	for i, l := range []string{"a", "b", "a"} {
		e.send(t, liteMsg(topic, l, l+itoa(int32(i))))
	}
	c := e.liteClientOf(t, pb.ClientType_LITE_SIMPLE_CONSUMER, "lite-simple", group, topic)
	if code := e.syncLite(t, c, group, topic, pb.LiteSubscriptionAction_PARTIAL_ADD, nil, "a"); code != pb.Code_OK {
		t.Fatalf("sync: %v", code)
	}
	rt, err := e.cl.QueryRoute(c, &pb.QueryRouteRequest{Topic: res(topic)})
	if err != nil || rt.Status.GetCode() != pb.Code_OK {
		t.Fatalf("route: %v %v", rt, err)
	}
	var mq *pb.MessageQueue
	for _, q := range rt.MessageQueues {
		if p := q.GetPermission(); q.GetBroker().GetId() == 0 && (p == pb.Permission_READ || p == pb.Permission_READ_WRITE) {
			mq = q
			break
		}
	}
	if mq == nil {
		t.Fatalf("no readable master queue in %v", rt.MessageQueues)
	}
	got := e.receiveLiteFrom(t, c, group, mq, time.Second)
	if g := bodies(got); !slices.Equal(g, []string{"a:a0", "a:a2"}) {
		t.Fatalf("first receive: %v", g)
	}
	r, err := e.cl.AckMessage(c, &pb.AckMessageRequest{Group: res(group), Topic: res(topic), Entries: []*pb.AckMessageEntry{{
		MessageId: got[0].SystemProperties.MessageId, ReceiptHandle: got[0].SystemProperties.GetReceiptHandle(), LiteTopic: got[0].SystemProperties.LiteTopic}}})
	if err != nil || r.Status.GetCode() != pb.Code_OK {
		t.Fatalf("ack: %v %v", r, err)
	}
	m := got[1]
	ch, err := e.cl.ChangeInvisibleDuration(c, &pb.ChangeInvisibleDurationRequest{Group: res(group), Topic: res(topic),
		ReceiptHandle: m.SystemProperties.GetReceiptHandle(), InvisibleDuration: durationpb.New(200 * time.Millisecond),
		MessageId: m.SystemProperties.MessageId, LiteTopic: m.SystemProperties.LiteTopic, Suspend: proto.Bool(true)})
	if err != nil || ch.Status.GetCode() != pb.Code_OK || ch.GetReceiptHandle() == "" {
		t.Fatalf("change: %v %v", ch, err)
	}
	again := e.receiveLiteFrom(t, c, group, mq, 5*time.Second)
	if g := bodies(again); !slices.Equal(g, []string{"a:a2"}) {
		t.Fatalf("after the change: %v, want a:a2", g)
	}
	if n := again[0].GetSystemProperties().GetDeliveryAttempt(); n != 1 {
		t.Fatalf("after the change: attempt %d, want 1 (a suspension is not an attempt)", n)
	}
	r, err = e.cl.AckMessage(c, &pb.AckMessageRequest{Group: res(group), Topic: res(topic), Entries: []*pb.AckMessageEntry{{
		MessageId: again[0].SystemProperties.MessageId, ReceiptHandle: again[0].SystemProperties.GetReceiptHandle(), LiteTopic: again[0].SystemProperties.LiteTopic}}})
	if err != nil || r.Status.GetCode() != pb.Code_OK {
		t.Fatalf("ack after the change: %v %v", r, err)
	}
	if g := bodies(e.receiveLiteFrom(t, c, group, mq, 100*time.Millisecond)); len(g) != 0 {
		t.Fatalf("received after every message of a was acked: %v", g)
	}
}

// TestLiteHandlesWithoutLiteTopic: the C# LitePushConsumer names no lite
// topic in its acks, changes and dead letters, and Python's none in its
// changes; the receipt handle of a lite message says its lite topic, so
// they work as the other clients' do. A handle does not move to another
// topic's lite topic of the same name.
func TestLiteHandlesWithoutLiteTopic(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("LiteNoName"), brokertest.Name("litenoname")
	other := brokertest.Name("LiteOther")
	e.createLiteTopic(t, topic, group)
	e.createLiteTopic(t, other, group)
	for i, l := range []string{"a", "a", "a"} {
		e.send(t, liteMsg(topic, l, l+itoa(int32(i))))
	}
	c := e.liteClient(t, "lite-noname", group, topic)
	e.syncLite(t, c, group, topic, pb.LiteSubscriptionAction_PARTIAL_ADD, nil, "a")
	got := e.receiveLite(t, c, group, topic, time.Second)
	if g := bodies(got); !slices.Equal(g, []string{"a:a0", "a:a1", "a:a2"}) {
		t.Fatalf("receive: %v", g)
	}
	// An ack naming the other LITE topic fails: its lite topic a is not this one's.
	r, err := e.cl.AckMessage(c, &pb.AckMessageRequest{Group: res(group), Topic: res(other), Entries: []*pb.AckMessageEntry{{
		MessageId: got[0].SystemProperties.MessageId, ReceiptHandle: got[0].SystemProperties.GetReceiptHandle()}}})
	if err != nil || r.Entries[0].GetStatus().GetCode() != pb.Code_INVALID_RECEIPT_HANDLE {
		t.Fatalf("ack under another topic: %v %v", r, err)
	}
	r, err = e.cl.AckMessage(c, &pb.AckMessageRequest{Group: res(group), Topic: res(topic), Entries: []*pb.AckMessageEntry{{
		MessageId: got[0].SystemProperties.MessageId, ReceiptHandle: got[0].SystemProperties.GetReceiptHandle()}}})
	if err != nil || r.Status.GetCode() != pb.Code_OK {
		t.Fatalf("ack without the lite topic: %v %v", r, err)
	}
	ch, err := e.cl.ChangeInvisibleDuration(c, &pb.ChangeInvisibleDurationRequest{Group: res(group), Topic: res(topic),
		ReceiptHandle: got[1].SystemProperties.GetReceiptHandle(), InvisibleDuration: durationpb.New(0), MessageId: got[1].SystemProperties.MessageId})
	if err != nil || ch.Status.GetCode() != pb.Code_OK {
		t.Fatalf("change without the lite topic: %v %v", ch, err)
	}
	dl, err := e.cl.ForwardMessageToDeadLetterQueue(c, &pb.ForwardMessageToDeadLetterQueueRequest{Group: res(group), Topic: res(topic),
		ReceiptHandle: got[2].SystemProperties.GetReceiptHandle(), MessageId: got[2].SystemProperties.MessageId, DeliveryAttempt: 1, MaxDeliveryAttempts: 16})
	if err != nil || dl.Status.GetCode() != pb.Code_OK {
		t.Fatalf("dead letter without the lite topic: %v %v", dl, err)
	}
	// The changed one comes back at its next attempt; the others are done.
	again := e.receiveLite(t, c, group, topic, 5*time.Second)
	if g := bodies(again); !slices.Equal(g, []string{"a:a1"}) {
		t.Fatalf("after the ack, change and dead letter: %v, want a:a1 again", g)
	}
	if n := again[0].GetSystemProperties().GetDeliveryAttempt(); n != 2 {
		t.Fatalf("the changed message's attempt: %d, want 2", n)
	}
}

// TestLiteSuspend: a lite consumer's change of invisible time marked
// suspend brings the message back after the time asked, at the same
// attempt; one not so marked counts an attempt.
func TestLiteSuspend(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("LiteSus"), brokertest.Name("litesus")
	e.createLiteTopic(t, topic, group)
	e.send(t, liteMsg(topic, "s", "s0"))
	c := e.liteClient(t, "lite-sus", group, topic)
	e.syncLite(t, c, group, topic, pb.LiteSubscriptionAction_PARTIAL_ADD, nil, "s")
	attempt := func(m *pb.Message) int32 { return m.GetSystemProperties().GetDeliveryAttempt() }
	got := e.receiveLite(t, c, group, topic, time.Second)
	if len(got) != 1 || attempt(got[0]) != 1 {
		t.Fatalf("first: %v", got)
	}
	for _, x := range []struct {
		suspend bool
		want    int32
	}{{true, 1}, {false, 2}} {
		m := got[0]
		r, err := e.cl.ChangeInvisibleDuration(c, &pb.ChangeInvisibleDurationRequest{Group: res(group), Topic: res(topic),
			ReceiptHandle: m.SystemProperties.GetReceiptHandle(), InvisibleDuration: durationpb.New(0), MessageId: m.SystemProperties.MessageId,
			LiteTopic: m.SystemProperties.LiteTopic, Suspend: proto.Bool(x.suspend)})
		if err != nil || r.Status.GetCode() != pb.Code_OK {
			t.Fatalf("change: %v %v", r, err)
		}
		if got = e.receiveLite(t, c, group, topic, time.Second); len(got) != 1 || attempt(got[0]) != x.want {
			t.Fatalf("after a change (suspend %v): %v, want attempt %d", x.suspend, got, x.want)
		}
	}
}

// TestLiteOffsets: a subscription's offset option moves where the group
// reads a lite topic: the newest (MAX), an offset, the last n, a time.
func TestLiteOffsets(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("LiteOff"), brokertest.Name("liteoff")
	e.createLiteTopic(t, topic, group)
	for i := range 4 {
		e.send(t, liteMsg(topic, "o", "o"+itoa(int32(i))))
	}
	c := e.liteClient(t, "lite-off", group, topic)
	first := func(opt *pb.OffsetOption) string {
		t.Helper()
		e.syncLite(t, c, group, topic, pb.LiteSubscriptionAction_PARTIAL_REMOVE, nil, "o")
		if code := e.syncLite(t, c, group, topic, pb.LiteSubscriptionAction_PARTIAL_ADD, opt, "o"); code != pb.Code_OK {
			t.Fatalf("sync %v: %v", opt, code)
		}
		got := e.receiveLite(t, c, group, topic, 300*time.Millisecond)
		if len(got) == 0 {
			return ""
		}
		return string(got[0].Body)
	}
	for _, x := range []struct {
		opt  *pb.OffsetOption
		want string
	}{
		{&pb.OffsetOption{OffsetType: &pb.OffsetOption_Offset{Offset: 2}}, "o2"},
		{&pb.OffsetOption{OffsetType: &pb.OffsetOption_TailN{TailN: 1}}, "o3"},
		{&pb.OffsetOption{OffsetType: &pb.OffsetOption_Policy_{Policy: pb.OffsetOption_MIN}}, "o0"},
		{&pb.OffsetOption{OffsetType: &pb.OffsetOption_Timestamp{Timestamp: 0}}, "o0"},
		{&pb.OffsetOption{OffsetType: &pb.OffsetOption_Policy_{Policy: pb.OffsetOption_MAX}}, ""},
	} {
		if got := first(x.opt); got != x.want {
			t.Errorf("%v: first message %q, want %q", x.opt, got, x.want)
		}
	}
	if code := e.syncLite(t, c, group, topic, pb.LiteSubscriptionAction_PARTIAL_ADD, &pb.OffsetOption{OffsetType: &pb.OffsetOption_Offset{Offset: -1}}, "o"); code != pb.Code_ILLEGAL_OFFSET {
		t.Errorf("a negative offset: %v", code)
	}
}

// TestLiteWildcard: "*" subscribes to every lite topic of the topic,
// those created after the subscription too.
func TestLiteWildcard(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("LiteAll"), brokertest.Name("liteall")
	e.createLiteTopic(t, topic, group)
	e.send(t, liteMsg(topic, "w1", "w1"))
	c := e.liteClient(t, "lite-all", group, topic)
	if code := e.syncLite(t, c, group, topic, pb.LiteSubscriptionAction_COMPLETE_ADD, nil, "*"); code != pb.Code_OK {
		t.Fatalf("sync: %v", code)
	}
	if got := bodies(e.receiveLite(t, c, group, topic, time.Second)); !slices.Equal(got, []string{"w1:w1"}) {
		t.Fatalf("first: %v", got)
	}
	e.send(t, liteMsg(topic, "w2", "w2"))
	if got := bodies(e.receiveLite(t, c, group, topic, time.Second)); !slices.Equal(got, []string{"w2:w2"}) {
		t.Fatalf("a lite topic created later: %v", got)
	}
}

// TestLiteReceiveWakes: a receive waiting for its lite topics is woken by
// a message to one of them, not at the end of its long poll.
func TestLiteReceiveWakes(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("LiteWake"), brokertest.Name("litewake")
	e.createLiteTopic(t, topic, group)
	c := e.liteClient(t, "lite-wake", group, topic)
	e.syncLite(t, c, group, topic, pb.LiteSubscriptionAction_PARTIAL_ADD, nil, "k")
	done := make(chan []*pb.Message, 1)
	go func() { done <- e.receiveLite(t, c, group, topic, 20*time.Second) }()
	waitFor(t, func() bool { return pollWaiting(e) })
	e.send(t, liteMsg(topic, "k", "k0"))
	select {
	case got := <-done:
		if len(got) != 1 {
			t.Fatalf("woken with %v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting receive was not woken by its lite topic's message")
	}
}

// TestLiteDeleteParent: deleting a LITE topic deletes its lite topics,
// their messages and the groups' state on them; created again, it starts
// empty.
func TestLiteDeleteParent(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("LiteDel"), brokertest.Name("litedel")
	e.createLiteTopic(t, topic, group)
	e.send(t, liteMsg(topic, "d", "d0"))
	e.send(t, liteMsg(topic, "d", "d1"))
	c := e.liteClient(t, "lite-del", group, topic)
	e.syncLite(t, c, group, topic, pb.LiteSubscriptionAction_PARTIAL_ADD, nil, "d")
	if got := e.receiveLite(t, c, group, topic, time.Second); len(got) != 2 {
		t.Fatalf("before: %v", bodies(got))
	}
	if err := e.Broker.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	if got := e.Broker.View().LiteTopics(topic); len(got) != 0 {
		t.Fatalf("lite topics after the delete: %v", got)
	}
	e.createLiteTopic(t, topic, group)
	if r := e.send(t, liteMsg(topic, "d", "new")); r.Offset != 0 {
		t.Fatalf("the first message after the delete at offset %d", r.Offset)
	}
	if got := bodies(e.receiveLite(t, c, group, topic, time.Second)); !slices.Equal(got, []string{"d:new"}) {
		t.Fatalf("after the delete: %v", got)
	}
}

// TestLiteAcrossBrokerSets: a LITE topic spans two sets; a lite consumer
// syncs its subscriptions at one set's endpoint, which passes them on to
// the other, and receives a lite topic's messages from each set.
func TestLiteAcrossBrokerSets(t *testing.T) {
	a := start(t)
	b := connect(t, startSet(t, a, "broker-b", true))
	// A third set whose advertised endpoint nobody reaches: forwarding to
	// it fails, which does not fail the client's sync (the Java and Go
	// clients sync at every set themselves).
	c := connect(t, startSet(t, a, "broker-c", true, func(c *server.Config) { c.GRPC.Advertise = "127.0.0.1:1" }))
	topic, group := brokertest.Name("LiteSpread"), brokertest.Name("litespread")
	a.createLiteTopic(t, topic, group)
	b.createLiteTopic(t, topic, group)
	c.createLiteTopic(t, topic, group)
	a.send(t, liteMsg(topic, "x", "on-a"))
	b.send(t, liteMsg(topic, "x", "on-b"))
	ca := a.liteClient(t, "lite-spread", group, topic)
	cb := b.liteClient(t, "lite-spread", group, topic)
	// The route of broker-b is registered with the name server a moment
	// after it starts: sync until broker-b has it too.
	var fromB []string
	brokertest.Eventually(t, 10*time.Second, "broker-b given the subscription", func() bool {
		if code := a.syncLite(t, ca, group, topic, pb.LiteSubscriptionAction_COMPLETE_ADD, nil, "x"); code != pb.Code_OK {
			t.Fatalf("sync: %v", code)
		}
		fromB = bodies(b.receiveLite(t, cb, group, topic, 50*time.Millisecond))
		return len(fromB) > 0
	})
	if !slices.Equal(fromB, []string{"x:on-b"}) {
		t.Fatalf("from broker-b: %v", fromB)
	}
	if got := bodies(a.receiveLite(t, ca, group, topic, time.Second)); !slices.Equal(got, []string{"x:on-a"}) {
		t.Fatalf("from broker-a: %v", got)
	}
}

// TestLiteDeadLetter: a lite consumer gives a message up to the group's
// dead-letter queue; resent, it comes back in its lite topic (a group's
// retry topic would reach no lite consumer, so that resend is refused).
func TestLiteDeadLetter(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("LiteDLQ"), brokertest.Name("litedlq")
	e.createLiteTopic(t, topic, group)
	e.send(t, liteMsg(topic, "z", "z0"))
	c := e.liteClient(t, "lite-dlq", group, topic)
	e.syncLite(t, c, group, topic, pb.LiteSubscriptionAction_PARTIAL_ADD, nil, "z")
	got := e.receiveLite(t, c, group, topic, time.Second)
	if len(got) != 1 {
		t.Fatalf("received %v", bodies(got))
	}
	r, err := e.cl.ForwardMessageToDeadLetterQueue(c, &pb.ForwardMessageToDeadLetterQueueRequest{Group: res(group), Topic: res(topic),
		ReceiptHandle: got[0].SystemProperties.GetReceiptHandle(), MessageId: got[0].SystemProperties.MessageId, LiteTopic: got[0].SystemProperties.LiteTopic})
	if err != nil || r.Status.GetCode() != pb.Code_OK {
		t.Fatalf("dead letter: %v %v", r, err)
	}
	if _, err := e.Broker.Outbox().ResendDLQ(outbox.DLQSelector{Group: group}, outbox.ResendRetry); err == nil || !strings.Contains(err.Error(), "lite topic") {
		t.Fatalf("resend to the retry topic: %v", err)
	}
	if _, err := e.Broker.Outbox().ResendDLQ(outbox.DLQSelector{Group: group}, outbox.ResendOrigin); err != nil {
		t.Fatal(err)
	}
	if got := bodies(e.receiveLite(t, c, group, topic, time.Second)); !slices.Equal(got, []string{"z:z0"}) {
		t.Fatalf("after the resend: %v", got)
	}
}

// TestLiteExpiryNotifies: a lite topic deleted as expired is taken out of
// its subscribers' subscriptions, and they are told to unsubscribe over
// Telemetry (NotifyUnsubscribeLiteCommand), as RocketMQ does.
func TestLiteExpiryNotifies(t *testing.T) {
	var skew atomic.Int64
	e := start(t, func(c *server.Config) {
		c.Broker.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		c.Broker.LiteExpiryInterval = 20 * time.Millisecond
	})
	topic, group := brokertest.Name("LiteTTL"), brokertest.Name("litettl")
	e.createLiteTopic(t, topic, group)
	tc, _ := e.Broker.Topic(topic)
	tc.LiteExpiration = 30
	if err := e.Broker.CreateTopic(tc); err != nil {
		t.Fatal(err)
	}
	e.send(t, liteMsg(topic, "session-1", "s"))
	c := clientCtx(t, "lite-ttl")
	tel, err := e.cl.Telemetry(c)
	if err != nil {
		t.Fatal(err)
	}
	st := &pb.Settings{ClientType: pb.ClientType_LITE_PUSH_CONSUMER.Enum(), PubSub: &pb.Settings_Subscription{Subscription: &pb.Subscription{Group: res(group)}}}
	if err := tel.Send(&pb.TelemetryCommand{Command: &pb.TelemetryCommand_Settings{Settings: st}}); err != nil {
		t.Fatal(err)
	}
	if r, err := tel.Recv(); err != nil || r.GetSettings() == nil {
		t.Fatalf("settings: %v %v", r, err)
	}
	if code := e.syncLite(t, c, group, topic, pb.LiteSubscriptionAction_PARTIAL_ADD, nil, "session-1", "session-2"); code != pb.Code_OK {
		t.Fatalf("sync: %v", code)
	}
	skew.Store(int64(time.Hour))
	r, err := tel.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := r.GetNotifyUnsubscribeLiteCommand().GetLiteTopic(); got != "session-1" {
		t.Fatalf("told %v, want to unsubscribe from session-1", r)
	}
	if got := e.Broker.View().LiteTopics(topic); len(got) != 0 {
		t.Fatalf("lite topics after the expiry: %v", got)
	}
	// session-2, never written, was subscribed to only: still subscribed.
	e.send(t, liteMsg(topic, "session-2", "s2"))
	if got := bodies(e.receiveLite(t, c, group, topic, time.Second)); !slices.Equal(got, []string{"session-2:s2"}) {
		t.Fatalf("after the expiry: %v", got)
	}
}
