package grpcserver_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/broker"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
	"github.com/rmq-go/rmq/internal/server"
)

const grpcACL = `
enabled: true
accounts:
  - accessKey: brokerAdmin
    secretKey: brokerAdminSecret
    admin: true
  - accessKey: orderApp
    secretKey: orderAppSecret
    topicPerms: [GrpcOrders=PUB|SUB]
    groupPerms: [grpcBilling=SUB]
  - accessKey: subOnly1
    secretKey: subOnlySecret
    topicPerms: [GrpcOrders=SUB]
    groupPerms: [grpcBilling=SUB]
`

// signed returns metadata signed as RocketMQ 5 clients sign.
func signed(ak, sk string) metadata.MD {
	date := time.Now().UTC().Format("20060102T150405Z")
	return metadata.Pairs("x-mq-date-time", date,
		"authorization", "MQv2-HMAC-SHA1 Credential="+ak+", SignedHeaders=x-mq-date-time, Signature="+acl.SignHex(date, sk))
}

func TestACL(t *testing.T) {
	cfg, err := acl.ParseConfig([]byte(grpcACL))
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, func(c *server.Config) {
		c.ACL = cfg
		c.Broker.AccessKey, c.Broker.SecretKey = "brokerAdmin", "brokerAdminSecret"
		c.Broker.Topics = []broker.TopicOptions{{Name: "GrpcOrders", Queues: 2}}
	})
	route := func(md metadata.MD) pb.Code {
		c := ctx(t)
		if md != nil {
			c = metadata.NewOutgoingContext(c, metadata.Join(md, metadata.Pairs("x-mq-client-id", "acl-client")))
		}
		r, err := e.cl.QueryRoute(c, &pb.QueryRouteRequest{Topic: res("GrpcOrders")})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.GetCode()
	}
	for name, c := range map[string]struct {
		md   metadata.MD
		want pb.Code
	}{
		"unsigned":       {nil, pb.Code_UNAUTHORIZED},
		"wrong secret":   {signed("orderApp", "notTheSecret"), pb.Code_UNAUTHORIZED},
		"unknown":        {signed("nobody99", "whatever"), pb.Code_UNAUTHORIZED},
		"signed":         {signed("orderApp", "orderAppSecret"), pb.Code_OK},
		"subscribe only": {signed("subOnly1", "subOnlySecret"), pb.Code_OK},
	} {
		if got := route(c.md); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
	// A subscriber may not send.
	c := metadata.NewOutgoingContext(ctx(t), metadata.Join(signed("subOnly1", "subOnlySecret"), metadata.Pairs("x-mq-client-id", "acl-client")))
	r, err := e.cl.SendMessage(c, &pb.SendMessageRequest{Messages: []*pb.Message{msg("GrpcOrders", "id", "t", "x")}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status.GetCode() != pb.Code_FORBIDDEN {
		t.Fatalf("send by a subscriber: %v", r.Status)
	}
	// Settings the broker refuses end the Telemetry stream with the
	// reason: the clients apply any settings a reply carries whatever its
	// status, so a reply would start a producer the broker refused.
	st := &pb.Settings{ClientType: pb.ClientType_PRODUCER.Enum(), PubSub: &pb.Settings_Publishing{Publishing: &pb.Publishing{Topics: []*pb.Resource{res("GrpcOrders")}}}}
	if err := telemetryRefused(t, e, c, st); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a subscriber's producer settings: %v, want PermissionDenied", err)
	}
	unsigned := metadata.NewOutgoingContext(ctx(t), metadata.Pairs("x-mq-client-id", "acl-nobody"))
	if err := telemetryRefused(t, e, unsigned, st); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("unsigned producer settings: %v, want Unauthenticated", err)
	}
}
