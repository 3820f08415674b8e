package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store/storetest"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// startProducer starts a producer on e with a group of its own; mutate
// may change its options first. It is shut down when the test ends.
func startProducer(t testing.TB, e testEnv, mutate ...func(*ProducerOptions)) *Producer {
	t.Helper()
	opts := ProducerOptions{Client: e.options(), Group: brokertest.Name("pg")}
	for _, m := range mutate {
		m(&opts)
	}
	p, err := NewProducer(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return p
}

// testInstance returns the producer's client instance.
func testInstance(t testing.TB, p *Producer) *instance {
	t.Helper()
	in, err := p.instance()
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// pullQueue reads q from offset from until the broker has no more.
func pullQueue(t testing.TB, in *instance, q MessageQueue, from int64) []*MessageExt {
	t.Helper()
	var out []*MessageExt
	for {
		res, err := in.pull(context.Background(), pullRequest{
			group: "test_pull", queue: q, offset: from, maxNums: 32,
			sysFlag: pullFlagSubscription, expression: "*", expressionType: "TAG",
		})
		if err != nil {
			t.Fatalf("pull %s at %d: %v", q, from, err)
		}
		if res.status != pullFound {
			return out
		}
		out = append(out, res.msgs...)
		from = res.nextBeginOffset
	}
}

// pullTopic reads every queue of topic from the start.
func pullTopic(t testing.TB, in *instance, topic string) []*MessageExt {
	t.Helper()
	r, err := in.updateRoute(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []*MessageExt
	for _, q := range r.readQueues {
		out = append(out, pullQueue(t, in, q, 0)...)
	}
	return out
}

func TestProducerOptionsReportEveryProblem(t *testing.T) {
	_, err := NewProducer(ProducerOptions{SendTimeout: -1, CompressLevel: 10, MaxMessageSize: -1, DefaultTopicQueueNums: -2})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"NameServers", "Group", "SendTimeout", "CompressLevel", "MaxMessageSize", "DefaultTopicQueueNums"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
	p, err := NewProducer(ProducerOptions{Client: ClientOptions{NameServers: []string{"127.0.0.1:1"}}, Group: "g", RetryTimes: -1})
	if err != nil {
		t.Fatal(err)
	}
	o := p.opts
	if o.SendTimeout != DefaultSendTimeout || o.RetryTimes != 0 || o.CompressThreshold != DefaultCompressThreshold ||
		o.CompressLevel != DefaultCompressLevel || o.MaxMessageSize != DefaultMaxMessageSize || o.DefaultTopicQueueNums != 4 || p.fault == nil {
		t.Fatalf("defaults: %+v", o)
	}
	if _, err := p.SendSync(context.Background(), NewMessage("T", []byte("x"))); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("send before Start: %v", err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown of a producer never started: %v", err)
	}
}

// TestProducerPriority: a priority message goes to the queue of its
// priority on a PRIORITY topic, whatever queue the producer picks.
func TestProducerPriority(t *testing.T) {
	e := startBroker(t)
	topic := brokertest.Name("Prio")
	if err := e.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, MessageType: broker.MessageTypePriority}); err != nil {
		t.Fatal(err)
	}
	p := startProducer(t, e)
	for i := range 8 {
		prio := i % 5 // 4 shares the last queue, 3
		res, err := p.SendSync(context.Background(), NewMessage(topic, []byte("m")).WithPriority(prio))
		if err != nil {
			t.Fatal(err)
		}
		if want := int32(min(prio, 3)); res.Queue.QueueID != want {
			t.Fatalf("priority %d sent to queue %d, want %d", prio, res.Queue.QueueID, want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a priority below 0 did not panic")
		}
	}()
	NewMessage(topic, nil).WithPriority(-1)
}

func TestProducerSendSyncRoundTrip(t *testing.T) {
	e := startBroker(t)
	topic := brokertest.Name("T")
	e.createTopic(t, topic, 4)
	p := startProducer(t, e)
	in := testInstance(t, p)

	const n = 20
	sent := map[string]*SendResult{}
	for i := range n {
		m := NewMessage(topic, fmt.Appendf(nil, "body-%d", i)).WithTag("tagA").WithKeys(fmt.Sprint("k", i)).SetProperty("user", "u")
		m.Flag = int32(i)
		res, err := p.SendSync(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != SendOK || res.MsgID == "" || res.MsgID != m.Property(message.PropertyUniqKey) || len(res.OffsetMsgID) != 32 {
			t.Fatalf("result %+v for message %v", res, m.Properties)
		}
		if _, dup := sent[res.MsgID]; dup {
			t.Fatalf("message id %s given twice", res.MsgID)
		}
		sent[res.MsgID] = res
	}
	got := pullTopic(t, in, topic)
	if len(got) != n {
		t.Fatalf("pulled %d messages, sent %d", len(got), n)
	}
	for _, m := range got {
		res := sent[m.MsgID]
		if res == nil {
			t.Fatalf("pulled %s, which was not sent", m.MsgID)
		}
		if m.Queue() != res.Queue || m.QueueOffset != res.QueueOffset || m.OffsetMsgID != res.OffsetMsgID {
			t.Fatalf("pulled %s at %s/%d (%s), send said %s/%d (%s)", m.MsgID, m.Queue(), m.QueueOffset, m.OffsetMsgID, res.Queue, res.QueueOffset, res.OffsetMsgID)
		}
		i := m.Flag
		if string(m.Body) != fmt.Sprintf("body-%d", i) || m.Tag() != "tagA" || m.Property("user") != "u" || !slices.Equal(m.Keys(), []string{fmt.Sprint("k", i)}) {
			t.Fatalf("pulled %+v", m)
		}
	}
}

func TestProducerRoundRobinCoversQueues(t *testing.T) {
	e := startBroker(t)
	topic := brokertest.Name("T")
	e.createTopic(t, topic, 4)
	p := startProducer(t, e)
	in := testInstance(t, p)
	for range 8 {
		if _, err := p.SendSync(context.Background(), NewMessage(topic, []byte("x"))); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := in.route(context.Background(), topic)
	for _, q := range r.writeQueues {
		if max, err := in.maxOffset(context.Background(), q); err != nil || max != 2 {
			t.Fatalf("queue %s holds %d messages (%v), want 2 of 8", q, max, err)
		}
	}
}

func TestProducerBatch(t *testing.T) {
	e := startBroker(t)
	topic := brokertest.Name("T")
	e.createTopic(t, topic, 2)
	p := startProducer(t, e)
	in := testInstance(t, p)
	var msgs []*Message
	for i := range 5 {
		m := NewMessage(topic, fmt.Appendf(nil, "batch-%d", i)).WithTag(fmt.Sprint("t", i))
		m.Flag = int32(i)
		msgs = append(msgs, m)
	}
	res, err := p.SendSync(context.Background(), msgs...)
	if err != nil {
		t.Fatal(err)
	}
	ids := strings.Split(res.MsgID, ",")
	if len(ids) != 5 || len(strings.Split(res.OffsetMsgID, ",")) != 5 {
		t.Fatalf("batch result ids %q / %q", res.MsgID, res.OffsetMsgID)
	}
	got := pullQueue(t, in, res.Queue, res.QueueOffset)
	if len(got) != 5 {
		t.Fatalf("pulled %d of a batch of 5 from %s", len(got), res.Queue)
	}
	for i, m := range got {
		if m.QueueOffset != res.QueueOffset+int64(i) || string(m.Body) != fmt.Sprintf("batch-%d", i) ||
			m.Tag() != fmt.Sprint("t", i) || m.Flag != int32(i) || m.MsgID != ids[i] || m.MsgID != msgs[i].Property(message.PropertyUniqKey) {
			t.Fatalf("batch message %d: %+v (want id %s)", i, m, ids[i])
		}
	}
}

func TestProducerRefusesInvalidMessages(t *testing.T) {
	e := startBroker(t)
	topic := brokertest.Name("T")
	p := startProducer(t, e, func(o *ProducerOptions) { o.MaxMessageSize = 1024 })
	ctx := context.Background()
	big := NewMessage(topic, make([]byte, 1025))
	if _, err := p.SendSync(ctx, big); !errors.Is(err, ErrMessageTooLarge) || !strings.Contains(err.Error(), "1025") {
		t.Fatalf("body over the limit: %v", err)
	}
	if err := p.SendAsync(ctx, func(*SendResult, error) { t.Error("callback of a refused send") }, big); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("async body over the limit: %v", err)
	}
	if err := p.SendOneway(ctx, big); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("oneway body over the limit: %v", err)
	}
	var batch []*Message
	for range 3 {
		batch = append(batch, NewMessage(topic, make([]byte, 400)))
	}
	if _, err := p.SendSync(ctx, batch...); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("batch over the limit: %v", err)
	}
	for name, msgs := range map[string][]*Message{
		"no topic":     {NewMessage("", []byte("x"))},
		"bad topic":    {NewMessage("a b", []byte("x"))},
		"empty body":   {NewMessage(topic, nil)},
		"mixed topics": {NewMessage(topic, []byte("x")), NewMessage(topic+"2", []byte("x"))},
		"delay":        {NewMessage(topic, []byte("x")), NewMessage(topic, []byte("x")).WithDelayLevel(2)},
		"nil":          {nil},
		"none":         {},
	} {
		if _, err := p.SendSync(ctx, msgs...); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestProducerAsyncAndOneway(t *testing.T) {
	e := startBroker(t)
	topic := brokertest.Name("T")
	e.createTopic(t, topic, 4)
	p := startProducer(t, e)
	in := testInstance(t, p)
	ctx := context.Background()

	const n = 10
	type outcome struct {
		res *SendResult
		err error
	}
	done := make(chan outcome, n)
	for i := range n {
		if err := p.SendAsync(ctx, func(r *SendResult, err error) { done <- outcome{r, err} }, NewMessage(topic, fmt.Appendf(nil, "async-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	ids := map[string]bool{}
	for range n {
		o := brokertest.Wait(t, done, 10*time.Second, "async send callback")
		if o.err != nil || o.res.Status != SendOK {
			t.Fatalf("async send: %v %v", o.res, o.err)
		}
		ids[o.res.MsgID] = true
	}
	for i := range n {
		if err := p.SendOneway(ctx, NewMessage(topic, fmt.Appendf(nil, "oneway-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var got []*MessageExt
	brokertest.Eventually(t, 10*time.Second, "oneway messages stored", func() bool {
		got = pullTopic(t, in, topic)
		return len(got) >= 2*n
	})
	var async, oneway int
	for _, m := range got {
		switch {
		case strings.HasPrefix(string(m.Body), "async-"):
			async++
			if !ids[m.MsgID] {
				t.Errorf("pulled async message %s, no callback reported it", m.MsgID)
			}
		case strings.HasPrefix(string(m.Body), "oneway-"):
			oneway++
		}
	}
	if async != n || oneway != n || len(got) != 2*n {
		t.Fatalf("pulled %d async and %d oneway of %d messages, want %d each", async, oneway, len(got), n)
	}
}

func TestProducerAsyncShutdownWaits(t *testing.T) {
	e := startBroker(t)
	topic := brokertest.Name("T")
	e.createTopic(t, topic, 1)
	p, err := NewProducer(ProducerOptions{Client: e.options(), Group: brokertest.Name("pg")})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	for range 5 {
		if err := p.SendAsync(context.Background(), func(*SendResult, error) { calls.Add(1) }, NewMessage(topic, []byte("x"))); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 5 {
		t.Fatalf("%d callbacks ran before Shutdown returned, want 5", n)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
	if err := p.SendAsync(context.Background(), func(*SendResult, error) {}, NewMessage(topic, []byte("x"))); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("async send after shutdown: %v", err)
	}
}

func TestProducerHashSelectorSameQueueAcrossProducers(t *testing.T) {
	e := startBroker(t)
	topic := brokertest.Name("T")
	e.createTopic(t, topic, 8)
	p1, p2 := startProducer(t, e), startProducer(t, e)
	sel := NewHashSelector()
	for i := range 10 {
		key := fmt.Sprint("order-", i)
		r1, err := p1.SendSyncTo(context.Background(), sel, key, NewMessage(topic, []byte("a")))
		if err != nil {
			t.Fatal(err)
		}
		r2, err := p2.SendSyncTo(context.Background(), NewHashSelector(), nil, NewMessage(topic, []byte("b")).WithShardingKey(key))
		if err != nil {
			t.Fatal(err)
		}
		if r1.Queue != r2.Queue {
			t.Fatalf("key %s went to %s from one producer and %s from the other", key, r1.Queue, r2.Queue)
		}
	}
	bad := QueueSelectorFunc(func(_ *Message, qs []MessageQueue, _ any) MessageQueue {
		return MessageQueue{Topic: topic, BrokerName: "nobody", QueueID: 0}
	})
	if _, err := p1.SendSyncTo(context.Background(), bad, nil, NewMessage(topic, []byte("x"))); !errors.Is(err, ErrNoQueue) {
		t.Fatalf("selector picking a queue not in the route: %v", err)
	}
}

func TestProducerAutoCreatesTopic(t *testing.T) {
	e := startBroker(t)
	topic := brokertest.Name("New")
	p := startProducer(t, e, func(o *ProducerOptions) { o.DefaultTopicQueueNums = 2 })
	in := testInstance(t, p)
	res, err := p.SendSync(context.Background(), NewMessage(topic, []byte("first")))
	if err != nil {
		t.Fatal(err)
	}
	if res.Queue.QueueID >= 2 {
		t.Fatalf("sent to %s; the borrowed route has 2 queues", res.Queue)
	}
	if !slices.Contains(p.topics(), topic) {
		t.Fatalf("topics() = %v, want %s in it", p.topics(), topic)
	}
	var r *topicRoute
	brokertest.Eventually(t, 10*time.Second, "the created topic's route", func() bool {
		r, err = in.updateRoute(context.Background(), topic)
		return err == nil
	})
	if len(r.writeQueues) != 2 {
		t.Fatalf("created topic has queues %v, want 2", r.writeQueues)
	}
	if got := pullTopic(t, in, topic); len(got) != 1 || string(got[0].Body) != "first" {
		t.Fatalf("pulled %v", got)
	}
}

// TestProducerRetriesOnAnotherBroker runs two brokers under one name
// server and stops one: sends that pick it fail over to the other, and
// the fault tracker then keeps later sends away from it.
func TestProducerRetriesOnAnotherBroker(t *testing.T) {
	a := startBroker(t, func(c *server.Config) { c.Broker.BrokerName = "broker-a" })
	b := startBroker(t, func(c *server.Config) {
		c.Broker.BrokerName = "broker-b"
		c.NamesrvListen = ""
		c.NameServers = []string{a.NamesrvAddr}
	})
	topic := brokertest.Name("T")
	a.createTopic(t, topic, 2)
	b.createTopic(t, topic, 2)
	p := startProducer(t, a)
	noRetry := startProducer(t, a, func(o *ProducerOptions) { o.RetryTimes = -1; o.DisableLatencyFault = true })
	for _, p := range []*Producer{p, noRetry} {
		in := testInstance(t, p)
		brokertest.Eventually(t, 10*time.Second, "both brokers in the route", func() bool {
			r, err := in.updateRoute(context.Background(), topic)
			return err == nil && len(r.writeQueues) == 4
		})
	}
	b.Stop(t)
	for i := range 8 {
		res, err := p.SendSync(context.Background(), NewMessage(topic, []byte("x")))
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if res.Queue.BrokerName != "broker-a" {
			t.Fatalf("send %d went to %s, which is down", i, res.Queue)
		}
	}
	if p.fault.available("broker-b") {
		t.Fatal("the stopped broker is not held out")
	}
	failed := 0
	for range 4 {
		if _, err := noRetry.SendSync(context.Background(), NewMessage(topic, []byte("x"))); err != nil {
			failed++
		}
	}
	if failed != 2 {
		t.Fatalf("without retries %d of 4 round-robin sends failed, want the 2 that picked broker-b", failed)
	}
	// Unregistering at the stopped broker fails; that is expected here.
	_ = p.Shutdown(context.Background())
	_ = noRetry.Shutdown(context.Background())
}

func TestProducerSendLoopRetryRules(t *testing.T) {
	p, err := NewProducer(ProducerOptions{Client: ClientOptions{NameServers: []string{"127.0.0.1:1"}, Logger: brokertest.Logger()}, Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	qs := testQueues("a", "b")
	queues := func(context.Context) ([]MessageQueue, error) { return qs, nil }
	pick := func(qs []MessageQueue, last string) MessageQueue {
		return p.selectQueue(&Message{Topic: "T"}, qs, last)
	}
	for _, tc := range []struct {
		name   string
		fail   error // returned by the first broker picked
		tries  int
		sends  int
		wantOK bool
	}{
		{"system error retried elsewhere", &BrokerError{Code: remoting.SystemError}, 3, 2, true},
		{"busy retried elsewhere", &BrokerError{Code: remoting.SystemBusy}, 3, 2, true},
		{"topic not exist retried", &BrokerError{Code: remoting.TopicNotExist}, 3, 2, true},
		{"connection error retried", errors.New("connection refused"), 3, 2, true},
		{"illegal message not retried", &BrokerError{Code: remoting.MessageIllegal}, 3, 1, false},
		{"no retries", &BrokerError{Code: remoting.SystemError}, 1, 1, false},
		{"context ended", context.DeadlineExceeded, 3, 1, false},
	} {
		var picked []MessageQueue
		send := func(_ context.Context, q MessageQueue) (*SendResult, error) {
			picked = append(picked, q)
			if len(picked) == 1 {
				return nil, tc.fail
			}
			return &SendResult{Queue: q}, nil
		}
		res, err := p.sendLoop(context.Background(), "T", tc.tries, queues, pick, send)
		if (err == nil) != tc.wantOK || len(picked) != tc.sends {
			t.Errorf("%s: %d sends, err %v", tc.name, len(picked), err)
			continue
		}
		if err != nil && !errors.Is(err, tc.fail) && !errors.As(err, new(*BrokerError)) {
			t.Errorf("%s: error %v does not wrap %v", tc.name, err, tc.fail)
		}
		if tc.wantOK && res.Queue.BrokerName == picked[0].BrokerName {
			t.Errorf("%s: retried on %s, the broker that failed", tc.name, res.Queue)
		}
	}
}

func TestProducerSelectQueueSkipsHeldOutBrokers(t *testing.T) {
	clk := newFakeClock()
	p := &Producer{fault: newFaultTracker(clk.now)}
	qs := testQueues("a", "b", "c")
	msg := &Message{Topic: "T"}
	p.fault.record(MessageQueue{BrokerName: "b"}, 0, true)
	for range 20 {
		if q := p.selectQueue(msg, qs, ""); q.BrokerName == "b" {
			t.Fatalf("picked %s, held out", q)
		}
	}
	for range 20 {
		if q := p.selectQueue(msg, qs, "a"); q.BrokerName != "c" {
			t.Fatalf("picked %s after a failed on a and b is held out", q)
		}
	}
	p.fault.record(MessageQueue{BrokerName: "a"}, 0, true)
	p.fault.record(MessageQueue{BrokerName: "c"}, 0, true)
	seen := map[string]bool{}
	for range 24 {
		seen[p.selectQueue(msg, qs, "c").BrokerName] = true
	}
	if len(seen) != 2 || seen["c"] {
		t.Fatalf("with every broker held out and c just failed, picked brokers %v; want a and b", seen)
	}
	clk.add(10 * time.Minute)
	seen = map[string]bool{}
	for range 12 {
		seen[p.selectQueue(msg, qs, "").BrokerName] = true
	}
	if len(seen) != 3 {
		t.Fatalf("once the pauses ended, picked brokers %v; want all 3", seen)
	}
}

func TestProducerStartTwicePanics(t *testing.T) {
	e := startBroker(t)
	p := startProducer(t, e)
	defer func() {
		if recover() == nil {
			t.Fatal("second Start did not panic")
		}
	}()
	_ = p.Start()
}

// TestProducerRecall sends two delayed messages to one queue and recalls
// one by its SendResult's RecallHandle: only the other is delivered, and
// a recall of it once delivered, or of a malformed handle, fails.
func TestProducerRecall(t *testing.T) {
	e := startBroker(t, shortDelays)
	topic := brokertest.Name("Recall")
	e.createTopic(t, topic, 1)
	p := startProducer(t, e)
	ctx := context.Background()
	send := func(body string) *SendResult {
		t.Helper()
		r, err := p.SendSync(ctx, NewMessage(topic, []byte(body)).WithDelayLevel(1))
		if err != nil {
			t.Fatal(err)
		}
		if r.RecallHandle == "" {
			t.Fatalf("%s: no recall handle in %v", body, r)
		}
		return r
	}
	kept, gone := send("kept"), send("gone")
	if id, err := p.Recall(ctx, topic, gone.RecallHandle); err != nil || id != gone.MsgID {
		t.Fatalf("recall: %q %v, want %s", id, err, gone.MsgID)
	}
	if _, err := p.Recall(ctx, topic, "nonsense"); !errors.Is(err, ErrInvalidMessage) {
		t.Fatalf("recall of a malformed handle: %v", err)
	}
	brokertest.Eventually(t, 10*time.Second, "the kept message delivered", func() bool { return e.Store.MaxOffset(topic, 0) >= 1 })
	if got := storetest.ReadQueue(t, e.Store, topic, 0, 0); len(got) != 1 || got[0] != "kept" {
		t.Fatalf("delivered %q, want only kept", got)
	}
	var be *BrokerError
	if _, err := p.Recall(ctx, topic, kept.RecallHandle); !errors.As(err, &be) {
		t.Fatalf("recall of a delivered message: %v, want a BrokerError", err)
	}
}
