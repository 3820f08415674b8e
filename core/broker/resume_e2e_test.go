package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/internal/brokertest"
)

// resumeGoal is how soon after a restarted broker accepts connections its
// consumers must receive again: the official client waits 3 s after a
// failed pull before the next, so this is one retry and some margin.
const resumeGoal = 5 * time.Second

// TestConsumersResumeAfterRestart restarts the broker under a TAG and an
// SQL92 push consumer: both receive again within resumeGoal, long before
// their next heartbeat, and neither ever receives a message its
// subscription excludes.
func TestConsumersResumeAfterRestart(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Resume")
	createTopic(t, env, topic, 1) // one queue: the excluded message comes first

	type delivery struct {
		group, body string
	}
	got := make(chan delivery, 64)
	listen := func(group string, sel consumer.MessageSelector) {
		c := env.PushConsumer(t, group)
		err := c.Subscribe(topic, sel, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				got <- delivery{group, string(m.Body)}
			}
			return consumer.ConsumeSuccess, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		env.StartConsumer(t, c, group, true, topic)
	}
	tagGroup, sqlGroup := brokertest.Name("cg_tag"), brokertest.Name("cg_sql")
	listen(tagGroup, consumer.MessageSelector{Type: consumer.TAG, Expression: "TagA"})
	listen(sqlGroup, consumer.MessageSelector{Type: consumer.SQL92, Expression: "a > 5"})

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
			want[tagGroup+"/"+b], want[sqlGroup+"/"+b] = true, true
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
	t.Logf("both consumers received %v after the broker accepted connections again", time.Since(open).Round(time.Millisecond))
}
