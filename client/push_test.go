package client

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/internal/brokertest"
)

// produce sends n messages to topic with the official producer, bodies
// "<prefix>-<i>", and returns the bodies.
func (e testEnv) produce(t testing.TB, topic, prefix string, n int) []string {
	t.Helper()
	p := e.Producer(t)
	var bodies []string
	for i := range n {
		b := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(b)).WithTag("t")); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		bodies = append(bodies, b)
	}
	return bodies
}

// recorder collects consumed bodies.
type recorder struct {
	mu     sync.Mutex
	counts map[string]int
	by     map[string]string // body → consumer name
	total  int
	ch     chan struct{}
}

func newRecorder() *recorder {
	return &recorder{counts: map[string]int{}, by: map[string]string{}, ch: make(chan struct{}, 1)}
}

func (r *recorder) add(who string, msgs []*MessageExt) {
	r.mu.Lock()
	for _, m := range msgs {
		r.counts[string(m.Body)]++
		r.by[string(m.Body)] = who
		r.total++
	}
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

// waitDistinct waits until n distinct bodies were seen.
func (r *recorder) waitDistinct(t testing.TB, n int, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		r.mu.Lock()
		got := len(r.counts)
		r.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-r.ch:
		case <-deadline:
			t.Fatalf("saw %d distinct messages of %d", got, n)
		}
	}
}

func (r *recorder) snapshot() (map[string]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := make(map[string]int, len(r.counts))
	for k, v := range r.counts {
		c[k] = v
	}
	return c, r.total
}

// consumerOptions returns options for group with a fresh instance name.
func (e testEnv) consumerOptions(group string) ConsumerOptions {
	return ConsumerOptions{Client: e.options(), Group: group, ConsumeFrom: ConsumeFromFirstOffset, OffsetDir: ""}
}

// startPush starts a push consumer of topic and registers its shutdown.
func startPush(t testing.TB, opts ConsumerOptions, topic string, sel Selector, h Handler) *PushConsumer {
	t.Helper()
	c, err := NewPushConsumer(opts, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, sel); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return c
}

func TestPushClusteringEachMessageOnce(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 4)
	rec := newRecorder()
	var cs []*PushConsumer
	for i := range 2 {
		who := fmt.Sprint("c", i)
		opts := e.consumerOptions(group)
		opts.RebalanceInterval = 200 * time.Millisecond
		cs = append(cs, startPush(t, opts, topic, Selector{}, ConcurrentFunc(func(_ context.Context, _ *ConcurrentContext, msgs []*MessageExt) ConsumeResult {
			rec.add(who, msgs)
			return ConsumeSuccess
		})))
	}
	// While a queue changes hands both members may read it (at least
	// once, as in RocketMQ); exactly once holds once the group settled.
	brokertest.Eventually(t, 10*time.Second, "the queues split 2 and 2", func() bool {
		return len(cs[0].Assigned(topic)) == 2 && len(cs[1].Assigned(topic)) == 2
	})
	bodies := e.produce(t, topic, "m", 100)
	rec.waitDistinct(t, len(bodies), 30*time.Second)
	counts, total := rec.snapshot()
	if total != len(bodies) {
		t.Errorf("consumed %d messages for %d sent: %v", total, len(bodies), counts)
	}
}

// TestCommittedOffsetsHeal moves a group's offset back at the broker, as
// a broker that lost its last offset checkpoint in a crash would have it,
// while the consumer is idle: the consumer's next rounds put it right,
// though nothing changed on its side.
func TestCommittedOffsetsHeal(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	rec := newRecorder()
	opts := e.consumerOptions(group)
	opts.PersistInterval = 50 * time.Millisecond
	startPush(t, opts, topic, Selector{}, ConcurrentFunc(func(_ context.Context, _ *ConcurrentContext, msgs []*MessageExt) ConsumeResult {
		rec.add("", msgs)
		return ConsumeSuccess
	}))
	bodies := e.produce(t, topic, "m", 5)
	rec.waitDistinct(t, len(bodies), 30*time.Second)
	committed := func(want int64) func() bool {
		return func() bool {
			off, _ := e.Store.ConsumerOffset(group, topic, 0)
			return off == want
		}
	}
	brokertest.Eventually(t, 10*time.Second, "offset 5 committed", committed(5))
	if err := e.Store.CommitOffset(group, topic, 0, 2); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 10*time.Second, "offset 5 committed again", committed(5))
}

func TestPushBroadcastingEveryMemberGetsAll(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 2)
	recs := []*recorder{newRecorder(), newRecorder()}
	for i, rec := range recs {
		opts := e.consumerOptions(group)
		opts.Model = Broadcasting
		opts.OffsetDir = t.TempDir()
		startPush(t, opts, topic, Selector{Expression: "t"}, ConcurrentFunc(func(_ context.Context, _ *ConcurrentContext, msgs []*MessageExt) ConsumeResult {
			rec.add(fmt.Sprint(i), msgs)
			return ConsumeSuccess
		}))
	}
	bodies := e.produce(t, topic, "b", 20)
	for _, rec := range recs {
		rec.waitDistinct(t, len(bodies), 30*time.Second)
	}
}

