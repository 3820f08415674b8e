package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// lockClient is a raw protocol client for the lock tests.
type lockClient struct {
	t      *testing.T
	cl     *remoting.Client
	addr   string
	id     string
	group  string
	notify chan struct{}
}

func newLockClient(t *testing.T, env *brokertest.Env, group, id string) *lockClient {
	lc := &lockClient{t: t, addr: env.BrokerAddr, id: id, group: group, notify: make(chan struct{}, 16)}
	lc.cl = remoting.NewClient(remoting.ClientOptions{OnRequest: func(c *remoting.Conn, req *remoting.Command) *remoting.Command {
		if req.Code == remoting.NotifyConsumerIdsChanged {
			lc.notify <- struct{}{}
		}
		return nil
	}})
	t.Cleanup(func() { lc.cl.Close() })
	return lc
}

func (lc *lockClient) invoke(req *remoting.Command) *remoting.Command {
	lc.t.Helper()
	resp, err := lc.cl.Invoke(context.Background(), lc.addr, req)
	if err != nil {
		lc.t.Fatal(err)
	}
	return resp
}

func (lc *lockClient) heartbeat(topic string) {
	lc.t.Helper()
	body := fmt.Sprintf(`{"clientID":%q,"consumerDataSet":[{"groupName":%q,"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","subscriptionDataSet":[{"topic":%q,"subString":"*"}]}]}`,
		lc.id, lc.group, topic)
	if resp := lc.invoke(remoting.NewRequest(remoting.HeartBeat, nil, []byte(body))); resp.Code != remoting.Success {
		lc.t.Fatalf("heartbeat: %d %s", resp.Code, resp.Remark)
	}
}

func (lc *lockClient) body(topic string, queues ...int32) []byte {
	b := struct {
		Group string         `json:"consumerGroup"`
		ID    string         `json:"clientId"`
		MQs   []broker.Queue `json:"mqSet"`
	}{lc.group, lc.id, nil}
	for _, q := range queues {
		b.MQs = append(b.MQs, broker.Queue{Topic: topic, BrokerName: broker.DefaultBrokerName, QueueID: q})
	}
	out, _ := json.Marshal(b)
	return out
}

// lock asks for queues and returns those granted.
func (lc *lockClient) lock(topic string, queues ...int32) []int32 {
	lc.t.Helper()
	resp := lc.invoke(remoting.NewRequest(remoting.LockBatchMQ, nil, lc.body(topic, queues...)))
	var got struct {
		MQs []broker.Queue `json:"lockOKMQSet"`
	}
	if err := json.Unmarshal(resp.Body, &got); err != nil {
		lc.t.Fatalf("lock reply %q: %v", resp.Body, err)
	}
	out := []int32{}
	for _, q := range got.MQs {
		if q.Topic != topic || q.BrokerName != broker.DefaultBrokerName {
			lc.t.Errorf("lock reply names %+v", q)
		}
		out = append(out, q.QueueID)
	}
	return out
}

func (lc *lockClient) unlock(topic string, queues ...int32) {
	lc.t.Helper()
	if resp := lc.invoke(remoting.NewRequest(remoting.UnlockBatchMQ, nil, lc.body(topic, queues...))); resp.Code != remoting.Success {
		lc.t.Fatalf("unlock: %d %s", resp.Code, resp.Remark)
	}
}

func (lc *lockClient) pull(topic string, q int32) int16 {
	lc.t.Helper()
	return lc.invoke(remoting.NewRequest(remoting.PullMessage, map[string]string{
		"consumerGroup": lc.group, "topic": topic, "queueId": strconv.Itoa(int(q)), "queueOffset": "0",
		"maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0",
	}, nil)).Code
}

