package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

func TestParseDelayLevels(t *testing.T) {
	levels, err := broker.ParseDelayLevels(broker.DefaultDelayLevels)
	if err != nil || len(levels) != 18 || levels[0] != time.Second || levels[17] != 2*time.Hour {
		t.Fatalf("default levels: %v, %v", levels, err)
	}
	if got := broker.FormatDelayLevels(levels); got != broker.DefaultDelayLevels {
		t.Fatalf("format = %q", got)
	}
	if l, err := broker.ParseDelayLevels(" 1s  2d "); err != nil || l[1] != 48*time.Hour {
		t.Fatalf("days: %v %v", l, err)
	}
	for _, bad := range []string{"", "1s 5x", "1s -5s", "s", "1.5s", "1s 0m"} {
		_, err := broker.ParseDelayLevels(bad)
		if err == nil {
			t.Errorf("ParseDelayLevels(%q) accepted", bad)
			continue
		}
		if tok := strings.Fields(bad); len(tok) > 1 && !strings.Contains(err.Error(), tok[len(tok)-1]) {
			t.Errorf("error %q does not name the bad token", err)
		}
	}
}

// rawSend sends one SEND_MESSAGE as a client's retry fallback would.
func rawSend(t *testing.T, cl *remoting.Client, addr, topic string, reconsume, max int, props map[string]string, body string) *remoting.Command {
	t.Helper()
	req := remoting.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "CLIENT_INNER_PRODUCER", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
		"properties": string(message.EncodeProperties(props)), "reconsumeTimes": strconv.Itoa(reconsume),
		"unitMode": "false", "maxReconsumeTimes": strconv.Itoa(max), "batch": "false",
	}, []byte(body))
	resp, err := cl.Invoke(context.Background(), addr, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestRetryFallbackSend checks the rules for a retry the client sends as
// an ordinary message: within the limit it waits in the schedule, past it
// it goes to the dead-letter topic, and the outbox records both.
func TestRetryFallbackSend(t *testing.T) {
	env := brokertest.Start(t, shortLevels, func(c *server.Config) { c.Broker.Outbox = true })
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	group := brokertest.Name("cg")
	heartbeatConsumer(t, cl, env, group)
	props := func(id string) map[string]string {
		return map[string]string{"UNIQ_KEY": id, "RETRY_TOPIC": "Orders", "DELAY": "3", "ORIGIN_MESSAGE_ID": id}
	}
	if resp := rawSend(t, cl, env.BrokerAddr, broker.RetryGroupTopicPrefix+group, 2, 2, props("A"), "within"); resp.Code != remoting.Success {
		t.Fatalf("send within the limit: %v", resp)
	}
	if resp := rawSend(t, cl, env.BrokerAddr, broker.RetryGroupTopicPrefix+group, 3, 2, props("B"), "past"); resp.Code != remoting.Success {
		t.Fatalf("send past the limit: %v", resp)
	}
	if n := env.Store.MaxOffset(broker.ScheduleTopic, 2); n != 1 {
		t.Fatalf("schedule level 3 holds %d messages, want 1", n)
	}
	dead, err := env.Broker.Outbox().ListDLQ(outbox.DLQSelector{Group: group})
	if err != nil || len(dead) != 1 || dead[0].MsgID != "B" || dead[0].Topic != "Orders" {
		t.Fatalf("dead letters %+v, %v", dead, err)
	}
	events, err := env.Broker.Outbox().ReadEvents(0, 10, nil)
	if err != nil || len(events) != 2 {
		t.Fatalf("events %+v, %v", events, err)
	}
	if e := events[0]; e.Kind != outbox.KindRetry || e.MsgID != "A" || e.Group != group || e.Topic != "Orders" || e.DelayLevel != 3 || string(e.Body) != "within" || e.NextAttemptAt.IsZero() {
		t.Fatalf("retry event %+v", e)
	}
	if e := events[1]; e.Kind != outbox.KindDLQ || e.MsgID != "B" || string(e.Body) != "past" || e.TargetTopic != broker.DLQGroupTopicPrefix+group {
		t.Fatalf("dlq event %+v", e)
	}
	// The reason counts what ReconsumeTimes counts.
	if e := events[1]; e.ReconsumeTimes != 3 || e.Reason != "failed 3 times (the first delivery and 2 retries); the limit is 2 retries" {
		t.Fatalf("dlq event: reconsume times %d, reason %q", e.ReconsumeTimes, e.Reason)
	}
}

// TestOrderlyRetrySendGoesToDLQ: a Java orderly consumer (4.x to 5.1.0)
// gives up a message by sending it to its group's retry topic itself,
// with reconsumeTimes at the limit, not past it; RocketMQ's broker takes a
// send to the retry topic of a group holding queue locks (orderly) as a
// dead letter, and so does this one. Without the lock the same send is a
// retry, as a concurrent consumer's fallback is.
func TestOrderlyRetrySendGoesToDLQ(t *testing.T) {
	env := brokertest.Start(t, shortLevels, func(c *server.Config) { c.Broker.Outbox = true })
	group := brokertest.Name("orderly")
	createTopic(t, env, "Orders", 2)
	lc := newLockClient(t, env, group, "orderly-client")
	lc.heartbeat("Orders")
	props := func(id string) map[string]string {
		return map[string]string{"UNIQ_KEY": id, "RETRY_TOPIC": "Orders", "DELAY": "5", "ORIGIN_MESSAGE_ID": id}
	}
	if resp := rawSend(t, lc.cl, env.BrokerAddr, broker.RetryGroupTopicPrefix+group, 2, 2, props("unlocked"), "retry"); resp.Code != remoting.Success {
		t.Fatalf("send without a lock: %v", resp)
	}
	if got := lc.lock("Orders", 0, 1); len(got) != 2 {
		t.Fatalf("locked %v", got)
	}
	if resp := rawSend(t, lc.cl, env.BrokerAddr, broker.RetryGroupTopicPrefix+group, 2, 2, props("locked"), "give up"); resp.Code != remoting.Success {
		t.Fatalf("send with a lock: %v", resp)
	}
	dead, err := env.Broker.Outbox().ListDLQ(outbox.DLQSelector{Group: group})
	if err != nil || len(dead) != 1 || dead[0].MsgID != "locked" {
		t.Fatalf("dead letters %+v, %v; want the orderly group's message alone", dead, err)
	}
}

// TestSubscriptionGroupConfig sets a group's retry limit and queue count
// with UPDATE_AND_CREATE_SUBSCRIPTIONGROUP.
func TestSubscriptionGroupConfig(t *testing.T) {
	env := brokertest.Start(t, shortLevels)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	group := brokertest.Name("cg")
	body, _ := json.Marshal(map[string]any{"groupName": group, "consumeEnable": true, "retryQueueNums": 3, "retryMaxTimes": 1})
	resp, err := cl.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(remoting.UpdateAndCreateSubscriptionGroup, nil, body))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("update group: %v %v", resp, err)
	}
	// The client allows 5 retries; the group's config allows 1.
	if resp := rawSend(t, cl, env.BrokerAddr, broker.RetryGroupTopicPrefix+group, 2, 5, map[string]string{"UNIQ_KEY": "X", "DELAY": "3"}, "x"); resp.Code != remoting.Success {
		t.Fatalf("send: %v", resp)
	}
	if dead, _ := env.Broker.Outbox().ListDLQ(outbox.DLQSelector{Group: group}); len(dead) != 1 {
		t.Fatalf("dead letters %+v, want the message past the group's limit", dead)
	}
	if tc := env.Broker.Topics()[broker.RetryGroupTopicPrefix+group]; tc.WriteQueueNums != 3 {
		t.Fatalf("retry topic %+v, want 3 queues", tc)
	}
	resp, _ = cl.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"g","retryQueueNums":-1}`)))
	if resp.Code == remoting.Success {
		t.Fatal("a group with -1 retry queues was accepted")
	}
}

// TestDLQResend resends dead letters to their original topic and to the
// group's retry topic, each as a new message.
func TestDLQResend(t *testing.T) {
	env := brokertest.Start(t, shortLevels)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	group := brokertest.Name("cg")
	heartbeatConsumer(t, cl, env, group)
	createTopic(t, env, "Orders", 2)
	for i, id := range []string{"D1", "D2", "D3"} {
		props := map[string]string{"UNIQ_KEY": id, "RETRY_TOPIC": "Orders", "TAGS": "t" + strconv.Itoa(i)}
		if resp := rawSend(t, cl, env.BrokerAddr, broker.RetryGroupTopicPrefix+group, 17, 16, props, "body-"+id); resp.Code != remoting.Success {
			t.Fatalf("send: %v", resp)
		}
	}
	ctx := context.Background()
	res, err := env.Broker.Admin().Run(ctx, "dlq.list", json.RawMessage(`{"group":"`+group+`","msgId":"D2"}`))
	if list, _ := res.([]outbox.DeadLetter); err != nil || len(list) != 1 || list[0].Tags != "t1" {
		t.Fatalf("dlq.list: %+v, %v", res, err)
	}
	res, err = env.Broker.Admin().Run(ctx, "dlq.resend", json.RawMessage(`{"group":"`+group+`","msgId":"D2","target":"origin"}`))
	resent, _ := res.([]outbox.Resent)
	if err != nil || len(resent) != 1 || resent[0].Topic != "Orders" || resent[0].NewMsgID == "D2" || resent[0].OldMsgID != "D2" {
		t.Fatalf("resend to origin: %+v, %v", res, err)
	}
	// The resent message is a new message in Orders with the body intact.
	var found bool
	for q := int32(0); q < 2; q++ {
		if env.Store.MaxOffset("Orders", q) > 0 {
			found = true
		}
	}
	if !found {
		t.Fatal("nothing arrived in Orders")
	}
	// All of them to the retry topic.
	resent, err = env.Broker.Outbox().ResendDLQ(outbox.DLQSelector{Group: group}, outbox.ResendRetry)
	if err != nil || len(resent) != 3 || resent[0].Topic != broker.RetryGroupTopicPrefix+group {
		t.Fatalf("resend all to retry: %+v, %v", resent, err)
	}
	// The dead letters stay.
	if list, _ := env.Broker.Outbox().ListDLQ(outbox.DLQSelector{Group: group}); len(list) != 3 {
		t.Fatalf("dead letters after resends: %d", len(list))
	}
	if _, err := env.Broker.Outbox().ResendDLQ(outbox.DLQSelector{Group: group, MsgID: "nope"}, outbox.ResendOrigin); err == nil {
		t.Fatal("resending an unknown id succeeded")
	}
	if _, err := env.Broker.Outbox().ResendDLQ(outbox.DLQSelector{Group: group}, "elsewhere"); err == nil {
		t.Fatal("an unknown target was accepted")
	}
}

// TestOutboxSizeBound fills the outbox past its size bound: the oldest
// events are dropped, the newest kept.
func TestOutboxSizeBound(t *testing.T) {
	env := brokertest.Start(t, shortLevels, func(c *server.Config) {
		c.Broker.Outbox = true
		c.Broker.OutboxMaxBytes = 20 << 10
	})
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	group := brokertest.Name("cg")
	heartbeatConsumer(t, cl, env, group)
	for i := 0; i < 300; i++ {
		if resp := rawSend(t, cl, env.BrokerAddr, broker.RetryGroupTopicPrefix+group, 17, 16, map[string]string{"UNIQ_KEY": strconv.Itoa(i)}, "x"); resp.Code != remoting.Success {
			t.Fatalf("send: %v", resp)
		}
	}
	env.Broker.TrimOutboxNow()
	minOff, maxOff := env.Broker.Outbox().EventOffsets()
	if maxOff != 300 || minOff == 0 || maxOff-minOff > 200 {
		t.Fatalf("outbox spans [%d, %d) after trimming to 20 KiB", minOff, maxOff)
	}
	events, err := env.Broker.Outbox().ReadEvents(minOff, 1000, nil)
	if err != nil || int64(len(events)) != maxOff-minOff || events[len(events)-1].MsgID != "299" {
		t.Fatalf("read %d events, %v", len(events), err)
	}
}

// TestTimerDelayProperties sends with the relative timer properties: the
// message waits in the timer topic and arrives in its own after the delay;
// a delay past the maximum is refused.
func TestTimerDelayProperties(t *testing.T) {
	env := brokertest.Start(t)
	createTopic(t, env, "Later", 1)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	sent := time.Now()
	if resp := rawSend(t, cl, env.BrokerAddr, "Later", 0, 0, map[string]string{"UNIQ_KEY": "ms", "TIMER_DELAY_MS": "1200"}, "ms"); resp.Code != remoting.Success {
		t.Fatalf("send: %v", resp)
	}
	if resp := rawSend(t, cl, env.BrokerAddr, "Later", 0, 0, map[string]string{"UNIQ_KEY": "sec", "TIMER_DELAY_SEC": "1"}, "sec"); resp.Code != remoting.Success {
		t.Fatalf("send: %v", resp)
	}
	if n := env.Store.MaxOffset("Later", 0); n != 0 {
		t.Fatalf("%d messages visible before their time", n)
	}
	brokertest.Eventually(t, 10*time.Second, "the timed messages", func() bool { return env.Store.MaxOffset("Later", 0) == 2 })
	if d := time.Since(sent); d < time.Second {
		t.Fatalf("delivered after %v, before the 1 s delay", d)
	}
	resp := rawSend(t, cl, env.BrokerAddr, "Later", 0, 0, map[string]string{"UNIQ_KEY": "far", "TIMER_DELAY_SEC": "999999"}, "far")
	if resp.Code != remoting.MessageIllegal || !strings.Contains(resp.Remark, "TIMER_DELAY_SEC") {
		t.Fatalf("a delay past the maximum: %v", resp)
	}
	resp = rawSend(t, cl, env.BrokerAddr, "Later", 0, 0, map[string]string{"UNIQ_KEY": "bad", "TIMER_DELAY_MS": "soon"}, "bad")
	if resp.Code != remoting.MessageIllegal {
		t.Fatalf("a malformed delay: %v", resp)
	}
}

// TestListDLQWithoutDeadLetters: a group that never had a dead letter has
// none to list (an empty list, as for a selector that matches nothing),
// while a resend of its dead letters still finds none to send.
func TestListDLQWithoutDeadLetters(t *testing.T) {
	env := brokertest.Start(t)
	group := brokertest.Name("cg")
	dead, err := env.Broker.Outbox().ListDLQ(outbox.DLQSelector{Group: group})
	if err != nil || len(dead) != 0 {
		t.Fatalf("dead letters of a group without any: %+v, %v", dead, err)
	}
	if _, err := env.Broker.Outbox().ResendDLQ(outbox.DLQSelector{Group: group}, outbox.ResendOrigin); !errors.Is(err, outbox.ErrNoDeadLetter) {
		t.Fatalf("resend of a group without dead letters: %v, want ErrNoDeadLetter", err)
	}
}
