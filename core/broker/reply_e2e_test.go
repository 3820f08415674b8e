package broker_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestReplyTopicAtStartup checks that the cluster's reply topic exists
// before any client asks for it, as RocketMQ's broker creates it.
func TestReplyTopicAtStartup(t *testing.T) {
	env := brokertest.Start(t)
	name := broker.ReplyTopic(broker.DefaultClusterName)
	tc, ok := env.Broker.Topics()[name]
	if !ok || tc.ReadQueueNums != 1 || tc.WriteQueueNums != 1 || tc.Perm != 6 {
		t.Fatalf("reply topic %s: %+v, %v; want 1 read and 1 write queue, perm 6", name, tc, ok)
	}
	if _, ok := env.NS.Route(name); !ok {
		t.Fatalf("reply topic %s has no route", name)
	}
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	if r := invoke(t, cl, env, remoting.DeleteTopicInBroker, map[string]string{"topic": name}, nil); r.Code != remoting.NoPermission || !strings.Contains(r.Remark, "reply topic") {
		t.Fatalf("delete of the reply topic: %v", r)
	}
	env = env.Restart(t)
	if _, ok := env.Broker.Topics()[name]; !ok {
		t.Fatalf("reply topic %s gone after a restart", name)
	}
}

// TestReplyToGoneRequester sends a reply for a client that is not
// connected: the reply is stored once, and the responder's send fails
// with an error that names the requester and is not retried.
func TestReplyToGoneRequester(t *testing.T) {
	env := brokertest.Start(t)
	replyTopic := broker.ReplyTopic(broker.DefaultClusterName)
	responder := env.Producer(t)

	request := &primitive.MessageExt{}
	request.WithProperty(primitive.PropertyCluster, broker.DefaultClusterName)
	request.WithProperty(primitive.PropertyMessageReplyToClient, "10.0.0.9@gone")
	request.WithProperty(primitive.PropertyCorrelationID, "corr-1")
	reply, err := consumer.CreateReplyMessage(request, nil)
	if err != nil {
		t.Fatal(err)
	}
	reply.Body = []byte("too late")
	before := env.Store.MaxOffset(replyTopic, 0)
	_, err = responder.SendSync(context.Background(), reply)
	if err == nil || !strings.Contains(err.Error(), "CODE: 206") || !strings.Contains(err.Error(), "10.0.0.9@gone") || !strings.Contains(err.Error(), "not connected") {
		t.Fatalf("reply to a gone requester: err %v; want CONSUMER_NOT_ONLINE (206) naming the requester", err)
	}
	if got := env.Store.MaxOffset(replyTopic, 0); got != before+1 {
		t.Fatalf("reply topic grew from %d to %d; want the reply stored once", before, got)
	}
	for _, h := range env.Broker.UnconsumedHolds() {
		if h.Topic == replyTopic {
			t.Errorf("retention holds the reply topic as unconsumed: %+v", h)
		}
	}

	// A reply without a requester is refused and stores nothing.
	bare := primitive.NewMessage(replyTopic, []byte("to nobody"))
	bare.WithProperty(primitive.PropertyMsgType, "reply")
	if _, err := responder.SendSync(context.Background(), bare); err == nil || !strings.Contains(err.Error(), "REPLY_TO_CLIENT") {
		t.Fatalf("reply without REPLY_TO_CLIENT: err %v", err)
	}
	if got := env.Store.MaxOffset(replyTopic, 0); got != before+1 {
		t.Fatalf("a refused reply was stored: max offset %d, want %d", got, before+1)
	}
}

// queueSelector picks the queue with its id, so a test names the queue a
// send asks for.
type queueSelector int

func (s queueSelector) Select(_ *primitive.Message, queues []*primitive.MessageQueue, _ string) *primitive.MessageQueue {
	for _, q := range queues {
		if q.QueueId == int(s) {
			return q
		}
	}
	return nil
}

