package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// statsQueue is a MessageQueue as a stats body's key names it.
type statsQueue struct {
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
	Topic      string `json:"topic"`
}

// decodeQueueKeyed reads the offsetTable of a stats body, a map whose keys
// are MessageQueue objects written as objects (fastjson's form), the way
// RocketMQ's tools read it.
func decodeQueueKeyed[V any](t *testing.T, body []byte) map[statsQueue]V {
	t.Helper()
	const field = `"offsetTable":`
	i := bytes.Index(body, []byte(field))
	if i < 0 {
		t.Fatalf("no offsetTable in %s", body)
	}
	b := body[i+len(field):]
	fail := func(what string) {
		t.Helper()
		t.Fatalf("offsetTable: %s at %q", what, b)
	}
	next := func(v any) {
		t.Helper()
		d := json.NewDecoder(bytes.NewReader(b))
		if err := d.Decode(v); err != nil {
			fail(err.Error())
		}
		b = bytes.TrimLeft(b[d.InputOffset():], " ")
	}
	out := map[statsQueue]V{}
	if len(b) == 0 || b[0] != '{' {
		fail("want {")
	}
	b = b[1:]
	if b[0] == '}' {
		return out
	}
	for {
		var k statsQueue
		var v V
		next(&k)
		if len(b) == 0 || b[0] != ':' {
			fail("want :")
		}
		b = b[1:]
		next(&v)
		out[k] = v
		if len(b) == 0 {
			fail("unterminated")
		}
		if b[0] == '}' {
			return out
		}
		if b[0] != ',' {
			fail("want , or }")
		}
		b = b[1:]
	}
}

type offsetWrapper struct {
	BrokerOffset   int64 `json:"brokerOffset"`
	ConsumerOffset int64 `json:"consumerOffset"`
	LastTimestamp  int64 `json:"lastTimestamp"`
}

type topicOffset struct {
	MinOffset           int64 `json:"minOffset"`
	MaxOffset           int64 `json:"maxOffset"`
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
}

// TestConsumeStats produces with the official client, consumes part of it
// with an official push consumer, then checks that GET_CONSUME_STATS reports
// every queue's offsets and a lag equal to what was left unconsumed.
func TestConsumeStats(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Stats")
	createTopic(t, env, topic, 3)
	p := env.Producer(t)
	group := brokertest.Name("cg")
	const consumed, left = 12, 7
	sendN(t, p, topic, "first", consumed)

	col := newCollector(consumed)
	c := env.PushConsumer(t, group)
	c.Subscribe(topic, consumer.MessageSelector{}, col.listener(bodyKey))
	env.StartConsumer(t, c, group, true, topic)
	brokertest.Wait(t, col.done, 30*time.Second, "the first batch")
	committed := func() (n int64) {
		for q := int32(0); q < 3; q++ {
			off, _ := env.Store.ConsumerOffset(group, topic, q)
			n += off
		}
		return n
	}
	brokertest.Eventually(t, 30*time.Second, "every consumed offset committed", func() bool { return committed() == consumed })
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	sendN(t, p, topic, "second", left)

	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	stats := func(ext map[string]string) map[statsQueue]offsetWrapper {
		t.Helper()
		r := invoke(t, cl, env, remoting.GetConsumeStats, ext, nil)
		if r.Code != remoting.Success {
			t.Fatalf("GET_CONSUME_STATS %v: %v", ext, r)
		}
		if !bytes.Contains(r.Body, []byte(`"consumeTps":`)) {
			t.Errorf("no consumeTps in %s", r.Body)
		}
		return decodeQueueKeyed[offsetWrapper](t, r.Body)
	}
	one := stats(map[string]string{"consumerGroup": group, "topic": topic})
	if len(one) != 3 {
		t.Fatalf("%d queues, want 3: %v", len(one), one)
	}
	var lag, total int64
	for q := int32(0); q < 3; q++ {
		k := statsQueue{BrokerName: broker.DefaultBrokerName, QueueID: q, Topic: topic}
		w, ok := one[k]
		if !ok {
			t.Fatalf("queue %+v missing: %v", k, one)
		}
		off, _ := env.Store.ConsumerOffset(group, topic, q)
		if w.BrokerOffset != env.Store.MaxOffset(topic, q) || w.ConsumerOffset != off {
			t.Errorf("queue %d: %+v, want brokerOffset %d consumerOffset %d", q, w, env.Store.MaxOffset(topic, q), off)
		}
		if (w.ConsumerOffset > 0) != (w.LastTimestamp > 0) {
			t.Errorf("queue %d: lastTimestamp %d with consumerOffset %d", q, w.LastTimestamp, w.ConsumerOffset)
		}
		lag += w.BrokerOffset - w.ConsumerOffset
		total += w.BrokerOffset
	}
	if lag != left || total != consumed+left {
		t.Errorf("lag %d over %d messages, want %d over %d", lag, total, left, consumed+left)
	}

	// Without a topic: every topic the group has offsets on.
	all := stats(map[string]string{"consumerGroup": group})
	for k, w := range one {
		if all[k] != w {
			t.Errorf("without a topic, queue %+v: %+v, want %+v", k, all[k], w)
		}
	}
	if got := stats(map[string]string{"consumerGroup": brokertest.Name("nobody")}); len(got) != 0 {
		t.Errorf("a group without offsets: %v", got)
	}
	if r := invoke(t, cl, env, remoting.GetConsumeStats, map[string]string{"consumerGroup": group, "topic": "NoSuchTopic"}, nil); r.Code != remoting.TopicNotExist {
		t.Errorf("an unknown topic: %v", r)
	}
	if r := invoke(t, cl, env, remoting.GetConsumeStats, map[string]string{"consumerGroup": "bad name"}, nil); r.Code == remoting.Success {
		t.Errorf("an invalid group: %v", r)
	}
}

