package broker_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestPrefilter subscribes with SQL92 before and after messages arrive:
// the later ones are answered from the masks evaluated at arrival, the
// earlier ones at pull time, and the consumer gets exactly the matches.
func TestPrefilter(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Pre")
	createTopic(t, env, topic, 1)
	p := env.Producer(t)
	send := func(from, to int) {
		for i := from; i < to; i++ {
			m := primitive.NewMessage(topic, []byte(strconv.Itoa(i)))
			m.WithProperty("n", strconv.Itoa(i))
			if _, err := p.SendSync(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(0, 50) // before anyone subscribes: filtered at pull time
	matches := func(i int) bool { return i%10 == 3 }
	// 3, 13, …, 193: the SQL92 subset has no arithmetic, so list them.
	expr := "n IN ("
	for i := 3; i < 200; i += 10 {
		if i > 3 {
			expr += ","
		}
		expr += "'" + strconv.Itoa(i) + "'"
	}
	expr += ")"
	// A consumer of another group registers the expression and leaves.
	reg := brokertest.Name("reg")
	first := env.PushConsumer(t, reg)
	first.Subscribe(topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: expr}, func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return consumer.ConsumeSuccess, nil
	})
	env.StartConsumer(t, first, reg, true, topic)
	first.Shutdown()
	group := brokertest.Name("cg")
	send(50, 200) // after: evaluated as they arrive
	brokertest.Eventually(t, 10*time.Second, "the indexer to catch up", func() bool {
		v, _ := env.Broker.PrefilterProgress(topic, 0)
		return v == 200
	})
	// A consumer catching up reads only what the masks let through.
	col := newCollector(20)
	c := env.PushConsumer(t, group)
	c.Subscribe(topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: expr}, col.listener(bodyKey))
	env.StartConsumer(t, c, group, true, topic)
	brokertest.Wait(t, col.done, 30*time.Second, "the matching messages")
	waitCaughtUp(t, env, group, topic, 1)
	col.mu.Lock()
	defer col.mu.Unlock()
	for body := range col.seen {
		i, _ := strconv.Atoi(body)
		if !matches(i) {
			t.Errorf("received %d", i)
		}
	}
	if len(col.seen) != 20 || col.dup != 0 {
		t.Fatalf("received %d (%d duplicates), want 20", len(col.seen), col.dup)
	}
	if env.Broker.PrefilterSkipped() == 0 {
		t.Fatal("no message was skipped on its mask")
	}
}
