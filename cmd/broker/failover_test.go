package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/client"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// commitOnCheck leaves every transaction undecided when it is sent and
// commits it when the broker checks back.
type commitOnCheck struct {
	mu     sync.Mutex
	checks map[string]int
}

func (l *commitOnCheck) ExecuteLocalTransaction(*primitive.Message) primitive.LocalTransactionState {
	return primitive.UnkonwnState
}

func (l *commitOnCheck) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checks[string(m.Body)]++
	return primitive.CommitMessageState
}

// TestReplicatedSetFailoverKeepsTimersAndTransactions sends delayed
// messages and undecided transactional messages to a set's leader, and
// recalls a few more delayed ones sent first. It kills the leader with
// SIGKILL before any delay has passed or any transaction was checked,
// and restarts it: the new leader delivers each delayed message once
// when its delay is up, none of the recalled ones, and checks back each
// half message with the producer and commits it, so a consumer group
// that starts afterwards receives every message exactly once.
func TestReplicatedSetFailoverKeepsTimersAndTransactions(t *testing.T) {
	waitingTest(t)
	ns := startNamesrv(t)
	rs := startSet(t, "set-f", 3, []string{ns.NamesrvAddr})
	const topic, n = "Failover", 10
	createSetTopic(t, rs, ns.NamesrvAddr, topic)
	resolver := primitive.NewPassthroughResolver([]string{ns.NamesrvAddr})
	want := map[string]bool{}

	p, err := producer.NewDefaultProducer(producer.WithNsResolver(resolver), producer.WithInstanceName(brokertest.Name("failover-p")),
		producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	l := &commitOnCheck{checks: map[string]int{}}
	tp, err := rocketmq.NewTransactionProducer(l, producer.WithNsResolver(resolver), producer.WithGroupName(brokertest.Name("failover-txn")),
		producer.WithInstanceName(brokertest.Name("failover-tp")), producer.WithRetry(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(); err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown()
	send := func(what string, fn func() (*primitive.SendResult, error)) {
		t.Helper()
		brokertest.Eventually(t, 30*time.Second, "send "+what, func() bool {
			res, err := fn()
			return err == nil && res.Status == primitive.SendOK
		})
		want[what] = true
	}
	leader := rs.leader()
	// Recalled before the others are sent: the schedule delivers one
	// level's messages in order, so these would come first.
	rp, err := client.NewProducer(client.ProducerOptions{Group: brokertest.Name("failover-rp"),
		Client: client.ClientOptions{NameServers: []string{ns.NamesrvAddr}, InstanceName: brokertest.Name("failover-rp"), Logger: brokertest.Logger()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.Start(); err != nil {
		t.Fatal(err)
	}
	defer rp.Shutdown(context.Background())
	for i := range 3 {
		body := fmt.Sprintf("recalled-%d", i)
		res, err := rp.SendSync(context.Background(), client.NewMessage(topic, []byte(body)).WithDelayLevel(2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rp.Recall(context.Background(), topic, res.RecallHandle); err != nil {
			t.Fatalf("recall %s: %v", body, err)
		}
	}
	for i := range n {
		body := fmt.Sprintf("delay-%d", i)
		send(body, func() (*primitive.SendResult, error) {
			// Level 2 is 5 s: the leader is killed well before.
			return p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body)).WithDelayTimeLevel(2))
		})
		body = fmt.Sprintf("txn-%d", i)
		send(body, func() (*primitive.SendResult, error) {
			res, err := tp.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte(body)))
			if err != nil {
				return nil, err
			}
			return res.SendResult, nil
		})
	}
	rs.kill(leader, syscall.SIGKILL)
	if rs.leader() == leader {
		t.Fatal("the killed member still leads")
	}
	rs.start(leader)

	var (
		mu       sync.Mutex
		received = map[string]int{}
	)
	c, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(resolver), consumer.WithGroupName(brokertest.Name("failover-cg")),
		consumer.WithInstance(brokertest.Name("failover-c")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			received[string(m.Body)]++
		}
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	brokertest.Eventually(t, 90*time.Second, "every delayed and committed message consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for body := range want {
			if received[body] == 0 {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	var dup []string
	for body, k := range received {
		if strings.HasPrefix(body, "recalled-") {
			t.Errorf("received %q, recalled before the failover", body)
		} else if !want[body] {
			t.Errorf("received %q, which was never sent", body)
		}
		if k > 1 {
			dup = append(dup, fmt.Sprintf("%s×%d", body, k))
		}
	}
	if len(dup) > 0 {
		t.Errorf("delivered more than once: %s", strings.Join(dup, " "))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range n {
		if body := fmt.Sprintf("txn-%d", i); l.checks[body] == 0 {
			t.Errorf("%s was committed without being checked back", body)
		}
	}
}