// TestTopicStats checks GET_TOPIC_STATS_INFO against what the official
// producer stored.
func TestTopicStats(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("TopicStats")
	createTopic(t, env, topic, 2)
	p := env.Producer(t)
	const n = 9
	sendN(t, p, topic, "m", n)

	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	r := invoke(t, cl, env, remoting.GetTopicStatsInfo, map[string]string{"topic": topic}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("GET_TOPIC_STATS_INFO: %v", r)
	}
	table := decodeQueueKeyed[topicOffset](t, r.Body)
	if len(table) != 2 {
		t.Fatalf("%d queues, want 2: %s", len(table), r.Body)
	}
	var total int64
	for q := int32(0); q < 2; q++ {
		k := statsQueue{BrokerName: broker.DefaultBrokerName, QueueID: q, Topic: topic}
		o, ok := table[k]
		if !ok {
			t.Fatalf("queue %+v missing: %s", k, r.Body)
		}
		minOff, maxOff := env.Store.QueueOffsets(topic, q)
		if o.MinOffset != minOff || o.MaxOffset != maxOff {
			t.Errorf("queue %d: %+v, want %d..%d", q, o, minOff, maxOff)
		}
		if (o.MaxOffset > o.MinOffset) != (o.LastUpdateTimestamp > 0) {
			t.Errorf("queue %d: lastUpdateTimestamp %d over %d..%d", q, o.LastUpdateTimestamp, o.MinOffset, o.MaxOffset)
		}
		total += o.MaxOffset - o.MinOffset
	}
	if total != n {
		t.Errorf("%d messages, want %d", total, n)
	}
	if r := invoke(t, cl, env, remoting.GetTopicStatsInfo, map[string]string{"topic": "NoSuchTopic"}, nil); r.Code != remoting.TopicNotExist {
		t.Errorf("an unknown topic: %v", r)
	}
}

