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
	c := env.PushConsumer(t, brokertest.Name("cg"))
	if err := c.Subscribe(topic, consumer.MessageSelector{}, col.listener(bodyKey)); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	brokertest.Wait(t, col.done, 30*time.Second, "all messages")
	for body, m := range want {
		got := col.seen[body]
		if got.Topic != topic || got.GetTags() != m.GetTags() || got.GetKeys() != m.GetKeys() || got.GetProperty("user") != m.GetProperty("user") {
			t.Errorf("%s: got topic %q tags %q keys %q user %q", body, got.Topic, got.GetTags(), got.GetKeys(), got.GetProperty("user"))
		}
	}
}
