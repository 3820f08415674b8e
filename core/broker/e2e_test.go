package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// collector gathers consumed messages by a key and signals when n distinct
// keys arrived.
type collector struct {
	mu   sync.Mutex
	seen map[string]*primitive.MessageExt
	dup  int
	want int
	done chan struct{}
}

func newCollector(want int) *collector {
	return &collector{seen: map[string]*primitive.MessageExt{}, want: want, done: make(chan struct{})}
}

func (c *collector) add(key string, m *primitive.MessageExt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[key]; ok {
		c.dup++
		return
	}
	c.seen[key] = m
	if len(c.seen) == c.want {
		close(c.done)
	}
}

func (c *collector) listener(key func(*primitive.MessageExt) string) func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			c.add(key(m), m)
		}
		return consumer.ConsumeSuccess, nil
	}
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

func bodyKey(m *primitive.MessageExt) string { return string(m.Body) }

func createTopic(t *testing.T, env *brokertest.Env, topic string, queues int) {
	t.Helper()
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6}); err != nil {
		t.Fatal(err)
	}
}

// TestSendKindsAndPushConsume sends with every send kind and checks that a
// clustering push consumer receives each message exactly as sent.
func TestSendKindsAndPushConsume(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("SendKinds")
	createTopic(t, env, topic, 4)
	p := env.Producer(t)
	ctx := context.Background()

	want := map[string]*primitive.Message{}
	msg := func(kind string, i int) *primitive.Message {
		body := fmt.Sprintf("%s-%d", kind, i)
		m := primitive.NewMessage(topic, []byte(body))
		m.WithTag("Tag" + kind)
		m.WithKeys([]string{"k-" + body, "second"})
		m.WithProperty("user", "u-"+body)
		want[body] = m
		return m
	}
	for i := 0; i < 10; i++ {
		res, err := p.SendSync(ctx, msg("sync", i))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("sync send: %v %v", res, err)
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		err := p.SendAsync(ctx, func(_ context.Context, res *primitive.SendResult, err error) {
			defer wg.Done()
			if err != nil || res.Status != primitive.SendOK {
				t.Errorf("async send: %v %v", res, err)
			}
		}, msg("async", i))
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i := 0; i < 10; i++ {
		if err := p.SendOneWay(ctx, msg("oneway", i)); err != nil {
			t.Fatal(err)
		}
	}
	var batch []*primitive.Message
	for i := 0; i < 10; i++ {
		batch = append(batch, msg("batch", i))
	}
	if res, err := p.SendSync(ctx, batch...); err != nil || res.Status != primitive.SendOK {
		t.Fatalf("batch send: %v %v", res, err)
	}

	col := newCollector(len(want))
	group := brokertest.Name("cg")
	c := env.PushConsumer(t, group)
	if err := c.Subscribe(topic, consumer.MessageSelector{}, col.listener(bodyKey)); err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, c, group, true, topic)
	brokertest.Wait(t, col.done, 30*time.Second, "all messages")
	for body, m := range want {
		got := col.seen[body]
		if got.Topic != topic || got.GetTags() != m.GetTags() || got.GetKeys() != m.GetKeys() || got.GetProperty("user") != m.GetProperty("user") {
			t.Errorf("%s: got topic %q tags %q keys %q user %q", body, got.Topic, got.GetTags(), got.GetKeys(), got.GetProperty("user"))
		}
	}
}

func sendN(t *testing.T, p interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
}, topic, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("%s-%d", prefix, i)))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

// TestAutoCreateTopic sends to a topic nobody created: the producer falls
// back to TBW102's route, the broker creates the topic, and a consumer
// started afterwards finds it.
func TestAutoCreateTopic(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Auto")
	if _, ok := env.Broker.Topics()[topic]; ok {
		t.Fatal("topic exists before the first send")
	}
	p := env.Producer(t)
	sendN(t, p, topic, "auto", 5)
	tc, ok := env.Broker.Topics()[topic]
	if !ok || tc.WriteQueueNums != 4 || tc.Perm != 6 {
		t.Fatalf("auto-created topic: %+v, %v", tc, ok)
	}
	col := newCollector(5)
	group := brokertest.Name("cg")
	c := env.PushConsumer(t, group)
	c.Subscribe(topic, consumer.MessageSelector{}, col.listener(bodyKey))
	env.StartConsumer(t, c, group, true, topic)
	brokertest.Wait(t, col.done, 30*time.Second, "auto-created topic's messages")
}