// TestConnectionLists checks GET_CONSUMER_CONNECTION_LIST and
// GET_PRODUCER_CONNECTION_LIST against live official clients.
func TestConnectionLists(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Conns")
	createTopic(t, env, topic, 1)
	pgroup := brokertest.Name("pg")
	p := env.Producer(t, producer.WithGroupName(pgroup))
	sendN(t, p, topic, "m", 1)

	group := brokertest.Name("cg")
	c := env.PushConsumer(t, group)
	if err := c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "TagA || TagB"}, func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, c, group, true, topic)

	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	r := invoke(t, cl, env, remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": group}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("GET_CONSUMER_CONNECTION_LIST: %v", r)
	}
	var cc remoting.ConsumerConnection
	if err := json.Unmarshal(r.Body, &cc); err != nil {
		t.Fatal(err)
	}
	ids := env.Broker.View().ConsumerIDs(group)
	if len(cc.ConnectionSet) != 1 || len(ids) != 1 || cc.ConnectionSet[0].ClientID != ids[0] {
		t.Fatalf("connections %+v, want the client %v", cc.ConnectionSet, ids)
	}
	if conn := cc.ConnectionSet[0]; conn.Language != "GO" || conn.Version == 0 || conn.ClientAddr == "" {
		t.Errorf("connection %+v", conn)
	}
	if cc.MessageModel != "CLUSTERING" || cc.ConsumeType != "CONSUME_PASSIVELY" || cc.ConsumeFromWhere != "CONSUME_FROM_FIRST_OFFSET" {
		t.Errorf("group %+v", cc)
	}
	sd, ok := cc.SubscriptionTable[topic]
	if !ok || sd.SubString != "TagA || TagB" || len(sd.TagsSet) != 2 || sd.TagsSet[0] != "TagA" || sd.TagsSet[1] != "TagB" {
		t.Errorf("subscription of %s: %+v (table %v)", topic, sd, cc.SubscriptionTable)
	}
	if r := invoke(t, cl, env, remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": brokertest.Name("offline")}, nil); r.Code != remoting.ConsumerNotOnline || r.Remark == "" {
		t.Errorf("an offline group: %v", r)
	}

	var pc remoting.ProducerConnection
	brokertest.Eventually(t, 40*time.Second, "the producer's heartbeat", func() bool {
		r := invoke(t, cl, env, remoting.GetProducerConnectionList, map[string]string{"producerGroup": pgroup}, nil)
		return r.Code == remoting.Success && json.Unmarshal(r.Body, &pc) == nil
	})
	if len(pc.ConnectionSet) != 1 || pc.ConnectionSet[0].Language != "GO" || pc.ConnectionSet[0].ClientAddr == "" || pc.ConnectionSet[0].ClientID == "" {
		t.Errorf("producer connections %+v", pc.ConnectionSet)
	}
	if r := invoke(t, cl, env, remoting.GetProducerConnectionList, map[string]string{"producerGroup": brokertest.Name("offline")}, nil); r.Code == remoting.Success {
		t.Errorf("an offline producer group: %v", r)
	}
}

// TestTopicTableAndRuntimeInfo checks GET_ALL_TOPIC_CONFIG and
// GET_BROKER_RUNTIME_INFO after an official producer stored messages.
func TestTopicTableAndRuntimeInfo(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Table")
	createTopic(t, env, topic, 2)
	p := env.Producer(t)
	const n = 5
	sendN(t, p, topic, "m", n)

	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	r := invoke(t, cl, env, remoting.GetAllTopicConfig, nil, nil)
	if r.Code != remoting.Success {
		t.Fatalf("GET_ALL_TOPIC_CONFIG: %v", r)
	}
	var w remoting.TopicConfigWrapper
	if err := json.Unmarshal(r.Body, &w); err != nil {
		t.Fatal(err)
	}
	if tc, ok := w.TopicConfigTable[topic]; !ok || tc.ReadQueueNums != 2 || tc.WriteQueueNums != 2 || tc.TopicName != topic {
		t.Errorf("topic %s: %+v", topic, tc)
	}
	if len(w.TopicConfigTable) != len(env.Broker.Topics()) || w.DataVersion.Timestamp == 0 {
		t.Errorf("%d topics, the broker has %d; dataVersion %+v", len(w.TopicConfigTable), len(env.Broker.Topics()), w.DataVersion)
	}

	r = invoke(t, cl, env, remoting.GetBrokerRuntimeInfo, nil, nil)
	if r.Code != remoting.Success {
		t.Fatalf("GET_BROKER_RUNTIME_INFO: %v", r)
	}
	var kv remoting.KVTable
	if err := json.Unmarshal(r.Body, &kv); err != nil {
		t.Fatal(err)
	}
	num := func(key string) int64 {
		t.Helper()
		v, err := strconv.ParseInt(kv.Table[key], 10, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", key, kv.Table[key], err)
		}
		return v
	}
	minOff, maxOff := env.Store.CommitLogOffsets()
	if num("commitLogMinOffset") != minOff || num("commitLogMaxOffset") != maxOff || maxOff <= minOff {
		t.Errorf("commit log %s..%s, the store %d..%d", kv.Table["commitLogMinOffset"], kv.Table["commitLogMaxOffset"], minOff, maxOff)
	}
	if num("msgPutTotalTodayNow") < n || num("bootTimestamp") <= 0 || num("brokerVersion") != int64(remoting.DefaultVersion) {
		t.Errorf("table %v", kv.Table)
	}
	// The producer's connection and this one, at least (the producer's
	// instance may hold more than one).
	if num("connectionCount") < 2 {
		t.Errorf("connectionCount %s", kv.Table["connectionCount"])
	}
	if kv.Table["brokerVersionDesc"] == "" || !strings.HasPrefix(kv.Table["runtime"], "[ 0 days,") {
		t.Errorf("table %v", kv.Table)
	}
}
