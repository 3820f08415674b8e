package grpcserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"google.golang.org/protobuf/proto"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// TestCrossProtocol sends with the official 4.x Go client and receives
// over gRPC, then sends over gRPC and consumes with a 4.x push consumer.
func TestCrossProtocol(t *testing.T) {
	e := start(t)
	topic := brokertest.Name("Cross")
	e.createTopic(t, topic, 2)

	p := e.Producer(t)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown() })
	m := primitive.NewMessage(topic, []byte("from 4.x"))
	m.WithTag("old")
	m.WithKeys([]string{"k1"})
	m.WithProperty("color", "red")
	if _, err := p.SendSync(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	popGroup := brokertest.Name("pop")
	_, msgs := e.receive(t, popGroup, topic, &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "old"}, 32, 30*time.Second, 5*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("gRPC consumer got %d messages", len(msgs))
	}
	got := msgs[0]
	if string(got.Body) != "from 4.x" || got.SystemProperties.GetTag() != "old" || got.SystemProperties.GetKeys()[0] != "k1" ||
		got.UserProperties["color"] != "red" || got.SystemProperties.GetMessageId() == "" {
		t.Fatalf("4.x message over gRPC: %v", got)
	}

	e.send(t, msg(topic, "grpc-1", "new", "from 5.x"))
	recv := e.consume4x(t, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "new"}, func(m *primitive.MessageExt) string {
		return string(m.Body) + "|" + m.GetTags() + "|" + m.GetProperty("UNIQ_KEY")
	})
	if v := brokertest.Wait(t, recv, 30*time.Second, "the 4.x consumer"); v != "from 5.x|new|grpc-1" {
		t.Fatalf("gRPC message over 4.x: %q", v)
	}
}

// TestGroupIsPopOrPull refuses POP receives of a group whose 4.x
// consumers are online.
func TestGroupIsPopOrPull(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Mixed"), brokertest.Name("mixed")
	e.createTopic(t, topic, 2)
	c := e.PushConsumer(t, group)
	if err := c.Subscribe(topic, consumer.MessageSelector{}, func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	e.StartConsumer(t, c, group, true, topic)
	st, _ := e.receive(t, group, topic, nil, 1, time.Second, 0)
	if st.GetCode() != pb.Code_FORBIDDEN || !strings.Contains(st.Message, "either by POP") {
		t.Fatalf("POP receive of a pull group: %v", st)
	}
}

// TestPullRefusedForPopGroup refuses PULL_MESSAGE of a group with POP
// consumer sessions, saying why.
func TestPullRefusedForPopGroup(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("PopOnly"), brokertest.Name("poponly")
	e.createTopic(t, topic, 1)
	st := &pb.Settings{ClientType: pb.ClientType_SIMPLE_CONSUMER.Enum(), PubSub: &pb.Settings_Subscription{Subscription: &pb.Subscription{Group: res(group)}}}
	if r := telemetry(t, e, ctx(t), st); r.Status.GetCode() != pb.Code_OK {
		t.Fatal(r.Status)
	}
	cl := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger()})
	defer cl.Close()
	pull := func() *remoting.Command {
		resp, err := cl.Invoke(ctx(t), e.BrokerAddr, remoting.NewRequest(remoting.PullMessage, map[string]string{
			"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0", "maxMsgNums": "1", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
		}, nil))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := pull(); resp.Code != remoting.NoPermission || !strings.Contains(resp.Remark, "POP") {
		t.Fatalf("pull of a POP group: %d %s", resp.Code, resp.Remark)
	}
	if n, _ := e.cl.NotifyClientTermination(ctx(t), &pb.NotifyClientTerminationRequest{Group: res(group)}); n.Status.GetCode() != pb.Code_OK {
		t.Fatal(n.Status)
	}
	if resp := pull(); resp.Code == remoting.NoPermission {
		t.Fatalf("pull after the POP consumer left: %d %s", resp.Code, resp.Remark)
	}
}

// TestCrossProtocolMessageGroup carries a FIFO message group across the
// protocols under RocketMQ's property name, __SHARDINGKEY: a 4.x message
// with it is received over gRPC in its group, and a FIFO message sent over
// gRPC reaches a 4.x consumer with the property set.
func TestCrossProtocolMessageGroup(t *testing.T) {
	e := start(t)
	topic := brokertest.Name("Group")
	e.createTopic(t, topic, 1)

	p := e.Producer(t) // started, and shut down when the test ends
	m := primitive.NewMessage(topic, []byte("from 4.x"))
	m.WithTag("old")
	m.WithProperty("__SHARDINGKEY", "customer-1")
	if _, err := p.SendSync(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	_, msgs := e.receive(t, brokertest.Name("pop"), topic, &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "old"}, 32, 30*time.Second, 5*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("gRPC consumer got %d messages", len(msgs))
	}
	if sp := msgs[0].SystemProperties; sp.GetMessageType() != pb.MessageType_FIFO || sp.GetMessageGroup() != "customer-1" {
		t.Fatalf("4.x message with __SHARDINGKEY over gRPC: type %v, group %q", sp.GetMessageType(), sp.GetMessageGroup())
	}
	if _, ok := msgs[0].UserProperties["__SHARDINGKEY"]; ok {
		t.Fatalf("the message group is also a user property: %v", msgs[0].UserProperties)
	}

	fifo := msg(topic, "grpc-fifo", "new", "from 5.x")
	fifo.SystemProperties.MessageType, fifo.SystemProperties.MessageGroup = pb.MessageType_FIFO, proto.String("customer-2")
	e.send(t, fifo)
	recv := e.consume4x(t, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "new"}, func(m *primitive.MessageExt) string {
		return m.GetProperty("__SHARDINGKEY")
	})
	if v := brokertest.Wait(t, recv, 30*time.Second, "the 4.x consumer"); v != "customer-2" {
		t.Fatalf("a FIFO message over 4.x has __SHARDINGKEY %q, want its group", v)
	}
}

