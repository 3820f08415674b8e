package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/internal/brokertest"
)

// litePullOptions returns lite pull options for group that rebalance and
// commit quickly.
func (e testEnv) litePullOptions(group string) LitePullOptions {
	o := LitePullOptions{ConsumerOptions: e.consumerOptions(group)}
	o.RebalanceInterval = 200 * time.Millisecond
	return o
}

// startLite creates a lite pull consumer, lets setup subscribe or assign,
// starts it and registers its shutdown.
func startLite(t testing.TB, opts LitePullOptions, setup func(*LitePullConsumer) error) *LitePullConsumer {
	t.Helper()
	c, err := NewLitePullConsumer(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(c); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdownLite(t, c) })
	return c
}

func shutdownLite(t testing.TB, c *LitePullConsumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// pollN polls until n messages came or d passed, and fails the test when
// fewer came. Every queue's messages must come in offset order, with no
// gap: the puller's offsets are contiguous in a queue without filtering.
func pollN(t testing.TB, c *LitePullConsumer, n int, d time.Duration) []*MessageExt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out []*MessageExt
	last := map[MessageQueue]int64{}
	for len(out) < n {
		msgs, err := c.Poll(ctx)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if len(msgs) > c.opts.PullBatchSize {
			t.Fatalf("poll returned %d messages, more than the batch size %d", len(msgs), c.opts.PullBatchSize)
		}
		for _, m := range msgs {
			q := MessageQueue{Topic: m.Topic, BrokerName: m.BrokerName, QueueID: m.QueueID}
			if prev, ok := last[q]; ok && m.QueueOffset != prev+1 {
				t.Fatalf("%s: offset %d after %d", q, m.QueueOffset, prev)
			}
			last[q] = m.QueueOffset
		}
		out = append(out, msgs...)
		if ctx.Err() != nil {
			t.Fatalf("polled %d messages of %d", len(out), n)
		}
	}
	return out
}

// pollNothing polls for d and fails the test when a message comes.
func pollNothing(t testing.TB, c *LitePullConsumer, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for ctx.Err() == nil {
		msgs, err := c.Poll(ctx)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if len(msgs) > 0 {
			t.Fatalf("polled %d unexpected messages, first %s %q", len(msgs), msgs[0], msgs[0].Body)
		}
	}
}

// brokerName is the name of the test broker.
func brokerName(t testing.TB, e testEnv) string {
	t.Helper()
	in, err := acquireInstance(e.options())
	if err != nil {
		t.Fatal(err)
	}
	defer in.release()
	topic := brokertest.Name("T")
	e.createTopic(t, topic, 1)
	r, err := in.route(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return r.readQueues[0].BrokerName
}

func TestLitePullSubscribePollsEachMessageOnce(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 4)
	opts := e.litePullOptions(group)
	opts.PullBatchSize = 7
	c := startLite(t, opts, func(c *LitePullConsumer) error { return c.Subscribe(topic, Selector{Expression: "t"}) })
	sent := e.produce(t, topic, "m", 50)
	got := pollN(t, c, len(sent), 30*time.Second)
	seen := map[string]int{}
	for _, m := range got {
		seen[string(m.Body)]++
		if m.Topic != topic {
			t.Errorf("message %q of topic %q", m.Body, m.Topic)
		}
	}
	for _, b := range sent {
		if seen[b] != 1 {
			t.Errorf("%s polled %d times", b, seen[b])
		}
	}
	pollNothing(t, c, 300*time.Millisecond)
}

