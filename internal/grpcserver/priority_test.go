package grpcserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"google.golang.org/protobuf/proto"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// createPriorityTopic makes a PRIORITY topic of n queues.
func (e *env) createPriorityTopic(t *testing.T, topic string, n int) {
	t.Helper()
	if err := e.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: n, WriteQueueNums: n, Perm: 6, MessageType: broker.MessageTypePriority}); err != nil {
		t.Fatal(err)
	}
}

// prioMsg is a PRIORITY message of topic whose body is its id.
func prioMsg(topic, id string, priority int32) *pb.Message {
	m := msg(topic, id, "t", id)
	m.SystemProperties.MessageType, m.SystemProperties.Priority = pb.MessageType_PRIORITY, proto.Int32(priority)
	return m
}

// receiveOne receives one message of a priority topic and checks it is
// body's, in queue, with the priority, at the attempt.
func (e *env) receiveOne(t *testing.T, group, topic, body string, queue, priority, attempt int32) *pb.Message {
	t.Helper()
	_, got := e.receive(t, group, topic, nil, 1, 30*time.Second, 5*time.Second)
	if len(got) != 1 {
		t.Fatalf("received %d messages, want %s", len(got), body)
	}
	sp := got[0].SystemProperties
	if string(got[0].Body) != body || sp.GetQueueId() != queue || sp.Priority == nil || sp.GetPriority() != priority ||
		sp.GetMessageType() != pb.MessageType_PRIORITY || sp.GetDeliveryAttempt() != attempt {
		t.Fatalf("received %s (queue %d, priority %d set %v, type %v, attempt %d), want %s (queue %d, priority %d, attempt %d)",
			got[0].Body, sp.GetQueueId(), sp.GetPriority(), sp.Priority != nil, sp.GetMessageType(), sp.GetDeliveryAttempt(), body, queue, priority, attempt)
	}
	return got[0]
}

// TestPriorityMessages: a priority message is stored in the queue of its
// priority (the last queue for a higher one), and a receive takes the
// highest queue first, its redeliveries with it, so a message delivered
// again keeps its priority over new messages of lower ones.
func TestPriorityMessages(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Prio"), brokertest.Name("prio")
	e.createPriorityTopic(t, topic, 4)

	r, err := e.cl.QueryRoute(ctx(t), &pb.QueryRouteRequest{Topic: res(topic)})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range r.MessageQueues {
		if len(q.AcceptMessageTypes) != 1 || q.AcceptMessageTypes[0] != pb.MessageType_PRIORITY {
			t.Fatalf("queue %d of a priority topic accepts %v", q.Id, q.AcceptMessageTypes)
		}
	}

	// A backlog in the order sent; the Node client types a message of
	// priority 0 NORMAL.
	zero := msg(topic, "zero", "t", "zero")
	zero.SystemProperties.Priority = proto.Int32(0)
	for _, m := range []*pb.Message{prioMsg(topic, "p1", 1), zero, prioMsg(topic, "p9", 9), prioMsg(topic, "p2", 2), prioMsg(topic, "p3", 3), prioMsg(topic, "p1b", 1)} {
		e.send(t, m)
	}
	for _, want := range []struct {
		body            string
		queue, priority int32
	}{{"p9", 3, 9}, {"p3", 3, 3}, {"p2", 2, 2}, {"p1", 1, 1}, {"p1b", 1, 1}, {"zero", 0, 0}} {
		m := e.receiveOne(t, group, topic, want.body, want.queue, want.priority, 1)
		if c := e.ack(t, group, topic, m, m.SystemProperties.GetReceiptHandle()); c != pb.Code_OK {
			t.Fatalf("ack %s: %v", want.body, c)
		}
	}

	// A low message received and let go comes after a new high one.
	e.send(t, prioMsg(topic, "low", 0))
	low := e.receiveOne(t, group, topic, "low", 0, 0, 1)
	if st, _ := e.change(t, group, topic, low.SystemProperties.GetReceiptHandle(), 0); st.GetCode() != pb.Code_OK {
		t.Fatalf("change invisible: %v", st)
	}
	e.send(t, prioMsg(topic, "high", 2))
	e.receiveOne(t, group, topic, "high", 2, 2, 1)
	e.receiveOne(t, group, topic, "low", 0, 0, 2)
}

