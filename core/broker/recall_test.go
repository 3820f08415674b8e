package broker_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
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

// TestRecallSurvivesCrash recalls a timed message and a delayed one, then
// puts the broker in the state a crash can leave: restarted, the timer
// indexed again from the start and the recalled timer's index keys back
// (their deletion is not synced). Neither recalled message is delivered;
// the two sent beside them are, and a delivered message cannot be
// recalled.
func TestRecallSurvivesCrash(t *testing.T) {
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	env := brokertest.Start(t, func(c *server.Config) {
		c.Store.Now = now
		c.Broker.Now = now
	})
	const topic = "Recall"
	createTopic(t, env, topic, 1)
	due := now().Add(time.Hour).UnixMilli()
	send := func(id string, props map[string]string) string {
		t.Helper()
		props[message.PropertyUniqKey] = id
		r := env.Broker.SendLocalBatch([]broker.LocalSend{{Topic: topic, QueueID: 0, Body: []byte(id), Properties: message.EncodeProperties(props)}})[0]
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		h := r.RecallHandle
		if h == "" {
			t.Fatalf("%s: no recall handle for %+v", id, r)
		}
		return h
	}
	timed := func() map[string]string {
		return map[string]string{message.PropertyTimerDeliverMS: strconv.FormatInt(due, 10)}
	}
	level := func() map[string]string { return map[string]string{message.PropertyDelayLevel: "4"} } // 30 s
	goneTimer, keptTimer := send("gone-timer", timed()), send("kept-timer", timed())
	goneLevel, keptLevel := send("gone-level", level()), send("kept-level", level())
	brokertest.Eventually(t, 10*time.Second, "the timers indexed", func() bool { return env.Broker.PendingTimers() == 2 })

	for _, h := range []string{goneTimer, goneLevel} {
		if _, err := env.Broker.Recall(topic, h); err != nil {
			t.Fatal(err)
		}
	}
	if n := env.Broker.PendingTimers(); n != 1 {
		t.Fatalf("%d timers pending after the recall, want 1", n)
	}
	var m broker.Metrics
	if env.Broker.Metrics(&m); m.Recalled != 2 {
		t.Fatalf("the metrics count %d recalls, want 2", m.Recalled)
	}
	if _, err := env.Broker.Recall("Other", keptTimer); !errors.Is(err, broker.ErrIllegal) {
		t.Fatalf("recall with another topic: %v, want ErrIllegal", err)
	}

	env = env.Restart(t)
	env.Store.SetProgress("sched/timer/indexed", 0)
	if err := env.Store.PutKeys(broker.TimerKeys(due, 0)...); err != nil { // gone-timer's, at timer offset 0
		t.Fatal(err)
	}
	skew.Store(int64(2 * time.Hour))
	brokertest.Eventually(t, 10*time.Second, "the kept messages delivered", func() bool {
		return env.Store.MaxOffset(topic, 0) >= 2 && env.Broker.PendingTimers() == 0
	})
	// Each pair was due at one moment and is delivered in one step: the
	// recalled ones would be here by now.
	got := storetest.ReadQueue(t, env.Store, topic, 0, 0)
	slices.Sort(got)
	if !slices.Equal(got, []string{"kept-level", "kept-timer"}) {
		t.Fatalf("delivered %q, want kept-level and kept-timer", got)
	}
	for _, h := range []string{keptTimer, keptLevel} {
		if _, err := env.Broker.Recall(topic, h); !errors.Is(err, broker.ErrNoMessage) {
			t.Fatalf("recall of a delivered message: %v, want ErrNoMessage", err)
		}
	}
	if id, err := env.Broker.Recall(topic, goneTimer); err != nil || id != "gone-timer" {
		t.Fatalf("a second recall: %q %v", id, err)
	}
}

