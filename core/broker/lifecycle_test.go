package broker_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store/storetest"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

func newAdmin(t *testing.T, env *brokertest.Env) interface {
	CreateTopic(context.Context, ...admin.OptionCreate) error
	DeleteTopic(context.Context, ...admin.OptionDelete) error
} {
	t.Helper()
	a, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{env.NamesrvAddr})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// TestDeleteTopicStartsEmpty deletes a topic with messages and consumer
// offsets through the official client's admin API, creates it again and
// checks it starts empty, with no offsets, before and after a restart,
// while the consuming group's retry topic stays.
func TestDeleteTopicStartsEmpty(t *testing.T) {
	env := brokertest.Start(t)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	ctx := context.Background()
	a := newAdmin(t, env)
	const topic = "Reborn"
	create := func() {
		t.Helper()
		if err := a.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(env.BrokerAddr),
			admin.WithReadQueueNums(2), admin.WithWriteQueueNums(2)); err != nil {
			t.Fatal(err)
		}
	}
	create()
	for i := range 20 {
		r := sendRaw(t, cl, env, map[string]string{"topic": topic, "queueId": strconv.Itoa(i % 2)}, []byte("old"+strconv.Itoa(i)))
		if r.Code != remoting.Success {
			t.Fatalf("send: %v", r)
		}
	}
	heartbeatConsumer(t, cl, env, "lifecycle")
	for q := range 2 {
		r := invoke(t, cl, env, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "lifecycle", "topic": topic,
			"queueId": strconv.Itoa(q), "commitOffset": "7"}, nil)
		if r.Code != remoting.Success {
			t.Fatalf("commit offset: %v", r)
		}
	}

	// A long-polling pull parked at the end of queue 0.
	held := make(chan *remoting.Command, 1)
	go func() {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		r, err := cl.Invoke(pctx, env.BrokerAddr, remoting.NewRequest(remoting.PullMessage, map[string]string{"consumerGroup": "lifecycle",
			"topic": topic, "queueId": "0", "queueOffset": "10", "maxMsgNums": "32", "sysFlag": "6", "commitOffset": "0",
			"suspendTimeoutMillis": "20000", "subscription": "*", "expressionType": "TAG"}, nil))
		if err != nil {
			r = remoting.NewResponse(remoting.NewRequest(0, nil, nil), remoting.SystemError, err.Error())
		}
		held <- r
	}()
	brokertest.Eventually(t, 10*time.Second, "the pull to be held", func() bool { return env.Broker.HeldPulls() == 1 })

	if err := a.DeleteTopic(ctx, admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(env.BrokerAddr),
		admin.WithNameSrvAddr([]string{env.NamesrvAddr})); err != nil {
		t.Fatal(err)
	}
	if r := brokertest.Wait(t, held, 5*time.Second, "the held pull to be answered at the delete"); r.Code == remoting.Success {
		t.Errorf("the held pull on the deleted topic found messages: %v", r)
	}
	if _, ok := env.Broker.Topics()[topic]; ok {
		t.Fatal("the topic's config survived the delete")
	}
	if _, ok := env.Broker.Topics()[broker.RetryGroupTopicPrefix+"lifecycle"]; !ok {
		t.Fatal("deleting a topic deleted a consuming group's retry topic")
	}
	create()
	if r := sendRaw(t, cl, env, map[string]string{"topic": topic, "queueId": "0"}, []byte("new")); r.Code != remoting.Success {
		t.Fatalf("send after re-creating: %v", r)
	}
	check := func(env *brokertest.Env) {
		t.Helper()
		for q := int32(0); q < 2; q++ {
			want := []string{}
			if q == 0 {
				want = []string{"new"}
			}
			got := storetest.ReadQueue(t, env.Store, topic, q, 0)
			if len(got) != len(want) || (len(want) == 1 && got[0] != want[0]) {
				t.Fatalf("queue %d of the re-created topic holds %q, want %q", q, got, want)
			}
			r := invoke(t, cl, env, remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "lifecycle", "topic": topic,
				"queueId": strconv.Itoa(int(q))}, nil)
			if r.Code != remoting.Success || r.Get("offset") != "0" {
				t.Fatalf("queue %d: the group's offset is code %d offset %q, want 0 (nothing committed)", q, r.Code, r.Get("offset"))
			}
			if off, ok := env.Store.ConsumerOffset("lifecycle", topic, q); ok {
				t.Fatalf("queue %d: the old offset %d is still stored", q, off)
			}
		}
	}
	check(env)
	env = env.Restart(t)
	check(env)
}

