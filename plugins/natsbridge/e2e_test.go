package natsbridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/nats-io/nats.go"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
	"github.com/rmq-go/rmq/plugins/natsbridge"
)

// shortLevels makes retries quick: levels 1, 2, 3 wait 1, 2, 3 s.
func shortLevels(cfg *server.Config) {
	cfg.Broker.DelayLevels = []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	cfg.Broker.Outbox = true
}

// bridgeOn starts a bridge on a running broker, as the server wiring does.
func bridgeOn(t testing.TB, env *brokertest.Env, ns *natsServer, mutate ...func(*natsbridge.Options)) *natsbridge.Bridge {
	t.Helper()
	src := &server.BridgeSource{Broker: env.Broker, Store: env.Store}
	opts := testOptions(ns, src)
	opts.Resender = src
	for _, m := range mutate {
		m(&opts)
	}
	return startBridge(t, opts)
}

// subscribe collects every event the bridge publishes, as a core NATS
// subscriber sees them.
func subscribe(t testing.TB, ns *natsServer) <-chan *nats.Msg {
	t.Helper()
	nc, _ := ns.client(t)
	ch := make(chan *nats.Msg, 1<<16)
	sub, err := nc.ChanSubscribe("rmq.DefaultCluster.*.>", ch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return ch
}

// TestFailingConsumerEvents fails every delivery with the official client:
// each message is tried three times (WithMaxReconsumeTimes(2)), so the
// bridge publishes two retry events and then one dead-letter event per
// message, in order, with the group's and topic's names.
func TestFailingConsumerEvents(t *testing.T) {
	ns := runNATS(t)
	env := brokertest.Start(t, shortLevels)
	b := bridgeOn(t, env, ns)
	events := subscribe(t, ns)

	topic := brokertest.Name("Orders")
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	group := brokertest.Name("cg")
	c := env.PushConsumer(t, group, consumer.WithMaxReconsumeTimes(2))
	c.Subscribe(topic, consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		cc, _ := primitive.GetConcurrentlyCtx(ctx)
		cc.DelayLevelWhenNextConsume = 1
		return consumer.ConsumeRetryLater, nil
	})
	env.StartConsumer(t, c, group, true, topic)

	p := env.Producer(t)
	ids := map[string]string{} // msgId → body
	for i := range 2 {
		m := primitive.NewMessage(topic, []byte(fmt.Sprint("fail-", i)))
		m.WithKeys([]string{fmt.Sprint("key-", i)})
		m.WithTag("TagF")
		res, err := p.SendSync(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		ids[res.MsgID] = string(m.Body)
	}

	type seen struct {
		kind string
		rt   int
	}
	got := map[string][]seen{}
	var lastOffset int64 = -1
	for range 6 {
		m := brokertest.Wait(t, events, 60*time.Second, "an event")
		h := m.Header
		kind := h.Get(natsbridge.HeaderEvent)
		if want := natsbridge.Subject("rmq", "DefaultCluster", kind, group, topic); m.Subject != want {
			t.Errorf("subject %q, want %q", m.Subject, want)
		}
		if h.Get(natsbridge.HeaderGroup) != group || h.Get(natsbridge.HeaderTopic) != topic {
			t.Errorf("group %q topic %q", h.Get(natsbridge.HeaderGroup), h.Get(natsbridge.HeaderTopic))
		}
		id := h.Get(natsbridge.HeaderRmqMsgID)
		body, ok := ids[id]
		if !ok {
			t.Fatalf("event for unknown message %q: %v", id, h)
		}
		if string(m.Data) != body || h.Get(natsbridge.HeaderOriginMsgID) != id || h.Get(natsbridge.HeaderTags) != "TagF" ||
			h.Get(natsbridge.HeaderKeys) != "key-"+body[len("fail-"):] || h.Get(natsbridge.HeaderMaxReconsumeTimes) != "2" {
			t.Errorf("event %s: body %q headers %v", kind, m.Data, h)
		}
		msgID := h.Get(natsbridge.HeaderMsgID)
		off, err := strconv.ParseInt(msgID[len(fmt.Sprintf("DefaultCluster-broker-a-%s-", b.Status().Epoch)):], 10, 64)
		if err != nil || off <= lastOffset {
			t.Errorf("Nats-Msg-Id %q out of order after offset %d", msgID, lastOffset)
		}
		lastOffset = off
		rt, _ := strconv.Atoi(h.Get(natsbridge.HeaderReconsumeTimes))
		if kind == outbox.KindRetry {
			if h.Get(natsbridge.HeaderDelayLevel) != "1" || h.Get(natsbridge.HeaderNextAttemptAt) == "" {
				t.Errorf("retry event: %v", h)
			}
		} else if want := fmt.Sprintf("failed %d times (the first delivery and %d retries); the limit is 2 retries", rt, rt-1); h.Get(natsbridge.HeaderReason) != want {
			t.Errorf("dlq event: Rmq-Reason %q, want %q (Rmq-Reconsume-Times %d)", h.Get(natsbridge.HeaderReason), want, rt)
		}
		got[id] = append(got[id], seen{kind, rt})
	}
	for id := range ids {
		want := []seen{{outbox.KindRetry, 1}, {outbox.KindRetry, 2}, {outbox.KindDLQ, 3}}
		if fmt.Sprint(got[id]) != fmt.Sprint(want) {
			t.Errorf("message %s: events %v, want %v", id, got[id], want)
		}
	}
	// A subscriber can see the sixth event before the stream has stored
	// it: wait for the stream, then check it holds no more than six.
	_, js := ns.client(t)
	brokertest.Eventually(t, 10*time.Second, "the stream to hold 6 events", func() bool {
		return streamCount(t, js, natsbridge.DefaultStream) >= 6
	})
	if n := streamCount(t, js, natsbridge.DefaultStream); n != 6 {
		t.Errorf("stream holds %d events, want 6", n)
	}
}

// TestResendOverNATS resends a dead letter with a request over NATS, using
// the group and message id from its dead-letter event, and the group's
// consumer receives it.
func TestResendOverNATS(t *testing.T) {
	ns := runNATS(t)
	env := brokertest.Start(t, shortLevels)
	bridgeOn(t, env, ns, func(o *natsbridge.Options) { o.Resend = true })
	events := subscribe(t, ns)

	topic := brokertest.Name("Pay")
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	group := brokertest.Name("cg")
	var healthy atomic.Bool
	received := make(chan *primitive.MessageExt, 10)
	c := env.PushConsumer(t, group, consumer.WithMaxReconsumeTimes(1))
	c.Subscribe(topic, consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		if !healthy.Load() {
			cc, _ := primitive.GetConcurrentlyCtx(ctx)
			cc.DelayLevelWhenNextConsume = 1
			return consumer.ConsumeRetryLater, nil
		}
		for _, m := range msgs {
			received <- m
		}
		return consumer.ConsumeSuccess, nil
	})
	env.StartConsumer(t, c, group, true, topic)
	if _, err := env.Producer(t).SendSync(context.Background(), primitive.NewMessage(topic, []byte("poison"))); err != nil {
		t.Fatal(err)
	}
	var dead *nats.Msg
	for dead == nil {
		m := brokertest.Wait(t, events, 60*time.Second, "the dead-letter event")
		if m.Header.Get(natsbridge.HeaderEvent) == outbox.KindDLQ {
			dead = m
		}
	}
	healthy.Store(true)

	nc, _ := ns.client(t)
	req := natsbridge.ResendRequest{Group: dead.Header.Get(natsbridge.HeaderGroup), MsgID: dead.Header.Get(natsbridge.HeaderRmqMsgID), Target: "retry", Key: "ops-ticket-42"}
	r := resendRequest(t, nc, natsbridge.ResendSubject("rmq", "DefaultCluster"), req)
	if !r.OK || len(r.Resent) != 1 || r.Resent[0].Topic != broker.RetryGroupTopicPrefix+group {
		t.Fatalf("reply %+v", r)
	}
	m := brokertest.Wait(t, received, 30*time.Second, "the resent message")
	if string(m.Body) != "poison" || m.MsgId != r.Resent[0].NewMsgID {
		t.Fatalf("received %q id %s, want the resent message %s", m.Body, m.MsgId, r.Resent[0].NewMsgID)
	}
	// Retrying the request (the reply was lost, say) does not resend it.
	r2 := resendRequest(t, nc, natsbridge.ResendSubject("rmq", "DefaultCluster"), req)
	if !r2.OK || !r2.Duplicate || r2.Resent[0].NewMsgID != r.Resent[0].NewMsgID {
		t.Fatalf("retried reply %+v", r2)
	}
	select {
	case m := <-received:
		t.Fatalf("received %s again", m.MsgId)
	case <-time.After(2 * time.Second): // a redelivery would come at once
	}
}

