package broker_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

const retentionSegment = 8 << 10

// fillLog appends filler messages to topic's queue 0 until the commit log
// spans segments segments.
func fillLog(t *testing.T, env *brokertest.Env, topic string, segments int64) {
	t.Helper()
	body := strings.Repeat("f", 1000)
	for {
		if _, mx := env.Store.CommitLogOffsets(); mx >= segments*retentionSegment {
			return
		}
		if err := env.Store.Append([]*message.Message{storetest.Msg(topic, 0, body)}); err != nil {
			t.Fatal(err)
		}
	}
}

func commitOffset(t *testing.T, cl *remoting.Client, env *brokertest.Env, group, topic string, off int64) {
	t.Helper()
	resp := invoke(t, cl, env, remoting.UpdateConsumerOffset, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": strconv.FormatInt(off, 10)}, nil)
	if resp.Code != remoting.Success {
		t.Fatalf("commit %s %s@%d: %v", group, topic, off, resp)
	}
}

// TestHighWaterKeepsUnconsumed fills the log of a broker whose disk
// reports 99% full. A sent message nobody consumed keeps its segment,
// with an error log naming it and a count, until a group commits past
// it; with diskHighWaterDropsUnconsumed the segment goes at once, and the
// loss is logged and counted.
func TestHighWaterKeepsUnconsumed(t *testing.T) {
	for _, drops := range []bool{false, true} {
		t.Run(fmt.Sprintf("drops=%v", drops), func(t *testing.T) {
			logs := &storetest.LogBuffer{}
			env := brokertest.Start(t, func(c *server.Config) {
				c.Logger = logs.Logger()
				c.Store.FS = storetest.NewDiskFS(nil, 0.99)
				c.Store.SegmentSize = retentionSegment
				c.Store.RetentionInterval = time.Hour // run by hand
				c.Store.DiskHighWaterDropsUnconsumed = drops
			})
			createTopic(t, env, "Kept", 1)
			cl := remoting.NewClient(remoting.ClientOptions{})
			defer cl.Close()
			if resp := rawSend(t, cl, env.BrokerAddr, "Kept", 0, 0, map[string]string{"UNIQ_KEY": "precious"}, "precious"); resp.Code != remoting.Success {
				t.Fatalf("send: %v", resp)
			}
			fillLog(t, env, "Kept", 4)
			stats := env.Store.Stats()

			n, err := env.Store.RunRetention()
			if err != nil {
				t.Fatal(err)
			}
			if drops {
				mn := env.Store.MinOffset("Kept", 0)
				if n == 0 || mn == 0 || stats.UnconsumedDropped.Load() != mn {
					t.Fatalf("deleted %d segments, min offset %d, UnconsumedDropped %d", n, mn, stats.UnconsumedDropped.Load())
				}
				if out := logs.String(); !strings.Contains(out, "deleted unconsumed messages") ||
					!strings.Contains(out, fmt.Sprintf("Kept/0: %d messages from offset 0: no consumer group has committed an offset", mn)) {
					t.Fatalf("want an error naming what was dropped; log:\n%s", out)
				}
				return
			}
			if n != 0 || env.Store.MinOffset("Kept", 0) != 0 || stats.HighWaterHeld.Load() != 1 {
				t.Fatalf("deleted %d segments holding unconsumed messages; HighWaterHeld %d", n, stats.HighWaterHeld.Load())
			}
			if out := logs.String(); !strings.Contains(out, "DISK ABOVE HIGH WATER") || !strings.Contains(out, "used=99.0%") ||
				!strings.Contains(out, "oldestTopic=Kept") || !strings.Contains(out, "no consumer group has committed an offset") {
				t.Fatalf("want an error naming the held queue; log:\n%s", out)
			}

			commitOffset(t, cl, env, "G", "Kept", 1) // past "precious", not past the fillers
			if n, err := env.Store.RunRetention(); err != nil || n != 0 {
				t.Fatalf("deleted %d segments holding messages G has not consumed, %v", n, err)
			}
			if holds := env.Broker.UnconsumedHolds(); len(holds) != 1 || holds[0].Offset != 1 || holds[0].Holder != "group G" {
				t.Fatalf("unconsumed holds %+v", holds)
			}
			commitOffset(t, cl, env, "G", "Kept", env.Store.MaxOffset("Kept", 0))
			if n, err := env.Store.RunRetention(); err != nil || n == 0 || env.Store.MinOffset("Kept", 0) == 0 {
				t.Fatalf("after G consumed everything retention deleted %d segments, %v", n, err)
			}
			if stats.UnconsumedDropped.Load() != 0 {
				t.Fatalf("UnconsumedDropped %d without the option", stats.UnconsumedDropped.Load())
			}
		})
	}
}

// TestUnconsumedHolds checks what counts as unconsumed: per queue the
// lowest offset any group committed, the whole queue when no group
// committed, nothing for a topic only broadcasting consumers read, and
// nothing for the broker's own topics.
func TestUnconsumedHolds(t *testing.T) {
	env := brokertest.Start(t)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	for topic, n := range map[string]int{"Plain": 2, "Casted": 2, "Read": 3, "Done": 2} {
		createTopic(t, env, topic, 1)
		for i := 0; i < n; i++ {
			if resp := rawSend(t, cl, env.BrokerAddr, topic, 0, 0, map[string]string{"UNIQ_KEY": topic + strconv.Itoa(i)}, "x"); resp.Code != remoting.Success {
				t.Fatalf("send: %v", resp)
			}
		}
	}
	// Parked messages: a delayed one and a timed one.
	due := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	rawSend(t, cl, env.BrokerAddr, "Plain", 0, 0, map[string]string{"UNIQ_KEY": "late", "DELAY": "3"}, "x")
	rawSend(t, cl, env.BrokerAddr, "Plain", 0, 0, map[string]string{"UNIQ_KEY": "timed", "TIMER_DELIVER_MS": due}, "x")
	hb, _ := json.Marshal(remoting.HeartbeatData{ClientID: "b@1", ConsumerDataSet: []remoting.ConsumerData{{
		GroupName: "Caster", ConsumeType: "CONSUME_PASSIVELY", MessageModel: broker.ModelBroadcasting,
		SubscriptionDataSet: []remoting.SubscriptionData{{Topic: "Casted", SubString: "*"}}}}})
	if resp := invoke(t, cl, env, remoting.HeartBeat, nil, hb); resp.Code != remoting.Success {
		t.Fatalf("heartbeat: %v", resp)
	}
	commitOffset(t, cl, env, "A", "Read", 3)
	commitOffset(t, cl, env, "B", "Read", 1)
	commitOffset(t, cl, env, "A", "Done", 2)

	got := map[string]store.QueueHold{}
	for _, h := range env.Broker.UnconsumedHolds() {
		got[h.Topic] = h
	}
	want := map[string]store.QueueHold{
		"Plain": {Topic: "Plain", Offset: 0, Holder: "no consumer group has committed an offset"},
		"Read":  {Topic: "Read", Offset: 1, Holder: "group B (lowest of 2 groups)"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("unconsumed holds\n got %+v\nwant %+v", got, want)
	}
}

// agingBroker starts a broker with small segments, an hour's retention
// run by hand, no disk high-water mark and a clock that runs skew ahead
// of the wall clock.
func agingBroker(t *testing.T) (env *brokertest.Env, skew *atomic.Int64, now func() time.Time) {
	skew = new(atomic.Int64)
	now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	env = brokertest.Start(t, func(c *server.Config) {
		c.Store.SegmentSize = retentionSegment
		c.Store.Retention = time.Hour
		c.Store.RetentionInterval = time.Hour // run by hand
		c.Store.DiskHighWater = -1
		c.Store.Now = now
		c.Broker.Now = now
	})
	return env, skew, now
}

// TestTimerRollFreesRetention parks a message due in 71 hours, fills the
// log and ages it past retention. The first retention pass is held by the
// pending timer and asks the broker to roll it; the next pass deletes the
// old segments; the message still arrives once, at its due time.
func TestTimerRollFreesRetention(t *testing.T) {
	env, skew, now := agingBroker(t)
	createTopic(t, env, "Later", 1)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	due := now().Add(71 * time.Hour)
	props := map[string]string{"UNIQ_KEY": "far", "TIMER_DELIVER_MS": strconv.FormatInt(due.UnixMilli(), 10)}
	if resp := rawSend(t, cl, env.BrokerAddr, "Later", 0, 0, props, "due in 71h"); resp.Code != remoting.Success {
		t.Fatalf("send: %v", resp)
	}
	// The pending count the metrics report follows the index through the
	// roll and the delivery.
	timedPending := func() int64 {
		var m broker.Metrics
		env.Broker.Metrics(&m)
		return m.TimedPending
	}
	brokertest.Eventually(t, 10*time.Second, "the timer indexed", func() bool { return env.Broker.PendingTimers() == 1 && timedPending() == 1 })
	it := env.Store.NewQueueIter(broker.TimerTopic, 0, store.IterOptions{UnitsOnly: true})
	if !it.SeekGE(0) {
		t.Fatalf("no timed message stored: %v", it.Error())
	}
	parkedAt := it.Unit().CommitLogOffset
	it.Close()
	fillLog(t, env, "Filler", 4)

	skew.Store(int64(2 * time.Hour)) // every full segment is past retention
	if _, err := env.Store.RunRetention(); err != nil {
		t.Fatal(err)
	}
	if mn, _ := env.Store.CommitLogOffsets(); mn > parkedAt || env.Store.Stats().SegmentsHeld.Load() == 0 {
		t.Fatalf("the segment of a pending timer was deleted (log starts at %d, timer at %d), or no hold counted", mn, parkedAt)
	}
	brokertest.Eventually(t, 10*time.Second, "the timer rolled and indexed again", func() bool {
		indexed, _ := env.Store.Progress("sched/timer/indexed")
		return env.Store.MaxOffset(broker.TimerTopic, 0) == 2 && indexed == 2 && env.Broker.PendingTimers() == 1
	})
	if n := timedPending(); n != 1 {
		t.Fatalf("after the roll the metrics count %d pending timed messages, want 1", n)
	}
	if _, err := env.Store.RunRetention(); err != nil {
		t.Fatal(err)
	}
	if mn, _ := env.Store.CommitLogOffsets(); mn <= parkedAt {
		t.Fatalf("after the roll the log still starts at %d, at or before the timer's old record at %d", mn, parkedAt)
	}
	if n := env.Store.MaxOffset("Later", 0); n != 0 {
		t.Fatalf("%d messages delivered before their time", n)
	}

	skew.Add(int64(71 * time.Hour))
	brokertest.Eventually(t, 10*time.Second, "the timed message delivered", func() bool {
		return env.Store.MaxOffset("Later", 0) == 1 && env.Broker.PendingTimers() == 0
	})
	if n := timedPending(); n != 0 {
		t.Fatalf("after the delivery the metrics count %d pending timed messages, want 0", n)
	}
	got := storetest.ReadQueue(t, env.Store, "Later", 0, 0)
	if len(got) != 1 || got[0] != "due in 71h" {
		t.Fatalf("delivered %q", got)
	}
}
