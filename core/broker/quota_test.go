package broker_test

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store/storetest"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// TestWritesOnlyToReadableQueues checks that a topic configuration with
// more write queues than read queues is refused, and that on a topic an
// older version saved that way, sends and batches into a queue at or
// above the read count are refused while the broker's own queue choice
// stays below it.
func TestWritesOnlyToReadableQueues(t *testing.T) {
	env := brokertest.Start(t)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	r := invoke(t, cl, env, remoting.UpdateAndCreateTopic, map[string]string{"topic": "Wide", "readQueueNums": "2", "writeQueueNums": "4", "perm": "6"}, nil)
	if r.Code == remoting.Success || !strings.Contains(r.Remark, "writeQueueNums 4 exceeds readQueueNums 2") {
		t.Fatalf("write 4 > read 2: code %d %q", r.Code, r.Remark)
	}
	if _, ok := env.Broker.Topics()["Wide"]; ok {
		t.Fatal("the refused topic was created")
	}
	// Shrinking lowers the write count first: write < read is fine.
	r = invoke(t, cl, env, remoting.UpdateAndCreateTopic, map[string]string{"topic": "Shrinking", "readQueueNums": "4", "writeQueueNums": "2", "perm": "6"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("write 2 < read 4: %v", r)
	}

	if err := env.Broker.PutTopicUnchecked(broker.TopicConfig{TopicName: "Legacy", ReadQueueNums: 2, WriteQueueNums: 4, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	r = sendRaw(t, cl, env, map[string]string{"topic": "Legacy", "queueId": "3"}, []byte("x"))
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "queue 3 of topic Legacy is not readable: the topic has 2 read queues") {
		t.Fatalf("send to queue 3: code %d %q", r.Code, r.Remark)
	}
	batch, _ := message.AppendBatchEntry(nil, message.BatchEntry{Body: []byte("b")})
	r = invoke(t, cl, env, remoting.SendBatchMessage, map[string]string{"a": "p", "b": "Legacy", "e": "2", "f": "0",
		"g": "1", "h": "0", "i": "", "j": "0"}, batch)
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "not readable") {
		t.Fatalf("batch to queue 2: code %d %q", r.Code, r.Remark)
	}
	for i := range 40 {
		if r := sendRaw(t, cl, env, map[string]string{"topic": "Legacy", "queueId": "-1", "bornTimestamp": strconv.Itoa(i + 1)}, []byte("x")); r.Code != remoting.Success {
			t.Fatalf("send without a queue: %v", r)
		}
	}
	if r := sendRaw(t, cl, env, map[string]string{"topic": "Legacy", "queueId": "1"}, []byte("x")); r.Code != remoting.Success {
		t.Fatalf("send to readable queue 1: %v", r)
	}
	for q := int32(2); q < 4; q++ {
		if n := env.Store.MaxOffset("Legacy", q); n != 0 {
			t.Errorf("unreadable queue %d holds %d messages", q, n)
		}
	}
	if n := env.Store.MaxOffset("Legacy", 0) + env.Store.MaxOffset("Legacy", 1); n != 41 {
		t.Errorf("the readable queues hold %d messages, want 41", n)
	}
}

// TestTopicQuota fills the topic table to MaxTopics: creating one more, by
// UPDATE_AND_CREATE_TOPIC, a send or a new group's retry topic, is
// refused with a remark naming the limit and logged once, while an
// existing topic can still be changed and sent to.
func TestTopicQuota(t *testing.T) {
	const limit = 12
	logs := &storetest.LogBuffer{}
	env := brokertest.Start(t, func(c *server.Config) {
		c.Broker.MaxTopics = limit
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	create := func(topic string, queues int) *remoting.Command {
		n := strconv.Itoa(queues)
		return invoke(t, cl, env, remoting.UpdateAndCreateTopic, map[string]string{"topic": topic, "readQueueNums": n, "writeQueueNums": n, "perm": "6"}, nil)
	}
	for i := 0; len(env.Broker.Topics()) < limit; i++ {
		if r := create("Q"+strconv.Itoa(i), 1); r.Code != remoting.Success {
			t.Fatalf("topic %d of %d: %v", len(env.Broker.Topics())+1, limit, r)
		}
	}
	want := "12 topics exist, the limit is 12 (maxTopics)"
	for i := range 5 {
		r := create("Over"+strconv.Itoa(i), 1)
		if r.Code == remoting.Success || !strings.Contains(r.Remark, want) {
			t.Fatalf("a topic over the quota: code %d %q", r.Code, r.Remark)
		}
	}
	r := sendRaw(t, cl, env, map[string]string{"topic": "AutoOver"}, []byte("x"))
	if r.Code != remoting.TopicNotExist || !strings.Contains(r.Remark, want) {
		t.Fatalf("a send auto-creating a topic over the quota: code %d %q", r.Code, r.Remark)
	}
	hb, _ := json.Marshal(remoting.HeartbeatData{ClientID: "c@1", ConsumerDataSet: []remoting.ConsumerData{{
		GroupName: "newgroup", ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING"}}})
	if r := invoke(t, cl, env, remoting.HeartBeat, nil, hb); r.Code == remoting.Success || !strings.Contains(r.Remark, want) {
		t.Fatalf("a heartbeat whose retry topic is over the quota: code %d %q", r.Code, r.Remark)
	}
	if n := len(env.Broker.Topics()); n != limit {
		t.Fatalf("%d topics, want %d", n, limit)
	}
	if r := create("Q0", 2); r.Code != remoting.Success {
		t.Fatalf("updating an existing topic at the quota: %v", r)
	}
	if r := sendRaw(t, cl, env, map[string]string{"topic": "Q0", "queueId": "1"}, []byte("x")); r.Code != remoting.Success {
		t.Fatalf("sending to an existing topic at the quota: %v", r)
	}
	if n := strings.Count(logs.String(), "msg=\"topic quota reached;"); n != 1 {
		t.Fatalf("%d log lines for the quota, want 1 (rate-limited)", n)
	}
	// A full table does not keep a cluster's reply topic from existing.
	env.Config.Broker.ClusterName = "Other"
	env = env.Restart(t)
	if _, ok := env.Broker.Topics()[broker.ReplyTopic("Other")]; !ok {
		t.Fatalf("no reply topic for cluster Other at the topic quota")
	}
}

// TestGroupQuota registers groups up to MaxGroups: a heartbeat with one
// more consumer or producer group is refused for that group with a remark
// naming the limit, while the groups already registered keep
// heartbeating, changed subscriptions included.
func TestGroupQuota(t *testing.T) {
	logs := &storetest.LogBuffer{}
	env := brokertest.Start(t, func(c *server.Config) {
		c.Broker.MaxGroups = 3
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	createTopic(t, env, "Good", 1)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	consumer := func(group, expr string) remoting.ConsumerData {
		return remoting.ConsumerData{GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING",
			SubscriptionDataSet: []remoting.SubscriptionData{{Topic: "Good", SubString: expr}}}
	}
	heartbeat := func(hb remoting.HeartbeatData) *remoting.Command {
		body, _ := json.Marshal(hb)
		return invoke(t, cl, env, remoting.HeartBeat, nil, body)
	}
	r := heartbeat(remoting.HeartbeatData{ClientID: "c@1", ConsumerDataSet: []remoting.ConsumerData{consumer("c1", "*")},
		ProducerDataSet: []remoting.ProducerData{{GroupName: "p1"}, {GroupName: "p2"}}})
	if r.Code != remoting.Success {
		t.Fatalf("three groups: %v", r)
	}
	want := "3 groups are registered, the limit is 3 (maxGroups)"
	for _, hb := range []remoting.HeartbeatData{
		{ClientID: "c@2", ConsumerDataSet: []remoting.ConsumerData{consumer("c2", "*")}},
		{ClientID: "c@2", ProducerDataSet: []remoting.ProducerData{{GroupName: "p3"}}},
		{ClientID: "c@2", ProducerDataSet: []remoting.ProducerData{{GroupName: "c1"}}},
	} {
		r := heartbeat(hb)
		if r.Code == remoting.Success || !strings.Contains(r.Remark, want) {
			t.Fatalf("a fourth group: code %d %q", r.Code, r.Remark)
		}
	}
	if len(env.Broker.View().ConsumerIDs("c2")) != 0 {
		t.Fatal("the refused consumer group was registered")
	}
	if _, ok := env.Broker.Topics()[broker.RetryGroupTopicPrefix+"c2"]; ok {
		t.Fatal("the refused consumer group got a retry topic")
	}
	r = heartbeat(remoting.HeartbeatData{ClientID: "c@3", ConsumerDataSet: []remoting.ConsumerData{consumer("c1", "TagA")},
		ProducerDataSet: []remoting.ProducerData{{GroupName: "p2"}}})
	if r.Code != remoting.Success {
		t.Fatalf("new members of registered groups at the quota: %v", r)
	}
	if ids := env.Broker.View().ConsumerIDs("c1"); len(ids) != 2 {
		t.Fatalf("group c1 has members %v, want two", ids)
	}
	if n := strings.Count(logs.String(), "msg=\"group quota reached;"); n != 1 {
		t.Fatalf("%d log lines for the quota, want 1 (rate-limited)", n)
	}
}

// TestHeartbeatBounded sends heartbeats over the bounds: too many groups,
// a group with too many subscriptions or one to a topic name clients may
// not use, an over-long client id. Each is refused with a remark naming
// the bound and registers nothing, while a group subscribing to its own
// retry topic is accepted.
func TestHeartbeatBounded(t *testing.T) {
	env := brokertest.Start(t)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	heartbeat := func(hb remoting.HeartbeatData) *remoting.Command {
		body, _ := json.Marshal(hb)
		return invoke(t, cl, env, remoting.HeartBeat, nil, body)
	}
	consumer := func(group string, topics ...string) remoting.ConsumerData {
		cd := remoting.ConsumerData{GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING"}
		for _, topic := range topics {
			cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, remoting.SubscriptionData{Topic: topic, SubString: "*"})
		}
		return cd
	}
	var many []remoting.ConsumerData
	var producers []remoting.ProducerData
	for i := range broker.MaxHeartbeatGroups + 1 {
		many = append(many, consumer("g"+strconv.Itoa(i), "Good"))
		producers = append(producers, remoting.ProducerData{GroupName: "p" + strconv.Itoa(i)})
	}
	var topics []string
	for i := range broker.DefaultMaxSubscriptions + 1 {
		topics = append(topics, "T"+strconv.Itoa(i))
	}
	topicsBefore := len(env.Broker.Topics())
	for _, c := range []struct {
		name   string
		hb     remoting.HeartbeatData
		remark string
	}{
		{"too many consumer groups", remoting.HeartbeatData{ClientID: "c@1", ConsumerDataSet: many}, "at most 1000"},
		{"too many producer groups", remoting.HeartbeatData{ClientID: "c@1", ProducerDataSet: producers}, "at most 1000"},
		{"too many subscriptions", remoting.HeartbeatData{ClientID: "c@1", ConsumerDataSet: []remoting.ConsumerData{consumer("subs", topics...)}},
			"subscribes to 1001 topics, the limit is 1000 (maxSubscriptionsPerGroup)"},
		{"bad topic name", remoting.HeartbeatData{ClientID: "c@1", ConsumerDataSet: []remoting.ConsumerData{consumer("badtopic", "Good", "a b")}},
			"consumer group badtopic subscribes to a topic clients may not use"},
		{"long topic name", remoting.HeartbeatData{ClientID: "c@1", ConsumerDataSet: []remoting.ConsumerData{consumer("longtopic", strings.Repeat("t", 1<<20))}},
			"clients may not use"},
		{"long client id", remoting.HeartbeatData{ClientID: strings.Repeat("c", 2048), ProducerDataSet: producers[:1]}, "clientID of 1 to 1024 bytes"},
	} {
		r := heartbeat(c.hb)
		if r.Code == remoting.Success || !strings.Contains(r.Remark, c.remark) || len(r.Remark) > 512 {
			t.Errorf("%s: code %d %.300q, want a refusal mentioning %q", c.name, r.Code, r.Remark, c.remark)
		}
	}
	for _, group := range []string{"g0", "subs", "badtopic", "longtopic"} {
		if ids := env.Broker.View().ConsumerIDs(group); len(ids) != 0 {
			t.Errorf("refused group %s was registered: %v", group, ids)
		}
	}
	if n := len(env.Broker.Topics()); n != topicsBefore {
		t.Errorf("refused heartbeats created %d topics", n-topicsBefore)
	}
	r := heartbeat(remoting.HeartbeatData{ClientID: "c@1", ConsumerDataSet: []remoting.ConsumerData{
		consumer("ok", "Good", broker.RetryGroupTopicPrefix+"ok")}})
	if r.Code != remoting.Success || len(env.Broker.View().ConsumerIDs("ok")) != 1 {
		t.Fatalf("a group subscribing to its retry topic: %v", r)
	}
}

// TestConfiguredGroupsOnly turns autoCreateSubscriptionGroup off: a group
// without a subscription group config may not register consumers, pull,
// commit offsets or send messages back, until an operator configures it;
// groups from Options.Groups are configured at start with their fields.
func TestConfiguredGroupsOnly(t *testing.T) {
	env := brokertest.Start(t, func(c *server.Config) {
		c.Broker.DisableAutoCreateGroup = true
		c.Broker.Groups = []broker.GroupOptions{{Name: "configured", RetryMaxTimes: 3, RetryQueueNums: 2}, {Name: "nobcast", DisableConsumeBroadcast: true}}
	})
	createTopic(t, env, "Good", 1)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	sent := sendRaw(t, cl, env, nil, []byte("x"))
	if sent.Code != remoting.Success {
		t.Fatalf("send: %v", sent)
	}
	_, logOff, err := message.ParseOffsetMsgID(sent.Get("msgId"))
	if err != nil {
		t.Fatal(err)
	}
	heartbeat := func(group, model string) *remoting.Command {
		body, _ := json.Marshal(remoting.HeartbeatData{ClientID: "c@" + group, ConsumerDataSet: []remoting.ConsumerData{{
			GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: model,
			SubscriptionDataSet: []remoting.SubscriptionData{{Topic: "Good", SubString: "*"}}}}})
		return invoke(t, cl, env, remoting.HeartBeat, nil, body)
	}
	requests := func(group string) map[string]*remoting.Command {
		return map[string]*remoting.Command{
			"heartbeat": heartbeat(group, "CLUSTERING"),
			"pull": invoke(t, cl, env, remoting.PullMessage, map[string]string{"consumerGroup": group, "topic": "Good", "queueId": "0",
				"queueOffset": "0", "maxMsgNums": "32", "sysFlag": "5", "commitOffset": "1", "suspendTimeoutMillis": "0",
				"subscription": "*", "expressionType": "TAG"}, nil),
			"update offset": invoke(t, cl, env, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": group, "topic": "Good",
				"queueId": "0", "commitOffset": "1"}, nil),
			"send back": invoke(t, cl, env, remoting.ConsumerSendMsgBack, map[string]string{"group": group, "offset": strconv.FormatInt(logOff, 10),
				"delayLevel": "0", "originMsgId": "", "originTopic": "Good", "maxReconsumeTimes": "16"}, nil),
		}
	}
	for name, r := range requests("stranger") {
		if r.Code != remoting.SubscriptionGroupNotExist || !strings.Contains(r.Remark, "stranger has no subscription group config") {
			t.Errorf("%s by an unconfigured group: code %d %q, want SUBSCRIPTION_GROUP_NOT_EXIST", name, r.Code, r.Remark)
		}
	}
	if len(env.Broker.View().ConsumerIDs("stranger")) != 0 {
		t.Error("the unconfigured group was registered")
	}
	if _, ok := env.Store.ConsumerOffset("stranger", "Good", 0); ok {
		t.Error("the unconfigured group's offset was stored")
	}
	for _, topic := range []string{broker.RetryGroupTopicPrefix + "stranger", broker.DLQGroupTopicPrefix + "stranger"} {
		if _, ok := env.Broker.Topics()[topic]; ok {
			t.Errorf("%s was created", topic)
		}
	}
	// A producer group needs no config.
	heartbeatProducer(t, cl, env, "p@1", "anyproducer")

	for name, r := range requests("configured") {
		if r.Code != remoting.Success {
			t.Errorf("%s by a configured group: %v", name, r)
		}
	}
	if tc := env.Broker.Topics()[broker.RetryGroupTopicPrefix+"configured"]; tc.ReadQueueNums != 2 {
		t.Errorf("the configured group's retry topic: %+v, want 2 queues", tc)
	}
	var all struct {
		SubscriptionGroupTable map[string]broker.SubscriptionGroupConfig `json:"subscriptionGroupTable"`
	}
	r := invoke(t, cl, env, remoting.GetAllSubscriptionGroupConfig, nil, nil)
	if err := json.Unmarshal(r.Body, &all); err != nil {
		t.Fatal(err)
	}
	if gc := all.SubscriptionGroupTable["configured"]; gc.RetryMaxTimes != 3 || gc.RetryQueueNums != 2 || !gc.ConsumeBroadcastEnable {
		t.Errorf("the configured group: %+v", gc)
	}
	if r := heartbeat("nobcast", "BROADCASTING"); r.Code != remoting.SubscriptionGroupNotExist || !strings.Contains(r.Remark, "broadcasting") {
		t.Errorf("a broadcasting consumer of a group that disables it: code %d %q", r.Code, r.Remark)
	}
	if r := heartbeat("nobcast", "CLUSTERING"); r.Code != remoting.Success {
		t.Errorf("a clustering consumer of a group that disables broadcasting: %v", r)
	}

	// An operator configures the group; it may then consume.
	body, _ := json.Marshal(map[string]any{"groupName": "stranger", "retryQueueNums": 1, "retryMaxTimes": 16, "consumeEnable": true})
	if r := invoke(t, cl, env, remoting.UpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.Success {
		t.Fatalf("configure the group: %v", r)
	}
	for name, r := range requests("stranger") {
		if r.Code != remoting.Success {
			t.Errorf("%s once configured: %v", name, r)
		}
	}
}

// TestGroupOptionsChecked checks that every bad entry of Options.Groups
// is reported when the broker starts.
func TestGroupOptionsChecked(t *testing.T) {
	_, err := server.Start(server.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: brokertest.Logger(),
		Broker: broker.Options{Groups: []broker.GroupOptions{{Name: "a b"}, {Name: "ok"}, {Name: "many", RetryQueueNums: 5000}}}})
	if err == nil || !strings.Contains(err.Error(), "groups[0]") || !strings.Contains(err.Error(), "groups[2]") || strings.Contains(err.Error(), "groups[1]") {
		t.Fatalf("start with bad groups: %v", err)
	}
}
