package grpcserver

import (
	"context"
	"crypto/md5"
	"errors"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/internal/inflate"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// consumerTopic checks a consumer's group and topic and returns the
// topic's read queue count.
func (s *Server) consumerTopic(group, topic string) (int, error) {
	tc, err := s.consumerTopicConfig(group, topic)
	return tc.ReadQueueNums, err
}

// consumerTopicConfig checks a consumer's group and topic and returns the
// topic's configuration.
func (s *Server) consumerTopicConfig(group, topic string) (broker.TopicConfig, error) {
	if err := s.b.CheckConsumerGroup(group); err != nil {
		return broker.TopicConfig{}, refuse(pb.Code_CONSUMER_GROUP_NOT_FOUND, "%v", err)
	}
	tc, ok := s.b.Topic(topic)
	if !ok {
		return broker.TopicConfig{}, refuse(pb.Code_TOPIC_NOT_FOUND, "topic %s not found", topic)
	}
	if !tc.Readable() {
		return broker.TopicConfig{}, refuse(pb.Code_FORBIDDEN, "topic %s is not readable", topic)
	}
	return tc, nil
}

// ReceiveMessage pops messages of the topic from every queue of this
// broker, waiting up to the long-polling timeout for some to arrive or
// become visible again.
func (s *Server) ReceiveMessage(req *pb.ReceiveMessageRequest, stream pb.MessagingService_ReceiveMessageServer) error {
	ctx := stream.Context()
	group, topic := resource(req.GetGroup()), resource(req.GetMessageQueue().GetTopic())
	end := func(err error) error {
		return stream.Send(&pb.ReceiveMessageResponse{Content: &pb.ReceiveMessageResponse_Status{Status: statusOf(err)}})
	}
	c, err := s.begin(ctx, acl.TopicRes(topic, acl.Sub), acl.GroupRes(group, acl.Sub))
	if err != nil {
		return end(err)
	}
	tc, err := s.consumerTopicConfig(group, topic)
	if err != nil {
		return end(err)
	}
	if ids := s.b.View().ConsumerIDs(group); len(ids) > 0 {
		// Pull consumers keep their own offsets and queue allocation;
		// POP's would fight them over the same group offsets.
		return end(refuse(pb.Code_FORBIDDEN, "group %s is consumed by %d 4.x (remoting) consumer(s), e.g. %s: a group consumes either by POP over gRPC or by pull at a time", group, len(ids), ids[0]))
	}
	r := broker.POPReceive{Group: group, Topic: topic, ReadQueues: tc.ReadQueueNums, Batch: int(req.GetBatchSize()),
		Client: c.clientID, AttemptID: req.GetAttemptId(), Stop: s.quit}
	typ := s.sessions.clientType(c.clientID)
	if err := liteRefusal(tc, typ); err != nil {
		return end(err)
	}
	if isLite(typ) {
		r.LiteTopics = s.liteTopics(c.clientID, group, topic)
	}
	if r.Batch <= 0 {
		r.Batch = DefaultReceiveBatch
	}
	r.Batch = min(r.Batch, MaxReceiveBatch)
	r.Invisible = DefaultInvisible
	if req.GetAutoRenew() {
		// A push consumer: its live session keeps what it holds
		// invisible. The C++ one names an invisible duration too, which
		// RocketMQ's proxy ignores for such a receive, and so does this.
		r.Owner = c.clientID
	} else if req.InvisibleDuration != nil {
		if r.Invisible = req.GetInvisibleDuration().AsDuration(); r.Invisible <= 0 {
			return end(refuse(pb.Code_ILLEGAL_INVISIBLE_TIME, "invisible duration %v is not positive", r.Invisible))
		}
	}
	if r.Filter, err = s.compileFilter(req.GetFilterExpression()); err != nil {
		return end(err)
	}

	now := s.opts.Now()
	remaining, hasDeadline := time.Duration(0), false
	if dl, ok := ctx.Deadline(); ok {
		remaining, hasDeadline = time.Until(dl), true
	}
	r.Until = now.Add(pollTime(req.LongPollingTimeout, s.opts.LongPolling, remaining, hasDeadline))
	got, err := s.b.POP().Receive(ctx, r)
	switch {
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return err // the client is gone: nothing to answer
	case err != nil:
		return end(err)
	}
	return s.deliver(stream, req.GetMessageQueue().GetTopic(), r, got)
}

// Margins a receive's long polling leaves before the call's deadline.
const (
	// pollMargin is the time to answer in: a receive naming its
	// long_polling_timeout ends at least this long before the deadline.
	pollMargin = 200 * time.Millisecond
	// pollMarginUnnamed is the margin of a receive naming none (the Go
	// simple consumer's, whose deadline is its await duration plus its
	// request timeout): half the clients' default request timeout (3 s),
	// as RocketMQ's proxy leaves half the client's, so an answer crosses
	// a slow network before the client gives up.
	pollMarginUnnamed = 1500 * time.Millisecond
)

// pollTime is how long a receive waits for messages: the request's
// long_polling_timeout, or the server's longest when it names none,
// within longest, and ending before the call's deadline (remaining from now, when
// hasDeadline) by its margin.
func pollTime(asked *durationpb.Duration, longest, remaining time.Duration, hasDeadline bool) time.Duration {
	poll, margin := longest, pollMarginUnnamed
	if asked != nil {
		poll, margin = min(max(asked.AsDuration(), 0), longest), pollMargin
	}
	if !hasDeadline {
		return poll
	}
	if remaining-margin < pollMargin {
		// Too short a call for the wide margin: the narrow one.
		margin = pollMargin
	}
	return max(min(poll, remaining-margin), 0)
}

// compileFilter compiles a receive's filter through the broker's filters.
func (s *Server) compileFilter(fe *pb.FilterExpression) (broker.Filter, error) {
	typ, expr := broker.ExpressionTag, strings.TrimSpace(fe.GetExpression())
	if fe.GetType() == pb.FilterType_SQL {
		typ = broker.ExpressionSQL92
	}
	if expr == "" && typ == broker.ExpressionTag {
		expr = "*"
	}
	f, err := s.b.CompileFilter(typ, expr)
	if err != nil {
		return nil, refuse(pb.Code_ILLEGAL_FILTER_EXPRESSION, "%v", err)
	}
	return f, nil
}

// deliver streams the messages popped: OK, each message, then the
// delivery timestamp.
// topicRes is the topic as the client named it.
func (s *Server) deliver(stream pb.MessagingService_ReceiveMessageServer, topicRes *pb.Resource, r broker.POPReceive, got []broker.POPDelivery) error {
	if err := stream.Send(&pb.ReceiveMessageResponse{Content: &pb.ReceiveMessageResponse_Status{Status: okStatus()}}); err != nil {
		s.b.POP().Release(r.Group, r.Topic, got)
		return err
	}
	for i, d := range got {
		m := s.messagePB(topicRes, r.Topic, r.Invisible, d)
		if err := stream.Send(&pb.ReceiveMessageResponse{Content: &pb.ReceiveMessageResponse_Message{Message: m}}); err != nil {
			// The client is gone: what it did not get is deliverable
			// again now, not after the invisible time.
			s.b.POP().Release(r.Group, r.Topic, got[i:])
			return err
		}
	}
	return stream.Send(&pb.ReceiveMessageResponse{Content: &pb.ReceiveMessageResponse_DeliveryTimestamp{DeliveryTimestamp: timestamppb.New(s.opts.Now())}})
}

// messagePB builds the delivered form of a stored message of topic, as
// the client named it in topicRes (nil: from topic's name), received to
// stay invisible for invisible.
func (s *Server) messagePB(topicRes *pb.Resource, topic string, invisible time.Duration, d broker.POPDelivery) *pb.Message {
	props := d.Record.Properties()
	body, encoding := d.Record.Body(), pb.Encoding_IDENTITY
	if flag := d.Record.SysFlag(); flag&message.SysFlagCompressed != 0 {
		if plain, err := inflate.Body(flag, body, s.opts.MaxBodySize); err == nil {
			body = plain
		} else {
			// Larger than a message may be, or not a body this broker
			// reads: the stored bytes, marked GZIP, for the client to
			// decompress, as RocketMQ's proxy delivers every compressed
			// body (the clients take zlib and, Java, LZ4 and zstd there),
			// never a body cut short.
			encoding = pb.Encoding_GZIP
		}
	}
	sp := &pb.SystemProperties{
		MessageId:         props.Get(message.PropertyUniqKey),
		BodyDigest:        &pb.Digest{Type: pb.DigestType_MD5, Checksum: md5Hex(md5.Sum(body))},
		BodyEncoding:      encoding,
		MessageType:       pb.MessageType_NORMAL,
		BornTimestamp:     timestamppb.New(time.UnixMilli(d.Record.BornTimestamp())),
		BornHost:          d.Record.BornHost().Addr().String(),
		StoreTimestamp:    timestamppb.New(time.UnixMilli(d.Record.StoreTimestamp())),
		StoreHost:         d.Record.StoreHost().String(),
		ReceiptHandle:     &d.Handle,
		QueueId:           d.Queue,
		QueueOffset:       &d.Offset,
		InvisibleDuration: durationpb.New(invisible),
		DeliveryAttempt:   &d.Attempt,
	}
	if sp.MessageId == "" {
		sp.MessageId = message.OffsetMsgID(d.Record.StoreHost(), d.Record.CommitLogOffset())
	}
	if h := props.Get(message.PropertyBornHost); h != "" {
		sp.BornHost = h // as the producing client named itself
	}
	if v, ok := props.Lookup(message.PropertyTraceContext); ok {
		tc := string(v)
		sp.TraceContext = &tc
	}
	if v, ok := props.Lookup(message.PropertyTags); ok {
		t := string(v)
		sp.Tag = &t
	}
	if k := props.Get(message.PropertyKeys); k != "" {
		sp.Keys = strings.Fields(k)
	}
	g := props.Get(message.PropertyShardingKey)
	if g == "" {
		g = props.Get(message.PropertyShardingKeyOld)
	}
	if g != "" {
		sp.MessageType, sp.MessageGroup = pb.MessageType_FIFO, &g
	}
	if t := props.Get(message.PropertyTimerDeliverMS); t != "" {
		if ms, err := strconv.ParseInt(t, 10, 64); err == nil {
			sp.MessageType, sp.DeliveryTimestamp = pb.MessageType_DELAY, timestamppb.New(time.UnixMilli(ms))
		}
	}
	if v, ok := props.Lookup(message.PropertyPriority); ok && sp.MessageType == pb.MessageType_NORMAL {
		if n, err := strconv.ParseInt(string(v), 10, 32); err == nil && n >= 0 {
			p := int32(n)
			sp.MessageType, sp.Priority = pb.MessageType_PRIORITY, &p
		}
	}
	if d.Record.SysFlag()&message.SysFlagTxMask == message.SysFlagTxCommit {
		sp.MessageType = pb.MessageType_TRANSACTION
	}
	if strings.HasPrefix(topic, broker.DLQGroupTopicPrefix) {
		sp.DeadLetterQueue = &pb.DeadLetterQueue{Topic: props.Get(message.PropertyRetryTopic), MessageId: props.Get(message.PropertyOriginMessageID)}
	}
	user := map[string]string{}
	props.Each(func(k, v []byte) bool {
		if !systemKeys[string(k)] {
			user[string(k)] = string(v)
		}
		return true
	})
	if parent, lite, ok := broker.SplitLiteQueue(d.Topic); ok {
		sp.MessageType, sp.LiteTopic = pb.MessageType_LITE, &lite
		topic = parent
	}
	if topicRes == nil {
		topicRes = unwrap(topic)
	}
	return &pb.Message{Topic: topicRes, UserProperties: user, SystemProperties: sp, Body: body}
}

// md5Hex is an MD5 sum in upper-case hexadecimal, as Apache's proxy
// writes a body's digest and every client compares it.
func md5Hex(sum [md5.Size]byte) string {
	const digits = "0123456789ABCDEF"
	var out [2 * md5.Size]byte
	for i, c := range sum {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&0xf]
	}
	return string(out[:])
}