// TestPriorityMessageChecks: what a priority message may be sent to, and
// what is refused.
func TestPriorityMessageChecks(t *testing.T) {
	e := start(t)
	prio, plain, typed := brokertest.Name("Prio"), brokertest.Name("Plain"), brokertest.Name("Typed")
	e.createPriorityTopic(t, prio, 4)
	e.createTopic(t, plain, 4)
	if err := e.Broker.CreateTopic(broker.TopicConfig{TopicName: typed, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6, MessageType: "NORMAL"}); err != nil {
		t.Fatal(err)
	}
	noPriority := msg(prio, "none", "t", "none")
	noPriority.SystemProperties.MessageType = pb.MessageType_PRIORITY
	for _, c := range []struct {
		name string
		m    *pb.Message
		want pb.Code
	}{
		{"priority message to a topic without a type", prioMsg(plain, "a", 1), pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"priority message to a NORMAL topic", prioMsg(typed, "b", 1), pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"normal message to a priority topic", msg(prio, "c", "t", "c"), pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"priority message without a priority", noPriority, pb.Code_BAD_REQUEST},
		{"priority below 0", prioMsg(prio, "d", -1), pb.Code_BAD_REQUEST},
	} {
		r, err := e.cl.SendMessage(ctx(t), &pb.SendMessageRequest{Messages: []*pb.Message{c.m}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.GetCode() != c.want {
			t.Errorf("%s: %v, want %v", c.name, r.Status, c.want)
		}
	}

	// A NORMAL message's priority elsewhere is ignored, as its type says.
	m := msg(plain, "normal", "t", "normal")
	m.SystemProperties.Priority = proto.Int32(3)
	e.send(t, m)
	_, got := e.receive(t, brokertest.Name("g"), plain, nil, 32, 30*time.Second, 5*time.Second)
	if len(got) != 1 || got[0].SystemProperties.Priority != nil || got[0].SystemProperties.GetMessageType() != pb.MessageType_NORMAL {
		t.Fatalf("a NORMAL message with a priority on a plain topic: %v", got)
	}
}

// TestPriorityFromRemoting: a 4.x producer's message with RocketMQ's
// priority property goes to the queue of its priority, overriding the
// queue the producer picked; a message of another kind loses the
// property; and a receive takes the highest priority first.
func TestPriorityFromRemoting(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Prio"), brokertest.Name("prio")
	e.createPriorityTopic(t, topic, 4)
	p := e.Producer(t) // started, and shut down when the test ends
	send := func(body string, props ...string) *primitive.SendResult {
		t.Helper()
		m := primitive.NewMessage(topic, []byte(body))
		for i := 0; i < len(props); i += 2 {
			m.WithProperty(props[i], props[i+1])
		}
		r, err := p.SendSync(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for i := range 8 { // the producer picks each of the 4 queues in turn
		if r := send(fmt.Sprint("p", i%3), "_SYS_MSG_PRIORITY_", fmt.Sprint(i%3)); r.MessageQueue.QueueId != i%3 {
			t.Fatalf("priority %d stored in queue %d", i%3, r.MessageQueue.QueueId)
		}
	}
	if r := send("p99", "_SYS_MSG_PRIORITY_", "99"); r.MessageQueue.QueueId != 3 {
		t.Fatalf("priority 99 stored in queue %d, want the last, 3", r.MessageQueue.QueueId)
	}
	send("fifo", "_SYS_MSG_PRIORITY_", "3", "__SHARDINGKEY", "customer-1")

	// The highest first; one message per receive.
	var order []string
	for range 10 {
		_, got := e.receive(t, group, topic, nil, 1, 30*time.Second, 5*time.Second)
		if len(got) != 1 {
			t.Fatalf("received %d messages after %v", len(got), order)
		}
		sp := got[0].SystemProperties
		if string(got[0].Body) == "fifo" {
			if sp.Priority != nil || sp.GetMessageGroup() != "customer-1" {
				t.Fatalf("a FIFO message kept its priority: %v", sp)
			}
		} else if fmt.Sprint("p", sp.GetPriority()) != string(got[0].Body) {
			t.Fatalf("message %s has priority %d", got[0].Body, sp.GetPriority())
		}
		order = append(order, string(got[0].Body))
	}
	// "fifo" is in whatever queue the producer picked; the rest in order.
	var prios []string
	for _, b := range order {
		if b != "fifo" {
			prios = append(prios, b)
		}
	}
	if fmt.Sprint(prios) != "[p99 p2 p2 p1 p1 p1 p0 p0 p0]" {
		t.Fatalf("received in the order %v", order)
	}
}

// TestPriorityFactor: a group's priority.factor is the share of its
// receives that follow priorities. At 0 none do: each receive starts one
// queue further on, so every priority is served in turn.
func TestPriorityFactor(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Prio"), brokertest.Name("fair")
	e.createPriorityTopic(t, topic, 4)
	gc := broker.SubscriptionGroupConfig{GroupName: group, ConsumeEnable: true, RetryQueueNums: 1, RetryMaxTimes: 16,
		Attributes: map[string]string{broker.PriorityFactorAttribute: "0"}}
	if err := e.Broker.PutGroupConfig(gc); err != nil {
		t.Fatal(err)
	}
	for p := range int32(4) {
		e.send(t, prioMsg(topic, fmt.Sprint("p", p), p))
	}
	for p := range int32(4) {
		e.receiveOne(t, group, topic, fmt.Sprint("p", p), p, p, 1)
	}
	gc.Attributes[broker.PriorityFactorAttribute] = "101"
	if err := e.Broker.PutGroupConfig(gc); err == nil || !strings.Contains(err.Error(), "0..100") {
		t.Fatalf("priority.factor 101: %v", err)
	}
}
