package grpcserver_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/internal/brokertest"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
	"github.com/rmq-go/rmq/internal/server"
)

// startSet runs another broker set that registers with e's name server:
// named name, with a gRPC endpoint unless grpc is false.
func startSet(t *testing.T, e *env, name string, grpc bool, mutate ...func(*server.Config)) *brokertest.Env {
	t.Helper()
	return brokertest.Start(t, append([]func(*server.Config){func(c *server.Config) {
		c.NamesrvListen, c.NameServers = "", []string{e.NamesrvAddr}
		c.Broker.BrokerName = name
		if grpc {
			c.GRPCListen = "127.0.0.1:0"
		}
	}}, mutate...)...)
}

// brokerQueues counts a route's queues by broker name and endpoint.
func brokerQueues(qs []*pb.MessageQueue) map[string]int {
	out := map[string]int{}
	for _, q := range qs {
		ep := q.GetBroker().GetEndpoints().GetAddresses()[0]
		out[q.GetBroker().GetName()+" "+ep.GetHost()+":"+itoa(ep.GetPort())]++
	}
	return out
}

// TestRoutesSpanBrokerSets: a topic on two broker sets is routed from
// either set's endpoint with both sets' queues, each set named with its
// own gRPC endpoint, and a push consumer is assigned one queue of each.
// A set that serves no gRPC is left out.
func TestRoutesSpanBrokerSets(t *testing.T) {
	a := start(t, func(c *server.Config) { c.Broker.DisableAutoCreateTopic = true })
	b := startSet(t, a, "broker-b", true)
	c := startSet(t, a, "broker-c", false)
	topic, group := brokertest.Name("Spread"), brokertest.Name("spreadg")
	a.createTopic(t, topic, 4)
	bb := connect(t, b)
	bb.createTopic(t, topic, 2)
	if err := c.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 3, WriteQueueNums: 3, Perm: 6}); err != nil {
		t.Fatal(err)
	}

	want := map[string]int{"broker-a " + a.GRPCAddr: 4, "broker-b " + b.GRPCAddr: 2}
	for _, e := range []*env{a, bb} {
		r, err := e.cl.QueryRoute(ctx(t), &pb.QueryRouteRequest{Topic: res(topic)})
		if err != nil || r.Status.GetCode() != pb.Code_OK {
			t.Fatalf("route from %s: %v %v", e.GRPCAddr, r, err)
		}
		if got := brokerQueues(r.MessageQueues); !maps.Equal(got, want) {
			t.Errorf("route from %s: queues by broker %v, want %v", e.GRPCAddr, got, want)
		}
		for _, q := range r.MessageQueues {
			if q.Permission != pb.Permission_READ_WRITE {
				t.Errorf("route from %s: queue %s/%d is %v", e.GRPCAddr, q.Broker.GetName(), q.Id, q.Permission)
			}
		}

		as, err := e.cl.QueryAssignment(ctx(t), &pb.QueryAssignmentRequest{Topic: res(topic), Group: res(group)})
		if err != nil || as.Status.GetCode() != pb.Code_OK {
			t.Fatalf("assignment from %s: %v %v", e.GRPCAddr, as, err)
		}
		var names []string
		for _, x := range as.Assignments {
			names = append(names, x.MessageQueue.GetBroker().GetName())
			if x.MessageQueue.Id != -1 {
				t.Errorf("assignment from %s: queue %d, want -1", e.GRPCAddr, x.MessageQueue.Id)
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"broker-a", "broker-b"}) {
			t.Errorf("assignment from %s: brokers %v, want broker-a and broker-b", e.GRPCAddr, names)
		}
	}

	// A topic only broker-b serves is routed from broker-a, which does
	// not create topics, to broker-b alone; one that no set serves is
	// refused as before.
	onlyB := brokertest.Name("OnlyB")
	bb.createTopic(t, onlyB, 2)
	r, err := a.cl.QueryRoute(ctx(t), &pb.QueryRouteRequest{Topic: res(onlyB)})
	if err != nil || r.Status.GetCode() != pb.Code_OK {
		t.Fatalf("route of a topic only broker-b serves: %v %v", r, err)
	}
	if got := brokerQueues(r.MessageQueues); !maps.Equal(got, map[string]int{"broker-b " + b.GRPCAddr: 2}) {
		t.Errorf("route of a topic only broker-b serves: %v", got)
	}
	as, err := a.cl.QueryAssignment(ctx(t), &pb.QueryAssignmentRequest{Topic: res(onlyB), Group: res(group)})
	if err != nil || as.Status.GetCode() != pb.Code_OK || len(as.Assignments) != 1 || as.Assignments[0].MessageQueue.GetBroker().GetName() != "broker-b" {
		t.Fatalf("assignment of a topic only broker-b serves: %v %v", as, err)
	}
	r, err = a.cl.QueryRoute(ctx(t), &pb.QueryRouteRequest{Topic: res(brokertest.Name("Nowhere"))})
	if err != nil || r.Status.GetCode() != pb.Code_TOPIC_NOT_FOUND {
		t.Fatalf("route of a topic no set serves: %v %v", r, err)
	}
}

