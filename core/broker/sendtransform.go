package broker

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// SendTransform changes or refuses the messages of a send before the
// broker stores them: a transform plugin. TransformSend gets the client's
// messages of one send (one message, or every message of a batch), as the
// producer sent them with the broker's own properties added, and may change
// each one's Topic, Properties, Body and SysFlag in place. To refuse the
// send it returns an error wrapping ErrSendRejected, whose text the
// producer receives; any other error is a failure of the transform and
// refuses the send as a system error. Either way nothing of the send is
// stored. Implementations are safe for concurrent use.
type SendTransform interface {
	TransformSend(ctx context.Context, msgs []*message.Message) error
}

// ErrSendRejected marks a SendTransform's refusal of a send: the producer
// gets MESSAGE_ILLEGAL (gRPC: BAD_REQUEST) with the error's text.
var ErrSendRejected = errors.New("rejected")

// sendTransformFor returns the transform of sends to topic, or nil. Retry
// topics are never transformed: their messages were transformed when first
// sent.
func (b *Broker) sendTransformFor(topic string) SendTransform {
	if b.opts.SendTransform == nil || isRetryTopic(topic) {
		return nil
	}
	return b.opts.SendTransform(topic)
}

// transformSend runs the transform of topic over the client's messages of
// one send, all or nothing, and checks what it changed: a message sent to
// another topic goes to a random writable queue of that topic, which must
// exist, be writable and not be the broker's own. It returns why the send
// is refused.
func (b *Broker) transformSend(topic string, msgs []*message.Message) error {
	t := b.sendTransformFor(topic)
	if t == nil {
		return nil
	}
	if err := t.TransformSend(context.Background(), msgs); err != nil {
		if errors.Is(err, ErrSendRejected) {
			if b.transformLog.allow(time.Now()) {
				b.log.Info("send refused by a transform (more are not logged for a while)", "topic", topic, "err", err)
			}
			return refusef(ErrIllegal, "%w", err)
		}
		if b.transformLog.allow(time.Now()) {
			b.log.Warn("send transform failed; the send is refused (more are not logged for a while)", "topic", topic, "err", err)
		}
		return refusef(ErrInternal, "%w", err)
	}
	for i, m := range msgs {
		if len(m.Body) > b.opts.MaxMessageSize {
			return refusef(ErrTooLarge, "transform made message %d's body %d bytes, over the %d-byte limit", i, len(m.Body), b.opts.MaxMessageSize)
		}
		if len(m.Properties) > message.MaxPropertiesLen {
			return refusef(ErrTooLarge, "transform made message %d's properties %d bytes, over %d", i, len(m.Properties), message.MaxPropertiesLen)
		}
		if m.Topic == topic {
			continue
		}
		if err := ValidateTopic(m.Topic); err != nil {
			return refusef(ErrNoQueue, "transform sent message %d to an invalid topic: %v", i, err)
		}
		if reservedTopic(m.Topic) || isRetryTopic(m.Topic) {
			return refusef(ErrNoPermission, "transform sent message %d to topic %s, which is the broker's", i, m.Topic)
		}
		tc, ok := b.topics.get(m.Topic)
		if !ok {
			return refusef(ErrTopicNotFound, "transform sent message %d to topic %s, which does not exist", i, m.Topic)
		}
		if tc.Perm&remoting.PermWrite == 0 {
			return refusef(ErrNoPermission, "transform sent message %d to topic %s, which is not writable", i, m.Topic)
		}
		m.QueueID = rand.Int32N(writableQueues(tc))
	}
	return nil
}
