//go:build !race

// The official client's lite pull consumer races with itself (see
// core/broker/litepull_norace_test.go), so this test runs without the race
// detector; .ci/run runs it that way.

package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/rmq-go/rmq/client"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// resumeGoal is how soon consumers must receive again after a restarted
// broker accepts connections: the official client waits 3 s after a
// failed pull, so this is one retry and some margin.
const resumeGoal = 5 * time.Second

// officialKillWait bounds the official Go client after a SIGKILL: a pull
// it had in flight on the killed connection is never failed by the client
// when the connection closes, only by its 30 s pull timeout, after which
// it waits 3 s more. No broker can answer a pull sent to a dead process.
const officialKillWait = 45 * time.Second

// TestConsumersResumeAfterBrokerRestart restarts a broker running in a
// child process, gracefully (SIGTERM) and by SIGKILL, under push and
// lite-pull consumers of the official client and a push consumer of this
// project's client, with TAG and SQL92 subscriptions. Each consumer
// receives again after the restart, within resumeGoal where the client
// lets a broker achieve that, and none ever receives a message its
// subscription excludes.
func TestConsumersResumeAfterBrokerRestart(t *testing.T) {
	rlog.SetLogLevel("error")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) { testResume(t, sig) })
	}
}

func testResume(t *testing.T, sig syscall.Signal) {
	dataDir := t.TempDir()
	args := func(listen, ns string) []string {
		return []string{"--data-dir", dataDir, "--listen", listen, "--namesrv-listen", ns, "--log-level", "info"}
	}
	cmd, brokerAddr, nsAddr, _ := startChild(t, args("127.0.0.1:0", "127.0.0.1:0")...)
	topic := brokertest.Name("Resume")
	ns := primitive.NewPassthroughResolver([]string{nsAddr})

	type delivery struct{ consumer, body string }
	got := make(chan delivery, 256)
	deliver := func(who string, body []byte) { got <- delivery{who, string(body)} }

	// Create the topic with its first message, so every consumer has a
	// route when it starts.
	send := func(body, tag, a string) {
		t.Helper()
		p, err := client.NewProducer(client.ProducerOptions{Group: brokertest.Name("pg"),
			Client: client.ClientOptions{NameServers: []string{nsAddr}, InstanceName: brokertest.Name("p")}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		defer p.Shutdown(context.Background())
		m := client.NewMessage(topic, []byte(body)).WithTag(tag).SetProperty("a", a)
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
	}
	send("excluded-0", "TagB", "1")

	// The official push consumer, TAG.
	push, err := consumer.NewPushConsumer(consumer.WithNsResolver(ns), consumer.WithGroupName(brokertest.Name("cg_push")),
		consumer.WithInstance(brokertest.Name("push")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	err = push.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "TagA"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				deliver("official push", m.Body)
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := push.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { push.Shutdown() })

	// The official lite pull consumer, SQL92.
	lite, err := consumer.NewPullConsumer(consumer.WithNsResolver(ns), consumer.WithGroupName(brokertest.Name("cg_lite")),
		consumer.WithInstance(brokertest.Name("lite")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	if err := lite.Subscribe(topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: "a > 5"}); err != nil {
		t.Fatal(err)
	}
	if err := lite.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for ctx.Err() == nil {
			cr, err := lite.Poll(ctx, time.Second)
			if err != nil {
				continue
			}
			for _, m := range cr.GetMsgList() {
				deliver("official lite pull", m.Body)
			}
			lite.ACK(ctx, cr, consumer.ConsumeSuccess)
		}
	}()
	t.Cleanup(func() { cancel(); <-polled; lite.Shutdown() })

	// This project's push consumer, SQL92.
	ours, err := client.NewPushConsumer(client.ConsumerOptions{Group: brokertest.Name("cg_ours"), ConsumeFrom: client.ConsumeFromFirstOffset,
		Client: client.ClientOptions{NameServers: []string{nsAddr}, InstanceName: brokertest.Name("ours")}},
		client.ConcurrentFunc(func(_ context.Context, _ *client.ConcurrentContext, msgs []*client.MessageExt) client.ConsumeResult {
			for _, m := range msgs {
				deliver("rmq-go push", m.Body)
			}
			return client.ConsumeSuccess
		}))
	if err != nil {
		t.Fatal(err)
	}
	if err := ours.Subscribe(topic, client.Selector{Type: client.ExpressionSQL92, Expression: "a > 5"}); err != nil {
		t.Fatal(err)
	}
	if err := ours.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ours.Shutdown(context.Background()) })

	consumers := []string{"official push", "official lite pull", "rmq-go push"}
	// expect waits until every consumer received body, failing on any
	// other delivery, and returns when each received it.
	expect := func(body string, timeout map[string]time.Duration) map[string]time.Time {
		t.Helper()
		at := map[string]time.Time{}
		var longest time.Duration
		for _, d := range timeout {
			longest = max(longest, d)
		}
		deadline := time.After(longest)
		for len(at) < len(consumers) {
			select {
			case d := <-got:
				if d.body != body {
					t.Fatalf("%s received %q, want %q", d.consumer, d.body, body)
				}
				if _, dup := at[d.consumer]; !dup {
					at[d.consumer] = time.Now()
				}
			case <-deadline:
				t.Fatalf("%q: after %v only %v received it", body, longest, at)
			}
		}
		return at
	}
	all := func(d time.Duration) map[string]time.Duration {
		return map[string]time.Duration{"official push": d, "official lite pull": d, "rmq-go push": d}
	}
	send("before", "TagA", "9")
	expect("before", all(60*time.Second))

	switch sig {
	case syscall.SIGTERM:
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("broker exit after SIGTERM: %v", err)
		}
	default:
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait() // killed: the error says so
	}
	startChild(t, args(brokerAddr, nsAddr)...)
	open := time.Now()
	send("excluded-1", "TagB", "1")
	send("after", "TagA", "9")
	limits := all(resumeGoal)
	if sig == syscall.SIGKILL {
		limits["official push"], limits["official lite pull"] = officialKillWait, officialKillWait
	}
	at := expect("after", limits)
	var report []string
	for _, who := range consumers {
		took := at[who].Sub(open)
		report = append(report, fmt.Sprintf("%s %v", who, took.Round(10*time.Millisecond)))
		if took > limits[who] {
			t.Errorf("%s received again %v after the broker accepted connections, want under %v", who, took, limits[who])
		}
	}
	t.Logf("after %v: %s", sig, strings.Join(report, ", "))
}