func TestLitePullAssignSeek(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 2)
	sent := e.produce(t, topic, "m", 20)
	// Start with no queue, then assign from the route.
	c := startLite(t, e.litePullOptions(group), func(c *LitePullConsumer) error { return c.Assign(nil) })
	c2, err := NewLitePullConsumer(e.litePullOptions(group))
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Start(); err == nil {
		t.Fatal("Start without Subscribe or Assign: no error")
	}
	qs, err := c.FetchQueues(context.Background(), topic)
	if err != nil || len(qs) != 2 {
		t.Fatalf("FetchQueues: %v, %v", qs, err)
	}
	if err := c.Assign(qs); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, Selector{}); err == nil {
		t.Fatal("Subscribe on an assigning consumer: no error")
	}
	got := pollN(t, c, len(sent), 30*time.Second)
	perQueue := map[MessageQueue]int{}
	for _, m := range got {
		perQueue[m.Queue()]++
	}
	q0 := qs[0]
	if perQueue[q0] == 0 {
		t.Fatalf("nothing from %s: %v", q0, perQueue)
	}

	// Seek back: q0's messages again, from offset 2.
	if err := c.Seek(q0, 2); err != nil {
		t.Fatal(err)
	}
	if off, err := c.Committed(context.Background(), q0); err != nil || off != 2 {
		t.Fatalf("committed after seek: %d, %v", off, err)
	}
	again := pollN(t, c, perQueue[q0]-2, 30*time.Second)
	for i, m := range again {
		if m.Queue() != q0 || m.QueueOffset != int64(i+2) {
			t.Fatalf("after seek, message %d is %s", i, m)
		}
	}
	pollNothing(t, c, 300*time.Millisecond)

	// A pull of the generation before the seek, answered late, is dropped.
	c.lmu.Lock()
	lq := c.lmu.queues[q0]
	stale := lq.gen - 1
	c.lmu.Unlock()
	late := &MessageExt{QueueOffset: 0, Message: Message{Topic: topic, Body: []byte("late")}}
	if c.buffer(lq, stale, []*MessageExt{late}, 1) {
		t.Fatal("a stale puller's messages were buffered")
	}
	if n, _ := c.buffered(q0); n != 0 {
		t.Fatalf("%d messages buffered after a stale pull", n)
	}

	if err := c.SeekToBegin(q0); err != nil {
		t.Fatal(err)
	}
	if again := pollN(t, c, perQueue[q0], 30*time.Second); again[0].QueueOffset != 0 {
		t.Fatalf("after SeekToBegin, first message %s", again[0])
	}
	if err := c.Seek(q0, int64(perQueue[q0])+1); err == nil {
		t.Fatal("seek past the max offset: no error")
	}
	other := MessageQueue{Topic: topic, BrokerName: q0.BrokerName, QueueID: 7}
	if err := c.Seek(other, 0); !errors.Is(err, ErrQueueNotHeld) {
		t.Fatalf("seek of a queue not held: %v", err)
	}

	// Assign one queue only: the other is given up.
	if err := c.Assign(qs[1:]); err != nil {
		t.Fatal(err)
	}
	if err := c.SeekToBegin(q0); !errors.Is(err, ErrQueueNotHeld) {
		t.Fatalf("seek of an unassigned queue: %v", err)
	}
}

func TestLitePullSeekToEndSkips(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 2)
	e.produce(t, topic, "old", 20)
	in, err := acquireInstance(e.options())
	if err != nil {
		t.Fatal(err)
	}
	r, err := in.route(context.Background(), topic)
	in.release()
	if err != nil {
		t.Fatal(err)
	}
	c := startLite(t, e.litePullOptions(group), func(c *LitePullConsumer) error { return c.Assign(r.readQueues) })
	// The pullers start at offset 0 (ConsumeFromFirstOffset) and may
	// have buffered old messages already: the seek drops them.
	for _, q := range r.readQueues {
		if err := c.SeekToEnd(q); err != nil {
			t.Fatal(err)
		}
	}
	e.produce(t, topic, "new", 4)
	for _, b := range bodies(pollN(t, c, 4, 30*time.Second)) {
		if !strings.HasPrefix(b, "new-") {
			t.Fatalf("polled %q after SeekToEnd", b)
		}
	}
	pollNothing(t, c, 300*time.Millisecond)
}

