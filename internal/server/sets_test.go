package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// TestTwoSetsTwoNameServers runs two broker sets behind two name servers,
// with the official producer and push consumer told both name servers: a
// topic on both sets is produced to and consumed from both; when one set
// stops, sends go to the other and consumption goes on; a name server that
// restarts relearns the routes from the next registrations; the set that
// comes back is consumed from again.
func TestTwoSetsTwoNameServers(t *testing.T) {
	startNS := func(listen string) *server.Server {
		t.Helper()
		ns, err := server.StartNamesrv(server.Config{NamesrvListen: listen, Logger: brokertest.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	stopNS := func(ns *server.Server) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ns.Shutdown(ctx)
	}
	ns1, ns2 := startNS("127.0.0.1:0"), startNS("127.0.0.1:0")
	ns1Addr, ns2Addr := ns1.NamesrvAddr, ns2.NamesrvAddr
	t.Cleanup(func() { stopNS(ns2) })
	set := func(name string) func(*server.Config) {
		return func(c *server.Config) {
			c.NamesrvListen = ""
			c.NameServers = []string{ns1Addr, ns2Addr}
			c.Broker.BrokerName = name
			c.Broker.RegisterInterval = 200 * time.Millisecond
		}
	}
	a, b := brokertest.Start(t, set("broker-a")), brokertest.Start(t, set("broker-b"))
	topic, group := brokertest.Name("Sets"), brokertest.Name("cg")
	for _, env := range []*brokertest.Env{a, b} {
		if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}); err != nil {
			t.Fatal(err)
		}
	}
	resolver := primitive.NewPassthroughResolver([]string{ns1Addr, ns2Addr})

	var mu sync.Mutex
	byBroker := map[string]map[string]bool{} // broker name → bodies
	got := make(chan struct{}, 1)
	c, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(resolver), consumer.WithGroupName(group),
		consumer.WithInstance(brokertest.Name("consumer")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		for _, m := range msgs {
			if byBroker[m.Queue.BrokerName] == nil {
				byBroker[m.Queue.BrokerName] = map[string]bool{}
			}
			byBroker[m.Queue.BrokerName][string(m.Body)] = true
		}
		mu.Unlock()
		select {
		case got <- struct{}{}:
		default:
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown() })

	p, err := rocketmq.NewProducer(producer.WithNsResolver(resolver), producer.WithInstanceName(brokertest.Name("producer")),
		producer.WithGroupName(brokertest.Name("pg")), producer.WithRetry(2), producer.WithSendMsgTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown() })
	// send sends n messages and returns how many went to each broker.
	send := func(prefix string, n int) map[string]int {
		t.Helper()
		to := map[string]int{}
		for i := range n {
			res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("%s-%d", prefix, i))))
			if err != nil || res.Status != primitive.SendOK {
				t.Fatalf("send %s-%d: %v %v", prefix, i, res, err)
			}
			to[res.MessageQueue.BrokerName]++
		}
		return to
	}
	// consumed waits until every body of prefix is consumed, and returns
	// how many came from each broker.
	consumed := func(prefix string, n int) map[string]int {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for {
			mu.Lock()
			from, total := map[string]int{}, 0
			for name, bodies := range byBroker {
				for i := range n {
					if bodies[fmt.Sprintf("%s-%d", prefix, i)] {
						from[name]++
						total++
					}
				}
			}
			mu.Unlock()
			if total >= n {
				return from
			}
			select {
			case <-got:
			case <-deadline:
				t.Fatalf("%s: %d of %d consumed (%v)", prefix, total, n, from)
			}
		}
	}

	to := send("both", 40)
	if to["broker-a"] == 0 || to["broker-b"] == 0 {
		t.Fatalf("sends spread over %v, want both sets", to)
	}
	if from := consumed("both", 40); from["broker-a"] != to["broker-a"] || from["broker-b"] != to["broker-b"] {
		t.Fatalf("consumed %v, sent %v", from, to)
	}

	// One set stops: sends go to the other, and are consumed.
	b.Stop(t)
	to = send("one", 40)
	if to["broker-b"] != 0 {
		t.Fatalf("sends after broker-b stopped went to %v", to)
	}
	consumed("one", 40)

	// A name server restarts on its address and relearns the routes.
	stopNS(ns1)
	ns1 = startNS(ns1Addr)
	t.Cleanup(func() { stopNS(ns1) })
	only1, err := rocketmq.NewProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns1Addr})),
		producer.WithInstanceName(brokertest.Name("producer1")), producer.WithGroupName(brokertest.Name("pg1")), producer.WithRetry(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := only1.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { only1.Shutdown() })
	brokertest.Eventually(t, 10*time.Second, "the restarted name server to route the topic", func() bool {
		res, err := only1.SendSync(context.Background(), primitive.NewMessage(topic, []byte("relearned")))
		return err == nil && res.Status == primitive.SendOK
	})

	// The stopped set comes back on its address and is consumed from again.
	b = b.Restart(t)
	brokertest.Eventually(t, 30*time.Second, "sends to reach broker-b again", func() bool {
		return send("back-probe", 4)["broker-b"] > 0
	})
	to = send("back", 40)
	if from := consumed("back", 40); from["broker-b"] != to["broker-b"] || to["broker-b"] == 0 {
		t.Fatalf("after broker-b came back: consumed %v, sent %v", from, to)
	}
}
