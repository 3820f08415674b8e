// Package brokertest runs a whole broker in-process for tests and builds
// official RocketMQ Go clients pointed at it.
package brokertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/server"
)

func init() {
	// The official client logs every rebalance and heartbeat; keep tests
	// readable.
	rlog.SetLogLevel("error")
}

// Env is a running broker with an embedded name server.
type Env struct {
	*server.Server
	Config server.Config
}

// Logger returns a logger that is silent unless RMQ_TEST_LOG is set.
func Logger() *slog.Logger {
	if os.Getenv("RMQ_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Start runs a broker on free ports with its data in a temporary
// directory. mutate may change the config first. The broker is shut down
// when the test ends.
func Start(t testing.TB, mutate ...func(*server.Config)) *Env {
	t.Helper()
	cfg := server.Config{
		DataDir:       t.TempDir(),
		Listen:        "127.0.0.1:0",
		NamesrvListen: "127.0.0.1:0",
		Logger:        Logger(),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	return StartConfig(t, cfg)
}

// StartConfig runs a broker with cfg as given.
func StartConfig(t testing.TB, cfg server.Config) *Env {
	t.Helper()
	s, err := server.Start(cfg)
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	e := &Env{Server: s, Config: cfg}
	t.Cleanup(func() { e.Stop(t) })
	return e
}

// Stop shuts the broker down; it is safe to call more than once.
func (e *Env) Stop(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// Restart stops the broker and starts it again on the same data
// directory and addresses.
func (e *Env) Restart(t testing.TB) *Env {
	t.Helper()
	e.Stop(t)
	cfg := e.Config
	cfg.Listen = e.BrokerAddr
	if cfg.NamesrvListen != "" {
		cfg.NamesrvListen = e.NamesrvAddr
	}
	return StartConfig(t, cfg)
}

var seq atomic.Int64

// Name returns a name unique within the test process.
func Name(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), seq.Add(1))
}

// Resolver points official clients at the embedded name server.
func (e *Env) Resolver() primitive.NsResolver {
	return primitive.NewPassthroughResolver([]string{e.NamesrvAddr})
}

// Producer starts an official producer with its own client instance.
func (e *Env) Producer(t testing.TB, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	all := append([]producer.Option{
		producer.WithNsResolver(e.Resolver()),
		producer.WithGroupName(Name("pg")),
		producer.WithInstanceName(Name("producer")),
		producer.WithRetry(2),
	}, opts...)
	p, err := rocketmq.NewProducer(all...)
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("start producer: %v", err)
	}
	t.Cleanup(func() { p.Shutdown() })
	return p
}

// PushConsumer builds an official push consumer with its own client
// instance; the caller subscribes and starts it. It is shut down when the
// test ends.
func (e *Env) PushConsumer(t testing.TB, group string, opts ...consumer.Option) rocketmq.PushConsumer {
	t.Helper()
	all := append([]consumer.Option{
		consumer.WithNsResolver(e.Resolver()),
		consumer.WithGroupName(group),
		consumer.WithInstance(Name("consumer")),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}, opts...)
	c, err := rocketmq.NewPushConsumer(all...)
	if err != nil {
		t.Fatalf("new push consumer: %v", err)
	}
	t.Cleanup(func() { c.Shutdown() })
	e.quietTeardown(t)
	return c
}

// Wait waits for ch to deliver or fails the test after timeout.
func Wait[T any](t testing.TB, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
	var zero T
	return zero
}

// Eventually polls cond until it holds or fails the test after timeout. It
// is for state another process or goroutine changes without telling the
// test (a oneway request applied by the broker, say), not a stand-in for an
// event the test could wait on.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// quietTeardown stops membership notifications before the test's clients
// shut down. The official client reads a flag without synchronisation when
// a notification races its Shutdown, which the race detector reports; the
// notifications are of no use at teardown anyway. Cleanups run last-in
// first-out, so this runs before any client registered so far stops.
func (e *Env) quietTeardown(t testing.TB) {
	t.Cleanup(func() { e.Broker.Hooks().SetNotifyConsumerIDsChanged(false) })
}

// StartConsumer starts an official push consumer and waits until the
// group pulls every queue of topics (and, for clustering groups, its retry
// topic) after the start, so the consumer's start-up rebalance is over.
// The official client's Start leaves that rebalance running in the
// background, and a Shutdown that overlaps it is a data race inside the
// client; waiting also makes tests independent of how quickly the client
// settles. A queue pulled before the start counts only once pulled again:
// a group restarted with a new consumer has pulled them all before.
func (e *Env) StartConsumer(t testing.TB, c rocketmq.PushConsumer, group string, clustering bool, topics ...string) {
	t.Helper()
	if clustering {
		topics = append(topics, "%RETRY%"+group)
	}
	type queue struct {
		topic string
		id    int32
	}
	before := map[queue]int64{}
	for _, topic := range topics {
		tc := e.Broker.Topics()[topic] // no queues when it does not exist yet
		for q := range int32(tc.ReadQueueNums) {
			before[queue{topic, q}] = e.Broker.View().Pulls(group, topic, q)
		}
	}
	if err := c.Start(); err != nil {
		t.Fatalf("start consumer: %v", err)
	}
	Eventually(t, 30*time.Second, "the consumer to pull every queue of "+strings.Join(topics, ", "), func() bool {
		for _, topic := range topics {
			tc, ok := e.Broker.Topics()[topic]
			if !ok {
				return false
			}
			for q := int32(0); q < int32(tc.ReadQueueNums); q++ {
				if e.Broker.View().Pulls(group, topic, q) <= before[queue{topic, q}] {
					return false
				}
			}
		}
		return true
	})
}

// KnowGroup makes the broker know consumer group by creating its retry
// topic, as a consumer's heartbeat would: the broker accepts sends into a
// group's retry topic only for groups it knows.
func (e *Env) KnowGroup(t testing.TB, group string) {
	t.Helper()
	tc := broker.TopicConfig{TopicName: broker.RetryGroupTopicPrefix + group, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	if err := e.Broker.CreateTopic(tc); err != nil {
		t.Fatalf("create the retry topic of %s: %v", group, err)
	}
}
