package grpcserver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/broker"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// allTypes are the message types of a MIXED topic, or one without a type
// (a 4.x topic).
var allTypes = []pb.MessageType{pb.MessageType_NORMAL, pb.MessageType_FIFO, pb.MessageType_DELAY, pb.MessageType_TRANSACTION}

// acceptedTypes are the message types a topic accepts.
func acceptedTypes(tc broker.TopicConfig) []pb.MessageType {
	if t, ok := pb.MessageType_value[tc.MessageType]; ok && tc.MessageType != "MESSAGE_TYPE_UNSPECIFIED" {
		return []pb.MessageType{pb.MessageType(t)}
	}
	return allTypes
}

// accepts reports whether a topic accepts messages of type t.
func accepts(tc broker.TopicConfig, t pb.MessageType) bool {
	if t == pb.MessageType_MESSAGE_TYPE_UNSPECIFIED {
		t = pb.MessageType_NORMAL
	}
	return slices.Contains(acceptedTypes(tc), t)
}

// endpoints returns a gRPC address as Endpoints.
func endpoints(addr string) *pb.Endpoints {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	scheme := pb.AddressScheme_DOMAIN_NAME
	if a, err := netip.ParseAddr(host); err == nil {
		scheme = pb.AddressScheme_IPv4
		if a.Is6() && !a.Is4In6() {
			scheme = pb.AddressScheme_IPv6
		}
	}
	return &pb.Endpoints{Scheme: scheme, Addresses: []*pb.Address{{Host: host, Port: int32(p)}}}
}

// brokerPB is the broker routes name: this endpoint, or on a replicated
// set's replica the leader's.
func (s *Server) brokerPB() (*pb.Broker, error) {
	addr := s.Addr()
	if s.opts.Leader != nil {
		var err error
		if addr, err = s.leaderEndpoint(); err != nil {
			return nil, err
		}
	}
	return &pb.Broker{Name: s.opts.BrokerName, Id: 0, Endpoints: endpoints(addr)}, nil
}

// topic returns a topic's configuration, creating it when the broker
// auto-creates topics.
func (s *Server) topic(name string) (broker.TopicConfig, error) {
	tc, err := s.b.EnsureTopic(name)
	if err != nil {
		return tc, fmt.Errorf("topic %s: %w", name, err)
	}
	return tc, nil
}

// QueryRoute lists the topic's queues on this broker, each with its
// permission and the gRPC endpoint. Queue 0 is readable and writable
// whenever the topic is (the Node client only uses queue 0).
func (s *Server) QueryRoute(ctx context.Context, req *pb.QueryRouteRequest) (*pb.QueryRouteResponse, error) {
	name := resource(req.GetTopic())
	if _, err := s.begin(ctx, acl.TopicRes(name, acl.PubSub)); err != nil {
		return &pb.QueryRouteResponse{Status: statusOf(err)}, nil
	}
	tc, err := s.topic(name)
	if err != nil {
		return &pb.QueryRouteResponse{Status: statusOf(err)}, nil
	}
	br, err := s.brokerPB()
	if err != nil {
		return &pb.QueryRouteResponse{Status: statusOf(err)}, nil
	}
	n := max(tc.ReadQueueNums, tc.WriteQueueNums)
	qs := make([]*pb.MessageQueue, 0, n)
	for i := range n {
		r := i < tc.ReadQueueNums && tc.Readable()
		w := i < tc.WriteQueueNums && i < tc.ReadQueueNums && tc.Writable()
		perm := pb.Permission_NONE
		switch {
		case r && w:
			perm = pb.Permission_READ_WRITE
		case r:
			perm = pb.Permission_READ
		case w:
			perm = pb.Permission_WRITE
		}
		qs = append(qs, &pb.MessageQueue{Topic: req.Topic, Id: int32(i), Permission: perm, Broker: br, AcceptMessageTypes: acceptedTypes(tc)})
	}
	return &pb.QueryRouteResponse{Status: okStatus(), MessageQueues: qs}, nil
}

// QueryAssignment gives a push consumer one queue, id -1, standing for
// every queue of the topic here: POP needs no allocation among clients.
func (s *Server) QueryAssignment(ctx context.Context, req *pb.QueryAssignmentRequest) (*pb.QueryAssignmentResponse, error) {
	name, group := resource(req.GetTopic()), resource(req.GetGroup())
	if _, err := s.begin(ctx, acl.TopicRes(name, acl.Sub), acl.GroupRes(group, acl.Sub)); err != nil {
		return &pb.QueryAssignmentResponse{Status: statusOf(err)}, nil
	}
	tc, err := s.topic(name)
	if err != nil {
		return &pb.QueryAssignmentResponse{Status: statusOf(err)}, nil
	}
	if !tc.Readable() || tc.ReadQueueNums == 0 {
		return &pb.QueryAssignmentResponse{Status: statusOf(refuse(pb.Code_FORBIDDEN, "topic %s is not readable", name))}, nil
	}
	br, err := s.brokerPB()
	if err != nil {
		return &pb.QueryAssignmentResponse{Status: statusOf(err)}, nil
	}
	if gc, _ := s.b.GroupConfig(group); gc.ConsumeMessageOrderly {
		// A FIFO group is assigned every read queue, as Apache's proxy does.
		out := make([]*pb.Assignment, tc.ReadQueueNums)
		for i := range out {
			out[i] = &pb.Assignment{MessageQueue: &pb.MessageQueue{Topic: req.Topic, Id: int32(i), Permission: pb.Permission_READ_WRITE, Broker: br, AcceptMessageTypes: acceptedTypes(tc)}}
		}
		return &pb.QueryAssignmentResponse{Status: okStatus(), Assignments: out}, nil
	}
	mq := &pb.MessageQueue{Topic: req.Topic, Id: -1, Permission: pb.Permission_READ_WRITE, Broker: br, AcceptMessageTypes: acceptedTypes(tc)}
	return &pb.QueryAssignmentResponse{Status: okStatus(), Assignments: []*pb.Assignment{{MessageQueue: mq}}}, nil
}