// TestTraceContextAndBornHost: a 5.x message's trace context and born host
// are kept as RocketMQ's proxy keeps them (TRACE_CONTEXT, __BORNHOST), so a
// consumer of either protocol sees them, and a 4.x message's trace context
// reaches 5.x consumers.
func TestTraceContextAndBornHost(t *testing.T) {
	e := start(t)
	topic := brokertest.Name("Trace")
	e.createTopic(t, topic, 1)
	const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	m := msg(topic, "traced", "t", "traced")
	m.SystemProperties.TraceContext, m.SystemProperties.BornHost = proto.String(trace), "node-host-7"
	e.send(t, m)
	p := e.Producer(t) // started, and shut down when the test ends
	old := primitive.NewMessage(topic, []byte("from 4.x"))
	old.WithTag("t")
	old.WithProperty("TRACE_CONTEXT", trace+"-4x")
	if _, err := p.SendSync(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	_, msgs := e.receive(t, brokertest.Name("pop"), topic, nil, 32, 30*time.Second, 5*time.Second)
	got := map[string]*pb.Message{}
	for _, m := range msgs {
		got[string(m.Body)] = m
	}
	if sp := got["traced"].GetSystemProperties(); sp.GetTraceContext() != trace || sp.GetBornHost() != "node-host-7" {
		t.Fatalf("5.x message over gRPC: trace context %q, born host %q", sp.GetTraceContext(), sp.GetBornHost())
	}
	if sp := got["from 4.x"].GetSystemProperties(); sp.GetTraceContext() != trace+"-4x" || sp.GetBornHost() != "127.0.0.1" {
		t.Fatalf("4.x message over gRPC: trace context %q, born host %q", sp.GetTraceContext(), sp.GetBornHost())
	}
	for _, m := range msgs {
		for _, k := range []string{"TRACE_CONTEXT", "__BORNHOST"} {
			if _, ok := m.UserProperties[k]; ok {
				t.Fatalf("%s is also a user property of %s", k, m.Body)
			}
		}
	}

	recv := e.consume4x(t, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "t"}, func(m *primitive.MessageExt) string {
		return string(m.Body) + "|" + m.GetProperty("TRACE_CONTEXT") + "|" + m.GetProperty("__BORNHOST")
	})
	seen := map[string]bool{}
	for range 2 {
		seen[brokertest.Wait(t, recv, 30*time.Second, "the 4.x consumer")] = true
	}
	if !seen["traced|"+trace+"|node-host-7"] || !seen["from 4.x|"+trace+"-4x|"] {
		t.Fatalf("over 4.x: %v", seen)
	}
}

// TestSystemPropertiesStayHidden: the properties RocketMQ keeps for
// itself (its MessageConst.STRING_HASH_SET) are not a 4.x message's user
// properties over gRPC, and a 5.x client may not set them.
func TestSystemPropertiesStayHidden(t *testing.T) {
	e := start(t)
	topic := brokertest.Name("Hidden")
	e.createTopic(t, topic, 1)
	p := e.Producer(t) // started, and shut down when the test ends
	m := primitive.NewMessage(topic, []byte("from 4.x"))
	m.WithProperty("color", "red")
	system := []string{"TTL", "BUYER_ID", "DUP_INFO", "CORRELATION_ID", "MSG_TYPE", "TIMER_DELAY_LEVEL", "1ST_POP_TIME", "BORN_TIMESTAMP"}
	for _, k := range system {
		m.WithProperty(k, "1")
	}
	if _, err := p.SendSync(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	_, msgs := e.receive(t, brokertest.Name("pop"), topic, nil, 32, 30*time.Second, 5*time.Second)
	if len(msgs) != 1 || len(msgs[0].UserProperties) != 1 || msgs[0].UserProperties["color"] != "red" {
		t.Fatalf("user properties over gRPC: %v", msgs)
	}
	for _, k := range system {
		bad := msg(topic, "bad-"+k, "t", "bad")
		bad.UserProperties = map[string]string{k: "1"}
		r, err := e.cl.SendMessage(ctx(t), &pb.SendMessageRequest{Messages: []*pb.Message{bad}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.GetCode() != pb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY {
			t.Errorf("user property %s: %v, want ILLEGAL_MESSAGE_PROPERTY_KEY", k, r.Status)
		}
	}
}

// consume4x starts an official 4.x push consumer of a new group on topic
// and returns what see makes of each message it receives.
func (e *env) consume4x(t *testing.T, topic string, sel consumer.MessageSelector, see func(*primitive.MessageExt) string) <-chan string {
	t.Helper()
	group := brokertest.Name("pull")
	c := e.PushConsumer(t, group)
	out := make(chan string, 16)
	if err := c.Subscribe(topic, sel, func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range ms {
			out <- see(m)
		}
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	e.StartConsumer(t, c, group, true, topic)
	return out
}
