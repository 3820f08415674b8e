package broker_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store/storetest"
	"github.com/rmq-go/rmq/internal/brokertest"
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

	if err := a.DeleteTopic(ctx, admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(env.BrokerAddr),
		admin.WithNameSrvAddr([]string{env.NamesrvAddr})); err != nil {
		t.Fatal(err)
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
