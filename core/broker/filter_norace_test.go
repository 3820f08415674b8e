//go:build !race

// The official client's pull consumer races with itself (its Pull reads
// queue state its background rebalance writes without a lock), so this
// test runs without the race detector; .ci/run runs it that way.

package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"

	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestBadSQL92IsReported pulls with a malformed SQL92 expression: the
// consumer gets an error naming the problem.
func TestBadSQL92IsReported(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("BadSql")
	createTopic(t, env, topic, 1)
	sendN(t, env.Producer(t), topic, "x", 1)
	group := brokertest.Name("pull")
	c, err := rocketmq.NewPullConsumer(
		consumer.WithNsResolver(env.Resolver()),
		consumer.WithGroupName(group),
		consumer.WithInstance(brokertest.Name("pullc")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: "a > AND b = 1"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	// Start leaves a rebalance running that Pull would race with inside
	// the client; it is over once the client's own pulls reach the broker.
	brokertest.Eventually(t, 30*time.Second, "the client's start-up rebalance", func() bool { return env.Broker.View().Pulled(group, topic, 0) })
	_, err = c.Pull(context.Background(), 10)
	if err == nil || !strings.Contains(err.Error(), "sql92") || !strings.Contains(err.Error(), "23") {
		t.Fatalf("Pull with a bad expression: %v", err)
	}
	t.Logf("error seen by the client: %v", err)
}
