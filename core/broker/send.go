package broker

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
)

// sendHeader is the custom header of SEND_MESSAGE and its V2 form.
type sendHeader struct {
	producerGroup         string
	topic                 string
	defaultTopic          string
	defaultTopicQueueNums int
	queueID               int32
	sysFlag               int32
	bornTimestamp         int64
	flag                  int32
	properties            string
	reconsumeTimes        int32
	maxReconsumeTimes     int32
	hasMaxReconsume       bool
	batch                 bool
}

// v1 and V2 (single-letter) key names, in field order.
var (
	sendKeysV1 = [...]string{"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
		"bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes", "batch"}
	sendKeysV2 = [...]string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m"}
)

func parseSendHeader(req *remoting.Command) (sendHeader, error) {
	keys := &sendKeysV1
	if req.Code == remoting.SendMessageV2 || req.Code == remoting.SendBatchMessage {
		keys = &sendKeysV2
	}
	var h sendHeader
	var errs []error
	num := func(i int, def int64) int64 {
		v := req.Get(keys[i])
		if v == "" {
			return def
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, errors.New("header field "+keys[i]+" is not a number: "+strconv.Quote(v)))
		}
		return n
	}
	h.producerGroup = req.Get(keys[0])
	h.topic = req.Get(keys[1])
	h.defaultTopic = req.Get(keys[2])
	h.defaultTopicQueueNums = int(num(3, 4))
	h.queueID = int32(num(4, -1))
	h.sysFlag = int32(num(5, 0))
	h.bornTimestamp = num(6, 0)
	h.flag = int32(num(7, 0))
	h.properties = req.Get(keys[8])
	h.reconsumeTimes = int32(num(9, 0))
	if v := req.Get(keys[11]); v != "" {
		h.maxReconsumeTimes, h.hasMaxReconsume = int32(num(11, 0)), true
	}
	h.batch = req.Get(keys[12]) == "true" || req.Code == remoting.SendBatchMessage
	return h, errors.Join(errs...)
}

