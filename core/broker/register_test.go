package broker_test

import (
	"strconv"
	"testing"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestTopicRegistrationIncremental creates 2,000 topics: the registration
// bytes the broker sends grow by a bounded amount per topic rather than
// with the table's size, every topic is routable as soon as it is
// created, and a deleted topic loses its route.
func TestTopicRegistrationIncremental(t *testing.T) {
	const n, perTopic = 2000, 1 << 10
	env := brokertest.Start(t)
	base := env.Broker.RegisteredBytes()
	for i := range n {
		name := "Inc_" + strconv.Itoa(i)
		if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: name, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}); err != nil {
			t.Fatal(err)
		}
		if sent := env.Broker.RegisteredBytes() - base; sent > int64(i+1)*perTopic {
			t.Fatalf("after %d topics the broker sent %d bytes of registrations, over %d per topic", i+1, sent, perTopic)
		}
		if i%500 == 0 {
			if _, ok := env.NS.Route(name); !ok {
				t.Fatalf("topic %s has no route once created", name)
			}
		}
	}
	if got := len(env.NS.Topics()); got < n {
		t.Fatalf("the name server knows %d topics, want at least %d", got, n)
	}
	// An update is registered too.
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: "Inc_7", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	if r, ok := env.NS.Route("Inc_7"); !ok || r.QueueDatas[0].WriteQueueNums != 4 {
		t.Fatalf("route after an update: %+v %v", r, ok)
	}
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	if r := invoke(t, cl, env, remoting.DeleteTopicInBroker, map[string]string{"topic": "Inc_7"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete: %v", r)
	}
	if _, ok := env.NS.Route("Inc_7"); ok {
		t.Fatal("a deleted topic is still routable")
	}
	if _, ok := env.NS.Route("Inc_8"); !ok {
		t.Fatal("deleting a topic lost another's route")
	}
}