// TestDelayedSendResultQueue checks that the answer to a delayed or timed
// send names the queue the send asked for, not the queue of the topic the
// message waits in.
func TestDelayedSendResultQueue(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("DelayedQueue")
	createTopic(t, env, topic, 4)
	const asked = 3
	p := env.Producer(t, producer.WithQueueSelector(queueSelector(asked)))
	cases := []struct {
		name string
		msg  func(*primitive.Message)
	}{
		{"level 1", func(m *primitive.Message) { m.WithDelayTimeLevel(1) }},
		{"level 6", func(m *primitive.Message) { m.WithDelayTimeLevel(6) }},
		{"timed", func(m *primitive.Message) { m.WithDelayTimestamp(time.Now().Add(time.Hour)) }},
		{"plain", func(*primitive.Message) {}},
	}
	for _, c := range cases {
		m := primitive.NewMessage(topic, []byte(c.name))
		c.msg(m)
		res, err := p.SendSync(context.Background(), m)
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("%s: %v %v", c.name, res, err)
		}
		if res.MessageQueue.QueueId != asked || res.MessageQueue.Topic != topic {
			t.Errorf("%s: send result names %s queue %d; want %s queue %d", c.name, res.MessageQueue.Topic, res.MessageQueue.QueueId, topic, asked)
		}
	}
}

// TestRequestReply runs the official client's request-reply: a producer's
// Request is consumed by a responder that answers with CreateReplyMessage
// and a send, and the reply reaches the requester.
func TestRequestReply(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Request")
	createTopic(t, env, topic, 2)
	replyTopic := broker.ReplyTopic(broker.DefaultClusterName)
	responder := env.Producer(t)

	var mu sync.Mutex
	seen := map[string]*primitive.MessageExt{} // requests by body
	var replyErrs []error
	group := brokertest.Name("responders")
	c := env.PushConsumer(t, group)
	err := c.Subscribe(topic, consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			mu.Lock()
			seen[string(m.Body)] = m
			mu.Unlock()
			reply, err := consumer.CreateReplyMessage(m, nil)
			if err == nil {
				// The client's CreateReplyMessage reads its body argument
				// as properties and leaves the body empty; set it here.
				reply.Body = append([]byte("re: "), m.Body...)
				_, err = responder.SendSync(ctx, reply)
			}
			mu.Lock()
			if err != nil {
				replyErrs = append(replyErrs, err)
			}
			mu.Unlock()
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, c, group, true, topic)

	requester := env.Producer(t)
	for _, body := range []string{"ping-1", "ping-2", "ping-3"} {
		reply, err := requester.Request(context.Background(), 15*time.Second, primitive.NewMessage(topic, []byte(body)))
		if err != nil {
			mu.Lock()
			t.Fatalf("request %s: %v (responder errors: %v)", body, err, replyErrs)
		}
		if string(reply.Body) != "re: "+body || reply.Topic != replyTopic {
			t.Errorf("request %s: reply %q on %s; want %q on %s", body, reply.Body, reply.Topic, "re: "+body, replyTopic)
		}
		mu.Lock()
		req := seen[body]
		mu.Unlock()
		// The request is an ordinary message of its topic, carrying what
		// the responder needs to answer it.
		if req == nil || req.Topic != topic || req.GetProperty(primitive.PropertyCorrelationID) == "" ||
			req.GetProperty(primitive.PropertyMessageReplyToClient) == "" {
			t.Fatalf("request %s as consumed: %v", body, req)
		}
		if got, want := reply.GetProperty(primitive.PropertyCorrelationID), req.GetProperty(primitive.PropertyCorrelationID); got != want {
			t.Errorf("request %s: reply's correlation id %q, request's %q", body, got, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(replyErrs) > 0 {
		t.Errorf("responder's sends failed: %v", replyErrs)
	}
	if got := env.Store.MaxOffset(replyTopic, 0); got != 3 {
		t.Errorf("reply topic holds %d replies; want 3", got)
	}
}