// bornHost returns the peer address of a connection as a BORNHOST.
func bornHost(c *remoting.Conn) netip.AddrPort {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

func (b *Broker) handleSend(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	h, err := parseSendHeader(req)
	if err != nil {
		return response(req, remoting.MessageIllegal, "send: %v", err)
	}
	if err := ValidateTopic(h.topic); err != nil {
		return response(req, remoting.SystemError, "send: %v", err)
	}
	if systemTopic(h.topic) {
		return response(req, remoting.NoPermission, "send: topic %s is reserved for the broker", h.topic)
	}
	if len(h.properties) > message.MaxPropertiesLen {
		return response(req, remoting.MessageIllegal, "send: properties of %d bytes exceed %d", len(h.properties), message.MaxPropertiesLen)
	}
	tc, ok := b.topics.get(h.topic)
	if !ok {
		var code int16
		if tc, code, err = b.autoCreate(h.topic, h.defaultTopic, h.defaultTopicQueueNums); err != nil {
			return response(req, code, "send: %v", err)
		}
	}
	if tc.Perm&permWrite == 0 {
		return response(req, remoting.NoPermission, "send: topic %s is not writable (perm %d)", h.topic, tc.Perm)
	}
	qid := h.queueID
	if qid < 0 {
		qid = rand.Int32N(int32(tc.WriteQueueNums))
	}
	if int(qid) >= max(tc.ReadQueueNums, tc.WriteQueueNums) {
		return response(req, remoting.SystemError, "send: queue %d does not exist in topic %s (%d queues)", qid, h.topic, tc.WriteQueueNums)
	}

	var msgs []*message.Message
	if req.Code == remoting.SendBatchMessage {
		if msgs, err = b.batchMessages(c, &h, qid, req.Body); err != nil {
			return response(req, remoting.MessageIllegal, "send batch: %v", err)
		}
	} else {
		if len(req.Body) > b.opts.MaxMessageSize {
			return response(req, remoting.MessageIllegal, "send: body of %d bytes exceeds the %d-byte limit", len(req.Body), b.opts.MaxMessageSize)
		}
		m := b.newMessage(c, &h, qid, req.Body, nil)
		if m.Properties, err = b.storedPropertiesString(h.properties); err != nil {
			return response(req, remoting.MessageIllegal, "send: %v", err)
		}
		msgs = []*message.Message{m}
		extra, code, err := b.transform(m, &h)
		if err != nil {
			return response(req, code, "send: %v", err)
		}
		msgs = append(msgs, extra...)
	}
	sent := len(msgs) // the client's messages; any after them are the broker's own (outbox events)
	if req.Code != remoting.SendBatchMessage {
		sent = 1
	}
	if err := b.store.Append(msgs); err != nil {
		return b.storeError(req, err)
	}
	return b.sendResponse(req, msgs[:sent])
}

// newMessage builds a stored message from a send header.
func (b *Broker) newMessage(c *remoting.Conn, h *sendHeader, qid int32, body []byte, props message.Properties) *message.Message {
	return &message.Message{
		Topic:          h.topic,
		QueueID:        qid,
		Flag:           h.flag,
		SysFlag:        h.sysFlag,
		BornTimestamp:  h.bornTimestamp,
		BornHost:       bornHost(c),
		StoreHost:      b.storeHost,
		ReconsumeTimes: h.reconsumeTimes,
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
		return nil, message.ErrPropertiesTooLong
	}
	return p, nil
}

// storedPropertiesString is storedProperties for the header's string,
// copying it once.
func (b *Broker) storedPropertiesString(props string) (message.Properties, error) {
	if strings.Contains(props, message.PropertyWaitStoreOK) || strings.Contains(props, message.PropertyCluster) {
		return b.storedProperties(message.Properties(props))
	}
	p := make(message.Properties, 0, len(props)+len(message.PropertyCluster)+len(b.opts.ClusterName)+2)
	p = append(p, props...)
	if len(p) > 0 && p[len(p)-1] != 2 {
		p = append(p, 2)
	}
	p = append(p, message.PropertyCluster...)
	p = append(p, 1)
	p = append(p, b.opts.ClusterName...)
	p = append(p, 2)
	if len(p) > message.MaxPropertiesLen {
		return nil, message.ErrPropertiesTooLong
	}
	return p, nil
}

// batchMessages decodes a SEND_BATCH_MESSAGE body into messages that share
// the header's topic, queue and flags.
func (b *Broker) batchMessages(c *remoting.Conn, h *sendHeader, qid int32, body []byte) ([]*message.Message, error) {
	entries, err := message.DecodeBatch(body)
	if err != nil {
		return nil, err
	}
	if h.sysFlag&message.SysFlagTxMask != 0 {
		return nil, errors.New("a batch may not hold transactional messages")
	}
	common := message.Properties(h.properties)
	msgs := make([]*message.Message, len(entries))
	for i, e := range entries {
		if len(e.Body) > b.opts.MaxMessageSize {
			return nil, errors.New("message " + strconv.Itoa(i) + " has a body of " + strconv.Itoa(len(e.Body)) + " bytes, over the limit of " + strconv.Itoa(b.opts.MaxMessageSize))
		}
		props := e.Properties
		if len(common) > 0 {
			props = append(append(message.Properties(nil), props...), common...)
		}
		if props.Has(message.PropertyDelayLevel) || props.Has(message.PropertyTransactionPrepared) {
			return nil, errors.New("a batch may not hold delayed or transactional messages")
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

// storeError answers a request whose append failed.
func (b *Broker) storeError(req *remoting.Command, err error) *remoting.Command {
	switch {
	case errors.Is(err, store.ErrTooLarge), errors.Is(err, message.ErrTopicTooLong), errors.Is(err, message.ErrPropertiesTooLong):
		return response(req, remoting.MessageIllegal, "send: %v", err)
	case errors.Is(err, store.ErrClosed):
		return response(req, remoting.ServiceNotAvailable, "send: the broker is shutting down")
	}
	b.log.Error("append failed", "err", err)
	return response(req, remoting.SystemError, "send: %v", err)
}

// sendResponse answers a successful send.
func (b *Broker) sendResponse(req *remoting.Command, msgs []*message.Message) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	first := msgs[0]
	var ids strings.Builder
	for i, m := range msgs {
		if i > 0 {
			ids.WriteByte(',')
		}
		ids.WriteString(message.OffsetMsgID(m.StoreHost, m.CommitLogOffset))
	}
	resp.ExtFields = map[string]string{
		"msgId":       ids.String(),
		"queueId":     strconv.Itoa(int(sentQueue(first))),
		"queueOffset": strconv.FormatInt(first.QueueOffset, 10),
		"MSG_REGION":  "DefaultRegion",
		"TRACE_ON":    "true",
	}
	return resp
}

const permWrite = 2

// sentQueue is the queue a message was sent to: for a half message or a
// delayed one parked elsewhere, the queue it will end up in.
func sentQueue(m *message.Message) int32 {
	if m.Topic == HalfTopic {
		if q, err := strconv.Atoi(m.Properties.Get(message.PropertyRealQueueID)); err == nil {
			return int32(q)
		}
	}
	return m.QueueID
}
