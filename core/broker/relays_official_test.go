package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// officialRecorder counts an official push consumer's deliveries by body.
type officialRecorder struct {
	mu     sync.Mutex
	counts map[string]int
	msgs   map[string]*primitive.MessageExt
	signal chan struct{}
}

func (r *officialRecorder) listener(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	r.mu.Lock()
	for _, m := range msgs {
		r.counts[string(m.Body)]++
		r.msgs[string(m.Body)] = m
	}
	r.mu.Unlock()
	select {
	case r.signal <- struct{}{}:
	default:
	}
	return consumer.ConsumeSuccess, nil
}

// wait waits until every body of prefix, 0..n-1, was delivered at least
// want times.
func (r *officialRecorder) wait(t *testing.T, prefix string, n, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		done := true
		r.mu.Lock()
		for i := range n {
			done = done && r.counts[fmt.Sprintf("%s-%d", prefix, i)] >= want
		}
		r.mu.Unlock()
		if done {
			return
		}
		select {
		case <-r.signal:
		case <-deadline:
			t.Fatalf("timed out after %v waiting for %s-0..%d delivered %d times each", timeout, prefix, n-1, want)
		}
	}
}

func (r *officialRecorder) count(body string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[body]
}

// TestRelaysOfficialClient drives the relays against the official Go
// client's push consumer: status, running info and a direct consumption.
// Its offset reset is in relays_official_norace_test.go.
func TestRelaysOfficialClient(t *testing.T) {
	env := brokertest.Start(t)
	topic, group := brokertest.Name("RelayOfficial"), brokertest.Name("relayofficial")
	createTopic(t, env, topic, 2)
	const n = 4
	twoBatches(t, env, topic, n)
	rec := &officialRecorder{counts: map[string]int{}, msgs: map[string]*primitive.MessageExt{}, signal: make(chan struct{}, 1)}
	c := env.PushConsumer(t, group)
	if err := c.Subscribe(topic, consumer.MessageSelector{}, rec.listener); err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, c, group, true, topic)
	rec.wait(t, "A", n, 1, 30*time.Second)
	rec.wait(t, "B", n, 1, 30*time.Second)
	committedAll(t, env, group, topic, 2)
	ids := env.Broker.View().ConsumerIDs(group)
	if len(ids) != 1 {
		t.Fatalf("group members %v, want one", ids)
	}
	id := ids[0]
	cl := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger()})
	defer cl.Close()

	r := invoke(t, cl, env, remoting.InvokeBrokerToGetConsumerStatus, map[string]string{"topic": topic, "group": group}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("get consumer status: %d %s", r.Code, r.Remark)
	}
	ct, _ := remoting.FastjsonField(r.Body, "consumerTable")
	status := offsetTable(t, ct, id)
	for q := range int32(2) {
		if status[q] != env.Store.MaxOffset(topic, q) {
			t.Errorf("status of queue %d: %d, want %d (%s)", q, status[q], env.Store.MaxOffset(topic, q), r.Body)
		}
	}

	r = invoke(t, cl, env, remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": group, "clientId": id, "jstackEnable": "false"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("running info: %d %s", r.Code, r.Remark)
	}
	// The official client's answer comes as it was sent. That client fails
	// to encode its own running info while a statistic of it has no
	// sample (0/0 is NaN, which encoding/json refuses): it then answers
	// SUCCESS with no body and the encoder's error as remark.
	if len(r.Body) == 0 {
		if !strings.Contains(r.Remark, "json") {
			t.Errorf("running info: success, no body, remark %q", r.Remark)
		}
	} else {
		checkRunningInfo(t, r.Body, topic)
	}

	rec.mu.Lock()
	a0 := rec.msgs["A-0"]
	rec.mu.Unlock()
	r = invoke(t, cl, env, remoting.ConsumeMessageDirectly, map[string]string{"consumerGroup": group, "clientId": id, "msgId": a0.OffsetMsgId}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("consume directly: %d %s", r.Code, r.Remark)
	}
	var direct struct{ ConsumeResult int } // the official Go client writes the result's ordinal: 0 is success
	if err := json.Unmarshal(r.Body, &direct); err != nil || direct.ConsumeResult != 0 {
		t.Errorf("consume directly answered %s (%v)", r.Body, err)
	}
	if got := rec.count("A-0"); got != 2 {
		t.Errorf("A-0 delivered %d times after consuming it directly, want 2", got)
	}
}