// TestConsumerResumesFromCommittedOffset stops a consumer group after it
// consumed and committed, sends more, and checks the restarted group starts
// exactly at the committed offsets.
func TestConsumerResumesFromCommittedOffset(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Resume")
	createTopic(t, env, topic, 2)
	p := env.Producer(t)
	group := brokertest.Name("cg")
	sendN(t, p, topic, "first", 20)

	col := newCollector(20)
	c := env.PushConsumer(t, group)
	c.Subscribe(topic, consumer.MessageSelector{}, col.listener(bodyKey))
	env.StartConsumer(t, c, group, true, topic)
	brokertest.Wait(t, col.done, 30*time.Second, "first batch")
	// Shutdown sends the consumed offsets as oneway requests just before
	// it closes its connections. The last listener call may still be
	// finishing when Shutdown starts, so a message or two may stay
	// uncommitted; what matters is where the restarted group begins.
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	committed := map[int32]int64{}
	sum := func() int64 {
		var n int64
		for q := int32(0); q < 2; q++ {
			committed[q], _ = env.Store.ConsumerOffset(group, topic, q)
			n += committed[q]
		}
		return n
	}
	brokertest.Eventually(t, 10*time.Second, "offsets committed at shutdown", func() bool { return sum() >= 18 })
	sum()

	sendN(t, p, topic, "second", 10)
	redelivered := 20 - int(committed[0]+committed[1])
	col2 := newCollector(10 + redelivered)
	c2 := env.PushConsumer(t, group)
	c2.Subscribe(topic, consumer.MessageSelector{}, col2.listener(bodyKey))
	env.StartConsumer(t, c2, group, true, topic)
	brokertest.Wait(t, col2.done, 30*time.Second, "second batch")
	for body, m := range col2.seen {
		if body[:6] == "first-" && m.QueueOffset < committed[int32(m.Queue.QueueId)] {
			t.Errorf("restarted group received %q at offset %d, before the committed %d", body, m.QueueOffset, committed[int32(m.Queue.QueueId)])
		}
	}
}

// TestTwoConsumersSplitQueues runs two consumers in one group: they divide
// the queues and together receive every message once.
func TestTwoConsumersSplitQueues(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Split")
	createTopic(t, env, topic, 4)
	group := brokertest.Name("cg")
	p := env.Producer(t)
	var (
		mu         sync.Mutex
		col        *collector
		byConsumer = map[string]map[int]bool{}
	)
	for _, name := range []string{"a", "b"} {
		c := env.PushConsumer(t, group)
		c.Subscribe(topic, consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			for _, m := range msgs {
				if byConsumer[name] == nil {
					byConsumer[name] = map[int]bool{}
				}
				byConsumer[name][m.Queue.QueueId] = true
			}
			cur := col
			mu.Unlock()
			return cur.listener(bodyKey)(ctx, msgs...)
		})
		env.StartConsumer(t, c, group, true, topic)
	}
	brokertest.Eventually(t, 10*time.Second, "both consumers registered", func() bool { return len(env.Broker.View().ConsumerIDs(group)) == 2 })
	// A first round lets the rebalance that followed the second consumer's
	// arrival finish; the split is checked on the second.
	for round, n := range []int{40, 200} {
		mu.Lock()
		col = newCollector(n)
		clear(byConsumer)
		mu.Unlock()
		sendN(t, p, topic, fmt.Sprint("split", round), n)
		brokertest.Wait(t, col.done, 60*time.Second, "all messages across both consumers")
	}
	mu.Lock()
	defer mu.Unlock()
	for q := 0; q < 4; q++ {
		if byConsumer["a"][q] && byConsumer["b"][q] {
			t.Errorf("queue %d consumed by both consumers", q)
		}
	}
	if len(byConsumer["a"]) == 0 || len(byConsumer["b"]) == 0 {
		t.Errorf("queues not split: a=%v b=%v", byConsumer["a"], byConsumer["b"])
	}
}

// TestBroadcasting runs two broadcasting consumers in one group: each
// receives every message.
func TestBroadcasting(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Broadcast")
	createTopic(t, env, topic, 2)
	group := brokertest.Name("cg")
	var cols []*collector
	for i := 0; i < 2; i++ {
		col := newCollector(30)
		cols = append(cols, col)
		c := env.PushConsumer(t, group, consumer.WithConsumerModel(consumer.BroadCasting))
		c.Subscribe(topic, consumer.MessageSelector{}, col.listener(bodyKey))
		env.StartConsumer(t, c, group, false, topic)
	}
	p := env.Producer(t)
	sendN(t, p, topic, "bc", 30)
	for i, col := range cols {
		brokertest.Wait(t, col.done, 30*time.Second, fmt.Sprintf("broadcast consumer %d", i))
	}
}

// TestRestartKeepsMessages produces, restarts the broker on the same data
// directory, and consumes everything.
func TestRestartKeepsMessages(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Restart")
	createTopic(t, env, topic, 4)
	p := env.Producer(t)
	sendN(t, p, topic, "kept", 100)
	p.Shutdown()

	env = env.Restart(t)
	if _, ok := env.Broker.Topics()[topic]; !ok {
		t.Fatal("topic lost in the restart")
	}
	col := newCollector(100)
	group := brokertest.Name("cg")
	c := env.PushConsumer(t, group)
	c.Subscribe(topic, consumer.MessageSelector{}, col.listener(bodyKey))
	env.StartConsumer(t, c, group, true, topic)
	brokertest.Wait(t, col.done, 30*time.Second, "messages after the restart")
}
