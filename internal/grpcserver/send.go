package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/internal/inflate"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// txnGroupPrefix names the producer group of a gRPC transaction: RocketMQ
// 5 clients have no producer group, so the topic stands for it.
const txnGroupPrefix = "GRPC_TXN_"

// SendMessage stores each message on the broker's send path: the server
// picks the queue (FIFO: by message group), DELAY parks in the timer,
// TRANSACTION writes a half message. The messages of one request are
// queued together, so they share the store's group commit, and each is
// answered on its own.
func (s *Server) SendMessage(ctx context.Context, req *pb.SendMessageRequest) (*pb.SendMessageResponse, error) {
	msgs := req.GetMessages()
	if len(msgs) == 0 {
		return &pb.SendMessageResponse{Status: statusOf(refuse(pb.Code_BAD_REQUEST, "no messages"))}, nil
	}
	topic := resource(msgs[0].GetTopic())
	c, err := s.begin(ctx, acl.TopicRes(topic, acl.Pub))
	if err != nil {
		return &pb.SendMessageResponse{Status: statusOf(err)}, nil
	}
	resp := &pb.SendMessageResponse{Entries: make([]*pb.SendResultEntry, len(msgs))}
	sends := make([]broker.LocalSend, 0, len(msgs))
	at := make([]int, 0, len(msgs)) // the entry of each send
	for i, m := range msgs {
		ls, entry := s.localSend(ctx, c, topic, m)
		resp.Entries[i] = entry
		if entry.Status == nil {
			sends = append(sends, ls)
			at = append(at, i)
		}
	}
	for j, r := range s.b.SendLocalBatch(sends) {
		s.sent(topic, msgs[at[j]], resp.Entries[at[j]], r)
	}
	var common *pb.Status
	for _, entry := range resp.Entries {
		switch {
		case common == nil:
			common = entry.Status
		case common.Code != entry.Status.Code:
			common = &pb.Status{Code: pb.Code_MULTIPLE_RESULTS, Message: "the messages have different results"}
		}
	}
	resp.Status = common
	return resp, nil
}

