package grpcserver

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// Errors of the endpoint. Each maps to one Code in statusOf, the one
// place our errors become the Status of a response.
var (
	ErrClientIDRequired = errors.New("grpcserver: x-mq-client-id metadata is required")
	ErrUnknownClient    = errors.New("grpcserver: unknown client: send Settings over Telemetry first")
	ErrTooManyRequests  = errors.New("grpcserver: too many sessions or waiting receives")
	ErrUnsupported      = errors.New("grpcserver: not supported by this broker")
	ErrClosed           = errors.New("grpcserver: shutting down")
)

// codedError carries the Code a request is refused with.
type codedError struct {
	code pb.Code
	msg  string
}

func (e *codedError) Error() string { return e.msg }

// refuse returns an error answered with code.
func refuse(code pb.Code, format string, args ...any) error {
	return &codedError{code: code, msg: fmt.Sprintf(format, args...)}
}

// okStatus is the Status of a request served; never leave Code unset:
// Node's client treats 0 as an error.
func okStatus() *pb.Status { return &pb.Status{Code: pb.Code_OK, Message: "OK"} }

// statusOf maps an error to the Status of a response: nil is OK.
func statusOf(err error) *pb.Status {
	if err == nil {
		return okStatus()
	}
	return &pb.Status{Code: codeOf(err), Message: err.Error()}
}

func codeOf(err error) pb.Code {
	var ce *codedError
	var denied *acl.Denied
	switch {
	case errors.As(err, &ce):
		return ce.code
	case errors.Is(err, ErrClientIDRequired):
		return pb.Code_CLIENT_ID_REQUIRED
	case errors.Is(err, broker.ErrBadReceiptHandle):
		return pb.Code_INVALID_RECEIPT_HANDLE
	case errors.Is(err, broker.ErrBadTransactionID), errors.Is(err, broker.ErrTxnNotPending):
		return pb.Code_INVALID_TRANSACTION_ID
	case errors.Is(err, broker.ErrNoMessage):
		return pb.Code_MESSAGE_NOT_FOUND
	case errors.Is(err, ErrUnknownClient):
		return pb.Code_UNRECOGNIZED_CLIENT_TYPE
	case errors.Is(err, ErrTooManyRequests), errors.Is(err, broker.ErrTooManyWaiting):
		return pb.Code_TOO_MANY_REQUESTS
	case errors.Is(err, ErrUnsupported):
		return pb.Code_UNSUPPORTED
	case errors.Is(err, ErrClosed):
		return pb.Code_INTERNAL_SERVER_ERROR
	case errors.As(err, &denied):
		if denied.Reason == acl.NoPermission {
			return pb.Code_FORBIDDEN
		}
		return pb.Code_UNAUTHORIZED
	case errors.Is(err, broker.ErrBadTopic):
		return pb.Code_ILLEGAL_TOPIC
	case errors.Is(err, broker.ErrBadLiteTopic):
		return pb.Code_ILLEGAL_LITE_TOPIC
	case errors.Is(err, broker.ErrLiteTopicQuota):
		return pb.Code_LITE_TOPIC_QUOTA_EXCEEDED
	case errors.Is(err, broker.ErrGroupNotConfigured):
		return pb.Code_CONSUMER_GROUP_NOT_FOUND
	// The broker's kinds of refusal (core/broker/errors.go).
	case errors.Is(err, message.ErrPropertiesTooLong):
		return pb.Code_MESSAGE_PROPERTIES_TOO_LARGE
	case errors.Is(err, broker.ErrTooLarge):
		return pb.Code_MESSAGE_BODY_TOO_LARGE
	case errors.Is(err, broker.ErrIllegal), errors.Is(err, broker.ErrNoQueue):
		return pb.Code_BAD_REQUEST
	case errors.Is(err, broker.ErrNoPermission):
		return pb.Code_FORBIDDEN
	case errors.Is(err, broker.ErrTopicNotFound):
		return pb.Code_TOPIC_NOT_FOUND
	case errors.Is(err, broker.ErrUnavailable), errors.Is(err, broker.ErrNotLeader), errors.Is(err, broker.ErrInternal):
		return pb.Code_INTERNAL_SERVER_ERROR
	case errors.Is(err, context.DeadlineExceeded):
		return pb.Code_PROXY_TIMEOUT
	case errors.Is(err, context.Canceled):
		return pb.Code_REQUEST_TIMEOUT
	}
	return pb.Code_INTERNAL_SERVER_ERROR
}

// rpcError is a refusal as the gRPC status a call ends with, for calls
// that answer no Status of their own (a Telemetry stream's): the class
// of its code (400xx, 401xx, ...) picks the gRPC code, and its message
// names the RocketMQ code too.
func rpcError(st *pb.Status) error {
	c := codes.Internal
	switch n := int32(st.GetCode()); {
	case n >= 40000 && n < 40100:
		c = codes.InvalidArgument
	case n >= 40100 && n < 40200:
		c = codes.Unauthenticated
	case n >= 40300 && n < 40400:
		c = codes.PermissionDenied
	case n >= 40400 && n < 40500:
		c = codes.NotFound
	case n >= 42900 && n < 43000:
		c = codes.ResourceExhausted
	case n >= 50100 && n < 50200, n >= 50500 && n < 50600:
		c = codes.Unimplemented
	case n >= 50400 && n < 50500:
		c = codes.DeadlineExceeded
	}
	return status.Error(c, st.GetCode().String()+": "+st.GetMessage())
}