// allGroups returns GET_ALL_SUBSCRIPTIONGROUP_CONFIG's table.
func allGroups(t *testing.T, cl *remoting.Client, env *brokertest.Env) map[string]broker.SubscriptionGroupConfig {
	t.Helper()
	var all struct {
		SubscriptionGroupTable map[string]broker.SubscriptionGroupConfig `json:"subscriptionGroupTable"`
	}
	r := invoke(t, cl, env, remoting.GetAllSubscriptionGroupConfig, nil, nil)
	if r.Code != remoting.Success {
		t.Fatalf("GET_ALL_SUBSCRIPTIONGROUP_CONFIG: %v", r)
	}
	if err := json.Unmarshal(r.Body, &all); err != nil {
		t.Fatal(err)
	}
	return all.SubscriptionGroupTable
}

// TestGroupConfigLifecycle: an official consumer's first heartbeat
// creates its group's config with the defaults, which
// GET_ALL_SUBSCRIPTIONGROUP_CONFIG then lists; DELETE_SUBSCRIPTIONGROUP
// removes it durably, with cleanOffset the group's offsets too, and
// leaves the group's retry topic.
func TestGroupConfigLifecycle(t *testing.T) {
	env := brokertest.Start(t)
	createTopic(t, env, "Good", 1)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	group := brokertest.Name("live")
	if _, ok := allGroups(t, cl, env)[group]; ok {
		t.Fatal("the group is listed before any heartbeat")
	}
	c := env.PushConsumer(t, group)
	if err := c.Subscribe("Good", consumer.MessageSelector{}, func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, c, group, true, "Good")
	gc, ok := allGroups(t, cl, env)[group]
	if !ok {
		t.Fatal("a live consumer group is missing from GET_ALL_SUBSCRIPTIONGROUP_CONFIG")
	}
	if !gc.AutoCreated || gc.RetryQueueNums != 1 || gc.RetryMaxTimes != broker.DefaultMaxReconsumeTimes || !gc.ConsumeEnable {
		t.Errorf("the auto-created config: %+v", gc)
	}
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if r := invoke(t, cl, env, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": group, "topic": "Good",
		"queueId": "0", "commitOffset": "0"}, nil); r.Code != remoting.Success {
		t.Fatalf("commit offset: %v", r)
	}

	// Without cleanOffset the offsets stay.
	heartbeatConsumer(t, cl, env, "keeper")
	if r := invoke(t, cl, env, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "keeper", "topic": "Good",
		"queueId": "0", "commitOffset": "0"}, nil); r.Code != remoting.Success {
		t.Fatalf("commit offset: %v", r)
	}
	if r := invoke(t, cl, env, remoting.DeleteSubscriptionGroup, map[string]string{"groupName": "keeper"}, nil); r.Code != remoting.Success {
		t.Fatalf("DELETE_SUBSCRIPTIONGROUP: %v", r)
	}
	if _, ok := env.Store.ConsumerOffset("keeper", "Good", 0); !ok {
		t.Error("DELETE_SUBSCRIPTIONGROUP without cleanOffset removed the group's offsets")
	}

	if r := invoke(t, cl, env, remoting.DeleteSubscriptionGroup, map[string]string{"groupName": group, "cleanOffset": "true"}, nil); r.Code != remoting.Success {
		t.Fatalf("DELETE_SUBSCRIPTIONGROUP: %v", r)
	}
	if r := invoke(t, cl, env, remoting.DeleteSubscriptionGroup, map[string]string{"groupName": "bad name"}, nil); r.Code == remoting.Success {
		t.Error("DELETE_SUBSCRIPTIONGROUP accepted an invalid group name")
	}
	check := func(env *brokertest.Env) {
		t.Helper()
		all := allGroups(t, cl, env)
		for _, g := range []string{group, "keeper"} {
			if _, ok := all[g]; ok {
				t.Errorf("group %s is listed after DELETE_SUBSCRIPTIONGROUP", g)
			}
		}
		if off, ok := env.Store.ConsumerOffset(group, "Good", 0); ok {
			t.Errorf("the group's offset %d survived cleanOffset", off)
		}
		if _, ok := env.Broker.Topics()[broker.RetryGroupTopicPrefix+group]; !ok {
			t.Error("DELETE_SUBSCRIPTIONGROUP deleted the group's retry topic")
		}
	}
	check(env)
	check(env.Restart(t))
}

