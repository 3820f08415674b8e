package grpcserver

import (
	"context"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// A replica forwards RecallMessage to its set's leader. RocketMQ 5's
// clients send a recall to the endpoint they were given, not to the
// broker their routes name, as they do sends; a client given a replica
// as its endpoint could not recall otherwise. The call goes on with the
// client's own x-mq-* and authorization metadata, so the leader checks
// it as if the client had called it, and its answer comes back as it is.
// The leader is reached over h2c: a set whose gRPC ports take TLS only
// (tls mode enforcing) answers with the refusal naming the leader.

const (
	// forwardTimeout bounds a forwarded call.
	forwardTimeout = 5 * time.Second
	// mdForwarded marks a forwarded call, which is not forwarded again:
	// two members that each take the other for the leader, while roles
	// change, refuse it instead of passing it back and forth.
	mdForwarded = "x-rmq-forwarded"
)

// leaderConn is the replica's connection to the leader it forwards to.
type leaderConn struct {
	mu   sync.Mutex
	addr string
	conn *grpc.ClientConn
}

// get returns a connection to addr, replacing one to an earlier leader.
func (l *leaderConn) get(addr string) (*grpc.ClientConn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil && l.addr == addr {
		return l.conn, nil
	}
	if l.conn != nil {
		l.conn.Close()
		l.conn = nil
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	l.addr, l.conn = addr, conn
	return conn, nil
}

func (l *leaderConn) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		l.conn.Close()
		l.conn = nil
	}
}

// forwardRecall serves RecallMessage on a replica: the leader's answer.
func (s *Server) forwardRecall(ctx context.Context, req *pb.RecallMessageRequest) *pb.RecallMessageResponse {
	addr, _ := s.opts.Leader()
	in, _ := metadata.FromIncomingContext(ctx)
	if addr == "" || (s.opts.TLS != nil && !s.opts.TLSPermissive) || len(in.Get(mdForwarded)) > 0 {
		return &pb.RecallMessageResponse{Status: s.notLeader()}
	}
	failed := func(err error) *pb.RecallMessageResponse {
		return &pb.RecallMessageResponse{Status: &pb.Status{Code: pb.Code_HA_NOT_AVAILABLE, Message: "forwarding the recall to the set's leader at " + addr + ": " + err.Error()}}
	}
	conn, err := s.toLeader.get(addr)
	if err != nil {
		return failed(err)
	}
	out := metadata.Pairs(mdForwarded, "1")
	for k, v := range in {
		if strings.HasPrefix(k, "x-mq-") || k == mdAuthorization {
			out[k] = v
		}
	}
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(ctx, out), forwardTimeout)
	defer cancel()
	resp, err := pb.NewMessagingServiceClient(conn).RecallMessage(ctx, req)
	if err != nil {
		return failed(err)
	}
	return resp
}
