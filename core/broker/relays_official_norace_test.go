//go:build !race

// The official client's push consumer races with itself when it applies an
// offset reset (ResetOffset clears a process queue without the lock its
// puller reads it under), so this test runs without the race detector;
// .ci/run runs it that way.

package broker_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestResetOffsetOfficialClient resets a live official push consumer's
// group to a time: it consumes the later batch again (the official client
// applies a reset 10 s after it hears of it), and the earlier not. Then,
// with the group stopped, a reset makes it start from that time again.
func TestResetOffsetOfficialClient(t *testing.T) {
	env := brokertest.Start(t)
	topic, group := brokertest.Name("ResetOfficial"), brokertest.Name("resetofficial")
	createTopic(t, env, topic, 2)
	const n = 4
	mark := twoBatches(t, env, topic, n)
	rec := &officialRecorder{counts: map[string]int{}, msgs: map[string]*primitive.MessageExt{}, signal: make(chan struct{}, 1)}
	c := env.PushConsumer(t, group)
	if err := c.Subscribe(topic, consumer.MessageSelector{}, rec.listener); err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, c, group, true, topic)
	rec.wait(t, "B", n, 1, 30*time.Second)
	committedAll(t, env, group, topic, 2)
	cl := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger()})
	defer cl.Close()

	wantAtTime(t, env, topic, 2, mark, resetOffset(t, cl, env, group, topic, mark, false))
	rec.wait(t, "B", n, 2, 60*time.Second)
	committedAll(t, env, group, topic, 2)
	for i := range n {
		if got := rec.count("A-" + strconv.Itoa(i)); got != 1 {
			t.Errorf("A-%d delivered %d times after the reset, want 1", i, got)
		}
	}

	// Stopped: the group starts again from the reset.
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 10*time.Second, "the consumer gone from the group", func() bool { return len(env.Broker.View().ConsumerIDs(group)) == 0 })
	wantAtTime(t, env, topic, 2, mark, resetOffset(t, cl, env, group, topic, mark, false))
	again := env.PushConsumer(t, group)
	if err := again.Subscribe(topic, consumer.MessageSelector{}, rec.listener); err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, again, group, true, topic)
	rec.wait(t, "B", n, 3, 30*time.Second)
	for i := range n {
		if got := rec.count("A-" + strconv.Itoa(i)); got != 1 {
			t.Errorf("A-%d delivered %d times after the restart, want 1", i, got)
		}
	}
}
