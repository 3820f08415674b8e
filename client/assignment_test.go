package client

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/allocate"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// queueIDs lists the queue ids of qs, sorted.
func queueIDs(qs []MessageQueue) []int32 {
	var ids []int32
	for _, q := range qs {
		ids = append(ids, q.QueueID)
	}
	slices.Sort(ids)
	return ids
}

// TestBrokerAssignmentFollowsGroupStrategy changes a group's strategy at
// the broker while two of our consumers run: within a rebalance period
// each holds what the new strategy gives it, and no message sent before
// or after the change is lost or consumed twice.
func TestBrokerAssignmentFollowsGroupStrategy(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 4)
	rec := newRecorder()
	var consumers []*PushConsumer
	for range 2 {
		opts := e.consumerOptions(group)
		opts.RebalanceInterval = 200 * time.Millisecond
		opts.PersistInterval = 50 * time.Millisecond
		consumers = append(consumers, startPush(t, opts, topic, Selector{}, ConcurrentFunc(func(_ context.Context, _ *ConcurrentContext, msgs []*MessageExt) ConsumeResult {
			rec.add("", msgs)
			return ConsumeSuccess
		})))
	}
	ids := []string{consumers[0].in.id, consumers[1].in.id}
	slices.Sort(ids)
	first, second := consumers[0], consumers[1]
	if first.in.id != ids[0] {
		first, second = second, first
	}
	// waitHeld waits until the group has settled on an assignment: while
	// a queue changes hands both members may read it (at least once), so
	// exactly-once is checked only between settled states.
	waitHeld := func(a, b []int32) {
		t.Helper()
		brokertest.Eventually(t, 10*time.Second, fmt.Sprintf("the consumers to hold %v and %v", a, b), func() bool {
			return slices.Equal(queueIDs(first.held(topic)), a) && slices.Equal(queueIDs(second.held(topic)), b)
		})
	}
	waitHeld([]int32{0, 1}, []int32{2, 3}) // AVG
	before := e.produce(t, topic, "before", 40)
	rec.waitDistinct(t, len(before), 30*time.Second)
	// Settled means committed too: a queue that changes hands before its
	// offset reached the broker is read again from the last commit by its
	// new owner (at least once, as in RocketMQ).
	brokertest.Eventually(t, 10*time.Second, "the consumed offsets committed", func() bool {
		var sum int64
		for q := range int32(4) {
			off, _ := e.Store.ConsumerOffset(group, topic, q)
			sum += off
		}
		return sum == int64(len(before))
	})

	if err := e.Broker.Admin().SetGroupStrategy(group, allocate.NameByCircle); err != nil {
		t.Fatal(err)
	}
	waitHeld([]int32{0, 2}, []int32{1, 3}) // AVG_BY_CIRCLE
	after := e.produce(t, topic, "after", 40)
	rec.waitDistinct(t, len(before)+len(after), 30*time.Second)
	counts, total := rec.snapshot()
	if total != len(before)+len(after) {
		for b, n := range counts {
			if n > 1 {
				t.Errorf("%s consumed %d times", b, n)
			}
		}
	}
}

// TestClientAllocationWhenAsked checks that ClientAllocation makes the
// client allocate with its own strategy even though the broker assigns.
func TestClientAllocationWhenAsked(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 4)
	if err := e.Broker.Admin().SetGroupStrategy(group, allocate.NameByCircle); err != nil {
		t.Fatal(err)
	}
	opts := e.consumerOptions(group)
	opts.ClientAllocation = true
	opts.RebalanceInterval = 200 * time.Millisecond
	c := startPush(t, opts, topic, Selector{}, ConcurrentFunc(func(context.Context, *ConcurrentContext, []*MessageExt) ConsumeResult { return ConsumeSuccess }))
	brokertest.Eventually(t, 10*time.Second, "all 4 queues held", func() bool { return len(c.held(topic)) == 4 })
	if c.rebal.brokerAssigns.Load() {
		t.Fatal("asked the broker although ClientAllocation is set")
	}
}

// TestStrategyAdapter checks that the client's strategies, adapted from
// core/allocate (which the broker's QUERY_ASSIGNMENT runs too), give each
// member what core/allocate gives it, and every queue to one member.
func TestStrategyAdapter(t *testing.T) {
	for _, name := range []string{allocate.NameAveragely, allocate.NameByCircle, allocate.NameConsistentHash} {
		s, ok := StrategyByName(name)
		if !ok {
			t.Fatalf("no strategy %s", name)
		}
		clients := []string{"10.0.0.3@b", "10.0.0.1@a", "10.0.0.2@c"}
		var queues []MessageQueue
		for i := range 7 {
			queues = append(queues, MessageQueue{Topic: "T", BrokerName: "b", QueueID: int32(i)})
		}
		seen := map[MessageQueue]int{}
		for _, c := range clients {
			got, err := s.Allocate("g", c, clients, queues)
			if err != nil {
				t.Fatal(err)
			}
			shared, _ := allocate.ByName(name)
			aqs := make([]allocate.Queue, len(queues))
			for i, q := range queues {
				aqs[i] = allocate.Queue(q)
			}
			want, _ := shared.Allocate("g", c, clients, aqs)
			if len(got) != len(want) {
				t.Fatalf("%s: client %v, broker %v", name, got, want)
			}
			for _, q := range got {
				seen[q]++
			}
		}
		if len(seen) != len(queues) {
			t.Errorf("%s: %d of %d queues assigned", name, len(seen), len(queues))
		}
	}
}

// TestBrokerAssignmentAcrossBrokers runs a group of two of our consumers on
// a topic spread over two brokers: each broker assigns its own queues, and
// together the consumers hold every queue of both, each once, and consume
// every message.
func TestBrokerAssignmentAcrossBrokers(t *testing.T) {
	a := startBroker(t)
	b := startBroker(t, func(c *server.Config) {
		c.NamesrvListen = ""
		c.NameServers = []string{a.NamesrvAddr}
		c.Broker.BrokerName = "broker-b"
	})
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	a.createTopic(t, topic, 2)
	b.createTopic(t, topic, 2)
	rec := newRecorder()
	var consumers []*PushConsumer
	for range 2 {
		opts := a.consumerOptions(group)
		opts.RebalanceInterval = 200 * time.Millisecond
		consumers = append(consumers, startPush(t, opts, topic, Selector{}, ConcurrentFunc(func(_ context.Context, _ *ConcurrentContext, msgs []*MessageExt) ConsumeResult {
			rec.add("", msgs)
			return ConsumeSuccess
		})))
	}
	brokertest.Eventually(t, 10*time.Second, "the consumers to hold the four queues of both brokers, each once", func() bool {
		held := map[string]int{}
		for _, c := range consumers {
			for _, q := range c.held(topic) {
				held[fmt.Sprintf("%s/%d", q.BrokerName, q.QueueID)]++
			}
		}
		if len(held) != 4 {
			return false
		}
		for _, n := range held {
			if n != 1 {
				return false
			}
		}
		return len(consumers[0].held(topic)) == 2
	})
	sent := a.produce(t, topic, "m", 40)
	rec.waitDistinct(t, len(sent), 30*time.Second)
}
