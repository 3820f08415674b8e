package broker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// Request-reply: a requester sends an ordinary message carrying
// CORRELATION_ID and REPLY_TO_CLIENT (its client id); a responder answers
// it with SEND_REPLY_MESSAGE(_V2) to the cluster's reply topic, keeping
// both properties. The broker stores the reply like any message (no delay,
// no transaction) and pushes it to the requester's connection with
// PUSH_REPLY_MESSAGE_TO_CLIENT, whose extFields are:
//
//	+-----------------------+----------------------------------------------+
//	| key                   | value                                        |
//	+-----------------------+----------------------------------------------+
//	| producerGroup         | the responder's producer group               |
//	| topic                 | the reply's topic                            |
//	| defaultTopic          | from the responder's header                  |
//	| defaultTopicQueueNums | from the responder's header                  |
//	| queueId               | the queue the reply was stored in            |
//	| sysFlag               | the responder's flags (compressed body: the  |
//	|                       | requester inflates it)                       |
//	| bornTimestamp         | Unix ms when the responder made the reply    |
//	| flag                  | the reply's user flag                        |
//	| properties            | the stored properties and PUSH_REPLY_TIME    |
//	| reconsumeTimes        | from the responder's header                  |
//	| unitMode              | from the responder's header                  |
//	| bornHost              | the responder's address, ip:port             |
//	| storeHost             | this broker's address, ip:port               |
//	| storeTimestamp        | Unix ms when the reply was stored            |
//	+-----------------------+----------------------------------------------+
//
// The body is the reply's body as sent. The requester matches the reply
// to its request by CORRELATION_ID.

// replyPushTimeout bounds the wait for the requester's answer to a push.
// It is shorter than the official clients' default send timeout (3 s), so
// the responder hears why a push failed before it gives up waiting.
const replyPushTimeout = 2 * time.Second

// handleSendReply serves SEND_REPLY_MESSAGE and SEND_REPLY_MESSAGE_V2.
// The reply is stored first and then pushed; a requester that is not
// connected, or that refuses the push, is reported to the responder with
// CONSUMER_NOT_ONLINE, which no client retries (a retry would store the
// reply again, see RATIONALE.md).
func (b *Broker) handleSendReply(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeSendHeaderOf(req)
	if err != nil {
		return response(req, remoting.MessageIllegal, "send reply: %v", err)
	}
	if h.Batch {
		return response(req, remoting.MessageIllegal, "send reply: a reply may not be a batch")
	}
	requester, ok := message.Properties(h.Properties).Lookup(message.PropertyReplyToClient)
	if !ok || len(requester) == 0 {
		return response(req, remoting.MessageIllegal, "send reply: property %s (the requester's client id) is missing; nothing stored", message.PropertyReplyToClient)
	}
	if len(req.Body) > b.opts.MaxMessageSize {
		return response(req, remoting.MessageIllegal, "send reply: body of %d bytes exceeds the %d-byte limit", len(req.Body), b.opts.MaxMessageSize)
	}
	qid, err := b.sendQueue(&h, true)
	if err != nil {
		return refused(req, "send", err)
	}
	m := b.newMessage(c, &h, qid, req.Body, nil)
	if m.Properties, err = b.storedPropertiesString(h.Properties); err != nil {
		return refused(req, "send reply", err)
	}
	msgs := []*message.Message{m}
	if err := b.store.Append(msgs); err != nil {
		return refused(req, "send", b.storeRefusal(err))
	}
	if err := b.pushReply(c, &h, m, string(requester)); err != nil {
		b.log.Info("reply stored but not delivered", "topic", m.Topic, "queue", m.QueueID, "offset", m.QueueOffset,
			"requester", logName(string(requester)), "correlation_id", m.Properties.Get(message.PropertyCorrelationID), "err", err)
		return response(req, remoting.ConsumerNotOnline, "send reply: stored in %s queue %d at offset %d, but not delivered: %v",
			m.Topic, m.QueueID, m.QueueOffset, err)
	}
	return b.sendResponse(req, msgs)
}

// pushReply hands a stored reply to its requester's connection and waits
// for the requester's answer.
func (b *Broker) pushReply(responder *remoting.Conn, h *remoting.SendHeader, m *message.Message, requester string) error {
	conn, ok := b.clients.clientConn(requester)
	if !ok {
		return fmt.Errorf("requester %s is not connected to this broker (it stopped, or has not sent a heartbeat yet)", logName(requester))
	}
	props := m.Properties.With(message.PropertyPushReplyTime, strconv.FormatInt(b.now().UnixMilli(), 10))
	ext := map[string]string{
		"producerGroup":         h.ProducerGroup,
		"topic":                 m.Topic,
		"defaultTopic":          h.DefaultTopic,
		"defaultTopicQueueNums": strconv.Itoa(int(h.DefaultTopicQueueNums)),
		"queueId":               strconv.Itoa(int(m.QueueID)),
		"sysFlag":               strconv.Itoa(int(m.SysFlag)),
		"bornTimestamp":         strconv.FormatInt(m.BornTimestamp, 10),
		"flag":                  strconv.Itoa(int(m.Flag)),
		"properties":            string(props),
		"reconsumeTimes":        strconv.Itoa(int(m.ReconsumeTimes)),
		"unitMode":              strconv.FormatBool(h.UnitMode),
		"bornHost":              bornHost(responder).String(),
		"storeHost":             b.storeHost.String(),
		"storeTimestamp":        strconv.FormatInt(m.StoreTimestamp, 10),
	}
	ctx, cancel := context.WithTimeout(context.Background(), replyPushTimeout)
	defer cancel()
	resp, err := conn.Request(ctx, remoting.NewRequest(remoting.PushReplyMessageToClient, ext, m.Body))
	if err != nil {
		return fmt.Errorf("push to requester %s failed: %w", logName(requester), err)
	}
	if resp.Code != remoting.Success {
		return fmt.Errorf("requester %s refused the push: %s %s", logName(requester), remoting.ResponseCode(resp.Code), resp.Remark)
	}
	return nil
}
