package grpcserver

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// RecallMessage is forwarded. RocketMQ 5's clients send a recall to the
// endpoint they were given, not to the broker their routes name, as they
// do sends. So a replica forwards it to its set's leader, and any member
// forwards a handle made by another broker set to that set's endpoint
// (peers.go); a client could not recall otherwise. The call goes on with
// the client's own x-mq-* and authorization metadata, so the broker that
// holds the message checks it as if the client had called it, and its
// answer comes back as it is. The other broker is reached over h2c: a
// broker whose gRPC port takes TLS only (tls mode enforcing) refuses
// instead, naming where to recall.

const (
	// forwardTimeout bounds a forwarded call.
	forwardTimeout = 5 * time.Second
	// mdForwarded marks a forwarded call with each kind of hop it made
	// (hopLeader, hopSet), and a call is forwarded at most once of each
	// kind: two members that each take the other for the leader, while
	// roles change, refuse it instead of passing it back and forth, and
	// a recall goes at most replica, leader, other set, its leader.
	mdForwarded = "x-rmq-forwarded"
	hopLeader   = "leader"
	hopSet      = "set"
	// maxForwardConns bounds the connections kept to other brokers.
	maxForwardConns = 64
)

// forwardConns are the connections to the brokers calls are forwarded
// to, by address: a replica's leader, other broker sets.
type forwardConns struct {
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// get returns a connection to addr. Past maxForwardConns it closes the
// others first: the addresses are a set's leader and the cluster's
// other sets, which change only as roles and sets do.
func (f *forwardConns) get(addr string) (*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.conns[addr]; c != nil {
		return c, nil
	}
	if len(f.conns) >= maxForwardConns {
		f.closeLocked()
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	if f.conns == nil {
		f.conns = make(map[string]*grpc.ClientConn)
	}
	f.conns[addr] = conn
	return conn, nil
}

func (f *forwardConns) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeLocked()
}

func (f *forwardConns) closeLocked() {
	for a, c := range f.conns {
		c.Close()
		delete(f.conns, a)
	}
}

// forwardable reports whether this call may be forwarded with a hop of
// kind: not one that made such a hop already, and not under TLS only.
func (s *Server) forwardable(ctx context.Context, kind string) bool {
	in, _ := metadata.FromIncomingContext(ctx)
	return (s.opts.TLS == nil || s.opts.TLSPermissive) && !slices.Contains(in.Get(mdForwarded), kind)
}

// forwarded reports whether this call made a hop of kind already.
func (s *Server) forwarded(ctx context.Context, kind string) bool {
	in, _ := metadata.FromIncomingContext(ctx)
	return slices.Contains(in.Get(mdForwarded), kind)
}

// forwardRecall serves RecallMessage on a replica: the leader's answer.
func (s *Server) forwardRecall(ctx context.Context, req *pb.RecallMessageRequest) *pb.RecallMessageResponse {
	addr, _ := s.opts.Leader()
	if addr == "" || !s.forwardable(ctx, hopLeader) {
		return &pb.RecallMessageResponse{Status: s.notLeader()}
	}
	return s.forward(ctx, req, hopLeader, addr, "the set's leader")
}

// forward passes req on to the broker at addr, what, as a hop of kind,
// and returns its answer.
func (s *Server) forward(ctx context.Context, req *pb.RecallMessageRequest, kind, addr, what string) *pb.RecallMessageResponse {
	resp, st := forwardCall(s, ctx, kind, addr, "the recall to "+what, func(ctx context.Context, c pb.MessagingServiceClient) (*pb.RecallMessageResponse, error) {
		return c.RecallMessage(ctx, req)
	})
	if st != nil {
		return &pb.RecallMessageResponse{Status: st}
	}
	return resp
}

// forwardCall makes call, a hop of kind, on the broker at addr, with the
// client's own x-mq-* and authorization metadata; what names the call and
// where it goes in the status of a failure to reach it.
func forwardCall[R any](s *Server, ctx context.Context, kind, addr, what string, call func(context.Context, pb.MessagingServiceClient) (R, error)) (R, *pb.Status) {
	var zero R
	failed := func(err error) (R, *pb.Status) {
		return zero, &pb.Status{Code: pb.Code_HA_NOT_AVAILABLE, Message: "forwarding " + what + " at " + addr + ": " + err.Error()}
	}
	conn, err := s.forwardTo.get(addr)
	if err != nil {
		return failed(err)
	}
	in, _ := metadata.FromIncomingContext(ctx)
	out := metadata.MD{mdForwarded: append(slices.Clone(in.Get(mdForwarded)), kind)}
	for k, v := range in {
		if strings.HasPrefix(k, "x-mq-") || k == mdAuthorization {
			out[k] = v
		}
	}
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(ctx, out), forwardTimeout)
	defer cancel()
	resp, err := call(ctx, pb.NewMessagingServiceClient(conn))
	if err != nil {
		return failed(err)
	}
	return resp, nil
}