func TestLitePullManualCommit(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	e.produce(t, topic, "m", 30)
	opts := e.litePullOptions(group)
	opts.ManualCommit = true
	opts.PullBatchSize = 4
	opts.PersistInterval = 50 * time.Millisecond
	assign := func(c *LitePullConsumer) error {
		return c.Assign([]MessageQueue{{Topic: topic, BrokerName: brokerName(t, e), QueueID: 0}})
	}

	// a polls some, commits, polls more and shuts down: the group stands
	// where a committed.
	a := startLite(t, opts, assign)
	got := pollN(t, a, 10, 30*time.Second)
	committed := got[len(got)-1].QueueOffset + 1
	if err := a.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	q := got[0].Queue()
	if off, err := a.Committed(context.Background(), q); err != nil || off != committed {
		t.Fatalf("Committed: %d, %v; want %d", off, err, committed)
	}
	pollN(t, a, 5, 30*time.Second)
	shutdownLite(t, a)

	// b starts there, polls without committing; so c starts there too.
	for _, name := range []string{"b", "c"} {
		b := startLite(t, opts, assign)
		if first := pollN(t, b, 5, 30*time.Second)[0]; first.QueueOffset != committed {
			t.Fatalf("%s: first polled offset %d, want the committed %d", name, first.QueueOffset, committed)
		}
		shutdownLite(t, b)
	}
}

func TestLitePullAutoCommit(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 2)
	opts := e.litePullOptions(group)
	opts.AutoCommitInterval = 100 * time.Millisecond
	sub := func(c *LitePullConsumer) error { return c.Subscribe(topic, Selector{}) }
	a := startLite(t, opts, sub)
	sent := e.produce(t, topic, "old", 20)
	pollN(t, a, len(sent), 30*time.Second)
	// The committer, not Shutdown, sends the offsets.
	qs := a.held(topic)
	if len(qs) != 2 {
		t.Fatalf("held %v", qs)
	}
	brokertest.Eventually(t, 10*time.Second, "the broker to have the polled offsets", func() bool {
		for _, q := range qs {
			ctx, cancel := a.in.ctx()
			off, err := a.in.queryConsumerOffset(ctx, group, q)
			max, merr := a.in.maxOffset(ctx, q)
			cancel()
			if err != nil || merr != nil || off != max {
				return false
			}
		}
		return true
	})
	shutdownLite(t, a)

	b := startLite(t, opts, sub)
	e.produce(t, topic, "new", 6)
	for _, body := range bodies(pollN(t, b, 6, 30*time.Second)) {
		if !strings.HasPrefix(body, "new-") {
			t.Fatalf("polled %q, consumed before", body)
		}
	}
}

func TestLitePullRebalanceGivesUpQueue(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 2)
	opts := func() LitePullOptions {
		o := e.litePullOptions(group)    // a fresh instance name each
		o.AutoCommitInterval = time.Hour // only giving a queue up commits
		return o
	}
	sub := func(c *LitePullConsumer) error { return c.Subscribe(topic, Selector{}) }
	a := startLite(t, opts(), sub)
	sent := e.produce(t, topic, "m", 20)
	pollN(t, a, len(sent), 30*time.Second)
	before := a.held(topic)
	if len(before) != 2 {
		t.Fatalf("a alone holds %v", before)
	}

	b := startLite(t, opts(), sub)
	brokertest.Eventually(t, 30*time.Second, "a and b to share the queues", func() bool {
		return len(a.held(topic)) == 1 && len(b.held(topic)) == 1
	})
	gone := b.held(topic)[0]
	ctx, cancel := a.in.ctx()
	defer cancel()
	off, err := a.in.queryConsumerOffset(ctx, group, gone)
	max, merr := a.in.maxOffset(ctx, gone)
	if err != nil || merr != nil || off != max {
		t.Fatalf("offset of the queue a gave up: %d, %v; want its max %d, %v", off, err, max, merr)
	}
	// b may still re-read what a polled: it can take the queue up before
	// a gives it up, as in RocketMQ, so that is not checked.
}

