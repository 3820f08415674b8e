package client

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// waitTotal waits until r saw at least n deliveries.
func (r *recorder) waitTotal(t testing.TB, n int, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		if _, total := r.snapshot(); total >= n {
			return
		}
		select {
		case <-r.ch:
		case <-deadline:
			_, total := r.snapshot()
			t.Fatalf("saw %d deliveries of %d", total, n)
		}
	}
}

// TestRelaysOrderly resets an orderly consumer through the broker: it
// gives up its queues, unlocks and locks them again, and consumes from
// the reset offsets in order; a message consumed directly goes through
// its handler and is reported as orderly.
func TestRelaysOrderly(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("RelayOrderly"), brokertest.Name("relayorderly")
	e.createTopic(t, topic, 1)
	const n = 6
	e.produce(t, topic, "m", n)
	rec := newRecorder()
	var order []int64
	var lastID string
	c := startPush(t, e.consumerOptions(group), topic, Selector{}, OrderlyFunc(func(_ context.Context, _ *OrderlyContext, msgs []*MessageExt) OrderlyResult {
		rec.mu.Lock()
		for _, m := range msgs {
			order = append(order, m.QueueOffset)
			lastID = m.OffsetMsgID
		}
		rec.mu.Unlock()
		rec.add("c", msgs)
		return OrderlySuccess
	}))
	rec.waitTotal(t, n, 30*time.Second)
	brokertest.Eventually(t, 30*time.Second, "the offset committed", func() bool {
		off, _ := e.Store.ConsumerOffset(group, topic, 0)
		return off == n
	})

	cl := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger()})
	defer cl.Close()
	invoke := func(code int16, ext map[string]string) *remoting.Command {
		t.Helper()
		r, err := cl.Invoke(context.Background(), e.BrokerAddr, remoting.NewRequest(code, ext, nil))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := invoke(remoting.InvokeBrokerToResetOffset, map[string]string{"topic": topic, "group": group, "queueId": "0", "offset": "2"})
	if r.Code != remoting.Success {
		t.Fatalf("reset: %d %s", r.Code, r.Remark)
	}
	rec.waitTotal(t, n+n-2, 30*time.Second)
	rec.mu.Lock()
	again := append([]int64(nil), order[n:]...)
	rec.mu.Unlock()
	for i, off := range again {
		if off != int64(2+i) {
			t.Fatalf("after the reset the orderly consumer got offsets %v, want 2..%d in order", again, n-1)
		}
	}

	rec.mu.Lock()
	msgID := lastID
	rec.mu.Unlock()
	r = invoke(remoting.ConsumeMessageDirectly, map[string]string{"consumerGroup": group, "clientId": c.ClientID(), "msgId": msgID})
	var direct directResult
	if r.Code != remoting.Success || json.Unmarshal(r.Body, &direct) != nil || direct.ConsumeResult != "CR_SUCCESS" || !direct.Order {
		t.Errorf("consume directly: %d %q %s", r.Code, r.Remark, r.Body)
	}
	rec.waitTotal(t, n+n-2+1, 10*time.Second)

	// The offset moves when the handler's call returns, just after the
	// recorder saw the messages.
	want := `"queueId":0,"topic":"` + topic + `"}:` + strconv.Itoa(n) + "}"
	brokertest.Eventually(t, 10*time.Second, "the consumer's status at offset "+strconv.Itoa(n), func() bool {
		r = invoke(remoting.InvokeBrokerToGetConsumerStatus, map[string]string{"topic": topic, "group": group})
		return r.Code == remoting.Success && strings.Contains(string(r.Body), want)
	})
}

// TestServeRelayRefusals checks the answers of a client asked about a
// client or a group it does not run.
func TestServeRelayRefusals(t *testing.T) {
	e := startBroker(t)
	in, err := acquireInstance(e.options())
	if err != nil {
		t.Fatal(err)
	}
	defer in.release()
	for _, tc := range []struct {
		code int16
		ext  map[string]string
		want string
	}{
		{remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": "g", "clientId": "someone@else"}, "not someone@else"},
		{remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": "g", "clientId": in.id}, "runs no consumer of group g"},
		{remoting.GetConsumerStatusFromClient, map[string]string{"group": "g", "topic": "T"}, "runs no consumer of group g"},
	} {
		resp, ok := in.serveRelay(nil, remoting.NewRequest(tc.code, tc.ext, nil))
		if !ok || resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, tc.want) {
			t.Errorf("%s %v: %v %v, want SYSTEM_ERROR %q", remoting.RequestCode(tc.code), tc.ext, resp, ok, tc.want)
		}
	}
	if _, ok := in.serveRelay(nil, remoting.NewRequest(remoting.PullMessage, nil, nil)); ok {
		t.Error("serveRelay took a PULL_MESSAGE")
	}
}

// TestRelaysLitePull resets a live lite pull consumer: its next polls
// return the messages from the reset offset again. Its status and running
// info are served; it has no handler to consume a message directly.
func TestRelaysLitePull(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("RelayLite"), brokertest.Name("relaylite")
	e.createTopic(t, topic, 1)
	const n = 5
	e.produce(t, topic, "m", n)
	c := startLite(t, e.litePullOptions(group), func(c *LitePullConsumer) error { return c.Subscribe(topic, Selector{}) })
	poll := func(want int) []*MessageExt {
		t.Helper()
		var got []*MessageExt
		deadline := time.Now().Add(30 * time.Second)
		for len(got) < want && time.Now().Before(deadline) {
			msgs, err := c.Poll(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, msgs...)
		}
		if len(got) != want {
			t.Fatalf("polled %d messages, want %d", len(got), want)
		}
		return got
	}
	first := poll(n)

	cl := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger()})
	defer cl.Close()
	invoke := func(code int16, ext map[string]string) *remoting.Command {
		t.Helper()
		r, err := cl.Invoke(context.Background(), e.BrokerAddr, remoting.NewRequest(code, ext, nil))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := invoke(remoting.InvokeBrokerToResetOffset, map[string]string{"topic": topic, "group": group, "queueId": "0", "offset": "1"}); r.Code != remoting.Success {
		t.Fatalf("reset: %d %s", r.Code, r.Remark)
	}
	again := poll(n - 1)
	for i, m := range again {
		if m.QueueOffset != int64(1+i) {
			t.Fatalf("after the reset polled offset %d at %d, want %d", m.QueueOffset, i, 1+i)
		}
	}
	brokertest.Eventually(t, 10*time.Second, "the status at the end", func() bool {
		r := invoke(remoting.InvokeBrokerToGetConsumerStatus, map[string]string{"topic": topic, "group": group})
		return r.Code == remoting.Success && strings.Contains(string(r.Body), `"topic":"`+topic+`"}:`+strconv.Itoa(n)+"}")
	})
	r := invoke(remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": group, "clientId": c.ClientID()})
	if r.Code != remoting.Success || !strings.Contains(string(r.Body), `"PROP_CONSUME_TYPE":"CONSUME_ACTIVELY"`) {
		t.Errorf("running info: %d %q %s", r.Code, r.Remark, r.Body)
	}
	r = invoke(remoting.ConsumeMessageDirectly, map[string]string{"consumerGroup": group, "clientId": c.ClientID(), "msgId": first[0].OffsetMsgID})
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "no handler") {
		t.Errorf("consume directly on a lite pull consumer: %d %q", r.Code, r.Remark)
	}
}
