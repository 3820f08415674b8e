package grpcserver_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/grpcserver"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
	"github.com/rmq-go/rmq/internal/server"
)

// TestReplicaNamesLeader: an endpoint with Options.Leader routes to the
// leader's address and refuses sends, receives, acks, transactions and
// Telemetry with HA_NOT_AVAILABLE naming the leader; with no leader
// known, QueryRoute is refused alike.
func TestReplicaNamesLeader(t *testing.T) {
	e := start(t, func(c *server.Config) { c.Broker.BrokerName = "set-r" })
	topic := brokertest.Name("Replica")
	e.createTopic(t, topic, 2)
	leader := "127.0.0.9:18081"
	known := make(chan bool, 1)
	known <- true
	g, err := grpcserver.New(grpcserver.Options{Broker: e.Broker, BrokerName: "set-r", Logger: brokertest.Logger(),
		Leader: func() (string, string) {
			k := <-known
			known <- k
			if !k {
				return "", ""
			}
			return leader, "node n1"
		}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(ln)
	t.Cleanup(func() { g.Shutdown(context.Background()) })
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := pb.NewMessagingServiceClient(conn)
	c := ctx(t)

	r, err := cl.QueryRoute(c, &pb.QueryRouteRequest{Topic: res(topic)})
	if err != nil || r.Status.GetCode() != pb.Code_OK || len(r.MessageQueues) != 2 {
		t.Fatalf("route: %v %v", r, err)
	}
	for _, q := range r.MessageQueues {
		a := q.GetBroker().GetEndpoints().GetAddresses()
		if len(a) != 1 || a[0].Host != "127.0.0.9" || a[0].Port != 18081 || q.GetBroker().GetName() != "set-r" {
			t.Fatalf("queue %d names %v, not the leader", q.Id, q.GetBroker())
		}
	}
	refused := func(what string, st *pb.Status) {
		t.Helper()
		if st.GetCode() != pb.Code_HA_NOT_AVAILABLE || !strings.Contains(st.GetMessage(), leader) || !strings.Contains(st.GetMessage(), "node n1") {
			t.Fatalf("%s on a replica: %v", what, st)
		}
	}
	s, err := cl.SendMessage(c, &pb.SendMessageRequest{Messages: []*pb.Message{msg(topic, "m1", "t", "body")}})
	if err != nil {
		t.Fatal(err)
	}
	refused("send", s.Status)
	a, err := cl.AckMessage(c, &pb.AckMessageRequest{Group: res("g"), Topic: res(topic), Entries: []*pb.AckMessageEntry{{MessageId: "m1", ReceiptHandle: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	refused("ack", a.Status)
	et, err := cl.EndTransaction(c, &pb.EndTransactionRequest{Topic: res(topic), MessageId: "m1", TransactionId: "x"})
	if err != nil {
		t.Fatal(err)
	}
	refused("end transaction", et.Status)
	rs, err := cl.ReceiveMessage(c, &pb.ReceiveMessageRequest{Group: res("g"), MessageQueue: &pb.MessageQueue{Topic: res(topic)},
		BatchSize: 1, InvisibleDuration: durationpb.New(time.Second), LongPollingTimeout: durationpb.New(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	rr, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	refused("receive", rr.GetStatus())
	tel, err := cl.Telemetry(c)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := tel.Recv()
	if err != nil {
		t.Fatal(err)
	}
	refused("telemetry", tc.GetStatus())

	<-known
	known <- false
	r, err = cl.QueryRoute(c, &pb.QueryRouteRequest{Topic: res(topic)})
	if err != nil || r.Status.GetCode() != pb.Code_HA_NOT_AVAILABLE || len(r.MessageQueues) != 0 || !strings.Contains(r.Status.GetMessage(), "no leader") {
		t.Fatalf("route with no leader known: %v %v", r, err)
	}
}