// sender appends dead-letter events to a broker fast: sends to
// %RETRY%<group> past the retry limit go straight to the dead-letter topic
// (the send path's fallback rule), each with its outbox event.
type sender struct {
	cl    *remoting.Client
	addr  string
	group string
	seq   atomic.Int64
}

func newSender(t testing.TB, env *brokertest.Env) *sender {
	cl := remoting.NewClient(remoting.ClientOptions{})
	t.Cleanup(func() { cl.Close() })
	group := brokertest.Name("cg")
	env.KnowGroup(t, group)
	return &sender{cl: cl, addr: env.BrokerAddr, group: group}
}

// send sends n messages from workers goroutines and returns when all were
// stored.
func (s *sender) send(t testing.TB, n, workers int) {
	var wg sync.WaitGroup
	var left atomic.Int64
	left.Store(int64(n))
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				i := s.seq.Add(1) - 1
				props := map[string]string{"UNIQ_KEY": fmt.Sprintf("DEAD%08d", i), "RETRY_TOPIC": "Orders", "ORIGIN_MESSAGE_ID": fmt.Sprintf("DEAD%08d", i)}
				req := remoting.NewRequest(remoting.SendMessage, map[string]string{
					"producerGroup": "CLIENT_INNER_PRODUCER", "topic": broker.RetryGroupTopicPrefix + s.group, "defaultTopic": "TBW102",
					"defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
					"flag": "0", "properties": string(message.EncodeProperties(props)), "reconsumeTimes": "3", "unitMode": "false",
					"maxReconsumeTimes": "2", "batch": "false",
				}, fmt.Appendf(nil, "dead letter %d", i))
				resp, err := s.cl.Invoke(context.Background(), s.addr, req)
				if err == nil && resp.Code != remoting.Success {
					err = fmt.Errorf("send: code %d %s", resp.Code, resp.Remark)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// TestBrokerOutage stops NATS while 10k dead letters are produced through
// the broker and starts it again: every event arrives once.
func TestBrokerOutage(t *testing.T) {
	const total = 10_000
	ns := runNATS(t)
	env := brokertest.Start(t, shortLevels)
	b := bridgeOn(t, env, ns)
	s := newSender(t, env)
	s.send(t, total/10, 8)
	waitCursor(t, b, total/10, 30*time.Second)
	ns.stop()
	s.send(t, total*9/10, 8)
	st := b.Status()
	t.Logf("during the outage: connection %s, cursor %d, lag %d events / %.1fs, failures %d", st.Connection, st.Cursor, st.LagEvents, st.LagSeconds, st.Failures)
	if st.LagEvents == 0 {
		t.Fatal("no lag during the outage")
	}
	ns.start()
	waitCursor(t, b, total, 60*time.Second)
	_, js := ns.client(t)
	if n := streamCount(t, js, natsbridge.DefaultStream); n != total {
		t.Fatalf("stream holds %d events, want %d", n, total)
	}
	st = b.Status()
	t.Logf("after: published %d, duplicates %d, expired %d", st.Published, st.Duplicates, st.Expired)
	if st.Expired != 0 || st.Published+st.Duplicates < total {
		t.Fatalf("status %+v", st)
	}
}

// TestBrokerRestartMidStream restarts the broker (and so the bridge) while
// events are being bridged: the cursor resumes from the store and nothing
// is lost.
func TestBrokerRestartMidStream(t *testing.T) {
	const total = 6000
	ns := runNATS(t)
	env := brokertest.Start(t, shortLevels)
	b1 := bridgeOn(t, env, ns)
	s := newSender(t, env)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		s.send(t, total/2, 8)
	}()
	// Stop mid-stream: whatever is in flight settles or is replayed.
	waitCursor(t, b1, total/8, 30*time.Second)
	stopBridge(t, b1)
	<-sent
	cursor := b1.Status().Cursor
	t.Logf("stopped at cursor %d of %d", cursor, total/2)
	env = env.Restart(t)
	if v, ok := (&server.BridgeSource{Broker: env.Broker, Store: env.Store}).Progress("natsbridge/cursor"); !ok || v != cursor {
		t.Fatalf("cursor after restart %d, %v; want %d", v, ok, cursor)
	}
	s.addr = env.BrokerAddr
	b2 := bridgeOn(t, env, ns)
	if b2.Status().Epoch != b1.Status().Epoch {
		t.Fatal("epoch changed across a restart")
	}
	s.send(t, total/2, 8)
	waitCursor(t, b2, total, 60*time.Second)
	_, js := ns.client(t)
	if n := streamCount(t, js, natsbridge.DefaultStream); n != total {
		t.Fatalf("stream holds %d events, want %d", n, total)
	}
}

// TestResendReplyJSON pins the reply's wire form.
func TestResendReplyJSON(t *testing.T) {
	r := natsbridge.ResendReply{OK: true, Broker: "broker-a", Resent: []outbox.Resent{{QueueOffset: 3, OldMsgID: "A", NewMsgID: "B", Topic: "T", QueueID: 1}}}
	data, _ := json.Marshal(r)
	want := `{"ok":true,"broker":"broker-a","resent":[{"queueOffset":3,"oldMsgId":"A","newMsgId":"B","topic":"T","queueId":1}]}`
	if string(data) != want {
		t.Fatalf("%s\nwant %s", data, want)
	}
}

// TestProduceRateDuringOutage reports the broker's produce rate with NATS
// up (the bridge publishing as it goes) and down (events piling up in the
// outbox), alternating the two on one broker so that drift in the
// machine's load hits both alike. It reports; it does not assert on
// wall-clock figures.
func TestProduceRateDuringOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for a few seconds")
	}
	const rounds, perPhase = 5, 2000
	ns := runNATS(t)
	env := brokertest.Start(t, shortLevels)
	b := bridgeOn(t, env, ns)
	s := newSender(t, env)
	s.send(t, 200, 8)
	var up, down []float64
	total := int64(200)
	for range rounds {
		waitCursor(t, b, total, 60*time.Second)
		start := time.Now()
		s.send(t, perPhase, 8)
		up = append(up, perPhase/time.Since(start).Seconds())
		total += perPhase

		ns.stop()
		start = time.Now()
		s.send(t, perPhase, 8)
		down = append(down, perPhase/time.Since(start).Seconds())
		total += perPhase
		ns.start()
	}
	waitCursor(t, b, total, 60*time.Second)
	_, js := ns.client(t)
	if n := streamCount(t, js, natsbridge.DefaultStream); n != uint64(total) {
		t.Fatalf("stream holds %d events, want %d", n, total)
	}
	med := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	t.Logf("produce rate, NATS up: %.0f/s (rounds %.0f); NATS down: %.0f/s (rounds %.0f); down/up = %.2f",
		med(up), up, med(down), down, med(down)/med(up))
}