// AckMessage acknowledges messages by receipt handle, each answered on
// its own.
func (s *Server) AckMessage(ctx context.Context, req *pb.AckMessageRequest) (*pb.AckMessageResponse, error) {
	group, topic := resource(req.GetGroup()), resource(req.GetTopic())
	if _, err := s.begin(ctx, acl.TopicRes(topic, acl.Sub), acl.GroupRes(group, acl.Sub)); err != nil {
		return &pb.AckMessageResponse{Status: statusOf(err)}, nil
	}
	nq, err := s.consumerTopic(group, topic)
	if err != nil {
		return &pb.AckMessageResponse{Status: statusOf(err)}, nil
	}
	resp := &pb.AckMessageResponse{}
	var common *pb.Status
	errs := s.ackEntries(group, topic, nq, req.GetEntries())
	for i, e := range req.GetEntries() {
		st := statusOf(errs[i])
		resp.Entries = append(resp.Entries, &pb.AckMessageResultEntry{MessageId: e.GetMessageId(), ReceiptHandle: e.GetReceiptHandle(), Status: st})
		switch {
		case common == nil:
			common = st
		case common.Code != st.Code:
			common = &pb.Status{Code: pb.Code_MULTIPLE_RESULTS, Message: "the entries have different results"}
		}
	}
	if common == nil {
		common = statusOf(refuse(pb.Code_BAD_REQUEST, "no entries"))
	}
	resp.Status = common
	return resp, nil
}

