package client

import (
	"errors"
	"fmt"

	"github.com/rmq-go/rmq/core/remoting"
)

// Errors of this package, compared with errors.Is.
var (
	// ErrTopicNotExist is returned when the name servers know no route
	// for a topic.
	ErrTopicNotExist = errors.New("client: topic does not exist")
	// ErrBrokerNotFound is returned when no address is known for a
	// broker name.
	ErrBrokerNotFound = errors.New("client: broker not found")
	// ErrGroupInUse is returned when a producer or consumer group is
	// started twice in one client instance.
	ErrGroupInUse = errors.New("client: group already started in this client instance")
	// ErrNotStarted is returned by calls on a producer or consumer that
	// has not been started or has been shut down.
	ErrNotStarted = errors.New("client: not started")
	// ErrQueueNotHeld is returned by a lite pull consumer's Seek and its
	// variants for a queue it does not hold (not assigned to it, or not
	// yet taken up after a rebalance).
	ErrQueueNotHeld = errors.New("client: queue not held by this consumer")
	// ErrNoQueue is returned when a topic has no queue to send to.
	ErrNoQueue = errors.New("client: no queue to send to")
	// ErrInvalidMessage is returned, wrapped with the reason, for a
	// message the producer refuses before sending: no topic or body, a
	// bad topic name, properties too long, or a batch whose messages
	// differ in topic or carry a delay or a transaction.
	ErrInvalidMessage = errors.New("client: invalid message")
	// ErrMessageTooLarge is returned when a body, or a batch's body, is
	// larger than ProducerOptions.MaxMessageSize.
	ErrMessageTooLarge = errors.New("client: message too large")
)

// BrokerError is a broker's answer with an error code.
type BrokerError struct {
	Code   int16
	Remark string
}

func (e *BrokerError) Error() string {
	return fmt.Sprintf("broker: %s (%d): %s", remoting.ResponseCode(e.Code), e.Code, e.Remark)
}

// brokerError turns an error response into a *BrokerError.
func brokerError(resp *remoting.Command) error {
	return &BrokerError{Code: resp.Code, Remark: resp.Remark}
}
