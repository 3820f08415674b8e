//go:build !race

// The official client's orderly consumer reads its message cache without
// the lock its puller writes it under (processQueue.takeMessages spins on
// msgCache.Empty()), so the race detector reports the client itself as
// soon as a message arrives while the consumer waits. These tests run
// without -race; locks_test.go covers the broker's side of the protocol
// under it.

package broker_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

const (
	orderCount    = 20
	orderMessages = 500 // orderCount orders of 25 steps each
	orderSteps    = orderMessages / orderCount
)

// sendOrders sends steps [from, to) of every order, interleaved, with the
// order id as sharding key, so each order's steps land in one queue in
// sequence.
func sendOrders(t *testing.T, p interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
}, topic string, from, to int) {
	t.Helper()
	for step := from; step < to; step++ {
		for o := 0; o < orderCount; o++ {
			m := primitive.NewMessage(topic, []byte(fmt.Sprintf("%d:%d", o, step)))
			m.WithShardingKey("order-" + strconv.Itoa(o))
			if _, err := p.SendSync(context.Background(), m); err != nil {
				t.Fatalf("send order %d step %d: %v", o, step, err)
			}
		}
	}
}

// committedOffsets sums a group's committed offsets over a topic's queues.
func committedOffsets(env *brokertest.Env, group, topic string, queues int) int64 {
	var n int64
	for q := 0; q < queues; q++ {
		off, _ := env.Store.ConsumerOffset(group, topic, int32(q))
		n += off
	}
	return n
}

func parseOrder(t *testing.T, m *primitive.MessageExt) (order, step int) {
	if _, err := fmt.Sscanf(string(m.Body), "%d:%d", &order, &step); err != nil {
		t.Errorf("unexpected body %q", m.Body)
	}
	return order, step
}

// orderLog checks orderly deliveries as they happen: every delivery of an
// order is its next step (or, with redeliveries allowed, a step already
// consumed), no two deliveries of one queue overlap, and it records which
// consumer consumed which queue.
type orderLog struct {
	t          *testing.T
	mu         sync.Mutex
	next       [orderCount]int // next step to consume, per order
	skip       map[int]int     // order → a step that goes to the DLQ instead
	byConsumer map[string]map[int]bool
	inFlight   map[int]string // queue → consumer inside the listener
	violations []string
	target     int // steps per order that mean done
	done       chan struct{}
	closed     bool
}

func newOrderLog(t *testing.T, target int) *orderLog {
	return &orderLog{t: t, skip: map[int]int{}, byConsumer: map[string]map[int]bool{}, inFlight: map[int]string{},
		target: target, done: make(chan struct{})}
}

func (l *orderLog) violate(format string, args ...any) {
	if len(l.violations) < 20 {
		l.violations = append(l.violations, fmt.Sprintf(format, args...))
	}
}

// enter records that consumer started on queue q.
func (l *orderLog) enter(name string, q int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if other, ok := l.inFlight[q]; ok {
		l.violate("queue %d consumed by %s and %s at once", q, other, name)
	}
	l.inFlight[q] = name
	if l.byConsumer[name] == nil {
		l.byConsumer[name] = map[int]bool{}
	}
	l.byConsumer[name][q] = true
}

func (l *orderLog) leave(q int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.inFlight, q)
}

// deliver checks one delivery; ok says the listener consumes it.
func (l *orderLog) deliver(name string, order, step int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	want := l.next[order]
	if s, has := l.skip[order]; has && want == s && step == s+1 {
		want = s + 1 // the step before went to the dead-letter queue
	}
	if step != want {
		l.violate("%s: order %d delivered step %d, want step %d", name, order, step, want)
		return
	}
	if !ok {
		return
	}
	l.next[order] = step + 1
	for _, n := range l.next {
		if n < l.target {
			return
		}
	}
	if !l.closed {
		l.closed = true
		close(l.done)
	}
}

func (l *orderLog) check() {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.violations {
		l.t.Error(v)
	}
}

