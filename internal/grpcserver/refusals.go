package grpcserver

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/rmq-go/rmq/internal/ratelog"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// RocketMQ 5 answers carry their outcome in a Status of the response, not
// in gRPC's: every response is counted here by method and code (Counts),
// and every refusal is logged, from the responses the
// service returns, with the method, the client's address, the code and
// its message, at most once per refusalLogInterval for each pair of
// method and code, as the remoting port logs its refusals.

// refusalLogInterval is how often one kind of refusal is logged.
const refusalLogInterval = 10 * time.Second

// statusResponse is every response of the service: each carries a
// Status.
type statusResponse interface{ GetStatus() *pb.Status }

// refusalCode reports whether code refuses a request, and whether the
// refusal is a failure on this side (logged at Warn). A receive that found
// no message (MESSAGE_NOT_FOUND) is an answer, not a refusal.
func refusalCode(code pb.Code) (refused, ours bool) {
	switch {
	case code == pb.Code_OK, code == pb.Code_MULTIPLE_RESULTS, code == pb.Code_MESSAGE_NOT_FOUND:
		return false, false
	case code == pb.Code_HA_NOT_AVAILABLE: // a replica names the leader: the client's route is old
		return true, false
	case code >= pb.Code_INTERNAL_ERROR:
		return true, true
	case code >= pb.Code_BAD_REQUEST:
		return true, false
	}
	return false, false
}

// refusals counts the service's responses and logs the refusals among
// them.
type refusals struct {
	log    *ratelog.Log
	counts *Counts
}

func newRefusals(logger *slog.Logger, counts *Counts) *refusals {
	return &refusals{log: ratelog.New(logger, refusalLogInterval), counts: counts}
}

// note counts resp's Status and logs it when it refuses the request.
func (r *refusals) note(ctx context.Context, method string, resp any) {
	sr, ok := resp.(statusResponse)
	if !ok || sr.GetStatus() == nil {
		return
	}
	st := sr.GetStatus()
	r.counts.add(method, st.GetCode())
	refused, ours := refusalCode(st.GetCode())
	if !refused {
		return
	}
	client := "unknown"
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		client = p.Addr.String()
	}
	level := slog.LevelInfo
	if ours {
		level = slog.LevelWarn
	}
	r.log.Log(level, method+" "+strconv.Itoa(int(st.GetCode())), "grpc: request refused",
		"method", method, "peer", client, "code", st.GetCode().String(), "reason", st.GetMessage())
}

// unary is the interceptor of unary calls.
func (r *refusals) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err == nil {
		r.note(ctx, info.FullMethod, resp)
	}
	return resp, err
}

// stream is the interceptor of streaming calls: it looks at each message
// the service sends.
func (r *refusals) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, refusalStream{ServerStream: ss, r: r, method: info.FullMethod})
}

type refusalStream struct {
	grpc.ServerStream
	r      *refusals
	method string
}

func (s refusalStream) SendMsg(m any) error {
	s.r.note(s.Context(), s.method, m)
	return s.ServerStream.SendMsg(m)
}
