package grpcserver

import (
	"context"
	"errors"
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
// permission and the gRPC endpoint, then those of the other broker sets
// that serve it (peers.go). Queue 0 is readable and writable whenever
// the topic is (the Node client only uses queue 0).
func (s *Server) QueryRoute(ctx context.Context, req *pb.QueryRouteRequest) (*pb.QueryRouteResponse, error) {
	name := resource(req.GetTopic())
	if _, err := s.begin(ctx, acl.TopicRes(name, acl.PubSub)); err != nil {
		return &pb.QueryRouteResponse{Status: statusOf(err)}, nil
	}
	tc, err := s.topic(name)
	peers := s.peersOf(ctx, name, err)
	if err != nil && len(peers) == 0 {
		return &pb.QueryRouteResponse{Status: statusOf(err)}, nil
	}
	// A topic only other sets serve is routed to them alone.
	types, qs := allTypes, []*pb.MessageQueue(nil)
	if err == nil {
		br, err := s.brokerPB()
		if err != nil {
			return &pb.QueryRouteResponse{Status: statusOf(err)}, nil
		}
		types = acceptedTypes(tc)
		qs = appendQueues(nil, req.Topic, tc.ReadQueueNums, tc.WriteQueueNums, tc.Readable(), tc.Writable(), br, types)
	}
	for _, p := range peers {
		qs = appendQueues(qs, req.Topic, p.read, p.write, p.readable, p.writable, p.broker(), types)
	}
	return &pb.QueryRouteResponse{Status: okStatus(), MessageQueues: qs}, nil
}

// peersOf returns the other sets serving topic, whose lookup here ended
// with err: none for a topic that cannot be (a bad name, no permission),
// so such a request costs the name servers nothing.
func (s *Server) peersOf(ctx context.Context, topic string, err error) []peerSet {
	if err != nil && !errors.Is(err, broker.ErrTopicNotFound) {
		return nil
	}
	return s.peers.sets(ctx, topic)
}

// appendQueues appends one broker's queues of a topic, read and write
// queues as many as it has and its permissions allow. A topic's other
// sets are taken to accept the message types it accepts here: `topics
// create --cluster` gives every set one configuration.
func appendQueues(qs []*pb.MessageQueue, topic *pb.Resource, read, write int, readable, writable bool, br *pb.Broker, types []pb.MessageType) []*pb.MessageQueue {
	for i := range max(read, write) {
		r := i < read && readable
		w := i < write && i < read && writable
		p := pb.Permission_NONE
		switch {
		case r && w:
			p = pb.Permission_READ_WRITE
		case r:
			p = pb.Permission_READ
		case w:
			p = pb.Permission_WRITE
		}
		qs = append(qs, &pb.MessageQueue{Topic: topic, Id: int32(i), Permission: p, Broker: br, AcceptMessageTypes: types})
	}
	return qs
}

// broker names a peer set and its master's endpoint.
func (p peerSet) broker() *pb.Broker {
	return &pb.Broker{Name: p.name, Id: 0, Endpoints: endpoints(p.endpoint)}
}

// QueryAssignment gives a push consumer one queue, id -1, standing for
// every queue of the topic here, and one for each other broker set that
// serves it (peers.go): POP needs no allocation among clients. A FIFO
// group gets every read queue of every set.
func (s *Server) QueryAssignment(ctx context.Context, req *pb.QueryAssignmentRequest) (*pb.QueryAssignmentResponse, error) {
	name, group := resource(req.GetTopic()), resource(req.GetGroup())
	if _, err := s.begin(ctx, acl.TopicRes(name, acl.Sub), acl.GroupRes(group, acl.Sub)); err != nil {
		return &pb.QueryAssignmentResponse{Status: statusOf(err)}, nil
	}
	tc, err := s.topic(name)
	peers := s.peersOf(ctx, name, err)
	if err != nil && len(peers) == 0 {
		return &pb.QueryAssignmentResponse{Status: statusOf(err)}, nil
	}
	local := err == nil && tc.Readable() && tc.ReadQueueNums > 0
	if !local && !slices.ContainsFunc(peers, func(p peerSet) bool { return p.readable && p.read > 0 }) {
		return &pb.QueryAssignmentResponse{Status: statusOf(refuse(pb.Code_FORBIDDEN, "topic %s is not readable", name))}, nil
	}
	types := allTypes
	if err == nil {
		types = acceptedTypes(tc)
	}
	gc, _ := s.b.GroupConfig(group)
	assign := func(out []*pb.Assignment, br *pb.Broker, read int) []*pb.Assignment {
		if gc.ConsumeMessageOrderly {
			// A FIFO group is assigned every read queue, as Apache's proxy does.
			for i := range read {
				out = append(out, &pb.Assignment{MessageQueue: &pb.MessageQueue{Topic: req.Topic, Id: int32(i), Permission: pb.Permission_READ_WRITE, Broker: br, AcceptMessageTypes: types}})
			}
			return out
		}
		return append(out, &pb.Assignment{MessageQueue: &pb.MessageQueue{Topic: req.Topic, Id: -1, Permission: pb.Permission_READ_WRITE, Broker: br, AcceptMessageTypes: types}})
	}
	var out []*pb.Assignment
	if local {
		br, err := s.brokerPB()
		if err != nil {
			return &pb.QueryAssignmentResponse{Status: statusOf(err)}, nil
		}
		out = assign(out, br, tc.ReadQueueNums)
	}
	for _, p := range peers {
		if p.readable && p.read > 0 {
			out = assign(out, p.broker(), p.read)
		}
	}
	return &pb.QueryAssignmentResponse{Status: okStatus(), Assignments: out}, nil
}