// TestNodeTwoBrokerSets: the Node client, given one set's endpoint,
// consumes what the official 4.x producer spread over two sets, and its
// producer spreads its own sends over both, where the 4.x consumer finds
// them.
func TestNodeTwoBrokerSets(t *testing.T) {
	short := func(c *server.Config) { c.GRPC.LongPolling = 2 * time.Second }
	a := start(t, short)
	b := connect(t, startSet(t, a, "broker-b", true, short))
	toNode, fromNode := brokertest.Name("SpreadToNode"), brokertest.Name("SpreadFromNode")
	for _, e := range []*env{a, b} {
		e.createTopic(t, toNode, 2)
		e.createTopic(t, fromNode, 2)
	}

	p := a.Producer(t)
	perBroker := map[string]int{}
	var bodies []string
	for i := range 8 {
		body := "go-" + itoa(int32(i))
		r, err := p.SendSync(context.Background(), primitive.NewMessage(toNode, []byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		perBroker[r.MessageQueue.BrokerName]++
		bodies = append(bodies, body)
	}
	if perBroker["broker-a"] == 0 || perBroker["broker-b"] == 0 {
		t.Fatalf("the 4.x producer's sends by broker: %v, want both sets", perBroker)
	}
	out := runNode(t, a, "push", "RMQ_TOPIC="+toNode, "RMQ_GROUP="+brokertest.Name("nodespread"), "RMQ_N=8")
	want, _ := json.Marshal(bodies)
	if !strings.Contains(out, `"bodies":`+string(want)) {
		t.Fatalf("node push consumer given broker-a's endpoint, %v sent by broker: %s", perBroker, out)
	}

	got := nodeProduced(t, a, fromNode, 8)
	seen, stored := map[string]bool{}, map[string]int{}
	for len(seen) < 8 {
		m := brokertest.Wait(t, got, 30*time.Second, "the Node producer's messages")
		if !seen[string(m.Body)] {
			stored[m.Queue.BrokerName]++
		}
		seen[string(m.Body)] = true
	}
	if stored["broker-a"] == 0 || stored["broker-b"] == 0 {
		t.Errorf("the Node producer, given broker-a's endpoint, stored by broker: %v, want both sets", stored)
	}
}

// TestRecallAcrossBrokerSets: a recall sent to one set's endpoint, with a
// handle another set made, is recalled there (the Node client sends its
// recalls to its endpoint); a handle naming a broker no route knows is
// refused, naming it.
func TestRecallAcrossBrokerSets(t *testing.T) {
	a := start(t)
	b := connect(t, startSet(t, a, "broker-b", true))
	topic, group := brokertest.Name("RecallSpread"), brokertest.Name("g")
	a.createTopic(t, topic, 2)
	b.createTopic(t, topic, 2)
	at := time.Now().Add(1500 * time.Millisecond)
	keep, gone := b.sendDelayed(t, topic, "keep", at), b.sendDelayed(t, topic, "gone", at)
	recall := func(topic, handle string) *pb.RecallMessageResponse {
		t.Helper()
		r, err := a.cl.RecallMessage(ctx(t), &pb.RecallMessageRequest{Topic: res(topic), RecallHandle: handle})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for i := range 2 {
		if r := recall(topic, gone.RecallHandle); r.Status.GetCode() != pb.Code_OK || r.MessageId != "gone" {
			t.Fatalf("recall %d through broker-a: %v", i+1, r)
		}
	}
	h, err := message.ParseRecallHandle(keep.RecallHandle)
	if err != nil {
		t.Fatal(err)
	}
	h.Broker = "broker-z"
	if r := recall(topic, h.String()); r.Status.GetCode() != pb.Code_BAD_REQUEST || !strings.Contains(r.Status.GetMessage(), "broker-z") {
		t.Fatalf("a handle of an unknown broker: %v, want BAD_REQUEST naming it", r)
	}

	var bodies []string
	for len(bodies) == 0 {
		_, msgs := b.receive(t, group, topic, nil, 32, 30*time.Second, 15*time.Second)
		if len(msgs) == 0 {
			t.Fatal("received nothing")
		}
		for _, m := range msgs {
			bodies = append(bodies, string(m.Body))
		}
	}
	// Both were due at once: the recalled one would have come with the
	// other. One more poll past its due time finds nothing.
	if _, msgs := b.receive(t, group, topic, nil, 32, 30*time.Second, 2*time.Second); len(msgs) != 0 || !slices.Equal(bodies, []string{"keep"}) {
		t.Fatalf("broker-b delivered %v, then %d more; want keep only", bodies, len(msgs))
	}
}
