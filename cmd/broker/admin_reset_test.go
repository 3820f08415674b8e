package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rmq-go/rmq/client"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestAdminOffsetsReset resets a live consumer group's offsets to a time
// with "broker admin offsets reset": the consumer (this project's client)
// receives the later messages again, and the earlier ones not.
func TestAdminOffsetsReset(t *testing.T) {
	env := brokertest.Start(t)
	topic, group := brokertest.Name("ResetCLI"), brokertest.Name("resetcli")
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	cl := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger()})
	defer cl.Close()
	send := func(body string) {
		t.Helper()
		ext := map[string]string{"producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
			"queueId": strconv.Itoa(len(body) % 2), "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0"}
		r, err := cl.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(remoting.SendMessage, ext, []byte(body)))
		if err != nil || r.Code != remoting.Success {
			t.Fatalf("send %s: %v %v", body, r, err)
		}
	}
	const n = 4
	for i := range n {
		send(fmt.Sprintf("A-%d%s", i, strings.Repeat("x", i)))
	}
	mark := time.Now().UnixMilli()
	for time.Now().UnixMilli() <= mark { // the clock's next millisecond, not a synchronisation
		time.Sleep(time.Millisecond)
	}
	mark++
	for i := range n {
		send(fmt.Sprintf("B-%d%s", i, strings.Repeat("x", i)))
	}

	var mu sync.Mutex
	counts := map[string]int{}
	got := make(chan struct{}, 1)
	c, err := client.NewPushConsumer(client.ConsumerOptions{
		Client: client.ClientOptions{NameServers: []string{env.NamesrvAddr}, InstanceName: brokertest.Name("reset"), Logger: brokertest.Logger()},
		Group:  group, ConsumeFrom: client.ConsumeFromFirstOffset,
	}, client.ConcurrentFunc(func(_ context.Context, _ *client.ConcurrentContext, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		for _, m := range msgs {
			counts[string(m.Body)[:3]]++
		}
		mu.Unlock()
		select {
		case got <- struct{}{}:
		default:
		}
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
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Shutdown(ctx)
	})
	waitAll := func(prefix string, want int) {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for {
			mu.Lock()
			done := true
			for i := range n {
				done = done && counts[fmt.Sprintf("%s-%d", prefix, i)] >= want
			}
			mu.Unlock()
			if done {
				return
			}
			select {
			case <-got:
			case <-deadline:
				t.Fatalf("timed out waiting for %s-* delivered %d times", prefix, want)
			}
		}
	}
	waitAll("A", 1)
	waitAll("B", 1)
	brokertest.Eventually(t, 30*time.Second, "the offsets committed", func() bool {
		for q := range int32(2) {
			if off, _ := env.Store.ConsumerOffset(group, topic, q); off != env.Store.MaxOffset(topic, q) {
				return false
			}
		}
		return true
	})

	admin := func(args ...string) (int, string, string) {
		return runCmd(append([]string{"admin", "--broker", env.BrokerAddr, "offsets", "reset"}, args...)...)
	}
	at := time.UnixMilli(mark).UTC().Format(time.RFC3339Nano)
	code, out, errs := admin("--group", group, "--topic", topic, "--timestamp", at)
	if code != 0 || !strings.Contains(out, "told 1 of 1 online consumers: "+c.ClientID()) {
		t.Fatalf("reset: %d %q %q", code, out, errs)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			rows[f[0]] = f[1]
		}
	}
	for q := range int32(2) {
		want, _ := env.Store.OffsetForTimestamp(topic, q, mark)
		if rows[strconv.Itoa(int(q))] != strconv.FormatInt(want, 10) {
			t.Errorf("queue %d: want offset %d in\n%s", q, want, out)
		}
	}
	waitAll("B", 2)
	mu.Lock()
	for i := range n {
		if a := counts[fmt.Sprintf("A-%d", i)]; a != 1 {
			t.Errorf("A-%d delivered %d times, want 1", i, a)
		}
	}
	mu.Unlock()

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--topic", topic, "--timestamp", "now"}, "--group required"},
		{[]string{"--group", group, "--topic", topic, "--timestamp", "yesterday"}, "want RFC 3339"},
		{[]string{"--group", group, "--topic", topic}, "--timestamp required"},
	} {
		if code, _, errs := admin(tc.args...); code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: %d %q, want exit 2 and %q", tc.args, code, errs, tc.want)
		}
	}
	if code, _, errs := admin("--group", brokertest.Name("nobody"), "--topic", topic, "--timestamp", strconv.FormatInt(mark, 10)); code != 1 || !strings.Contains(errs, "not known") {
		t.Errorf("unknown group: %d %q", code, errs)
	}
}

func TestParseResetTime(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123)
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "now", want: now.UnixMilli()},
		{in: "1700000000000", want: 1_700_000_000_000},
		{in: "2023-11-14T22:13:20Z", want: 1_700_000_000_000},
		{in: "2023-11-14T23:13:20.5+01:00", want: 1_700_000_000_500},
		{in: "", bad: true},
		{in: "-5", bad: true},
		{in: "2023-11-14", bad: true},
	} {
		got, err := parseResetTime(tc.in, now)
		if tc.bad != (err != nil) || got != tc.want {
			t.Errorf("%q: %d, %v", tc.in, got, err)
		}
	}
}