// ackEntries acknowledges the entries of an AckMessage, those of each
// lite topic in its queue: errs[i] is entries[i]'s.
func (s *Server) ackEntries(group, topic string, nq int, entries []*pb.AckMessageEntry) []error {
	errs := make([]error, len(entries))
	byQueue := map[string][]int{} // internal topic: the entries
	var order []string
	for i, e := range entries {
		q, err := liteQueue(topic, e.GetLiteTopic(), e.GetReceiptHandle())
		if err != nil {
			errs[i] = err
			continue
		}
		if _, ok := byQueue[q]; !ok {
			order = append(order, q)
		}
		byQueue[q] = append(byQueue[q], i)
	}
	for _, q := range order {
		at := byQueue[q]
		handles := make([]string, len(at))
		for j, i := range at {
			handles[j] = entries[i].GetReceiptHandle()
		}
		n := nq
		if q != topic {
			n = 1 // a lite topic's one queue
		}
		for j, err := range s.b.POP().AckAll(group, q, n, handles) {
			errs[at[j]] = err
		}
	}
	return errs
}

// ChangeInvisibleDuration makes a message deliverable again after the
// duration (0: now) and answers a new receipt handle. A push consumer's
// message waits at least its group's retry delay for the attempt.
func (s *Server) ChangeInvisibleDuration(ctx context.Context, req *pb.ChangeInvisibleDurationRequest) (*pb.ChangeInvisibleDurationResponse, error) {
	group, topic := resource(req.GetGroup()), resource(req.GetTopic())
	if _, err := s.begin(ctx, acl.TopicRes(topic, acl.Sub), acl.GroupRes(group, acl.Sub)); err != nil {
		return &pb.ChangeInvisibleDurationResponse{Status: statusOf(err)}, nil
	}
	nq, err := s.consumerTopic(group, topic)
	if err != nil {
		return &pb.ChangeInvisibleDurationResponse{Status: statusOf(err)}, nil
	}
	d := req.GetInvisibleDuration().AsDuration()
	if d < 0 || d > 12*time.Hour {
		return &pb.ChangeInvisibleDurationResponse{Status: statusOf(refuse(pb.Code_ILLEGAL_INVISIBLE_TIME, "invisible duration %v is outside 0..12h", d))}, nil
	}
	q, err := liteQueue(topic, req.GetLiteTopic(), req.GetReceiptHandle())
	if err != nil {
		return &pb.ChangeInvisibleDurationResponse{Status: statusOf(err)}, nil
	}
	var h string
	switch {
	case q == topic:
		h, err = s.b.POP().ChangeInvisible(group, topic, nq, req.GetReceiptHandle(), d)
	case req.GetSuspend():
		// A lite consumer defers the message: not a failed attempt.
		h, err = s.b.POP().Suspend(group, q, 1, req.GetReceiptHandle(), d)
	default:
		h, err = s.b.POP().ChangeInvisible(group, q, 1, req.GetReceiptHandle(), d)
	}
	return &pb.ChangeInvisibleDurationResponse{Status: statusOf(err), ReceiptHandle: h}, nil
}

// ForwardMessageToDeadLetterQueue moves a message in flight to the
// group's dead-letter topic and acknowledges it.
func (s *Server) ForwardMessageToDeadLetterQueue(ctx context.Context, req *pb.ForwardMessageToDeadLetterQueueRequest) (*pb.ForwardMessageToDeadLetterQueueResponse, error) {
	group, topic := resource(req.GetGroup()), resource(req.GetTopic())
	if _, err := s.begin(ctx, acl.TopicRes(topic, acl.Sub), acl.GroupRes(group, acl.Sub)); err != nil {
		return &pb.ForwardMessageToDeadLetterQueueResponse{Status: statusOf(err)}, nil
	}
	nq, err := s.consumerTopic(group, topic)
	q := topic
	if err == nil {
		q, err = liteQueue(topic, req.GetLiteTopic(), req.GetReceiptHandle())
	}
	if q != topic {
		nq = 1 // a lite topic's one queue
	}
	if err == nil {
		err = s.b.POP().DeadLetter(group, q, nq, req.GetReceiptHandle())
	}
	return &pb.ForwardMessageToDeadLetterQueueResponse{Status: statusOf(err)}, nil
}