func equalQueues(got []int32, want ...int32) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// TestQueueLocks drives LOCK_BATCH_MQ and UNLOCK_BATCH_MQ directly: a queue
// is held by one client at a time, the reply lists exactly the requested
// queues the client holds, a lock passes on when it expires, is unlocked
// or its connection closes, a refused client is told to rebalance when
// the queue frees up, and pulls of a queue held by another client back
// off with SYSTEM_BUSY.
func TestQueueLocks(t *testing.T) {
	var skew atomic.Int64
	env := brokertest.Start(t, func(c *server.Config) {
		c.Broker.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	topic := brokertest.Name("Locked")
	createTopic(t, env, topic, 2)
	group := brokertest.Name("orderly")
	a := newLockClient(t, env, group, "client-a")
	b := newLockClient(t, env, group, "client-b")
	a.heartbeat(topic)
	b.heartbeat(topic)
	drain := func(lc *lockClient) {
		for len(lc.notify) > 0 {
			<-lc.notify
		}
	}

	if got := a.lock(topic, 0, 1); !equalQueues(got, 0, 1) {
		t.Fatalf("a locked %v, want [0 1]", got)
	}
	if got := b.lock(topic, 0); !equalQueues(got) {
		t.Fatalf("b locked %v of a's queue", got)
	}
	if got := a.lock(topic, 1); !equalQueues(got, 1) {
		t.Fatalf("renewing one queue answered %v, want just [1]", got)
	}
	if code := b.pull(topic, 0); code != remoting.SystemBusy {
		t.Fatalf("b's pull of a's queue answered %d, want SYSTEM_BUSY", code)
	}
	if code := a.pull(topic, 0); code != remoting.PullNotFound {
		t.Fatalf("a's pull of its own queue answered %d, want PULL_NOT_FOUND", code)
	}

	// b waits for queue 0; a's unlock frees it and tells b.
	drain(b)
	a.unlock(topic, 0)
	brokertest.Wait(t, b.notify, 10*time.Second, "b to be told queue 0 is free")
	if got := b.lock(topic, 0); !equalQueues(got, 0) {
		t.Fatalf("b locked %v after a's unlock, want [0]", got)
	}

	// a's lock on queue 1 expires once a stops renewing it.
	if got := b.lock(topic, 1); !equalQueues(got) {
		t.Fatalf("b took a's live lock: %v", got)
	}
	skew.Store(int64(broker.DefaultQueueLockExpiry + time.Second))
	if got := b.lock(topic, 0, 1); !equalQueues(got, 0, 1) {
		t.Fatalf("b locked %v after a's lock expired, want [0 1]", got)
	}
	if code := a.pull(topic, 1); code != remoting.SystemBusy {
		t.Fatalf("a's pull after the handover answered %d, want SYSTEM_BUSY", code)
	}
	a.heartbeat(topic) // a stays a member while the clock is skewed
	b.heartbeat(topic)

	// Closing b's connection releases its locks at once and tells a,
	// which waits for queue 0.
	drain(a)
	if got := a.lock(topic, 0); !equalQueues(got) {
		t.Fatalf("a took b's lock: %v", got)
	}
	b.cl.Close()
	brokertest.Wait(t, a.notify, 10*time.Second, "a to be told b's queues are free")
	if got := a.lock(topic, 0, 1); !equalQueues(got, 0, 1) {
		t.Fatalf("a locked %v after b's connection closed, want [0 1]", got)
	}
	if locks := env.Broker.QueueLocks(group); len(locks) != 2 {
		t.Fatalf("lock table %v, want a's two queues", locks)
	}
}

// TestQueueLockExpiryReleasesForWaiters lets a lock expire with the real
// clock: the broker notices, drops it and tells the waiting client.
func TestQueueLockExpiryReleasesForWaiters(t *testing.T) {
	env := brokertest.Start(t, func(c *server.Config) { c.Broker.QueueLockExpiry = 400 * time.Millisecond })
	topic := brokertest.Name("Locked")
	createTopic(t, env, topic, 1)
	group := brokertest.Name("orderly")
	a := newLockClient(t, env, group, "client-a")
	b := newLockClient(t, env, group, "client-b")
	a.heartbeat(topic)
	b.heartbeat(topic)
	start := time.Now()
	if got := a.lock(topic, 0); !equalQueues(got, 0) {
		t.Fatalf("a locked %v", got)
	}
	if got := b.lock(topic, 0); !equalQueues(got) {
		t.Fatalf("b locked %v of a's queue", got)
	}
	brokertest.Wait(t, b.notify, 10*time.Second, "b to be told a's lock expired")
	if waited := time.Since(start); waited < 400*time.Millisecond {
		t.Fatalf("b was told after %v, before the lock could expire", waited)
	}
	if got := b.lock(topic, 0); !equalQueues(got, 0) {
		t.Fatalf("b locked %v after the expiry", got)
	}
}

// TestQueueLockReleasedWithHeartbeat drops the locks of a client whose
// heartbeat expired, long before the locks themselves would expire.
func TestQueueLockReleasedWithHeartbeat(t *testing.T) {
	env := brokertest.Start(t, func(c *server.Config) { c.Broker.ClientExpiry = 300 * time.Millisecond })
	topic := brokertest.Name("Locked")
	createTopic(t, env, topic, 1)
	group := brokertest.Name("orderly")
	a := newLockClient(t, env, group, "client-a")
	b := newLockClient(t, env, group, "client-b")
	a.heartbeat(topic)
	b.heartbeat(topic)
	if got := a.lock(topic, 0); !equalQueues(got, 0) {
		t.Fatalf("a locked %v", got)
	}
	if got := b.lock(topic, 0); !equalQueues(got) {
		t.Fatalf("b locked %v of a's queue", got)
	}
	brokertest.Eventually(t, 10*time.Second, "a's lock to go with its heartbeat", func() bool {
		return equalQueues(b.lock(topic, 0), 0)
	})
	if d := broker.DefaultQueueLockExpiry; d < 10*time.Second {
		t.Fatalf("the lock expiry %v is too short for this test to tell", d)
	}
}

// TestVIPChannel: the broker serves its requests on the VIP channel too,
// where a Java client with vipChannelEnabled (the default up to 4.4.0)
// sends messages, offsets and queue locks, while it heartbeats and pulls
// on the plain port: such a client's sends succeed, and the queues it
// locks over the VIP channel are its own to pull on the plain one; another
// client's pulls of them still back off.
func TestVIPChannel(t *testing.T) {
	env := brokertest.Start(t, func(c *server.Config) { c.VIPListen = "127.0.0.1:0" })
	if env.VIPAddr == "" || env.VIPAddr == env.BrokerAddr {
		t.Fatalf("VIP channel at %q beside %q", env.VIPAddr, env.BrokerAddr)
	}
	topic, group := brokertest.Name("Vip"), brokertest.Name("vip")
	createTopic(t, env, topic, 2)
	main := newLockClient(t, env, group, "java-vip")
	vip := newLockClient(t, env, group, "java-vip")
	vip.addr = env.VIPAddr
	other := newLockClient(t, env, group, "other")
	main.heartbeat(topic)
	other.heartbeat(topic)
	if resp := rawSend(t, vip.cl, env.VIPAddr, topic, 0, 16, map[string]string{"UNIQ_KEY": "v1"}, "over the VIP channel"); resp.Code != remoting.Success {
		t.Fatalf("send over the VIP channel: %v", resp)
	}
	if got := vip.lock(topic, 0); !equalQueues(got, 0) {
		t.Fatalf("lock over the VIP channel: %v", got)
	}
	if code := main.pull(topic, 0); code != remoting.Success {
		t.Fatalf("the holder's pull on its plain connection: code %d, want SUCCESS", code)
	}
	if code := other.pull(topic, 0); code != remoting.SystemBusy {
		t.Fatalf("another client's pull of the locked queue: code %d, want SYSTEM_BUSY", code)
	}
}