// localSend checks a message and builds its send; an entry with a
// Status is the message refused.
func (s *Server) localSend(ctx context.Context, c call, topic string, m *pb.Message) (broker.LocalSend, *pb.SendResultEntry) {
	sp := m.GetSystemProperties()
	entry := &pb.SendResultEntry{MessageId: sp.GetMessageId()}
	fail := func(err error) (broker.LocalSend, *pb.SendResultEntry) {
		entry.Status = statusOf(err)
		return broker.LocalSend{}, entry
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if resource(m.GetTopic()) != topic {
		return fail(refuse(pb.Code_BAD_REQUEST, "the messages of one request must share a topic"))
	}
	if sp.GetMessageId() == "" {
		return fail(refuse(pb.Code_ILLEGAL_MESSAGE_ID, "message_id is required"))
	}
	switch t := sp.GetMessageType(); {
	case t == pb.MessageType_LITE && sp.GetLiteTopic() == "":
		return fail(refuse(pb.Code_ILLEGAL_LITE_TOPIC, "a LITE message needs a lite topic"))
	case sp.GetLiteTopic() != "" && (sp.MessageGroup != nil || sp.DeliveryTimestamp != nil || sp.Priority != nil):
		return fail(refuse(pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a lite topic's message has no message group, delivery time or priority"))
	case t == pb.MessageType_PRIORITY && sp.Priority == nil:
		return fail(refuse(pb.Code_BAD_REQUEST, "a PRIORITY message needs a priority"))
	case sp.GetPriority() < 0:
		return fail(refuse(pb.Code_BAD_REQUEST, "priority %d is below 0", sp.GetPriority()))
	}
	body := m.GetBody()
	if sp.GetBodyEncoding() == pb.Encoding_GZIP {
		var err error
		switch body, err = inflate.Gunzip(body, s.opts.MaxBodySize); {
		case errors.Is(err, inflate.ErrInflatedTooLarge):
			return fail(refuse(pb.Code_MESSAGE_BODY_TOO_LARGE, "body decompresses to more than %d bytes", s.opts.MaxBodySize))
		case err != nil:
			return fail(refuse(pb.Code_MESSAGE_CORRUPTED, "gzip body: %v", err))
		}
	}
	if len(body) > s.opts.MaxBodySize {
		return fail(refuse(pb.Code_MESSAGE_BODY_TOO_LARGE, "body of %d bytes exceeds %d", len(body), s.opts.MaxBodySize))
	}
	props := map[string]string{}
	for k, v := range m.GetUserProperties() {
		if systemKeys[k] || k == "" || strings.ContainsAny(k, "\x01\x02") || strings.ContainsAny(v, "\x01\x02") {
			return fail(refuse(pb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "property key %q is reserved or malformed", k))
		}
		props[k] = v
	}
	props[message.PropertyUniqKey] = sp.GetMessageId()
	if sp.Tag != nil {
		props[message.PropertyTags] = sp.GetTag()
	}
	if len(sp.GetKeys()) > 0 {
		props[message.PropertyKeys] = strings.Join(sp.GetKeys(), " ")
	}
	if tc := sp.GetTraceContext(); tc != "" {
		props[message.PropertyTraceContext] = tc
	}
	if h := sp.GetBornHost(); h != "" {
		props[message.PropertyBornHost] = h
	}
	typ := sp.GetMessageType()
	tc, exists := s.b.Topic(topic)
	if (typ == pb.MessageType_NORMAL || typ == pb.MessageType_MESSAGE_TYPE_UNSPECIFIED) && sp.Priority != nil && exists && accepts(tc, pb.MessageType_PRIORITY) {
		// The Node client types a message of priority 0 NORMAL; on a
		// priority topic it is a priority message. Elsewhere a NORMAL
		// message's priority is ignored, as its type says.
		typ = pb.MessageType_PRIORITY
	}
	if sp.GetLiteTopic() != "" {
		typ = pb.MessageType_LITE
	}
	if exists && !accepts(tc, typ) {
		return fail(refuse(pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "topic %s accepts %v messages, not %v", topic, acceptedTypes(tc), typ))
	}
	ls := broker.LocalSend{Topic: topic, QueueID: -1, BornTimestamp: sp.GetBornTimestamp().AsTime().UnixMilli(), Body: body, BornHost: c.remote}
	switch typ {
	case pb.MessageType_FIFO:
		if sp.GetMessageGroup() == "" {
			return fail(refuse(pb.Code_ILLEGAL_MESSAGE_GROUP, "a FIFO message needs a message group"))
		}
		tc, err := s.topic(topic)
		if err != nil {
			return fail(err)
		}
		ls.QueueID = groupQueue(sp.GetMessageGroup(), tc)
		props[message.PropertyShardingKey] = sp.GetMessageGroup()
	case pb.MessageType_DELAY:
		if sp.DeliveryTimestamp == nil {
			return fail(refuse(pb.Code_ILLEGAL_DELIVERY_TIME, "a DELAY message needs a delivery timestamp"))
		}
		props[message.PropertyTimerDeliverMS] = strconv.FormatInt(sp.GetDeliveryTimestamp().AsTime().UnixMilli(), 10)
	case pb.MessageType_TRANSACTION:
		props[message.PropertyTransactionPrepared] = "true"
		props[message.PropertyProducerGroup] = txnGroupPrefix + topic
		ls.SysFlag |= message.SysFlagTxPrepared
		if d := sp.GetOrphanedTransactionRecoveryDuration(); d != nil && d.AsDuration() > 0 {
			props[message.PropertyCheckImmunityTime] = strconv.FormatInt(max(1, int64(d.AsDuration()/time.Second)), 10)
		}
	case pb.MessageType_LITE:
		// The broker stores it in its lite topic's queue.
		ls.LiteTopic = sp.GetLiteTopic()
	case pb.MessageType_PRIORITY:
		// The broker stores it in the queue of its priority.
		props[message.PropertyPriority] = strconv.Itoa(int(sp.GetPriority()))
	case pb.MessageType_NORMAL, pb.MessageType_MESSAGE_TYPE_UNSPECIFIED:
	default:
		return fail(refuse(pb.Code_BAD_REQUEST, "message type %v is not served", sp.GetMessageType()))
	}
	ls.Properties = message.EncodeProperties(props)
	return ls, entry
}

// sent fills the entry of a message from the broker's answer.
func (s *Server) sent(topic string, m *pb.Message, entry *pb.SendResultEntry, r broker.LocalSent) {
	if r.Err != nil {
		entry.Status = statusOf(r.Err)
		return
	}
	entry.Status, entry.Offset = okStatus(), r.QueueOffset
	entry.RecallHandle = r.RecallHandle
	if m.GetSystemProperties().GetMessageType() == pb.MessageType_TRANSACTION {
		entry.TransactionId = s.b.POP().TransactionID(topic, r.CommitLogOffset)
	}
}

// groupQueue is the queue of a FIFO message group: a hash of the group
// modulo the topic's writable queues, so one group keeps one queue.
func groupQueue(group string, tc broker.TopicConfig) int32 {
	n := max(1, min(tc.ReadQueueNums, tc.WriteQueueNums))
	h := fnv.New32a()
	h.Write([]byte(group))
	return int32(h.Sum32() % uint32(n))
}

// EndTransaction commits or rolls back a half message.
func (s *Server) EndTransaction(ctx context.Context, req *pb.EndTransactionRequest) (*pb.EndTransactionResponse, error) {
	topic := resource(req.GetTopic())
	if _, err := s.begin(ctx, acl.TopicRes(topic, acl.Pub)); err != nil {
		return &pb.EndTransactionResponse{Status: statusOf(err)}, nil
	}
	off, err := s.b.POP().ParseTransactionID(topic, req.GetTransactionId())
	if err == nil {
		switch req.GetResolution() {
		case pb.TransactionResolution_COMMIT, pb.TransactionResolution_ROLLBACK:
			err = s.b.EndLocalTransaction(txnGroupPrefix+topic, off, req.GetResolution() == pb.TransactionResolution_COMMIT)
		default:
			err = refuse(pb.Code_BAD_REQUEST, "resolution %v is neither COMMIT nor ROLLBACK", req.GetResolution())
		}
	}
	if err != nil && !errors.Is(err, broker.ErrTxnNotPending) && codeOf(err) == pb.Code_INTERNAL_SERVER_ERROR {
		err = fmt.Errorf("end transaction: %w", err)
	}
	return &pb.EndTransactionResponse{Status: statusOf(err)}, nil
}

// checkTransaction asks a producer of the transaction's topic, over its
// Telemetry stream, to resolve an orphaned transaction: it answers with
// EndTransaction (source SERVER_CHECK). It reports whether one was asked.
func (s *Server) checkTransaction(group string, m *message.Message, origin int64) bool {
	topic, ok := strings.CutPrefix(group, txnGroupPrefix)
	if !ok {
		return false
	}
	rec, err := message.AppendRecord(nil, m)
	if err != nil {
		s.log.Warn("encode an orphaned transaction", "topic", topic, "offset", origin, "err", err)
		return false
	}
	pm := s.messagePB(nil, topic, 0, broker.POPDelivery{Record: message.Record(rec), Queue: m.QueueID, Offset: m.QueueOffset})
	sp := pm.SystemProperties
	sp.ReceiptHandle, sp.DeliveryAttempt, sp.InvisibleDuration = nil, nil, nil
	sp.MessageType = pb.MessageType_TRANSACTION
	return s.sessions.push(topic, &pb.TelemetryCommand{Status: okStatus(), Command: &pb.TelemetryCommand_RecoverOrphanedTransactionCommand{
		RecoverOrphanedTransactionCommand: &pb.RecoverOrphanedTransactionCommand{Message: pm, TransactionId: s.b.POP().TransactionID(topic, origin)},
	}})
}

// RecallMessage cancels a delayed message's delivery while it waits, by
// the recall handle its send answered with. Who may send to the topic may
// recall its messages.
func (s *Server) RecallMessage(ctx context.Context, req *pb.RecallMessageRequest) (*pb.RecallMessageResponse, error) {
	topic := resource(req.GetTopic())
	if _, err := s.begin(ctx, acl.TopicRes(topic, acl.Pub)); err != nil {
		return &pb.RecallMessageResponse{Status: statusOf(err)}, nil
	}
	if h, err := message.ParseRecallHandle(req.GetRecallHandle()); err == nil && h.Topic == topic && h.Broker != s.opts.BrokerName && s.forwardable(ctx, hopSet) {
		// Made by another broker set: recall it there.
		for _, p := range s.peers.sets(ctx, topic) {
			if p.name == h.Broker {
				return s.forward(ctx, req, hopSet, p.endpoint, "broker "+p.name), nil
			}
		}
	}
	id, err := s.b.Recall(topic, req.GetRecallHandle())
	return &pb.RecallMessageResponse{Status: statusOf(err), MessageId: id}, nil
}