func TestLitePullFlowControlBoundsBuffer(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	sent := e.produce(t, topic, "m", 60)
	opts := e.litePullOptions(group)
	opts.PullThresholdForQueue = 10
	opts.PullBatchSize = 4
	q := MessageQueue{Topic: topic, BrokerName: brokerName(t, e), QueueID: 0}
	c := startLite(t, opts, func(c *LitePullConsumer) error { return c.Assign([]MessageQueue{q}) })
	limit := opts.PullThresholdForQueue + opts.PullBatchSize
	// Wait until flow control has held the puller several times; the
	// buffer must be over the limit then, and never beyond one batch more.
	brokertest.Eventually(t, 30*time.Second, "flow control to hold the puller", func() bool {
		n, holds := c.buffered(q)
		if n > limit {
			t.Fatalf("%d messages buffered, limit %d", n, limit)
		}
		return holds >= 5
	})
	if n, _ := c.buffered(q); n <= opts.PullThresholdForQueue || n > limit {
		t.Fatalf("%d messages buffered while held; want (%d, %d]", n, opts.PullThresholdForQueue, limit)
	}
	// Polling lets the puller go on.
	pollN(t, c, len(sent), 30*time.Second)
}

func TestLitePullPauseResume(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	q := MessageQueue{Topic: topic, BrokerName: brokerName(t, e), QueueID: 0}
	opts := e.litePullOptions(group)
	opts.PullBatchSize = 4
	c := startLite(t, opts, func(c *LitePullConsumer) error { return c.Assign([]MessageQueue{q}) })
	e.produce(t, topic, "m", 8)
	first := pollN(t, c, 4, 30*time.Second)
	c.Pause(q)
	// A pull under way when Pause came may still buffer; nothing is
	// handed out while paused.
	pollNothing(t, c, 300*time.Millisecond)
	c.Resume(q)
	rest := pollN(t, c, 4, 30*time.Second)
	if rest[0].QueueOffset != first[len(first)-1].QueueOffset+1 {
		t.Fatalf("after resume, offset %d follows %d", rest[0].QueueOffset, first[len(first)-1].QueueOffset)
	}
}

func TestLitePullPollTimeout(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	opts := e.litePullOptions(group)
	opts.PollTimeout = 300 * time.Millisecond
	c := startLite(t, opts, func(c *LitePullConsumer) error { return c.Subscribe(topic, Selector{}) })

	start := time.Now()
	msgs, err := c.Poll(context.Background())
	if err != nil || msgs == nil || len(msgs) != 0 {
		t.Fatalf("idle poll: %v, %v", msgs, err)
	}
	if d := time.Since(start); d < opts.PollTimeout {
		t.Fatalf("idle poll returned after %v, before the poll timeout", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	if msgs, err := c.Poll(ctx); err != nil || len(msgs) != 0 {
		t.Fatalf("idle poll with a deadline: %v, %v", msgs, err)
	}
	if d := time.Since(start); d >= opts.PollTimeout {
		t.Fatalf("poll ignored its context's deadline: %v", d)
	}

	shutdownLite(t, c)
	if _, err := c.Poll(context.Background()); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("poll after shutdown: %v", err)
	}
	shutdownLite(t, c) // idempotent
}

func TestLitePullRetryTopicRestored(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	e.createTopic(t, retryTopic(group), 1)
	c := startLite(t, e.litePullOptions(group), func(c *LitePullConsumer) error { return c.Subscribe(topic, Selector{}) })
	m := primitive.NewMessage(retryTopic(group), []byte("retried"))
	m.WithProperty("RETRY_TOPIC", topic)
	if _, err := e.Producer(t).SendSync(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got := pollN(t, c, 1, 30*time.Second)
	if got[0].Topic != topic || string(got[0].Body) != "retried" {
		t.Fatalf("retried message: topic %q body %q", got[0].Topic, got[0].Body)
	}
}

func TestLitePullOptionsInvalid(t *testing.T) {
	_, err := NewLitePullConsumer(LitePullOptions{PollTimeout: -1})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"Group is empty", "NameServers", "PollTimeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}
