package broker

import (
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/core/remoting"
)

// transform reroutes a single sent message that is not stored where it was
// sent, in this order:
//
//  1. a half message (TRAN_MSG=true) goes to the half topic (txn.go);
//  2. a retry that reached its limit goes to the dead-letter topic
//     (retry.go);
//  3. a delayed or timed message goes to the schedule (delay.go).
//
// It may add messages to store in the same write (an outbox event), and
// returns why when the message is refused. A
// request of request-reply (REPLY_TO_CLIENT) also tells the client table
// that c is the requester's connection, where its reply will be pushed.
func (b *Broker) transform(c *remoting.Conn, m *message.Message, h *remoting.SendHeader) (extra []*message.Message, err error) {
	half, parked, requester := scanSpecial(m.Properties)
	if requester != nil {
		b.clients.rememberRequester(requester, c)
	}
	if half {
		if err := b.toHalf(m); err != nil {
			return nil, refusef(ErrIllegal, "%w", err)
		}
		return nil, nil
	}
	var ev *outbox.Record
	if isRetryTopic(m.Topic) {
		if ev, err = b.retryLimit(m, h); err != nil {
			return nil, refusef(ErrInternal, "%w", err)
		}
	}
	if parked {
		if err := b.toSchedule(m); err != nil {
			return nil, err
		}
	}
	if ev != nil {
		// The event records the message in its final form.
		extra = append(extra, b.newEvent(*ev, m))
	}
	return extra, nil
}

// scanSpecial reads, in one pass over the properties, whether a message is
// a half message, whether it asks for a delay or a delivery time, and the
// client id it wants replies pushed to (nil if none; it aliases p).
func scanSpecial(p message.Properties) (half, parked bool, requester []byte) {
	p.Each(func(k, v []byte) bool {
		switch string(k) {
		case message.PropertyTransactionPrepared:
			half = string(v) == "true"
		case message.PropertyDelayLevel, message.PropertyTimerDeliverMS, message.PropertyTimerDelaySec, message.PropertyTimerDelayMS:
			parked = true
		case message.PropertyReplyToClient:
			if len(v) > 0 {
				requester = v
			}
		}
		return true
	})
	return half, parked, requester
}
