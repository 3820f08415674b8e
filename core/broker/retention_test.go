package broker_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
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
