package grpcserver

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// A replicated set's replica (Options.Leader set) serves only what reads
// the replicated topic and group configs and changes nothing: QueryRoute
// and QueryAssignment, whose queues name the leader's endpoint, so a
// client's next route takes it there. It forwards RecallMessage to the
// leader (forward.go). Every other call is refused before
// its handler runs, with HA_NOT_AVAILABLE and a message naming the
// leader: the 5.x clients retry a send refused so, and a consumer
// receives again after its back-off. A replica keeps no POP state and no
// sessions.

// replicaServes are the methods a replica answers.
var replicaServes = map[string]bool{
	"QueryRoute":      true,
	"QueryAssignment": true,
}

// methodName is the last element of a full gRPC method name.
func methodName(full string) string { return full[strings.LastIndexByte(full, '/')+1:] }

// notLeader is the refusal of a call a replica does not serve.
func (s *Server) notLeader() *pb.Status {
	addr, who := s.opts.Leader()
	msg := fmt.Sprintf("this member of broker set %s is a replica and takes no sends, receives, acks or transactions: ", s.opts.BrokerName)
	switch {
	case addr != "":
		msg += fmt.Sprintf("the leader is %s, serving gRPC at %s; query the route again", who, addr)
	case who != "":
		msg += fmt.Sprintf("the leader is %s, whose gRPC address is not known here yet; query the route again", who)
	default:
		msg += "the set has no leader now; query the route again"
	}
	return &pb.Status{Code: pb.Code_HA_NOT_AVAILABLE, Message: msg}
}

// leaderEndpoint is the address a replica's routes name, or the refusal
// while it knows none.
func (s *Server) leaderEndpoint() (string, error) {
	addr, _ := s.opts.Leader()
	if addr == "" {
		st := s.notLeader()
		return "", refuse(st.Code, "%s", st.Message)
	}
	return addr, nil
}

// refusal builds method's response carrying st: every response of the
// service has a status field.
func refusal(fullMethod string, st *pb.Status) (proto protoreflect.ProtoMessage, ok bool) {
	md := pb.File_apache_rocketmq_v2_service_proto.Services().ByName("MessagingService").Methods().ByName(protoreflect.Name(methodName(fullMethod)))
	if md == nil {
		return nil, false
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, false
	}
	m := mt.New()
	f := m.Descriptor().Fields().ByName("status")
	if f == nil {
		return nil, false
	}
	m.Set(f, protoreflect.ValueOfMessage(st.ProtoReflect()))
	return m.Interface(), true
}

// replicaUnary refuses, on a replica, the unary calls it does not serve.
func (s *Server) replicaUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if s.opts.Leader == nil || replicaServes[methodName(info.FullMethod)] {
		return handler(ctx, req)
	}
	switch r := req.(type) {
	case *pb.RecallMessageRequest:
		return s.forwardRecall(ctx, r), nil // forward.go
	case *pb.SyncLiteSubscriptionRequest:
		return s.forwardLite(ctx, r), nil // lite.go
	}
	st := s.notLeader()
	if resp, ok := refusal(info.FullMethod, st); ok {
		return resp, nil
	}
	return nil, status.Error(codes.Unavailable, st.Message)
}

// replicaStream refuses, on a replica, every streaming call (receives,
// Telemetry) with one response carrying the refusal.
func (s *Server) replicaStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if s.opts.Leader == nil || replicaServes[methodName(info.FullMethod)] {
		return handler(srv, ss)
	}
	st := s.notLeader()
	resp, ok := refusal(info.FullMethod, st)
	if !ok {
		return status.Error(codes.Unavailable, st.Message)
	}
	return ss.SendMsg(resp)
}