// TestRebalanceOnNotify keeps the periodic rebalance far away (20 s): a
// second member joining must still split the queues at once, through the
// broker's NOTIFY_CONSUMER_IDS_CHANGED.
func TestRebalanceOnNotify(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 4)
	h := ConcurrentFunc(func(context.Context, *ConcurrentContext, []*MessageExt) ConsumeResult { return ConsumeSuccess })
	a := startPush(t, e.consumerOptions(group), topic, Selector{}, h)
	brokertest.Eventually(t, 10*time.Second, "the first member to hold all 4 queues", func() bool { return len(a.Assigned(topic)) == 4 })
	b := startPush(t, e.consumerOptions(group), topic, Selector{}, h)
	brokertest.Eventually(t, 10*time.Second, "the queues split 2 and 2", func() bool {
		return len(a.Assigned(topic)) == 2 && len(b.Assigned(topic)) == 2
	})
}

// TestPushFilters subscribes with a tag expression and with SQL92 (which
// the pull carries, so no heartbeat is needed for the broker to filter):
// each consumer gets exactly its messages.
func TestPushFilters(t *testing.T) {
	e := startBroker(t)
	topic := brokertest.Name("T")
	e.createTopic(t, topic, 2)
	p, err := NewProducer(ProducerOptions{Client: e.options(), Group: brokertest.Name("pg")})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	for i := range 20 {
		tag := "even"
		if i%2 == 1 {
			tag = "odd"
		}
		m := NewMessage(topic, []byte(fmt.Sprint(i))).WithTag(tag).SetProperty("n", fmt.Sprint(i))
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		sel  Selector
		want int
		ok   func(n int) bool
	}{
		{Selector{Expression: "odd"}, 10, func(n int) bool { return n%2 == 1 }},
		{Selector{Type: ExpressionSQL92, Expression: "n >= 15"}, 5, func(n int) bool { return n >= 15 }},
	} {
		rec := newRecorder()
		startPush(t, e.consumerOptions(brokertest.Name("g")), topic, tc.sel, ConcurrentFunc(func(_ context.Context, _ *ConcurrentContext, msgs []*MessageExt) ConsumeResult {
			rec.add("", msgs)
			return ConsumeSuccess
		}))
		rec.waitDistinct(t, tc.want, 30*time.Second)
		// A message past the last match proves the filter has looked at
		// everything before it.
		if _, err := p.SendSync(context.Background(), NewMessage(topic, []byte("99")).WithTag("odd").SetProperty("n", "99")); err != nil {
			t.Fatal(err)
		}
		rec.waitDistinct(t, tc.want+1, 30*time.Second)
		counts, _ := rec.snapshot()
		for b := range counts {
			var n int
			fmt.Sscan(b, &n)
			if n != 99 && !tc.ok(n) {
				t.Errorf("%+v delivered %s", tc.sel, b)
			}
		}
	}
}

// flakyTable fails the first adds it is asked for, then passes them on.
type flakyTable struct {
	queueTable
	mu    sync.Mutex
	fails int
}

func (f *flakyTable) add(q MessageQueue) error {
	f.mu.Lock()
	fail := f.fails > 0
	if fail {
		f.fails--
	}
	f.mu.Unlock()
	if fail {
		return fmt.Errorf("flakyTable: %s refused once", q)
	}
	return f.queueTable.add(q)
}

// TestRebalanceRetriesSoonAfterFailure: a rebalance that could not take up
// a queue (here refused by the table, as a broker killed mid-rebalance
// would) runs again within seconds, not at the next periodic rebalance,
// an hour away in this test.
func TestRebalanceRetriesSoonAfterFailure(t *testing.T) {
	e := startBroker(t)
	topic := brokertest.Name("T")
	e.createTopic(t, topic, 4)
	opts := e.consumerOptions(brokertest.Name("g"))
	opts.RebalanceInterval = time.Hour
	h := ConcurrentFunc(func(context.Context, *ConcurrentContext, []*MessageExt) ConsumeResult { return ConsumeSuccess })
	c, err := NewPushConsumer(opts, h)
	if err != nil {
		t.Fatal(err)
	}
	c.rebal.table = &flakyTable{queueTable: c, fails: 2}
	if err := c.Subscribe(topic, Selector{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown(context.Background())
	brokertest.Eventually(t, 10*time.Second, "all 4 queues held after refused adds", func() bool { return len(c.Assigned(topic)) == 4 })
	if n := c.rebal.rounds.Load(); n < 2 {
		t.Fatalf("%d rebalance rounds; the retry should have made at least 2", n)
	}
}
