package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rmq-go/rmq/client"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// bodyRecorder counts the deliveries of each body and keeps the last
// message of each.
type bodyRecorder struct {
	mu     sync.Mutex
	counts map[string]int
	msgs   map[string]*client.MessageExt
	signal chan struct{} // cap 1: something was recorded
}

func newBodyRecorder() *bodyRecorder {
	return &bodyRecorder{counts: map[string]int{}, msgs: map[string]*client.MessageExt{}, signal: make(chan struct{}, 1)}
}

func (r *bodyRecorder) handler() client.ConcurrentFunc {
	return func(_ context.Context, _ *client.ConcurrentContext, msgs []*client.MessageExt) client.ConsumeResult {
		r.mu.Lock()
		for _, m := range msgs {
			r.counts[string(m.Body)]++
			r.msgs[string(m.Body)] = m
		}
		r.mu.Unlock()
		select {
		case r.signal <- struct{}{}:
		default:
		}
		return client.ConsumeSuccess
	}
}

func (r *bodyRecorder) count(body string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[body]
}

// wait waits until every body of prefix, 0..n-1, was delivered want
// times, and fails if one was delivered more often.
func (r *bodyRecorder) wait(t *testing.T, prefix string, n, want int) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		done := true
		r.mu.Lock()
		for i := range n {
			b := fmt.Sprintf("%s-%d", prefix, i)
			if c := r.counts[b]; c > want {
				r.mu.Unlock()
				t.Fatalf("%s delivered %d times, want %d", b, c, want)
			} else if c < want {
				done = false
			}
		}
		r.mu.Unlock()
		if done {
			return
		}
		select {
		case <-r.signal:
		case <-timeout:
			t.Fatalf("timed out waiting for %s-0..%d delivered %d times each", prefix, n-1, want)
		}
	}
}

// startOurs starts this project's push consumer of topic in group.
func startOurs(t *testing.T, env *brokertest.Env, group, topic string, h client.Handler) *client.PushConsumer {
	t.Helper()
	c, err := client.NewPushConsumer(client.ConsumerOptions{
		Client:      client.ClientOptions{NameServers: []string{env.NamesrvAddr}, InstanceName: brokertest.Name("ours"), Logger: brokertest.Logger()},
		Group:       group,
		ConsumeFrom: client.ConsumeFromFirstOffset,
	}, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, client.Selector{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopOurs(t, c) })
	return c
}

