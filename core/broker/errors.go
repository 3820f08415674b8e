package broker

import (
	"errors"
	"fmt"

	"github.com/rmq-go/rmq/core/remoting"
)

// Kinds of refusal. An operation that refuses a request returns an error
// that wraps one of these (test with errors.Is) and whose text says why;
// each front end turns the kinds into its own codes in one table: the
// remoting handlers in remotingCode below, the gRPC endpoint in
// internal/grpcserver's codes.go. No caller reads an error's text.
var (
	// ErrIllegal: the request or message breaks a rule (a bad property,
	// a batch holding delayed messages, a transform's rejection).
	ErrIllegal = errors.New("illegal")
	// ErrTooLarge: a body, a batch or the properties are over a limit.
	ErrTooLarge = errors.New("too large")
	// ErrNoPermission: the topic is not writable, or reserved for the
	// broker.
	ErrNoPermission = errors.New("no permission")
	// ErrTopicNotFound: the topic does not exist and is not created.
	ErrTopicNotFound = errors.New("topic not found")
	// ErrNoQueue: the topic has no such (readable) queue, or the topic's
	// name is not one a topic may have.
	ErrNoQueue = errors.New("no such queue")
	// ErrUnavailable: the broker cannot take it now (shutting down, disk
	// full); another broker may.
	ErrUnavailable = errors.New("service not available")
	// ErrNotLeader: this member of a replicated set does not lead it; the
	// error names the leader when one is known.
	ErrNotLeader = errors.New("not the set's leader")
	// ErrInternal: the broker failed (a store error, a failing plugin).
	ErrInternal = errors.New("internal error")
)

// refusal is an error of a kind with its own text; it unwraps to the kind
// and to any error the text wraps (%w).
type refusal struct {
	kind error
	err  error
}

func (r *refusal) Error() string   { return r.err.Error() }
func (r *refusal) Unwrap() []error { return []error{r.kind, r.err} }

// refusef returns an error of kind whose text is format's; %w in format
// keeps the wrapped error reachable.
func refusef(kind error, format string, args ...any) error {
	return &refusal{kind: kind, err: fmt.Errorf(format, args...)}
}

// remotingCode is the remoting response code of a refusal, the one place
// kinds become remoting codes. The codes are the ones RocketMQ's broker
// answers for the same refusals (a bad topic name or queue number is a
// SYSTEM_ERROR there too).
func remotingCode(err error) int16 {
	switch {
	case errors.Is(err, ErrIllegal), errors.Is(err, ErrTooLarge):
		return remoting.MessageIllegal
	case errors.Is(err, ErrNoPermission):
		return remoting.NoPermission
	case errors.Is(err, ErrTopicNotFound):
		return remoting.TopicNotExist
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrNotLeader):
		return remoting.ServiceNotAvailable
	default: // ErrNoQueue, ErrInternal, and anything unclassified
		return remoting.SystemError
	}
}

// refused answers req with err's code; what prefixes the remark ("send").
func refused(req *remoting.Command, what string, err error) *remoting.Command {
	return response(req, remotingCode(err), "%s: %v", what, err)
}
