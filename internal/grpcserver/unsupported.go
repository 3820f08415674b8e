package grpcserver

import (
	"context"
	"fmt"

	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// unsupported answers an RPC this broker does not serve, at once.
func unsupported(rpc string) *pb.Status {
	return statusOf(fmt.Errorf("%w: %s (consume with POP: ReceiveMessage, or use the 4.x protocol)", ErrUnsupported, rpc))
}

// PullMessage is not served: 5.x pull consumers are not supported.
func (s *Server) PullMessage(req *pb.PullMessageRequest, stream pb.MessagingService_PullMessageServer) error {
	return stream.Send(&pb.PullMessageResponse{Content: &pb.PullMessageResponse_Status{Status: unsupported("PullMessage")}})
}

// UpdateOffset is not served.
func (s *Server) UpdateOffset(context.Context, *pb.UpdateOffsetRequest) (*pb.UpdateOffsetResponse, error) {
	return &pb.UpdateOffsetResponse{Status: unsupported("UpdateOffset")}, nil
}

// GetOffset is not served.
func (s *Server) GetOffset(context.Context, *pb.GetOffsetRequest) (*pb.GetOffsetResponse, error) {
	return &pb.GetOffsetResponse{Status: unsupported("GetOffset")}, nil
}

// QueryOffset is not served.
func (s *Server) QueryOffset(context.Context, *pb.QueryOffsetRequest) (*pb.QueryOffsetResponse, error) {
	return &pb.QueryOffsetResponse{Status: unsupported("QueryOffset")}, nil
}
