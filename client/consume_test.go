package client

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// shortDelays makes delay levels 1-3 wait 1 s each, the shortest a broker allows.
func shortDelays(cfg *server.Config) {
	cfg.Broker.DelayLevels = []time.Duration{time.Second, time.Second, time.Second}
}

// deliveries records each delivery of each body.
type deliveries struct {
	mu   sync.Mutex
	seen map[string][]*MessageExt
	ch   chan struct{}
}

func newDeliveries() *deliveries {
	return &deliveries{seen: map[string][]*MessageExt{}, ch: make(chan struct{}, 1)}
}

func (d *deliveries) add(msgs []*MessageExt) {
	d.mu.Lock()
	for _, m := range msgs {
		c := *m
		d.seen[string(m.Body)] = append(d.seen[string(m.Body)], &c)
	}
	d.mu.Unlock()
	select {
	case d.ch <- struct{}{}:
	default:
	}
}

func (d *deliveries) get(body string) []*MessageExt {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*MessageExt(nil), d.seen[body]...)
}

// wait waits until cond holds over the recorded deliveries.
func (d *deliveries) wait(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.After(timeout)
	for !cond() {
		select {
		case <-d.ch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestConsumeRetryThenDeadLetter(t *testing.T) {
	e := startBroker(t, shortDelays)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	d := newDeliveries()
	opts := e.consumerOptions(group)
	opts.MaxReconsumeTimes = 2
	startPush(t, opts, topic, Selector{}, ConcurrentFunc(func(_ context.Context, cc *ConcurrentContext, msgs []*MessageExt) ConsumeResult {
		d.add(msgs)
		cc.DelayLevelWhenNextConsume = 1
		return ConsumeRetryLater
	}))
	e.produce(t, topic, "r", 1)
	d.wait(t, "three deliveries", 30*time.Second, func() bool { return len(d.get("r-0")) >= 3 })
	got := d.get("r-0")
	for i, m := range got[:3] {
		if m.ReconsumeTimes != int32(i) {
			t.Errorf("delivery %d: reconsume times %d", i, m.ReconsumeTimes)
		}
		if m.Topic != topic {
			t.Errorf("delivery %d: topic %s, want the original %s", i, m.Topic, topic)
		}
	}
	d.wait(t, "the dead letter", 10*time.Second, func() bool {
		dl, err := e.Broker.Outbox().ListDLQ(outbox.DLQSelector{Group: group})
		return err == nil && len(dl) == 1
	})
	if n := len(d.get("r-0")); n != 3 {
		t.Errorf("%d deliveries, want 3 before the dead letter", n)
	}
}

func TestConsumeAckIndexRetriesTheRest(t *testing.T) {
	e := startBroker(t, shortDelays)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	e.produce(t, topic, "a", 4)
	d := newDeliveries()
	opts := e.consumerOptions(group)
	opts.ConsumeBatchSize = 4
	var once sync.Once
	startPush(t, opts, topic, Selector{}, ConcurrentFunc(func(_ context.Context, cc *ConcurrentContext, msgs []*MessageExt) ConsumeResult {
		d.add(msgs)
		once.Do(func() {
			if len(msgs) != 4 {
				t.Errorf("first call got %d messages, want a batch of 4", len(msgs))
			}
			cc.AckIndex = 1
			cc.DelayLevelWhenNextConsume = 1
		})
		return ConsumeSuccess
	}))
	d.wait(t, "retries of a-2 and a-3", 30*time.Second, func() bool { return len(d.get("a-2")) == 2 && len(d.get("a-3")) == 2 })
	for _, b := range []string{"a-0", "a-1"} {
		if n := len(d.get(b)); n != 1 {
			t.Errorf("%s delivered %d times, want once (acknowledged)", b, n)
		}
	}
	if m := d.get("a-3")[1]; m.ReconsumeTimes != 1 {
		t.Errorf("retried a-3 has reconsume times %d", m.ReconsumeTimes)
	}
}

func TestAckIndex(t *testing.T) {
	for _, tc := range []struct {
		res  ConsumeResult
		ack  int
		n    int
		want int
	}{
		{ConsumeSuccess, 1 << 40, 4, 3},
		{ConsumeSuccess, 1, 4, 1},
		{ConsumeSuccess, -5, 4, -1},
		{ConsumeRetryLater, 2, 4, -1},
		{ConsumeSuccess, 0, 1, 0},
	} {
		if got := ackIndex(tc.res, &ConcurrentContext{AckIndex: tc.ack}, tc.n); got != tc.want {
			t.Errorf("ackIndex(%v, %d, %d) = %d, want %d", tc.res, tc.ack, tc.n, got, tc.want)
		}
	}
}

// TestConsumeResubmitWhenSendBackFails hands the consume service messages
// whose broker is unknown, so their send-back fails: they must come back
// to the handler locally, with reconsume times raised.
func TestConsumeResubmitWhenSendBackFails(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	d := newDeliveries()
	c, err := NewPushConsumer(e.consumerOptions(group), ConcurrentFunc(func(_ context.Context, _ *ConcurrentContext, msgs []*MessageExt) ConsumeResult {
		d.add(msgs)
		return ConsumeRetryLater
	}))
	if err != nil {
		t.Fatal(err)
	}
	c.resubmitDelay = 50 * time.Millisecond
	if err := c.Subscribe(topic, Selector{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	q := MessageQueue{Topic: topic, BrokerName: "no-such-broker", QueueID: 0}
	qs := &queueState{q: q, pq: newProcessQueue(false, time.Now()), done: make(chan struct{}), run: make(chan struct{}, 1)}
	m := &MessageExt{Message: Message{Topic: topic, Body: []byte("x")}, BrokerName: q.BrokerName, QueueOffset: 7, MsgID: "id"}
	qs.pq.put([]*MessageExt{m})
	c.submit(consumeRequest{qs: qs, msgs: []*MessageExt{m}})
	d.wait(t, "local re-consumption", 10*time.Second, func() bool { return len(d.get("x")) >= 3 })
	got := d.get("x")
	for i, m := range got[:3] {
		if m.ReconsumeTimes != int32(i) {
			t.Errorf("attempt %d: reconsume times %d", i, m.ReconsumeTimes)
		}
	}
	if n := qs.pq.count(); n != 1 {
		t.Errorf("the process queue holds %d messages, want the one still failing", n)
	}
}

// TestConsumeExpirySweep blocks the handler on one message past the
// consume timeout: the sweep must send it back for retry and let its
// queue's offset move past it while the handler is still stuck.
func TestConsumeExpirySweep(t *testing.T) {
	e := startBroker(t, shortDelays)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	d := newDeliveries()
	release := make(chan struct{})
	opts := e.consumerOptions(group)
	opts.ConsumeTimeout = 300 * time.Millisecond
	opts.PersistInterval = 100 * time.Millisecond
	c := startPush(t, opts, topic, Selector{}, ConcurrentFunc(func(_ context.Context, _ *ConcurrentContext, msgs []*MessageExt) ConsumeResult {
		d.add(msgs)
		if string(msgs[0].Body) == "s-0" && msgs[0].ReconsumeTimes == 0 {
			<-release
		}
		return ConsumeSuccess
	}))
	defer close(release)
	e.produce(t, topic, "s", 2)
	d.wait(t, "the stuck message's retry", 30*time.Second, func() bool { return len(d.get("s-0")) >= 2 })
	if m := d.get("s-0")[1]; m.ReconsumeTimes != 1 {
		t.Errorf("retried message has reconsume times %d, want 1", m.ReconsumeTimes)
	}
	q := MessageQueue{Topic: topic, BrokerName: d.get("s-0")[0].BrokerName, QueueID: 0}
	d.wait(t, "the committed offset past the stuck message", 10*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		off, err := c.in.queryConsumerOffset(ctx, group, q)
		return err == nil && off == 2
	})
}

// TestConsumeHandlerPanicRetries makes a handler panic once: the consumer
// survives and the message comes back through the retry topic.
func TestConsumeHandlerPanicRetries(t *testing.T) {
	e := startBroker(t, shortDelays)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	d := newDeliveries()
	var once sync.Once
	startPush(t, e.consumerOptions(group), topic, Selector{}, ConcurrentFunc(func(_ context.Context, cc *ConcurrentContext, msgs []*MessageExt) ConsumeResult {
		d.add(msgs)
		once.Do(func() {
			cc.DelayLevelWhenNextConsume = 1
			panic("handler bug")
		})
		return ConsumeSuccess
	}))
	e.produce(t, topic, "p", 1)
	d.wait(t, "the retry after the panic", 30*time.Second, func() bool { return len(d.get("p-0")) == 2 })
	if m := d.get("p-0")[1]; m.ReconsumeTimes != 1 {
		t.Errorf("retried message has reconsume times %d, want 1", m.ReconsumeTimes)
	}
}
