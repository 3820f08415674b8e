package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rmq-go/rmq/examples/wasm/internal/guestbuild"
	"github.com/rmq-go/rmq/internal/brokertest"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
	"github.com/rmq-go/rmq/internal/server"
)

// TestTransformGRPC sends over the RocketMQ 5 gRPC protocol to a topic the
// jsonschema example validates: a bad message's entry is BAD_REQUEST with
// the plugin's reason, a good one is stored.
func TestTransformGRPC(t *testing.T) {
	schema := guestbuild.Module(t, "../jsonschema")
	topic := brokertest.Name("Orders")
	list := &pluginList{}
	list.set(transformPlugin("schema", schema, `{"required":{"id":"string"}}`, topic))
	env := brokertest.Start(t, func(c *server.Config) {
		c.Plugins, _ = list.get()
		c.PluginSource = list.get
		c.PluginCacheDir = cacheDir
		c.GRPCListen = "127.0.0.1:0"
	})
	createTopic(t, env, topic, 1)
	conn, err := grpc.NewClient(env.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := pb.NewMessagingServiceClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "transform-test", "x-mq-protocol", "v2")
	send := func(id, body string) *pb.Status {
		tag := "t"
		m := &pb.Message{Topic: &pb.Resource{Name: topic}, Body: []byte(body),
			SystemProperties: &pb.SystemProperties{MessageId: id, Tag: &tag, MessageType: pb.MessageType_NORMAL, BornTimestamp: timestamppb.Now(), BornHost: "127.0.0.1"}}
		r, err := cl.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{m}})
		if err != nil || len(r.Entries) != 1 {
			t.Fatalf("send %s: %v %v", id, r, err)
		}
		return r.Entries[0].Status
	}
	if st := send("0A0000000000000000000001", `{"n":1}`); st.GetCode() != pb.Code_BAD_REQUEST || !strings.Contains(st.GetMessage(), "field id is required") {
		t.Fatalf("bad message: %v, want BAD_REQUEST with the plugin's reason", st)
	}
	if st := send("0A0000000000000000000002", `{"id":"g1"}`); st.GetCode() != pb.Code_OK {
		t.Fatalf("good message: %v", st)
	}
	if ps := pluginStatus(t, env, "schema"); ps.Rejected != 1 {
		t.Fatalf("schema status %+v: want 1 rejected", ps)
	}
}