// TestOrderlyConsumeInSequence sends 500 messages of 20 orders with a
// sharding-key selector and consumes them with an orderly push consumer:
// each order arrives strictly in sequence, across one suspended message
// (consumed again before anything after it) and one message that keeps
// failing and goes to the dead-letter queue after its reconsume limit.
func TestOrderlyConsumeInSequence(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Orders")
	createTopic(t, env, topic, 4)
	group := brokertest.Name("orderly")
	log := newOrderLog(t, orderSteps)
	const (
		suspendOrder, suspendStep = 3, 10 // suspended once
		poisonOrder, poisonStep   = 7, 5  // always fails
		maxReconsume              = 2
	)
	log.skip[poisonOrder] = poisonStep
	var suspended atomic.Bool
	var poisonTries atomic.Int32
	c := env.PushConsumer(t, group, consumer.WithConsumerOrder(true), consumer.WithMaxReconsumeTimes(maxReconsume))
	err := c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			q := m.Queue.QueueId
			log.enter("c", q)
			order, step := parseOrder(t, m)
			result := consumer.ConsumeSuccess
			switch {
			case order == suspendOrder && step == suspendStep && suspended.CompareAndSwap(false, true):
				result = consumer.SuspendCurrentQueueAMoment
			case order == poisonOrder && step == poisonStep:
				poisonTries.Add(1)
				result = consumer.SuspendCurrentQueueAMoment
			}
			log.deliver("c", order, step, result == consumer.ConsumeSuccess)
			log.leave(q)
			if result != consumer.ConsumeSuccess {
				return result, nil
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, c, group, true, topic)
	p := env.Producer(t, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	sendOrders(t, p, topic, 0, orderSteps)

	brokertest.Wait(t, log.done, 60*time.Second, "every order consumed to its last step")
	log.check()
	if !suspended.Load() {
		t.Error("the suspended message was never delivered")
	}
	// The client retries locally up to the limit and then sends the message
	// back with delay level -1.
	if n := poisonTries.Load(); n != maxReconsume+2 {
		t.Errorf("the failing message was delivered %d times, want %d", n, maxReconsume+2)
	}
	dlq := broker.DLQGroupTopicPrefix + group
	if _, maxOff := env.Store.QueueOffsets(dlq, 0); maxOff != 1 {
		t.Fatalf("%s holds %d messages, want 1", dlq, maxOff)
	}
	it := env.Store.NewQueueIter(dlq, 0, store.IterOptions{StopOnCorruption: true})
	if !it.SeekGE(0) {
		t.Fatalf("dead letter unreadable: %v", it.Error())
	}
	rec := slices.Clone(it.Record())
	it.Close()
	if want := fmt.Sprintf("%d:%d", poisonOrder, poisonStep); string(rec.Body()) != want {
		t.Errorf("dead letter %q, want %q", rec.Body(), want)
	}
	// The consumer holds every queue it consumes.
	locks := env.Broker.QueueLocks(group)
	for q := int32(0); q < 4; q++ {
		if locks[broker.Queue{Topic: topic, BrokerName: broker.DefaultBrokerName, QueueID: q}] == "" {
			t.Errorf("queue %d is not locked: %v", q, locks)
		}
	}
}

// TestOrderlyTwoConsumersHandover runs two orderly consumers in one group.
// While both run, each queue is consumed by one of them only, and every
// order stays in sequence; when one shuts down, the other takes its queues
// over and continues each order exactly where it stopped.
func TestOrderlyTwoConsumersHandover(t *testing.T) {
	// A queue the first consumer gives up in the rebalance stays locked
	// until it expires (the client does not unlock it); a short expiry
	// keeps the test short. The clients renew well within it.
	env := brokertest.Start(t, func(c *server.Config) { c.Broker.QueueLockExpiry = 2 * time.Second })
	topic := brokertest.Name("Orders")
	createTopic(t, env, topic, 4)
	group := brokertest.Name("orderly")
	log := newOrderLog(t, orderSteps/2)
	var mu sync.Mutex // guards log, replaced for the second half
	consumers := map[string]interface{ Shutdown() error }{}
	for _, name := range []string{"a", "b"} {
		c := env.PushConsumer(t, group, consumer.WithConsumerOrder(true), consumer.WithRebalanceLockInterval(300*time.Millisecond))
		err := c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			l := log
			mu.Unlock()
			for _, m := range msgs {
				q := m.Queue.QueueId
				l.enter(name, q)
				order, step := parseOrder(t, m)
				l.deliver(name, order, step, true)
				time.Sleep(time.Millisecond) // widen the window an overlap would show in
				l.leave(q)
			}
			return consumer.ConsumeSuccess, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		env.StartConsumer(t, c, group, true, topic)
		consumers[name] = c
	}
	// Wait until the queues are split between the two.
	brokertest.Eventually(t, 30*time.Second, "the queues to be locked by both consumers", func() bool {
		ids := env.Broker.View().ConsumerIDs(group)
		holders := map[string]int{}
		for q, id := range env.Broker.QueueLocks(group) {
			if q.Topic == topic {
				holders[id]++
			}
		}
		return len(ids) == 2 && len(holders) == 2 && holders[ids[0]]+holders[ids[1]] == 4
	})

	p := env.Producer(t, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	sendOrders(t, p, topic, 0, orderSteps/2)
	brokertest.Wait(t, log.done, 60*time.Second, "the first half of every order")
	log.check()
	log.mu.Lock()
	for q := 0; q < 4; q++ {
		if log.byConsumer["a"][q] && log.byConsumer["b"][q] {
			t.Errorf("queue %d consumed by both consumers", q)
		}
	}
	if len(log.byConsumer["a"]) == 0 || len(log.byConsumer["b"]) == 0 {
		t.Errorf("queues not split: a=%v b=%v", log.byConsumer["a"], log.byConsumer["b"])
	}
	aQueues := len(log.byConsumer["a"])
	log.mu.Unlock()
	// Let the consumed offsets reach the broker, so the handover starts
	// exactly where the first consumer stopped.
	brokertest.Eventually(t, 30*time.Second, "the consumed offsets to be committed", func() bool {
		return committedOffsets(env, group, topic, 4) == orderCount*(orderSteps/2)
	})

	// The second half goes to b alone once a shuts down.
	second := newOrderLog(t, orderSteps)
	second.next = log.next
	mu.Lock()
	log = second
	mu.Unlock()
	if err := consumers["a"].Shutdown(); err != nil {
		t.Fatal(err)
	}
	sendOrders(t, p, topic, orderSteps/2, orderSteps)
	brokertest.Wait(t, second.done, 60*time.Second, "the second half of every order")
	second.check()
	second.mu.Lock()
	defer second.mu.Unlock()
	if len(second.byConsumer["a"]) > 0 {
		t.Errorf("consumer a consumed after its shutdown: %v", second.byConsumer["a"])
	}
	if len(second.byConsumer["b"]) != 4 {
		t.Errorf("consumer b consumed queues %v after taking over %d of them, want all 4", second.byConsumer["b"], aQueues)
	}
}