// TestGroupConfigQuota: configs are created at a first heartbeat only
// below MaxGroups stored configs; the group is served all the same.
func TestGroupConfigQuota(t *testing.T) {
	env := brokertest.Start(t, func(c *server.Config) { c.Broker.MaxGroups = 3 })
	createTopic(t, env, "Good", 1)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	for _, g := range []string{"op1", "op2"} {
		if err := env.Broker.PutGroupConfig(broker.SubscriptionGroupConfig{GroupName: g, RetryQueueNums: 1, RetryMaxTimes: 3}); err != nil {
			t.Fatal(err)
		}
	}
	heartbeatConsumer(t, cl, env, "third")
	heartbeatConsumer(t, cl, env, "fourth")
	all := allGroups(t, cl, env)
	if _, ok := all["third"]; !ok {
		t.Error("the group below the quota got no config")
	}
	if _, ok := all["fourth"]; ok {
		t.Error("a config was created beyond MaxGroups")
	}
	if len(env.Broker.View().ConsumerIDs("fourth")) != 1 {
		t.Error("the group beyond the config quota was not registered")
	}
}

// TestRetryQueueNumsZero: a group configured with retryQueueNums 0 has no
// retries, as in RocketMQ: no retry topic is created for it, and a
// CONSUMER_SEND_MSG_BACK is answered with success and stores nothing
// (the failed message is dropped, not retried nor dead-lettered).
func TestRetryQueueNumsZero(t *testing.T) {
	env := brokertest.Start(t)
	createTopic(t, env, "Good", 1)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	body, _ := json.Marshal(map[string]any{"groupName": "noretry", "retryQueueNums": 0, "retryMaxTimes": 16, "consumeEnable": true})
	if r := invoke(t, cl, env, remoting.UpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.Success {
		t.Fatalf("retryQueueNums 0 refused: %v", r)
	}
	if gc := allGroups(t, cl, env)["noretry"]; gc.RetryQueueNums != 0 || gc.AutoCreated {
		t.Fatalf("the stored config: %+v", gc)
	}
	heartbeatConsumer(t, cl, env, "noretry")
	sent := sendRaw(t, cl, env, nil, []byte("fails"))
	if sent.Code != remoting.Success {
		t.Fatalf("send: %v", sent)
	}
	_, logOff, err := message.ParseOffsetMsgID(sent.Get("msgId"))
	if err != nil {
		t.Fatal(err)
	}
	_, end := env.Store.CommitLogOffsets()
	for _, level := range []string{"0", "-1"} {
		r := invoke(t, cl, env, remoting.ConsumerSendMsgBack, map[string]string{"group": "noretry", "offset": strconv.FormatInt(logOff, 10),
			"delayLevel": level, "originMsgId": "", "originTopic": "Good", "maxReconsumeTimes": "16"}, nil)
		if r.Code != remoting.Success {
			t.Fatalf("send back at level %s: %v", level, r)
		}
	}
	if _, after := env.Store.CommitLogOffsets(); after != end {
		t.Errorf("send-back of a group without retries stored %d bytes", after-end)
	}
	for _, topic := range []string{broker.RetryGroupTopicPrefix + "noretry", broker.DLQGroupTopicPrefix + "noretry"} {
		if _, ok := env.Broker.Topics()[topic]; ok {
			t.Errorf("%s was created for a group without retries", topic)
		}
	}
	r := sendRaw(t, cl, env, map[string]string{"topic": broker.RetryGroupTopicPrefix + "noretry", "reconsumeTimes": "1"}, []byte("x"))
	if r.Code != remoting.TopicNotExist {
		t.Errorf("a send into the retry topic of a group without retries: code %d %q, want TOPIC_NOT_EXIST", r.Code, r.Remark)
	}
	body, _ = json.Marshal(map[string]any{"groupName": "noretry", "retryQueueNums": -1})
	if r := invoke(t, cl, env, remoting.UpdateAndCreateSubscriptionGroup, nil, body); r.Code == remoting.Success {
		t.Error("retryQueueNums -1 accepted")
	}
}
