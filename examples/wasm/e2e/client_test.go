package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/client"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/examples/wasm/internal/guestbuild"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// TestClientFollowsStrategyPlugin runs two consumers of our client under
// the broker's default strategy, then configures the sticky example as
// the group's allocate plugin and reloads: within a rebalance period the
// consumers hold exactly what the plugin assigns, with no client change,
// and no message sent before or after the switch is lost or consumed
// twice.
func TestClientFollowsStrategyPlugin(t *testing.T) {
	sticky := guestbuild.Module(t, "../sticky")
	list := &pluginList{}
	env := start(t, list)
	topic, group := brokertest.Name("Switch"), brokertest.Name("cg_switch")
	// 16 queues: the plugin gives each consumer the queues the default
	// gives it once in C(16,8) = 12,870 runs, where with 8 queues it did
	// once in 70, and the test could only give up.
	createTopic(t, env, topic, 16)

	var (
		mu     sync.Mutex
		counts = map[string]int{}
	)
	consumers := map[string]*client.PushConsumer{}
	for range 2 {
		c, err := client.NewPushConsumer(client.ConsumerOptions{
			Client:            client.ClientOptions{NameServers: []string{env.NamesrvAddr}, InstanceName: brokertest.Name("ours"), Logger: brokertest.Logger()},
			Group:             group,
			ConsumeFrom:       client.ConsumeFromFirstOffset,
			RebalanceInterval: 200 * time.Millisecond,
			PersistInterval:   50 * time.Millisecond,
		}, client.ConcurrentFunc(func(_ context.Context, _ *client.ConcurrentContext, msgs []*client.MessageExt) client.ConsumeResult {
			mu.Lock()
			for _, m := range msgs {
				counts[string(m.Body)]++
			}
			mu.Unlock()
			return client.ConsumeSuccess
		}))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Subscribe(topic, client.Selector{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
		consumers[c.ClientID()] = c
	}
	// holdsExactly reports whether each consumer holds the queues want
	// gives its client id.
	holdsExactly := func(want map[string][]int32) bool {
		for id, c := range consumers {
			var got []int32
			for _, q := range c.Assigned(topic) {
				got = append(got, q.QueueID)
			}
			slices.Sort(got)
			if !slices.Equal(got, want[id]) {
				return false
			}
		}
		return true
	}
	assignment := func() map[string][]int32 {
		out := map[string][]int32{}
		for id := range consumers {
			res, err := env.Broker.Assign(t.Context(), broker.AssignmentQuery{Group: group, Topic: topic, ClientID: id})
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range res.Queues {
				out[id] = append(out[id], q.QueueID)
			}
			slices.Sort(out[id])
		}
		return out
	}
	sendAll := func(prefix string) []string {
		p := env.Producer(t)
		var bodies []string
		for i := range 40 {
			b := fmt.Sprintf("%s-%d", prefix, i)
			if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(b))); err != nil {
				t.Fatal(err)
			}
			bodies = append(bodies, b)
		}
		return bodies
	}
	waitConsumed := func(bodies []string) {
		brokertest.Eventually(t, 30*time.Second, "every message consumed", func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, b := range bodies {
				if counts[b] == 0 {
					return false
				}
			}
			return true
		})
	}

	brokertest.Eventually(t, 10*time.Second, "the default assignment", func() bool { return holdsExactly(assignment()) })
	before := assignment()
	bodies := sendAll("before")
	waitConsumed(bodies)

	list.set(server.Plugin{Options: wasm.Options{Name: "sticky", Kind: wasm.KindAllocate, Module: sticky}, Groups: []string{group}})
	if r := reload(t, env); !slices.Equal(r.Added, []string{"sticky"}) {
		t.Fatalf("reload: %+v", r)
	}
	after := assignment()
	if fmt.Sprint(after) == fmt.Sprint(before) {
		t.Fatalf("the plugin assigns as the default did (%v); the test shows nothing", after)
	}
	brokertest.Eventually(t, 10*time.Second, fmt.Sprintf("the plugin's assignment %v", after), func() bool { return holdsExactly(after) })
	more := sendAll("after")
	waitConsumed(more)
	mu.Lock()
	defer mu.Unlock()
	for _, b := range append(bodies, more...) {
		if counts[b] != 1 {
			t.Errorf("%s consumed %d times", b, counts[b])
		}
	}
}
