package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestTagFilter subscribes with "TagA || TagC" to 300 messages tagged A, B
// and C in turn: exactly the 200 A and C messages arrive.
func TestTagFilter(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Tags")
	createTopic(t, env, topic, 4)
	p := env.Producer(t)
	for i := 0; i < 300; i++ {
		tag := "Tag" + string(rune('A'+i%3))
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("%s-%d", tag, i))).WithTag(tag)
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	col := newCollector(200)
	group := brokertest.Name("cg")
	c := env.PushConsumer(t, group)
	c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "TagA || TagC"}, col.listener(bodyKey))
	env.StartConsumer(t, c, group, true, topic)
	brokertest.Wait(t, col.done, 30*time.Second, "the A and C messages")
	// Every queue is drained past the last message: nothing else will come.
	waitCaughtUp(t, env, group, topic, 4)
	col.mu.Lock()
	defer col.mu.Unlock()
	for body := range col.seen {
		if strings.HasPrefix(body, "TagB") {
			t.Errorf("received %s", body)
		}
	}
	if len(col.seen) != 200 || col.dup != 0 {
		t.Fatalf("received %d messages (%d duplicates), want 200", len(col.seen), col.dup)
	}
}

// waitCaughtUp waits until the group pulls every queue of topic from its
// end: everything before was delivered or filtered out.
func waitCaughtUp(t *testing.T, env *brokertest.Env, group, topic string, queues int) {
	t.Helper()
	brokertest.Eventually(t, 20*time.Second, "the consumer to reach the end of every queue", func() bool {
		for q := int32(0); q < int32(queues); q++ {
			off, ok := env.Broker.LastPullOffset(group, topic, q)
			if !ok || off < env.Store.MaxOffset(topic, q) {
				return false
			}
		}
		return true
	})
}

// TestSQL92Filter subscribes with an SQL92 expression over properties:
// of 100 messages exactly the 15 that match arrive.
func TestSQL92Filter(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Sql")
	createTopic(t, env, topic, 2)
	p := env.Producer(t)
	want := 0
	for i := 0; i < 100; i++ {
		color := "blue"
		if i%2 == 0 {
			color = "red"
		}
		if i > 50 && i <= 80 && color == "red" {
			want++
		}
		m := primitive.NewMessage(topic, []byte(strconv.Itoa(i)))
		m.WithProperty("a", strconv.Itoa(i))
		m.WithProperty("color", color)
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	if want != 15 {
		t.Fatalf("test data matches %d, want 15", want)
	}
	col := newCollector(want)
	group := brokertest.Name("cg")
	c := env.PushConsumer(t, group)
	c.Subscribe(topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: "a > 50 AND a <= 80 AND color = 'red'"}, col.listener(bodyKey))
	env.StartConsumer(t, c, group, true, topic)
	brokertest.Wait(t, col.done, 30*time.Second, "the matching messages")
	waitCaughtUp(t, env, group, topic, 2)
	col.mu.Lock()
	defer col.mu.Unlock()
	for body := range col.seen {
		i, _ := strconv.Atoi(body)
		if !(i > 50 && i <= 80 && i%2 == 0) {
			t.Errorf("received %d", i)
		}
	}
	if len(col.seen) != 15 {
		t.Fatalf("received %d, want 15", len(col.seen))
	}
}

// TestUnknownExpressionTypeRefused heartbeats with an expression type the
// broker does not know: the heartbeat and the pulls are refused with an
// error naming it, never treated as "match all".
func TestUnknownExpressionTypeRefused(t *testing.T) {
	env := brokertest.Start(t)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	topic := brokertest.Name("Geo")
	createTopic(t, env, topic, 1)
	hb := map[string]any{
		"clientID": "x@1",
		"consumerDataSet": []any{map[string]any{
			"groupName": "geo", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
			"subscriptionDataSet": []any{map[string]any{"topic": topic, "subString": "near(1,2)", "expressionType": "GEO", "subVersion": 1}},
		}},
	}
	body, _ := json.Marshal(hb)
	resp, err := cl.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(remoting.HeartBeat, nil, body))
	if err != nil || resp.Code != remoting.SubscriptionParseFailed || !strings.Contains(resp.Remark, "GEO") {
		t.Fatalf("heartbeat: %v %v", resp, err)
	}
	resp, err = cl.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(remoting.PullMessage, map[string]string{
		"consumerGroup": "geo", "topic": topic, "queueId": "0", "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "0",
	}, nil))
	if err != nil || resp.Code != remoting.SubscriptionParseFailed || !strings.Contains(resp.Remark, "GEO") {
		t.Fatalf("pull: %v %v", resp, err)
	}

	// One heartbeat names every group of a client process. The Java client
	// records the broker's version only from a heartbeat that succeeds, and
	// refuses its own SQL92 pulls to a broker whose version it does not
	// know: a heartbeat that registered another group cleanly succeeds,
	// its remark naming the problem of the bad one.
	hb["consumerDataSet"] = append(hb["consumerDataSet"].([]any), map[string]any{
		"groupName": "sql", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
		"subscriptionDataSet": []any{map[string]any{"topic": topic, "subString": "a > 1", "expressionType": "SQL92", "subVersion": 1}},
	})
	body, _ = json.Marshal(hb)
	resp, err = cl.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(remoting.HeartBeat, nil, body))
	if err != nil || resp.Code != remoting.Success || !strings.Contains(resp.Remark, "GEO") {
		t.Fatalf("heartbeat of a good group and a bad one: %v %v, want SUCCESS naming the bad one", resp, err)
	}
}