func stopOurs(t *testing.T, c *client.PushConsumer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// twoBatches sends n messages "A-i", then n "B-i" stored strictly later,
// and returns the first millisecond of batch B.
func twoBatches(t *testing.T, env *brokertest.Env, topic string, n int) int64 {
	t.Helper()
	p := env.Producer(t)
	sendN(t, p, topic, "A", n)
	mark := time.Now().UnixMilli()
	for time.Now().UnixMilli() <= mark { // the clock's next millisecond, not a synchronisation
		time.Sleep(time.Millisecond)
	}
	sendN(t, p, topic, "B", n)
	return mark + 1
}

// committedAll waits until group committed every queue of topic to its
// max offset.
func committedAll(t *testing.T, env *brokertest.Env, group, topic string, queues int32) {
	t.Helper()
	brokertest.Eventually(t, 30*time.Second, "every offset of "+group+" committed", func() bool {
		for q := range queues {
			if off, _ := env.Store.ConsumerOffset(group, topic, q); off != env.Store.MaxOffset(topic, q) {
				return false
			}
		}
		return true
	})
}

// offsetTable reads a queue-keyed table from field of body.
func offsetTable(t *testing.T, body []byte, field string) map[int32]int64 {
	t.Helper()
	raw, err := remoting.FastjsonField(body, field)
	if err != nil || raw == nil {
		t.Fatalf("no %s in %s (%v)", field, body, err)
	}
	table, err := remoting.ParseQueueOffsets(raw)
	if err != nil {
		t.Fatalf("%s of %s: %v", field, body, err)
	}
	out := map[int32]int64{}
	for _, e := range table {
		out[e.Queue.QueueID] = e.Offset
	}
	return out
}

// resetOffset sends INVOKE_BROKER_TO_RESET_OFFSET and returns the
// answer's offset table by queue.
func resetOffset(t *testing.T, cl *remoting.Client, env *brokertest.Env, group, topic string, ts int64, force bool) map[int32]int64 {
	t.Helper()
	r := invoke(t, cl, env, remoting.InvokeBrokerToResetOffset,
		map[string]string{"topic": topic, "group": group, "timestamp": strconv.FormatInt(ts, 10), "isForce": strconv.FormatBool(force)}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("reset offset: %d %s", r.Code, r.Remark)
	}
	return offsetTable(t, r.Body, "offsetTable")
}

// wantAtTime checks a reset's table against the store's offsets at ts.
func wantAtTime(t *testing.T, env *brokertest.Env, topic string, queues int32, ts int64, got map[int32]int64) {
	t.Helper()
	if len(got) != int(queues) {
		t.Fatalf("reset table %v, want %d queues", got, queues)
	}
	for q := range queues {
		want, err := env.Store.OffsetForTimestamp(topic, q, ts)
		if err != nil {
			t.Fatal(err)
		}
		if got[q] != want {
			t.Errorf("queue %d reset to %d, want %d (the first offset at %d)", q, got[q], want, ts)
		}
	}
}

// TestRelaysOurClient drives every relay against this project's push
// consumer: its status, a reset by time that makes it consume the later
// batch again, its running info, a direct consumption, and a client that
// is gone.
func TestRelaysOurClient(t *testing.T) {
	env := brokertest.Start(t)
	topic, group := brokertest.Name("Relay"), brokertest.Name("relay")
	createTopic(t, env, topic, 2)
	const n = 6
	mark := twoBatches(t, env, topic, n)
	rec := newBodyRecorder()
	c := startOurs(t, env, group, topic, rec.handler())
	rec.wait(t, "A", n, 1)
	rec.wait(t, "B", n, 1)
	committedAll(t, env, group, topic, 2)
	cl := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger()})
	defer cl.Close()

	// GET_CONSUMER_STATUS: the live client's offsets, at the end of both
	// queues.
	r := invoke(t, cl, env, remoting.InvokeBrokerToGetConsumerStatus, map[string]string{"topic": topic, "group": group}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("get consumer status: %d %s", r.Code, r.Remark)
	}
	ct, err := remoting.FastjsonField(r.Body, "consumerTable")
	if err != nil || ct == nil {
		t.Fatalf("no consumerTable in %s", r.Body)
	}
	status := offsetTable(t, ct, c.ClientID())
	for q := range int32(2) {
		if status[q] != env.Store.MaxOffset(topic, q) {
			t.Errorf("status of queue %d: %d, want %d (%s)", q, status[q], env.Store.MaxOffset(topic, q), r.Body)
		}
	}

	// A reset to batch B's first millisecond: the live consumer gets
	// batch B again, and batch A not.
	wantAtTime(t, env, topic, 2, mark, resetOffset(t, cl, env, group, topic, mark, false))
	rec.wait(t, "B", n, 2)
	committedAll(t, env, group, topic, 2)
	for i := range n {
		if got := rec.count(fmt.Sprintf("A-%d", i)); got != 1 {
			t.Errorf("A-%d delivered %d times after the reset, want 1", i, got)
		}
	}

	// GET_CONSUMER_RUNNING_INFO: the client's own answer.
	r = invoke(t, cl, env, remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": group, "clientId": c.ClientID(), "jstackEnable": "false"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("running info: %d %s", r.Code, r.Remark)
	}
	checkRunningInfo(t, r.Body, topic)

	// CONSUME_MESSAGE_DIRECTLY: A-0 once more, through the handler.
	rec.mu.Lock()
	a0 := rec.msgs["A-0"]
	rec.mu.Unlock()
	r = invoke(t, cl, env, remoting.ConsumeMessageDirectly, map[string]string{"consumerGroup": group, "clientId": c.ClientID(), "msgId": a0.OffsetMsgID}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("consume directly: %d %s", r.Code, r.Remark)
	}
	var direct struct{ ConsumeResult string }
	if err := json.Unmarshal(r.Body, &direct); err != nil || direct.ConsumeResult != "CR_SUCCESS" {
		t.Errorf("consume directly answered %s (%v)", r.Body, err)
	}
	if got := rec.count("A-0"); got != 2 {
		t.Errorf("A-0 delivered %d times after consuming it directly, want 2", got)
	}

	// A client that is not there.
	for _, code := range []int16{remoting.GetConsumerRunningInfo, remoting.ConsumeMessageDirectly} {
		r = invoke(t, cl, env, code, map[string]string{"consumerGroup": group, "clientId": "10.0.0.9@gone", "msgId": a0.OffsetMsgID}, nil)
		if r.Code != remoting.ConsumerNotOnline || !strings.Contains(r.Remark, "10.0.0.9@gone") || !strings.Contains(r.Remark, group) {
			t.Errorf("%s to a gone client: %d %q", remoting.RequestCode(code), r.Code, r.Remark)
		}
	}
	// With every relay slot taken, a relay is refused at once.
	release := env.Broker.OccupyRelays(broker.MaxRelays)
	r = invoke(t, cl, env, remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": group, "clientId": c.ClientID()}, nil)
	release()
	if r.Code != remoting.SystemBusy || !strings.Contains(r.Remark, "in flight") {
		t.Errorf("running info with every relay slot taken: %d %q", r.Code, r.Remark)
	}
	r = invoke(t, cl, env, remoting.InvokeBrokerToGetConsumerStatus, map[string]string{"topic": topic, "group": brokertest.Name("nobody")}, nil)
	if r.Code != remoting.ConsumerNotOnline {
		t.Errorf("status of a group with no client: %d %q", r.Code, r.Remark)
	}
	r = invoke(t, cl, env, remoting.ConsumeMessageDirectly, map[string]string{"consumerGroup": group, "clientId": c.ClientID(), "msgId": "not-an-id"}, nil)
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "offset message id") {
		t.Errorf("consume directly with a bad id: %d %q", r.Code, r.Remark)
	}
}

