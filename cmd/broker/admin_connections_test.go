package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/client"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestAdminConsumerProgress sends messages,
// consumes and commits part of them with a lite pull consumer (both
// this repository's client), and checks what "consumers progress", "consumers connections"
// and "producers connections" print: the lag is what was sent and not
// consumed.
func TestAdminConsumerProgress(t *testing.T) {
	env := brokertest.Start(t)
	admin := adminRunner(env)
	topic, group, pgroup := brokertest.Name("T"), brokertest.Name("cg"), brokertest.Name("pg")
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	// This repository's producer: its heartbeat interval can be short, so
	// the broker learns the producer group without a 30 s wait.
	pinstance := brokertest.Name("producer")
	p, err := client.NewProducer(client.ProducerOptions{Group: pgroup,
		Client: client.ClientOptions{NameServers: []string{env.NamesrvAddr}, InstanceName: pinstance, HeartbeatInterval: 50 * time.Millisecond, Logger: brokertest.Logger()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	send := func(n int) {
		for i := 0; i < n; i++ {
			if res, err := p.SendSync(context.Background(), client.NewMessage(topic, []byte("m"))); err != nil || res.Status != client.SendOK {
				t.Fatalf("send: %v %v", res, err)
			}
		}
	}
	const consumed, notConsumed = 20, 7
	send(consumed)

	instance := brokertest.Name("lite")
	c := startLitePull(t, env, group, topic, instance)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for got := 0; got < consumed; {
		msgs, err := c.Poll(ctx)
		if err != nil || ctx.Err() != nil {
			t.Fatalf("polled %d of %d: %v", got, consumed, err)
		}
		got += len(msgs)
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	send(notConsumed)

	var g groupProgress
	adminJSON(t, admin, &g, "consumers", "progress", "--group", group, "--topic", topic)
	if g.BrokerOffset != consumed+notConsumed || g.ConsumerOffset != consumed || g.Lag != notConsumed || len(g.Queues) != 2 {
		t.Fatalf("progress: %+v", g)
	}
	for _, q := range g.Queues {
		if q.Lag != q.BrokerOffset-q.ConsumerOffset || q.Topic != topic || (q.ConsumerOffset > 0) != (q.LastTimestamp > 0) {
			t.Fatalf("queue %+v", q)
		}
	}
	code, out, errs := admin("consumers", "progress", "--group", group)
	if code != 0 || !strings.Contains(out, "consumer offset 20, lag 7") || !strings.Contains(out, "LAST CONSUMED") {
		t.Fatalf("progress table: %d\n%s%s", code, out, errs)
	}
	var all []groupSummary
	adminJSON(t, admin, &all, "consumers", "progress")
	found := false
	for _, s := range all {
		if s.Group == group {
			found = true
			if s.Lag != notConsumed || s.Clients != 1 || s.MessageModel != "CLUSTERING" {
				t.Fatalf("summary of %s: %+v", group, s)
			}
		}
	}
	if !found {
		t.Fatalf("%s not among %+v", group, all)
	}

	var cc consumerConnections
	adminJSON(t, admin, &cc, "consumers", "connections", "--group", group)
	if len(cc.ConnectionSet) != 1 || !strings.HasSuffix(cc.ConnectionSet[0].ClientID, "@"+instance) || cc.SubscriptionTable[topic].Topic != topic {
		t.Fatalf("consumer connections: %+v", cc)
	}
	code, out, errs = admin("consumers", "connections", "--group", group)
	if code != 0 || !strings.Contains(out, instance) || !strings.Contains(out, topic) || !strings.Contains(out, "CLUSTERING") {
		t.Fatalf("consumer connections table: %d\n%s%s", code, out, errs)
	}
	if code, _, errs := admin("consumers", "connections", "--group", brokertest.Name("nobody")); code != 1 || !strings.Contains(errs, "CONSUMER_NOT_ONLINE (206)") {
		t.Fatalf("offline group: %d %s", code, errs)
	}

	brokertest.Eventually(t, 10*time.Second, "the producer's heartbeat", func() bool {
		code, _, _ := admin("producers", "connections", "--group", pgroup)
		return code == 0
	})
	var pc producerConnections
	adminJSON(t, admin, &pc, "producers", "connections", "--group", pgroup)
	if len(pc.ConnectionSet) != 1 || !strings.HasSuffix(pc.ConnectionSet[0].ClientID, "@"+pinstance) || pc.ConnectionSet[0].ClientAddr == "" {
		t.Fatalf("producer connections: %+v", pc)
	}
	if code, out, _ := admin("producers", "connections", "--group", pgroup); code != 0 || !strings.Contains(out, pc.ConnectionSet[0].ClientID) {
		t.Fatalf("producer connections table: %d\n%s", code, out)
	}
	// The consumer's heartbeat created the group's configuration.
	var groups []broker.SubscriptionGroupConfig
	adminJSON(t, admin, &groups, "groups", "list")
	if i := slices.IndexFunc(groups, func(gc broker.SubscriptionGroupConfig) bool { return gc.GroupName == group }); i < 0 || !groups[i].AutoCreated {
		t.Fatalf("groups list: %s not auto-created in %+v", group, groups)
	}
	// Deleting the group with its offsets puts its lag back to all. The
	// consumer goes first: a live one commits its offsets again at its
	// next round, as RocketMQ's clients do.
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := admin("groups", "delete", "--group", group, "--clean-offsets", "--keep-topics"); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("groups delete --clean-offsets: %d\n%s%s", code, out, errs)
	}
	if offs := env.Store.ConsumerOffsets(group); len(offs) != 0 {
		t.Fatalf("offsets after groups delete --clean-offsets: %+v", offs)
	}
	adminJSON(t, admin, &g, "consumers", "progress", "--group", group, "--topic", topic)
	if g.ConsumerOffset != 0 || g.Lag != consumed+notConsumed {
		t.Fatalf("progress after the offsets were deleted: %+v", g)
	}

	if code, _, errs := admin("producers", "connections", "--group", brokertest.Name("nobody")); code != 1 || !strings.Contains(errs, "SYSTEM_ERROR (1)") || !strings.Contains(errs, "not online") {
		t.Fatalf("offline producer group: %d %s", code, errs)
	}
	if code, _, errs := admin("consumers", "progress", "--topic", topic); code != 2 || !strings.Contains(errs, "--topic needs --group") {
		t.Fatalf("--topic alone: %d %s", code, errs)
	}
}

// startLitePull starts this repository's lite pull consumer of group on
// topic, committing only when told, and shuts it down when the test ends.
// The instance name, when given, is the second half of its client id.
func startLitePull(t *testing.T, env *brokertest.Env, group, topic string, instance ...string) *client.LitePullConsumer {
	t.Helper()
	name := brokertest.Name("lite")
	if len(instance) > 0 {
		name = instance[0]
	}
	c, err := client.NewLitePullConsumer(client.LitePullOptions{
		ConsumerOptions: client.ConsumerOptions{
			Client: client.ClientOptions{NameServers: []string{env.NamesrvAddr}, InstanceName: name, Logger: brokertest.Logger()},
			Group:  group, ConsumeFrom: client.ConsumeFromFirstOffset,
		},
		ManualCommit: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, client.Selector{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Shutdown(ctx)
	})
	return c
}
