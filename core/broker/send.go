package broker

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
)

// bornHost returns the peer address of a connection as a BORNHOST.
func bornHost(c *remoting.Conn) netip.AddrPort {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

func (b *Broker) handleSend(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	start := time.Now()
	h, err := remoting.DecodeSendHeaderOf(req)
	if err != nil {
		return response(req, remoting.MessageIllegal, "send: %v", err)
	}
	qid, err := b.sendQueue(&h, true)
	if err != nil {
		return refused(req, "send", err)
	}
	msgs, sent, err := b.sendMessages(c, req, &h, qid)
	if err != nil {
		return refused(req, sendWhat(&h), err)
	}
	if err := b.store.Append(msgs); err != nil {
		return refused(req, "send", b.storeRefusal(err))
	}
	b.meters.stored(h.Topic, msgs[:sent], start)
	return b.sent(c, req, msgs[:sent])
}

// sendFast serves the common send on the connection's reader goroutine
// (remoting.FastHandler): to a topic that exists and is not a retry topic,
// whose messages are queued with AppendAsync and answered once stored.
// Everything that may wait — creating a topic (which registers it with the
// name servers) and the retry rules (which read the group's config) — is
// declined to handleSend on a worker. Decoding once more there costs only
// the declined requests.
func (b *Broker) sendFast(c *remoting.Conn, req *remoting.Command, reply func(*remoting.Command)) bool {
	start := time.Now()
	h, err := remoting.DecodeSendHeaderOf(req)
	if err != nil {
		reply(response(req, remoting.MessageIllegal, "send: %v", err))
		return true
	}
	if h.Batch {
		// The batch's messages keep properties that point into the body,
		// and the answer reads them after the read buffer moved on.
		req.Body = bytes.Clone(req.Body)
	}
	if _, ok := b.topics.get(h.Topic); !ok || isRetryTopic(h.Topic) || b.sendTransformFor(h.Topic) != nil {
		// A transform may run up to its deadline: not on the reader.
		return false
	}
	qid, err := b.sendQueue(&h, false)
	if err != nil {
		reply(refused(req, "send", err))
		return true
	}
	msgs, sent, err := b.sendMessages(c, req, &h, qid)
	if err != nil {
		reply(refused(req, sendWhat(&h), err))
		return true
	}
	topic := h.Topic // not h itself: the callback would move it to the heap
	err = b.store.AppendAsync(msgs, func(err error) {
		if err != nil {
			reply(refused(req, "send", b.storeRefusal(err)))
			return
		}
		b.meters.stored(topic, msgs[:sent], start)
		reply(b.sent(c, req, msgs[:sent]))
	})
	if err != nil {
		reply(refused(req, "send", b.storeRefusal(err)))
	}
	return true
}

// sendQueue checks a send's topic, creating it when create is set and
// the topic is missing, and returns the queue the messages go to, or why
// the send is refused.
func (b *Broker) sendQueue(h *remoting.SendHeader, create bool) (int32, error) {
	if err := ValidateTopic(h.Topic); err != nil {
		return 0, refusef(ErrNoQueue, "%w", err)
	}
	if reservedTopic(h.Topic) {
		return 0, refusef(ErrNoPermission, "topic %s is reserved for the broker", h.Topic)
	}
	if len(h.Properties) > message.MaxPropertiesLen {
		return 0, refusef(ErrTooLarge, "%w: %d bytes", message.ErrPropertiesTooLong, len(h.Properties))
	}
	tc, ok := b.topics.get(h.Topic)
	if !ok {
		if !create {
			return 0, refusef(ErrTopicNotFound, "topic %s does not exist", h.Topic)
		}
		var err error
		if tc, err = b.autoCreate(h.Topic, h.DefaultTopic, int(h.DefaultTopicQueueNums)); err != nil {
			return 0, err
		}
	}
	if tc.Perm&remoting.PermWrite == 0 {
		return 0, refusef(ErrNoPermission, "topic %s is not writable (perm %d)", h.Topic, tc.Perm)
	}
	if tc.MessageType == MessageTypeLite {
		// Its queues are read by nobody: lite consumers read the queues of
		// lite topics.
		return 0, refusef(ErrIllegal, "topic %s holds lite topics: a message sent to it names its lite topic, which only RocketMQ 5 clients do", h.Topic)
	}
	qid := h.QueueID
	if p, ok := priorityQueue(h, tc); ok {
		qid = p
	} else if qid < 0 {
		qid = rand.Int32N(writableQueues(tc))
	}
	if int(qid) >= max(tc.ReadQueueNums, tc.WriteQueueNums) {
		return 0, refusef(ErrNoQueue, "queue %d does not exist in topic %s (%d queues)", qid, h.Topic, tc.WriteQueueNums)
	}
	if int(qid) >= tc.ReadQueueNums {
		// Consumers' routes list only the read queues: a message stored
		// here could never be pulled.
		return 0, refusef(ErrNoQueue, "queue %d of topic %s is not readable: the topic has %d read queues", qid, h.Topic, tc.ReadQueueNums)
	}
	return qid, nil
}

// sendMessages builds what a send stores: the client's messages, then any
// of the broker's own (outbox events); sent counts the client's.
func (b *Broker) sendMessages(c *remoting.Conn, req *remoting.Command, h *remoting.SendHeader, qid int32) (msgs []*message.Message, sent int, err error) {
	// SEND_BATCH_MESSAGE always carries a batch; SEND_MESSAGE(_V2) does
	// when its batch flag says so, which is how the C++ client sends one.
	if h.Batch {
		if len(req.Body) > b.opts.MaxMessageSize {
			return nil, 0, refusef(ErrTooLarge, "body of %d bytes exceeds the %d-byte limit (maxMessageSize)", len(req.Body), b.opts.MaxMessageSize)
		}
		if msgs, err = b.batchMessages(c, h, qid, req.Body); err != nil {
			return nil, 0, err
		}
		if err := b.transformSend(h.Topic, msgs); err != nil {
			return nil, 0, err
		}
		sent = len(msgs)
		if isRetryTopic(h.Topic) {
			// The retry rule holds for batches too. Every message carries
			// the header's reconsume times, so the whole batch goes one
			// way and stays in one queue.
			for _, m := range msgs[:sent] {
				ev, err := b.retryLimit(m, h)
				if err != nil {
					return nil, 0, refusef(ErrInternal, "%w", err)
				}
				if ev != nil {
					msgs = append(msgs, b.newEvent(*ev, m))
				}
			}
		}
		return msgs, sent, nil
	}
	if len(req.Body) > b.opts.MaxMessageSize {
		return nil, 0, refusef(ErrTooLarge, "body of %d bytes exceeds the %d-byte limit", len(req.Body), b.opts.MaxMessageSize)
	}
	// The message and the slice that holds it are one allocation.
	one := new(struct {
		m    message.Message
		msgs [1]*message.Message
	})
	m := &one.m
	b.initMessage(m, c, h, qid, req.Body, nil)
	if m.Properties, err = b.storedPropertiesString(h.Properties); err != nil {
		return nil, 0, err
	}
	one.msgs[0] = m
	msgs = one.msgs[:]
	if err := b.transformSend(h.Topic, msgs); err != nil {
		return nil, 0, err
	}
	extra, err := b.transform(c, m, h)
	if err != nil {
		return nil, 0, err
	}
	return append(msgs, extra...), 1, nil
}

// sendWhat names a send in its refusal: "send", or "send batch".
func sendWhat(h *remoting.SendHeader) string {
	if h.Batch {
		return "send batch"
	}
	return "send"
}

// sent answers a send whose messages are stored.
func (b *Broker) sent(c *remoting.Conn, req *remoting.Command, msgs []*message.Message) *remoting.Command {
	if msgs[0].Topic == HalfTopic {
		// This connection may now end the group's transactions.
		b.txn.rememberProducer(msgs[0].Properties.Get(message.PropertyProducerGroup), c)
	}
	return b.sendResponse(req, msgs)
}

// newMessage builds a stored message from a send header.
func (b *Broker) newMessage(c *remoting.Conn, h *remoting.SendHeader, qid int32, body []byte, props message.Properties) *message.Message {
	m := new(message.Message)
	b.initMessage(m, c, h, qid, body, props)
	return m
}

// initMessage sets m, which is zero, as newMessage does.
func (b *Broker) initMessage(m *message.Message, c *remoting.Conn, h *remoting.SendHeader, qid int32, body []byte, props message.Properties) {
	*m = message.Message{
		Topic:          h.Topic,
		QueueID:        qid,
		Flag:           h.Flag,
		SysFlag:        h.SysFlag,
		BornTimestamp:  h.BornTimestamp,
		BornHost:       bornHost(c),
		StoreHost:      b.storeHost,
		ReconsumeTimes: h.ReconsumeTimes,
		Body:           body,
		Properties:     props,
	}
}

// storedProperties drops what is not stored (WAIT) and adds the cluster
// name, which request/reply clients read back.
func (b *Broker) storedProperties(p message.Properties) (message.Properties, error) {
	if p.Has(message.PropertyWaitStoreOK) {
		p = p.Without(message.PropertyWaitStoreOK)
	}
	if !p.Has(message.PropertyCluster) {
		p = p.With(message.PropertyCluster, b.opts.ClusterName)
	}
	if len(p) > message.MaxPropertiesLen {
		return nil, refusef(ErrTooLarge, "%w", message.ErrPropertiesTooLong)
	}
	return p, nil
}

// storedPropertiesString is storedProperties for the header's string,
// copying it once.
func (b *Broker) storedPropertiesString(props string) (message.Properties, error) {
	if strings.Contains(props, message.PropertyWaitStoreOK) || strings.Contains(props, message.PropertyCluster) {
		return b.storedProperties(message.Properties(props))
	}
	// Room for the pair and its separators, and one for a last separator
	// the client may have left off.
	p := make(message.Properties, 0, len(props)+len(message.PropertyCluster)+len(b.opts.ClusterName)+3)
	p = message.AppendProperty(append(p, props...), message.PropertyCluster, b.opts.ClusterName)
	if len(p) > message.MaxPropertiesLen {
		return nil, refusef(ErrTooLarge, "%w", message.ErrPropertiesTooLong)
	}
	return p, nil
}

// batchMessages decodes a SEND_BATCH_MESSAGE body into messages that share
// the header's topic, queue and flags.
func (b *Broker) batchMessages(c *remoting.Conn, h *remoting.SendHeader, qid int32, body []byte) ([]*message.Message, error) {
	entries, err := message.DecodeBatch(body)
	if err != nil {
		return nil, refusef(ErrIllegal, "%w", err)
	}
	if len(entries) > b.opts.MaxBatchMessages {
		return nil, refusef(ErrTooLarge, "%d messages exceed the limit of %d per batch (maxBatchMessages)", len(entries), b.opts.MaxBatchMessages)
	}
	if h.SysFlag&message.SysFlagTxMask != 0 {
		return nil, refusef(ErrIllegal, "a batch may not hold transactional messages")
	}
	common := message.Properties(h.Properties)
	msgs := make([]*message.Message, len(entries))
	for i, e := range entries {
		if len(e.Body) > b.opts.MaxMessageSize {
			return nil, refusef(ErrTooLarge, "message %d has a body of %d bytes, over the limit of %d", i, len(e.Body), b.opts.MaxMessageSize)
		}
		props := e.Properties
		if len(common) > 0 {
			props = append(append(message.Properties(nil), props...), common...)
		}
		if props.Has(message.PropertyDelayLevel) || props.Has(message.PropertyTransactionPrepared) {
			return nil, refusef(ErrIllegal, "a batch may not hold delayed or transactional messages")
		}
		m := b.newMessage(c, h, qid, e.Body, props)
		m.Flag = e.Flag
		if m.Properties, err = b.storedProperties(m.Properties); err != nil {
			return nil, err
		}
		msgs[i] = m
	}
	return msgs, nil
}

// storeRefusal classifies an append's failure.
func (b *Broker) storeRefusal(err error) error {
	switch {
	case errors.Is(err, store.ErrTooLarge), errors.Is(err, message.ErrTopicTooLong), errors.Is(err, message.ErrPropertiesTooLong):
		return refusef(ErrTooLarge, "%w", err)
	case errors.Is(err, store.ErrClosed):
		return refusef(ErrUnavailable, "the broker is shutting down")
	case errors.Is(err, store.ErrDiskFull):
		// The store logs the full disk, rate-limited; clients retry
		// another broker on this code.
		return refusef(ErrUnavailable, "service not available now, the broker's disk is full: %w", err)
	case errors.Is(err, store.ErrNotLeader):
		return b.notLeader("send", err)
	}
	b.log.Error("append failed", "err", err)
	return refusef(ErrInternal, "%w", err)
}

// sendResponse answers a successful send.
func (b *Broker) sendResponse(req *remoting.Command, msgs []*message.Message) *remoting.Command {
	// The response and its fields are one allocation, and the fields'
	// text one more.
	a := new(struct {
		resp remoting.Command
		kv   [10]string
	})
	a.resp = *remoting.NewResponse(req, remoting.Success, "")
	first := msgs[0]
	var buf [96]byte
	text := message.AppendOffsetMsgID(buf[:0], first.StoreHost, first.CommitLogOffset)
	for _, m := range msgs[1:] {
		text = message.AppendOffsetMsgID(append(text, ','), m.StoreHost, m.CommitLogOffset)
	}
	idsEnd := len(text)
	text = strconv.AppendInt(text, first.QueueOffset, 10)
	all := string(text)
	a.kv = [10]string{
		"msgId", all[:idsEnd],
		"queueId", strconv.Itoa(int(sentQueue(first))),
		"queueOffset", all[idsEnd:],
		"MSG_REGION", "DefaultRegion",
		"TRACE_ON", "true",
	}
	a.resp.SetFields(a.kv[:]...)
	if first.Topic == ScheduleTopic || first.Topic == TimerTopic {
		if h := b.recallHandleOf(first); h != "" {
			a.resp.SetFields(append(a.kv[:], "recallHandle", h)...)
		}
	}
	return &a.resp
}

// sentQueue is the queue a message was sent to: for a half, delayed or
// timed message parked in a topic of the broker's, the queue it will end
// up in (the answer's offset stays the parked one, as in RocketMQ).
func sentQueue(m *message.Message) int32 {
	switch m.Topic {
	case HalfTopic, ScheduleTopic, TimerTopic:
		if q, err := strconv.Atoi(m.Properties.Get(message.PropertyRealQueueID)); err == nil {
			return int32(q)
		}
	}
	return m.QueueID
}