// checkRunningInfo checks the parts of a ConsumerRunningInfo body that
// RocketMQ's tools read.
func checkRunningInfo(t *testing.T, body []byte, topic string) {
	t.Helper()
	raw, err := remoting.FastjsonField(body, "properties")
	var props map[string]string
	if err == nil {
		err = json.Unmarshal(raw, &props)
	}
	if err != nil || props["PROP_CONSUME_TYPE"] != "CONSUME_PASSIVELY" || props["PROP_CONSUMER_START_TIMESTAMP"] == "" {
		t.Errorf("running info properties %s (%v)", raw, err)
	}
	raw, err = remoting.FastjsonField(body, "subscriptionSet")
	var subs []remoting.SubscriptionData
	if err == nil {
		err = json.Unmarshal(raw, &subs)
	}
	found := false
	for _, s := range subs {
		found = found || s.Topic == topic
	}
	if err != nil || !found {
		t.Errorf("running info subscriptions %s (%v), want one of %s", raw, err, topic)
	}
	if raw, err := remoting.FastjsonField(body, "mqTable"); err != nil || raw == nil {
		t.Errorf("running info without mqTable: %s (%v)", body, err)
	}
}

// TestResetOffsetStoppedGroup resets a group with no consumer online: the
// broker stores the offsets, only backwards unless forced, and the group
// resumes from them when it starts again.
func TestResetOffsetStoppedGroup(t *testing.T) {
	env := brokertest.Start(t)
	topic, group := brokertest.Name("RelayStopped"), brokertest.Name("stopped")
	createTopic(t, env, topic, 2)
	const n = 5
	mark := twoBatches(t, env, topic, n)
	rec := newBodyRecorder()
	c := startOurs(t, env, group, topic, rec.handler())
	rec.wait(t, "B", n, 1)
	committedAll(t, env, group, topic, 2)
	stopOurs(t, c)
	cl := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger()})
	defer cl.Close()

	atB := resetOffset(t, cl, env, group, topic, mark, false)
	wantAtTime(t, env, topic, 2, mark, atB)
	for q := range int32(2) {
		if off, _ := env.Store.ConsumerOffset(group, topic, q); off != atB[q] {
			t.Errorf("queue %d stored at %d, want %d", q, off, atB[q])
		}
	}
	// Without isForce an offset does not move forward; with it, it does.
	if got := resetOffset(t, cl, env, group, topic, -1, false); got[0] != atB[0] || got[1] != atB[1] {
		t.Errorf("an unforced reset to the end moved %v to %v", atB, got)
	}
	if got := resetOffset(t, cl, env, group, topic, -1, true); got[0] != env.Store.MaxOffset(topic, 0) || got[1] != env.Store.MaxOffset(topic, 1) {
		t.Errorf("a forced reset to the end gave %v", got)
	}
	resetOffset(t, cl, env, group, topic, mark, false)

	startOurs(t, env, group, topic, rec.handler())
	rec.wait(t, "B", n, 2)
	committedAll(t, env, group, topic, 2)
	for i := range n {
		if got := rec.count(fmt.Sprintf("A-%d", i)); got != 1 {
			t.Errorf("A-%d delivered %d times, want 1", i, got)
		}
	}

	for _, tc := range []struct {
		ext  map[string]string
		code int16
	}{
		{map[string]string{"topic": topic, "group": brokertest.Name("nobody"), "timestamp": "0"}, remoting.SubscriptionGroupNotExist},
		{map[string]string{"topic": "NoSuchTopic", "group": group, "timestamp": "0"}, remoting.TopicNotExist},
		{map[string]string{"topic": topic, "group": group}, remoting.SystemError},
		{map[string]string{"topic": topic, "group": group, "queueId": "0", "offset": "999999"}, remoting.SystemError},
		{map[string]string{"topic": topic, "group": group, "queueId": "7", "timestamp": "0"}, remoting.SystemError},
	} {
		if r := invoke(t, cl, env, remoting.InvokeBrokerToResetOffset, tc.ext, nil); r.Code != tc.code {
			t.Errorf("reset %v: %d %q, want %s", tc.ext, r.Code, r.Remark, remoting.ResponseCode(tc.code))
		}
	}
	// One queue to an explicit offset.
	r := invoke(t, cl, env, remoting.InvokeBrokerToResetOffset, map[string]string{"topic": topic, "group": group, "queueId": "1", "offset": "1"}, nil)
	if got := offsetTable(t, r.Body, "offsetTable"); r.Code != remoting.Success || len(got) != 1 || got[1] != 1 {
		t.Errorf("reset queue 1 to offset 1: %d %q %v", r.Code, r.Remark, got)
	}
}

