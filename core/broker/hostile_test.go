package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store/storetest"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// invoke sends one request and fails the test if it gets no answer.
func invoke(t *testing.T, cl *remoting.Client, env *brokertest.Env, code int16, ext map[string]string, body []byte) *remoting.Command {
	t.Helper()
	resp, err := cl.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(code, ext, body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// sendRaw sends one message over SEND_MESSAGE with the given header
// fields over the defaults.
func sendRaw(t *testing.T, cl *remoting.Client, env *brokertest.Env, ext map[string]string, body []byte) *remoting.Command {
	t.Helper()
	base := map[string]string{"producerGroup": "p", "topic": "Good", "queueId": "0", "sysFlag": "0",
		"bornTimestamp": "1", "flag": "0", "properties": "", "reconsumeTimes": "0"}
	for k, v := range ext {
		base[k] = v
	}
	return invoke(t, cl, env, remoting.SendMessage, base, body)
}

// TestUpdateOffsetValidated checks that UPDATE_CONSUMER_OFFSET and a pull's
// commit offset store nothing for an invalid group, a topic that does not
// exist, a queue out of range or an offset beyond the queue, and that a
// valid commit is kept.
func TestUpdateOffsetValidated(t *testing.T) {
	env := brokertest.Start(t)
	createTopic(t, env, "Good", 2)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	for i := range 3 {
		if r := sendRaw(t, cl, env, map[string]string{"properties": string(message.EncodeProperties(map[string]string{"i": strconv.Itoa(i)}))}, []byte("x")); r.Code != remoting.Success {
			t.Fatalf("send: %v", r)
		}
	}
	update := func(group, topic, queue, off string) *remoting.Command {
		return invoke(t, cl, env, remoting.UpdateConsumerOffset, map[string]string{
			"consumerGroup": group, "topic": topic, "queueId": queue, "commitOffset": off}, nil)
	}
	cases := []struct {
		name, group, topic, queue, off string
		want                           int16
		remark                         string
	}{
		{"long group", strings.Repeat("g", 256), "Good", "0", "1", remoting.SubscriptionGroupNotExist, "255"},
		{"group with NUL", "a\x00b", "Good", "0", "1", remoting.SubscriptionGroupNotExist, "characters"},
		{"group with space", "a b", "Good", "0", "1", remoting.SubscriptionGroupNotExist, "characters"},
		{"no topic", "g", "Missing", "0", "1", remoting.TopicNotExist, "does not exist"},
		{"queue out of range", "g", "Good", "2", "1", remoting.SystemError, "queue 2"},
		{"negative queue", "g", "Good", "-1", "1", remoting.SystemError, "queue -1"},
		{"offset beyond max", "g", "Good", "0", "4", remoting.SystemError, "outside"},
		{"negative offset", "g", "Good", "0", "-1", remoting.SystemError, "outside"},
	}
	for _, c := range cases {
		r := update(c.group, c.topic, c.queue, c.off)
		if r.Code != c.want || !strings.Contains(r.Remark, c.remark) {
			t.Errorf("%s: code %d %q, want %d mentioning %q", c.name, r.Code, r.Remark, c.want, c.remark)
		}
		if len(r.Remark) > 512 {
			t.Errorf("%s: remark of %d bytes quotes the name whole", c.name, len(r.Remark))
		}
	}
	if got := env.Store.ConsumerOffsets(""); len(got) != 0 {
		t.Fatalf("refused commits stored offsets: %+v", got)
	}
	if r := update("g", "Good", "0", "3"); r.Code != remoting.Success {
		t.Fatalf("valid commit: %v", r)
	}
	// A pull's commit offset is checked the same way: beyond the max it
	// is not stored, but the pull is still served.
	r := invoke(t, cl, env, remoting.PullMessage, map[string]string{"consumerGroup": "g", "topic": "Good", "queueId": "0",
		"queueOffset": "0", "maxMsgNums": "32", "sysFlag": "5", "commitOffset": "99", "suspendTimeoutMillis": "0",
		"subscription": "*", "expressionType": "TAG"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("pull with a bad commit offset: %v", r)
	}
	if off, ok := env.Store.ConsumerOffset("g", "Good", 0); !ok || off != 3 {
		t.Fatalf("offset after a pull committing 99: %d %v, want 3", off, ok)
	}
}

// TestPullCommitOnlyAdvances checks that the offset a pull carries never
// moves a group's committed offset back, while UPDATE_CONSUMER_OFFSET
// may. A client sends its offset with each pull as it stood when the pull
// left; a pull answered after a later explicit commit (long-polling, or
// just another goroutine) would otherwise undo it, and a client that
// commits only what changed would leave the older offset there for good.
func TestPullCommitOnlyAdvances(t *testing.T) {
	env := brokertest.Start(t)
	createTopic(t, env, "Good", 1)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	for range 5 {
		if r := sendRaw(t, cl, env, nil, []byte("x")); r.Code != remoting.Success {
			t.Fatalf("send: %v", r)
		}
	}
	commit := func(off string) {
		t.Helper()
		if r := invoke(t, cl, env, remoting.UpdateConsumerOffset, map[string]string{
			"consumerGroup": "g", "topic": "Good", "queueId": "0", "commitOffset": off}, nil); r.Code != remoting.Success {
			t.Fatalf("commit %s: %v", off, r)
		}
	}
	pull := func(off string) {
		t.Helper()
		r := invoke(t, cl, env, remoting.PullMessage, map[string]string{"consumerGroup": "g", "topic": "Good", "queueId": "0",
			"queueOffset": "0", "maxMsgNums": "32", "sysFlag": "5", "commitOffset": off, "suspendTimeoutMillis": "0",
			"subscription": "*", "expressionType": "TAG"}, nil)
		if r.Code != remoting.Success {
			t.Fatalf("pull committing %s: %v", off, r)
		}
	}
	want := func(off int64) {
		t.Helper()
		if got, ok := env.Store.ConsumerOffset("g", "Good", 0); !ok || got != off {
			t.Fatalf("committed offset %d %v, want %d", got, ok, off)
		}
	}
	pull("2")
	want(2) // the first commit of a queue
	commit("4")
	pull("3")
	want(4)
	pull("5")
	want(5)
	commit("1")
	want(1)
}

// TestDLQResendRefusesReservedTopics dead-letters messages whose
// RETRY_TOPIC names the broker's own topics: resending them, to their
// origin or to the retry topic, is refused and writes nothing there.
func TestDLQResendRefusesReservedTopics(t *testing.T) {
	env := brokertest.Start(t, shortLevels)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	group := brokertest.Name("cg")
	heartbeatConsumer(t, cl, env, group)
	reserved := []string{broker.HalfTopic, broker.OpHalfTopic, broker.ScheduleTopic, broker.TimerTopic, broker.EventsTopic,
		broker.TxnCheckMaxTopic, broker.AutoCreateTopicKey, broker.DLQGroupTopicPrefix + "other"}
	for i, topic := range reserved {
		props := map[string]string{"UNIQ_KEY": "R" + strconv.Itoa(i), "RETRY_TOPIC": topic}
		if resp := rawSend(t, cl, env.BrokerAddr, broker.RetryGroupTopicPrefix+group, 17, 16, props, "x"); resp.Code != remoting.Success {
			t.Fatalf("send: %v", resp)
		}
	}
	before := env.Broker.Topics()
	for i, topic := range reserved {
		for _, target := range []string{outbox.ResendOrigin, outbox.ResendRetry} {
			_, err := env.Broker.Outbox().ResendDLQ(outbox.DLQSelector{Group: group, MsgID: "R" + strconv.Itoa(i)}, target)
			if !errors.Is(err, broker.ErrReservedTopic) {
				t.Errorf("resend of a dead letter from %s to %s: %v, want ErrReservedTopic", topic, target, err)
			}
		}
	}
	for _, topic := range reserved {
		if _, ok := before[topic]; !ok {
			if _, ok := env.Broker.Topics()[topic]; ok {
				t.Errorf("resends created %s", topic)
			}
		}
		if n := env.Store.MaxOffset(topic, 0); n != 0 && topic != broker.ScheduleTopic {
			t.Errorf("%s holds %d messages", topic, n)
		}
	}
}

// heartbeatConsumer registers cl's connection as a consumer of group,
// which makes the group known to the broker.
func heartbeatConsumer(t *testing.T, cl *remoting.Client, env *brokertest.Env, group string) {
	t.Helper()
	body, _ := json.Marshal(remoting.HeartbeatData{ClientID: "c@" + group, ConsumerDataSet: []remoting.ConsumerData{{
		GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING"}}})
	if r := invoke(t, cl, env, remoting.HeartBeat, nil, body); r.Code != remoting.Success {
		t.Fatalf("heartbeat: %v", r)
	}
}

// heartbeatProducer registers cl's connection as a producer of group.
func heartbeatProducer(t *testing.T, cl *remoting.Client, env *brokertest.Env, clientID, group string) {
	t.Helper()
	body, _ := json.Marshal(remoting.HeartbeatData{ClientID: clientID, ProducerDataSet: []remoting.ProducerData{{GroupName: group}}})
	if r := invoke(t, cl, env, remoting.HeartBeat, nil, body); r.Code != remoting.Success {
		t.Fatalf("heartbeat: %v", r)
	}
}

// TestTxnForeignConnectionRefused checks that another connection can
// neither read a half message by id nor end its transaction, until it
// registers as a producer of the group.
func TestTxnForeignConnectionRefused(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("TxnForeign")
	createTopic(t, env, topic, 1)
	owner := remoting.NewClient(remoting.ClientOptions{})
	defer owner.Close()
	other := remoting.NewClient(remoting.ClientOptions{})
	defer other.Close()
	const group = "pg"
	off := rawTxn(t, owner, env, topic, group, "secret", nil)

	view := invoke(t, other, env, remoting.ViewMessageByID, map[string]string{"offset": strconv.FormatInt(off, 10)}, nil)
	if view.Code != remoting.NoPermission || strings.Contains(string(view.Body), "secret") {
		t.Fatalf("viewing a half message: code %d %q, body %d bytes", view.Code, view.Remark, len(view.Body))
	}
	if r := rawEnd(t, other, env, group, off, 8); r.Code != remoting.NoPermission {
		t.Fatalf("a foreign connection's commit: %d %q", r.Code, r.Remark)
	}
	if n := env.Store.MaxOffset(topic, 0); n != 0 {
		t.Fatalf("a refused commit made %d messages visible", n)
	}
	// Nor can it copy the half message into its own retry topic.
	heartbeatConsumer(t, other, env, "thief")
	back := invoke(t, other, env, remoting.ConsumerSendMsgBack, map[string]string{"group": "thief", "offset": strconv.FormatInt(off, 10),
		"delayLevel": "0", "originMsgId": "", "originTopic": topic, "maxReconsumeTimes": "16"}, nil)
	if back.Code != remoting.NoPermission {
		t.Fatalf("sending a half message back: code %d %q", back.Code, back.Remark)
	}
	heartbeatProducer(t, other, env, "other@1", group)
	if r := rawEnd(t, other, env, group, off, 8); r.Code != remoting.Success {
		t.Fatalf("a registered producer's commit: %d %q", r.Code, r.Remark)
	}
	if n := env.Store.MaxOffset(topic, 0); n != 1 {
		t.Fatalf("%d messages visible after the commit, want 1", n)
	}
}

// TestBatchBounded sends batches over the count and byte limits: each is
// refused with MESSAGE_ILLEGAL before anything is stored, and a batch at
// the count limit is stored and answered with every id.
func TestBatchBounded(t *testing.T) {
	env := brokertest.Start(t)
	createTopic(t, env, "Good", 1)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	batch := func(n, size int) []byte {
		var b []byte
		body := make([]byte, size)
		for range n {
			b, _ = message.AppendBatchEntry(b, message.BatchEntry{Body: body})
		}
		return b
	}
	send := func(body []byte) *remoting.Command {
		return invoke(t, cl, env, remoting.SendBatchMessage, map[string]string{"a": "p", "b": "Good", "e": "0", "f": "0",
			"g": "1", "h": "0", "i": "", "j": "0"}, body)
	}
	for _, c := range []struct {
		name   string
		body   []byte
		remark string
	}{
		{"too many", batch(broker.DefaultMaxBatchMessages+1, 1), "per batch"},
		{"too many bytes", batch(3, 2<<20), "exceeds"},
	} {
		r := send(c.body)
		if r.Code != remoting.MessageIllegal || !strings.Contains(r.Remark, c.remark) {
			t.Errorf("%s: code %d %q, want MESSAGE_ILLEGAL mentioning %q", c.name, r.Code, r.Remark, c.remark)
		}
		if n := env.Store.MaxOffset("Good", 0); n != 0 {
			t.Fatalf("%s: %d messages stored", c.name, n)
		}
	}
	r := send(batch(broker.DefaultMaxBatchMessages, 1))
	if r.Code != remoting.Success || strings.Count(r.Get("msgId"), ",") != broker.DefaultMaxBatchMessages-1 {
		t.Fatalf("a batch at the limit: code %d %q", r.Code, r.Remark)
	}
}

// TestReservedAndRetryTopicRules checks the rules for sends into the
// broker's topics: direct sends into dead-letter, template and check-max
// topics are refused with NO_PERMISSION; a retry topic is created only for
// a known group, even with auto-creation on or off; and a batch into a
// retry topic past the retry limit goes to the dead-letter topic.
func TestReservedAndRetryTopicRules(t *testing.T) {
	for _, autoCreate := range []bool{true, false} {
		t.Run("autoCreate="+strconv.FormatBool(autoCreate), func(t *testing.T) {
			env := brokertest.Start(t, func(c *server.Config) { c.Broker.DisableAutoCreateTopic = !autoCreate })
			cl := remoting.NewClient(remoting.ClientOptions{})
			defer cl.Close()
			for _, topic := range []string{broker.DLQGroupTopicPrefix + "g", broker.AutoCreateTopicKey, broker.TxnCheckMaxTopic, broker.HalfTopic} {
				if r := sendRaw(t, cl, env, map[string]string{"topic": topic}, []byte("x")); r.Code != remoting.NoPermission {
					t.Errorf("send to %s: code %d %q, want NO_PERMISSION", topic, r.Code, r.Remark)
				}
			}
			before := len(env.Broker.Topics())
			for i := range 20 {
				topic := broker.RetryGroupTopicPrefix + "made_up_" + strconv.Itoa(i)
				if r := sendRaw(t, cl, env, map[string]string{"topic": topic}, []byte("x")); r.Code == remoting.Success {
					t.Fatalf("send to %s of an unknown group succeeded", topic)
				}
			}
			if after := len(env.Broker.Topics()); after != before {
				t.Fatalf("sends to unknown groups' retry topics created %d topics", after-before)
			}

			group := brokertest.Name("cg")
			heartbeatConsumer(t, cl, env, group)
			var batch []byte
			for i := range 3 {
				batch, _ = message.AppendBatchEntry(batch, message.BatchEntry{Body: []byte("b" + strconv.Itoa(i))})
			}
			r := invoke(t, cl, env, remoting.SendBatchMessage, map[string]string{"a": "p", "b": broker.RetryGroupTopicPrefix + group,
				"e": "0", "f": "0", "g": "1", "h": "0", "i": "", "j": "999"}, batch)
			if r.Code != remoting.Success {
				t.Fatalf("batch into the retry topic: %v", r)
			}
			if n := env.Store.MaxOffset(broker.RetryGroupTopicPrefix+group, 0); n != 0 {
				t.Fatalf("a batch with reconsume times 999 left %d messages in the retry topic", n)
			}
			if dead, _ := env.Broker.Outbox().ListDLQ(outbox.DLQSelector{Group: group}); len(dead) != 3 {
				t.Fatalf("%d dead letters, want the batch's 3", len(dead))
			}
		})
	}
}

// TestHeldPullsCappedPerConnection holds pulls on one connection up to
// MaxHeldPullsPerConn: the next pull that finds nothing is answered at
// once with PULL_NOT_FOUND and the queue's offsets, not held.
func TestHeldPullsCappedPerConnection(t *testing.T) {
	const limit = 5
	env := brokertest.Start(t, func(c *server.Config) { c.Broker.MaxHeldPullsPerConn = limit })
	createTopic(t, env, "Good", 1)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	pull := func(ctx context.Context) (*remoting.Command, error) {
		return cl.Invoke(ctx, env.BrokerAddr, remoting.NewRequest(remoting.PullMessage, map[string]string{
			"consumerGroup": "g", "topic": "Good", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
			"sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "20000", "subscription": "*", "expressionType": "TAG"}, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	answered := make(chan struct{}, limit)
	for range limit {
		go func() {
			if _, err := pull(ctx); err == nil {
				answered <- struct{}{}
			}
		}()
	}
	brokertest.Eventually(t, 5*time.Second, "the pulls to be held", func() bool { return env.Broker.HeldPulls() == limit })
	start := time.Now()
	tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
	defer tcancel()
	r, err := pull(tctx)
	if err != nil {
		t.Fatalf("the pull over the limit was not answered at once: %v", err)
	}
	if r.Code != remoting.PullNotFound || r.Get("nextBeginOffset") != "0" || r.Get("maxOffset") != "0" || time.Since(start) > 2*time.Second {
		t.Fatalf("the pull over the limit: %v after %v", r, time.Since(start))
	}
	select {
	case <-answered:
		t.Fatal("a held pull was answered early")
	default:
	}
	if n := env.Broker.HeldPulls(); n != limit {
		t.Fatalf("%d pulls held, want %d", n, limit)
	}
}

// TestGroupNamesValidated sends requests naming a 1 MiB group, and groups
// outside RocketMQ's character set: each is refused with a short remark,
// nothing is registered or created for them, and the log never holds the
// name whole.
func TestGroupNamesValidated(t *testing.T) {
	logs := &storetest.LogBuffer{}
	env := brokertest.Start(t, func(c *server.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	createTopic(t, env, "Good", 1)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	topicsBefore := len(env.Broker.Topics())
	for _, group := range []string{strings.Repeat("g", 1<<20), "a b", "a\x00b", "a/b", ""} {
		hb, _ := json.Marshal(remoting.HeartbeatData{ClientID: "c@1",
			ConsumerDataSet: []remoting.ConsumerData{{GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING",
				SubscriptionDataSet: []remoting.SubscriptionData{{Topic: "Good", SubString: "*"}}}},
			ProducerDataSet: []remoting.ProducerData{{GroupName: group}}})
		lock, _ := json.Marshal(map[string]any{"consumerGroup": group, "clientId": "c@1", "mqSet": []any{}})
		for name, r := range map[string]*remoting.Command{
			"heartbeat": invoke(t, cl, env, remoting.HeartBeat, nil, hb),
			"pull": invoke(t, cl, env, remoting.PullMessage, map[string]string{"consumerGroup": group, "topic": "Good", "queueId": "0",
				"queueOffset": "0", "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
				"subscription": "*", "expressionType": "TAG"}, nil),
			"query offset": invoke(t, cl, env, remoting.QueryConsumerOffset, map[string]string{"consumerGroup": group, "topic": "Good", "queueId": "0"}, nil),
			"lock":         invoke(t, cl, env, remoting.LockBatchMQ, nil, lock),
			"send back": invoke(t, cl, env, remoting.ConsumerSendMsgBack, map[string]string{"group": group, "offset": "0",
				"delayLevel": "0", "originMsgId": "", "originTopic": "Good", "maxReconsumeTimes": "16"}, nil),
			"end transaction": invoke(t, cl, env, remoting.EndTransaction, map[string]string{"producerGroup": group,
				"tranStateTableOffset": "0", "commitLogOffset": "0", "commitOrRollback": "8"}, nil),
		} {
			if r.Code == remoting.Success {
				t.Errorf("%s with group %.20q succeeded", name, group)
			}
			if len(r.Remark) > 512 {
				t.Errorf("%s: a remark of %d bytes", name, len(r.Remark))
			}
		}
		if group != "" && len(env.Broker.View().ConsumerIDs(group)) != 0 {
			t.Errorf("group %.20q was registered", group)
		}
	}
	if n := len(env.Broker.Topics()); n != topicsBefore {
		t.Errorf("invalid groups created %d topics", n-topicsBefore)
	}
	if n := len(logs.String()); n > 256<<10 {
		t.Errorf("the log grew by %d bytes: a name was logged whole", n)
	}
}
