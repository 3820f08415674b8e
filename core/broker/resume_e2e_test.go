package broker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// resumeGoal is how soon after a restarted broker accepts connections its
// consumers must receive again: the official client waits 3 s after a
// failed pull before the next, so this is one retry and some margin.
const resumeGoal = 5 * time.Second

// TestConsumersResumeAfterRestart restarts the broker under a TAG and an
// SQL92 push consumer and a broadcasting one: each receives again within
// resumeGoal, long before its next heartbeat, and none ever receives a
// message its subscription excludes.
func TestConsumersResumeAfterRestart(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Resume")
	createTopic(t, env, topic, 1) // one queue: the excluded message comes first

	type delivery struct {
		group, body string
	}
	got := make(chan delivery, 64)
	listen := func(group string, sel consumer.MessageSelector, opts ...consumer.Option) {
		c := env.PushConsumer(t, group, opts...)
		err := c.Subscribe(topic, sel, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				got <- delivery{group, string(m.Body)}
			}
			return consumer.ConsumeSuccess, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		env.StartConsumer(t, c, group, len(opts) == 0, topic)
	}
	tagGroup, sqlGroup, bcGroup := brokertest.Name("cg_tag"), brokertest.Name("cg_sql"), brokertest.Name("cg_bc")
	listen(tagGroup, consumer.MessageSelector{Type: consumer.TAG, Expression: "TagA"})
	listen(sqlGroup, consumer.MessageSelector{Type: consumer.SQL92, Expression: "a > 5"})
	listen(bcGroup, consumer.MessageSelector{Type: consumer.TAG, Expression: "TagA"}, consumer.WithConsumerModel(consumer.BroadCasting))

	send := func(body, tag, a string) {
		t.Helper()
		p := env.Producer(t)
		m := primitive.NewMessage(topic, []byte(body)).WithTag(tag)
		m.WithProperty("a", a)
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
		p.Shutdown()
	}
	expect := func(what string, timeout time.Duration, bodies ...string) {
		t.Helper()
		want := map[string]bool{}
		for _, b := range bodies {
			want[tagGroup+"/"+b], want[sqlGroup+"/"+b], want[bcGroup+"/"+b] = true, true, true
		}
		deadline := time.After(timeout)
		for len(want) > 0 {
			select {
			case d := <-got:
				if !want[d.group+"/"+d.body] {
					t.Fatalf("%s: group %s received %q, which it should not", what, d.group, d.body)
				}
				delete(want, d.group+"/"+d.body)
			case <-deadline:
				t.Fatalf("%s: still waiting after %v for %v", what, timeout, want)
			}
		}
	}
	send("excluded-before", "TagB", "1")
	send("before", "TagA", "9")
	expect("before the restart", 30*time.Second, "before")

	env = env.Restart(t)
	open := time.Now()
	send("excluded-after", "TagB", "1")
	send("after", "TagA", "9")
	expect("after the restart", resumeGoal, "after")
	t.Logf("all three consumers received %v after the broker accepted connections again", time.Since(open).Round(time.Millisecond))
}

// TestGroupSnapshotAcrossRestart checks what a restarted broker remembers
// of a consumer group: its subscription serves pulls that carry none until
// ClientExpiry passes with no heartbeat, its members are not remembered,
// and a group whose last member unregistered is not remembered at all.
func TestGroupSnapshotAcrossRestart(t *testing.T) {
	env := brokertest.Start(t, func(c *server.Config) { c.Broker.ClientExpiry = 2 * time.Second })
	topic := brokertest.Name("Snap")
	createTopic(t, env, topic, 1)
	kept, gone := brokertest.Name("cg_kept"), brokertest.Name("cg_gone")
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	heartbeat := func(cl *remoting.Client, group string) {
		t.Helper()
		body, _ := json.Marshal(remoting.HeartbeatData{ClientID: "c@" + group, ConsumerDataSet: []remoting.ConsumerData{{
			GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING",
			SubscriptionDataSet: []remoting.SubscriptionData{{Topic: topic, SubString: "a > 5", ExpressionType: "SQL92"}}}}})
		if r := invoke(t, cl, env, remoting.HeartBeat, nil, body); r.Code != remoting.Success {
			t.Fatalf("heartbeat: %v", r)
		}
	}
	heartbeat(cl, kept)
	heartbeat(cl, gone)
	if r := invoke(t, cl, env, remoting.UnregisterClient, map[string]string{"clientID": "c@" + gone, "consumerGroup": gone}, nil); r.Code != remoting.Success {
		t.Fatalf("unregister: %v", r)
	}
	for _, a := range []string{"1", "9"} {
		if r := sendRaw(t, cl, env, map[string]string{"topic": topic, "properties": string(message.EncodeProperties(map[string]string{"a": a}))}, []byte("a="+a)); r.Code != remoting.Success {
			t.Fatalf("send: %v", r)
		}
	}
	// The client stays connected: its connection closes with the broker,
	// which does not make the broker forget it.
	env = env.Restart(t)
	cl = remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	members := func(group string) *remoting.Command {
		return invoke(t, cl, env, remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": group}, nil)
	}
	pull := func(group string) *remoting.Command {
		return invoke(t, cl, env, remoting.PullMessage, map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0",
			"queueOffset": "0", "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0"}, nil)
	}
	// Nobody is a member until they heartbeat, as without the snapshot.
	if r := members(kept); r.Code == remoting.Success {
		t.Fatalf("consumer list of %s after the restart, before any heartbeat: %s", kept, r.Body)
	}
	r := pull(kept)
	if r.Code != remoting.Success {
		t.Fatalf("pull of %s after the restart, before any heartbeat: %v", kept, r)
	}
	recs, err := message.DecodeRecords(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(bodies(recs), ","); got != "a=9" {
		t.Fatalf("pull with the remembered SQL92 subscription returned %q, want only a=9", got)
	}
	if r := pull(gone); r.Code != remoting.SubscriptionNotExist {
		t.Fatalf("pull of %s, which unregistered before the restart: %v", gone, r)
	}
	if r := members(gone); r.Code == remoting.Success {
		t.Fatalf("consumer list of %s, which unregistered before the restart: %s", gone, r.Body)
	}
	brokertest.Eventually(t, 10*time.Second, "the remembered group to be forgotten", func() bool {
		return pull(kept).Code == remoting.SubscriptionNotExist
	})
}
