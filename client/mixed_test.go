package client

import (
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestMixedGroupWithOfficialClient runs one consumer group of our client
// and the official Go client together: once both hold their queues, every
// message is consumed exactly once across the two.
func TestMixedGroupWithOfficialClient(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 4)
	rec := newRecorder()

	official := e.PushConsumer(t, group)
	if err := official.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		ours := make([]*MessageExt, len(msgs))
		for i, m := range msgs {
			ours[i] = &MessageExt{Message: Message{Body: m.Body}}
		}
		rec.add("official", ours)
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	e.StartConsumer(t, official, group, true, topic)

	opts := e.consumerOptions(group)
	opts.RebalanceInterval = 200 * time.Millisecond
	c := startPush(t, opts, topic, Selector{}, ConcurrentFunc(func(_ context.Context, _ *ConcurrentContext, msgs []*MessageExt) ConsumeResult {
		rec.add("ours", msgs)
		return ConsumeSuccess
	}))
	// Both settle: ours holds half the queues, and the official client
	// has given them up (it rebalances every 20 s or on notification).
	brokertest.Eventually(t, 30*time.Second, "our consumer to hold 2 queues", func() bool { return len(c.held(topic)) == 2 })
	brokertest.Eventually(t, 30*time.Second, "the group to be split", func() bool {
		ids := e.Broker.View().ConsumerIDs(group)
		return len(ids) == 2
	})
	// Cleanups run last-in first-out: this one runs before either
	// consumer stops, so our consumer's departure does not notify the
	// official client into a rebalance that races its own Shutdown (a race
	// inside that client).
	t.Cleanup(func() { e.Broker.Hooks().SetNotifyConsumerIDsChanged(false) })
	// Let the official client's rebalance catch up with the new member.
	deadline := time.Now().Add(25 * time.Second)
	var bodies []string
	for time.Now().Before(deadline) {
		bodies = e.produce(t, topic, "probe", 8)
		rec.waitDistinct(t, len(bodies), 30*time.Second)
		if _, total := rec.snapshot(); total == len(bodies) {
			break
		}
		rec = resetRecorder(rec)
		time.Sleep(500 * time.Millisecond)
	}
	rec = resetRecorder(rec)
	bodies = e.produce(t, topic, "m", 100)
	rec.waitDistinct(t, len(bodies), 30*time.Second)
	counts, total := rec.snapshot()
	if total != len(bodies) {
		t.Errorf("consumed %d messages for %d sent", total, len(bodies))
	}
	var byOfficial, byOurs int
	rec.mu.Lock()
	for _, who := range rec.by {
		if who == "official" {
			byOfficial++
		} else {
			byOurs++
		}
	}
	rec.mu.Unlock()
	if byOfficial == 0 || byOurs == 0 {
		t.Errorf("one client consumed everything: official %d, ours %d (%v)", byOfficial, byOurs, len(counts))
	}
}

// resetRecorder empties r in place and returns it.
func resetRecorder(r *recorder) *recorder {
	r.mu.Lock()
	r.counts = map[string]int{}
	r.by = map[string]string{}
	r.total = 0
	r.mu.Unlock()
	return r
}
