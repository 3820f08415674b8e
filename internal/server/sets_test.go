package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/client"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// setsClient is a producer and a push consumer of one client library, both
// told every name server.
type setsClient struct {
	// send sends one message and returns the broker it went to.
	send func(body string) (brokerName string, err error)
	// consume starts a push consumer of group on topic calling got for
	// each message.
	consume func(group, topic string, got func(brokerName, body string))
}

// TestTwoSetsTwoNameServers runs two broker sets behind two name servers,
// with the official client and with ours, each told both name servers: a
// topic on both sets is produced to and consumed from both; when one set
// stops, sends go to the other and consumption goes on; a name server that
// restarts relearns the routes from the next registrations; the set that
// comes back is consumed from again.
func TestTwoSetsTwoNameServers(t *testing.T) {
	t.Run("client=official", func(t *testing.T) { testTwoSets(t, officialSetsClient) })
	t.Run("client=rmq-go", func(t *testing.T) { testTwoSets(t, ourSetsClient) })
}

func officialSetsClient(t *testing.T, nameServers []string) setsClient {
	resolver := primitive.NewPassthroughResolver(nameServers)
	p, err := rocketmq.NewProducer(producer.WithNsResolver(resolver), producer.WithInstanceName(brokertest.Name("producer")),
		producer.WithGroupName(brokertest.Name("pg")), producer.WithRetry(2), producer.WithSendMsgTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown() })
	return setsClient{
		send: func(body string) (string, error) {
			res, err := p.SendSync(context.Background(), primitive.NewMessage(topicOf(body), []byte(body)))
			if err != nil {
				return "", err
			}
			if res.Status != primitive.SendOK {
				return "", fmt.Errorf("send status %v", res.Status)
			}
			return res.MessageQueue.BrokerName, nil
		},
		consume: func(group, topic string, got func(string, string)) {
			c, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(resolver), consumer.WithGroupName(group),
				consumer.WithInstance(brokertest.Name("consumer")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
			if err != nil {
				t.Fatal(err)
			}
			err = c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				for _, m := range msgs {
					got(m.Queue.BrokerName, string(m.Body))
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
		},
	}
}

func ourSetsClient(t *testing.T, nameServers []string) setsClient {
	opts := func() client.ClientOptions {
		return client.ClientOptions{NameServers: nameServers, InstanceName: brokertest.Name("ours"), Logger: brokertest.Logger()}
	}
	p, err := client.NewProducer(client.ProducerOptions{Client: opts(), Group: brokertest.Name("pg"), RetryTimes: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return setsClient{
		send: func(body string) (string, error) {
			res, err := p.SendSync(context.Background(), client.NewMessage(topicOf(body), []byte(body)))
			if err != nil {
				return "", err
			}
			return res.Queue.BrokerName, nil
		},
		consume: func(group, topic string, got func(string, string)) {
			c, err := client.NewPushConsumer(client.ConsumerOptions{Client: opts(), Group: group, ConsumeFrom: client.ConsumeFromFirstOffset},
				client.ConcurrentFunc(func(_ context.Context, _ *client.ConcurrentContext, msgs []*client.MessageExt) client.ConsumeResult {
					for _, m := range msgs {
						got(m.BrokerName, string(m.Body))
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
			t.Cleanup(func() { c.Shutdown(context.Background()) })
		},
	}
}

// topicOf is the topic a body names: "<topic>/<prefix>-<n>".
func topicOf(body string) string {
	topic, _, _ := strings.Cut(body, "/")
	return topic
}

func testTwoSets(t *testing.T, newClient func(*testing.T, []string) setsClient) {
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
	cl := newClient(t, []string{ns1Addr, ns2Addr})
	var mu sync.Mutex
	byBroker := map[string]map[string]bool{} // broker name → bodies
	got := make(chan struct{}, 1)
	cl.consume(group, topic, func(brokerName, body string) {
		mu.Lock()
		if byBroker[brokerName] == nil {
			byBroker[brokerName] = map[string]bool{}
		}
		byBroker[brokerName][body] = true
		mu.Unlock()
		select {
		case got <- struct{}{}:
		default:
		}
	})
	// send sends n messages and returns how many went to each broker.
	send := func(prefix string, n int) map[string]int {
		t.Helper()
		to := map[string]int{}
		for i := range n {
			name, err := cl.send(fmt.Sprintf("%s/%s-%d", topic, prefix, i))
			if err != nil {
				t.Fatalf("send %s-%d: %v", prefix, i, err)
			}
			to[name]++
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
					if bodies[fmt.Sprintf("%s/%s-%d", topic, prefix, i)] {
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
	only1 := newClient(t, []string{ns1Addr})
	brokertest.Eventually(t, 10*time.Second, "the restarted name server to route the topic", func() bool {
		_, err := only1.send(topic + "/relearned")
		return err == nil
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