// TestRecallOverRemoting recalls, with RECALL_MESSAGE, one of two messages
// sent with one delay level: the send's answer carries its recallHandle,
// as RocketMQ's SendMessageResponseHeader does, and only the other is
// delivered.
func TestRecallOverRemoting(t *testing.T) {
	env := brokertest.Start(t, shortLevels)
	const topic = "RecallRemoting"
	createTopic(t, env, topic, 1)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	if resp := rawSend(t, cl, env.BrokerAddr, topic, 0, 0, map[string]string{"UNIQ_KEY": "plain"}, "plain"); resp.Code != remoting.Success || resp.Get("recallHandle") != "" {
		t.Fatalf("a send not delayed: %v, recall handle %q", resp, resp.Get("recallHandle"))
	}
	handles := map[string]string{}
	for _, id := range []string{"kept", "gone"} {
		resp := rawSend(t, cl, env.BrokerAddr, topic, 0, 0, map[string]string{"UNIQ_KEY": id, "DELAY": "1"}, id)
		if resp.Code != remoting.Success || resp.Get("recallHandle") == "" {
			t.Fatalf("%s: %v, no recall handle", id, resp)
		}
		handles[id] = resp.Get("recallHandle")
	}
	recall := func(h string) *remoting.Command {
		t.Helper()
		req := remoting.NewRequest(remoting.RecallMessage, map[string]string{"producerGroup": "pg", "topic": topic, "recallHandle": h}, nil)
		resp, err := cl.Invoke(context.Background(), env.BrokerAddr, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := recall(handles["gone"]); resp.Code != remoting.Success || resp.Get("msgId") != "gone" {
		t.Fatalf("recall: %v", resp)
	}
	if resp := recall("x" + handles["gone"]); resp.Code == remoting.Success {
		t.Fatalf("a malformed handle recalled: %v", resp)
	}
	brokertest.Eventually(t, 10*time.Second, "the kept message delivered", func() bool { return env.Store.MaxOffset(topic, 0) >= 2 })
	if got := storetest.ReadQueue(t, env.Store, topic, 0, 0); !slices.Equal(got, []string{"plain", "kept"}) {
		t.Fatalf("delivered %q, want plain and kept", got)
	}
	if resp := recall(handles["kept"]); resp.Code == remoting.Success {
		t.Fatalf("a delivered message recalled: %v", resp)
	}
}

// TestRecallTombstoneLeavesWithItsRecord recalls a timed message and lets
// retention delete the segment it waits in: the recall's tombstone is
// dropped once the record is gone, and not before.
func TestRecallTombstoneLeavesWithItsRecord(t *testing.T) {
	env, skew, now := agingBroker(t)
	const topic = "RecallRetention"
	createTopic(t, env, topic, 1)
	props := message.EncodeProperties(map[string]string{message.PropertyUniqKey: "r", message.PropertyTimerDeliverMS: strconv.FormatInt(now().Add(30*time.Minute).UnixMilli(), 10)})
	r := env.Broker.SendLocalBatch([]broker.LocalSend{{Topic: topic, QueueID: 0, Body: []byte("r"), Properties: props}})[0]
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, err := env.Broker.Recall(topic, r.RecallHandle); err != nil {
		t.Fatal(err)
	}
	tombstones := func() int {
		n := 0
		if err := env.Store.EachMeta("recall/", func(string, []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := tombstones(); n != 1 {
		t.Fatalf("%d tombstones after the recall, want 1", n)
	}
	fillLog(t, env, "Filler", 4)
	skew.Store(int64(2 * time.Minute)) // a sweep is due, the record still there
	passes := env.Broker.SchedulerPasses()
	env.Broker.WakeScheduler()
	brokertest.Eventually(t, 10*time.Second, "a whole scheduler pass", func() bool { return env.Broker.SchedulerPasses() >= passes+2 })
	if n := tombstones(); n != 1 {
		t.Fatalf("%d tombstones while the record is kept, want 1", n)
	}
	skew.Store(int64(2 * time.Hour)) // every full segment is past retention
	if _, err := env.Store.RunRetention(); err != nil {
		t.Fatal(err)
	}
	if mn := env.Store.MinOffset(broker.TimerTopic, 0); mn == 0 {
		t.Fatal("retention kept the recalled timer's record")
	}
	env.Broker.WakeScheduler()
	brokertest.Eventually(t, 10*time.Second, "the tombstone dropped", func() bool { return tombstones() == 0 })
}

// TestRecallDuringSchedulerPass recalls a delayed message after the
// scheduler's pass has read the tombstones and before it delivers the
// message's level: the pass skips it all the same.
func TestRecallDuringSchedulerPass(t *testing.T) {
	env, skew, _ := agingBroker(t)
	const topic = "RecallMidPass"
	createTopic(t, env, topic, 1)
	send := func(id string) string {
		t.Helper()
		props := message.EncodeProperties(map[string]string{message.PropertyUniqKey: id, message.PropertyDelayLevel: "1"}) // 1 s
		r := env.Broker.SendLocalBatch([]broker.LocalSend{{Topic: topic, QueueID: 0, Body: []byte(id), Properties: props}})[0]
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r.RecallHandle
	}
	gone := send("gone")
	send("kept")
	recalled := make(chan error, 1)
	var once sync.Once
	env.Broker.OnSchedulePass(func(now time.Time) {
		if now.Before(time.Now().Add(30 * time.Second)) {
			return // a pass that finds nothing due
		}
		once.Do(func() {
			_, err := env.Broker.Recall(topic, gone)
			recalled <- err
		})
	})
	skew.Store(int64(time.Minute)) // both due
	env.Broker.WakeScheduler()
	if err := <-recalled; err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 10*time.Second, "the kept message delivered", func() bool { return env.Store.MaxOffset(topic, 0) >= 1 })
	if got := storetest.ReadQueue(t, env.Store, topic, 0, 0); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("delivered %q, want only kept", got)
	}
}
