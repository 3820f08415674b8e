//go:build !race

// The official client's lite pull consumer races with itself (a rebalance
// it starts in the background reads client state its Shutdown writes
// without a lock), so this test runs without the race detector; .ci/run
// runs it that way.

package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"

	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestLitePullConsumer polls every message with the lite pull consumer.
func TestLitePullConsumer(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Pull")
	createTopic(t, env, topic, 2)
	p := env.Producer(t)
	sendN(t, p, topic, "pull", 40)

	group := brokertest.Name("pull")
	c, err := consumer.NewPullConsumer(
		consumer.WithNsResolver(env.Resolver()),
		consumer.WithGroupName(group),
		consumer.WithInstance(brokertest.Name("pullc")),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, consumer.MessageSelector{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	seen := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < 40 && time.Now().Before(deadline) {
		cr, err := c.Poll(context.Background(), 2*time.Second)
		if err != nil {
			if consumer.IsNoNewMsgError(err) {
				continue
			}
			t.Fatal(err)
		}
		for _, m := range cr.GetMsgList() {
			seen[string(m.Body)] = true
		}
		c.ACK(context.Background(), cr, consumer.ConsumeSuccess)
	}
	if len(seen) != 40 {
		t.Fatalf("polled %d of 40 messages", len(seen))
	}
}