// TestRelaySilentClient relays to a client that never answers: the admin
// hears which client was silent, within the relay timeout.
func TestRelaySilentClient(t *testing.T) {
	env := brokertest.Start(t)
	env.Broker.SetRelayTimeout(300 * time.Millisecond)
	topic, group := brokertest.Name("RelaySilent"), brokertest.Name("silent")
	createTopic(t, env, topic, 1)
	release := make(chan struct{})
	silent := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger(), OnRequest: func(c *remoting.Conn, req *remoting.Command) *remoting.Command {
		<-release
		return nil
	}})
	t.Cleanup(func() { silent.Close() })
	t.Cleanup(func() { close(release) })
	const id = "127.0.0.1@silent"
	hb, _ := json.Marshal(remoting.HeartbeatData{ClientID: id, ProducerDataSet: []remoting.ProducerData{}, ConsumerDataSet: []remoting.ConsumerData{{
		GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: broker.ModelClustering, ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET",
		SubscriptionDataSet: []remoting.SubscriptionData{{Topic: topic, SubString: "*", TagsSet: []string{}, CodeSet: []string{}}},
	}}})
	if r := invoke(t, silent, env, remoting.HeartBeat, nil, hb); r.Code != remoting.Success {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	cl := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger()})
	defer cl.Close()
	start := time.Now()
	r := invoke(t, cl, env, remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": group, "clientId": id}, nil)
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "did not answer") || !strings.Contains(r.Remark, id) {
		t.Errorf("running info of a silent client: %d %q", r.Code, r.Remark)
	}
	r = invoke(t, cl, env, remoting.InvokeBrokerToGetConsumerStatus, map[string]string{"topic": topic, "group": group}, nil)
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "did not answer") {
		t.Errorf("status of a silent group: %d %q", r.Code, r.Remark)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("two relays to a silent client took %v; the timeout is 300ms", d)
	}
}
