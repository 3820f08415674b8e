package grpcserver

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/broker"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// session is a client that sent Settings: its type, topics or group, and
// when it was last heard of.
type session struct {
	clientID string
	typ      pb.ClientType
	group    string   // consumers
	topics   []string // producers
	lastSeen time.Time
	// streams are the open Telemetry streams' queues of server-initiated
	// commands.
	streams map[chan *pb.TelemetryCommand]struct{}
}

// sessionTable holds the sessions, at most max of them.
type sessionTable struct {
	max    int
	expiry time.Duration
	mu     struct {
		sync.Mutex
		byID map[string]*session
		// consumers counts the consumer sessions of each group.
		consumers map[string]int
	}
}

func isConsumer(s *session) bool {
	return s.group != "" && (s.typ == pb.ClientType_SIMPLE_CONSUMER || s.typ == pb.ClientType_PUSH_CONSUMER || isLite(s.typ))
}

// unindexLocked and indexLocked keep consumers in step with a session.
func (t *sessionTable) unindexLocked(s *session) {
	if isConsumer(s) {
		if t.mu.consumers[s.group]--; t.mu.consumers[s.group] <= 0 {
			delete(t.mu.consumers, s.group)
		}
	}
}

func (t *sessionTable) indexLocked(s *session) {
	if isConsumer(s) {
		t.mu.consumers[s.group]++
	}
}

func newSessionTable(max int, expiry time.Duration) *sessionTable {
	t := &sessionTable{max: max, expiry: expiry}
	t.mu.byID = map[string]*session{}
	t.mu.consumers = map[string]int{}
	return t
}

// settings records a client's Settings, received on the Telemetry stream
// whose command queue is push (nil: none); a new session beyond the cap is
// ErrTooManyRequests.
func (t *sessionTable) settings(id string, st *pb.Settings, now time.Time, push chan *pb.TelemetryCommand) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.mu.byID[id]
	if s == nil {
		if len(t.mu.byID) >= t.max {
			return ErrTooManyRequests
		}
		s = &session{clientID: id, streams: map[chan *pb.TelemetryCommand]struct{}{}}
		t.mu.byID[id] = s
	}
	if push != nil {
		s.streams[push] = struct{}{}
	}
	t.unindexLocked(s)
	defer t.indexLocked(s)
	s.typ, s.lastSeen = st.GetClientType(), now
	if sub := st.GetSubscription(); sub != nil {
		s.group = resource(sub.GetGroup())
	}
	if p := st.GetPublishing(); p != nil {
		s.topics = s.topics[:0]
		for _, r := range p.GetTopics() {
			s.topics = append(s.topics, resource(r))
		}
	}
	return nil
}

// push offers cmd to one Telemetry stream of a producer session that
// publishes to topic, without waiting; false if none took it.
func (t *sessionTable) push(topic string, cmd *pb.TelemetryCommand) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.mu.byID {
		if slices.Contains(s.topics, topic) && s.offer(cmd) {
			return true
		}
	}
	return false
}

// offer offers cmd to one of the session's Telemetry streams, without
// waiting; false if none took it. The table's lock must be held.
func (s *session) offer(cmd *pb.TelemetryCommand) bool {
	for ch := range s.streams {
		select {
		case ch <- cmd:
			return true
		default:
		}
	}
	return false
}

// pushTo offers cmd to one Telemetry stream of client id, without
// waiting; false if none took it.
func (t *sessionTable) pushTo(id string, cmd *pb.TelemetryCommand) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.mu.byID[id]
	return s != nil && s.offer(cmd)
}

// hasConsumers reports whether group has a consumer session.
func (t *sessionTable) hasConsumers(group string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.consumers[group] > 0
}

// alive reports whether a client has a session.
func (t *sessionTable) alive(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.byID[id] != nil
}

// touch refreshes a client's liveness; false if it has no session.
func (t *sessionTable) touch(id string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.mu.byID[id]
	if s != nil {
		s.lastSeen = now
	}
	return s != nil
}

// streamEnded notes a Telemetry stream of id closed.
func (t *sessionTable) streamEnded(id string, push chan *pb.TelemetryCommand, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.mu.byID[id]; s != nil {
		delete(s.streams, push)
		s.lastSeen = now
	}
}

func (t *sessionTable) drop(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.mu.byID[id]; s != nil {
		t.unindexLocked(s)
		delete(t.mu.byID, id)
	}
}

// clientType returns the type a client's Settings named, or
// CLIENT_TYPE_UNSPECIFIED.
func (t *sessionTable) clientType(id string) pb.ClientType {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.mu.byID[id]; s != nil {
		return s.typ
	}
	return pb.ClientType_CLIENT_TYPE_UNSPECIFIED
}

func (t *sessionTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.mu.byID)
}

// sweep drops the sessions without a stream not heard of within the
// expiry, and returns their ids.
func (t *sessionTable) sweep(now time.Time) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var gone []string
	for id, s := range t.mu.byID {
		if len(s.streams) == 0 && now.Sub(s.lastSeen) > t.expiry {
			t.unindexLocked(s)
			delete(t.mu.byID, id)
			gone = append(gone, id)
		}
	}
	return gone
}

// Telemetry answers each Settings with the settings the client must use
// (server values merged in), or ends the stream with the reason it
// refuses them, and keeps the session alive while the stream is open; it also carries the server's commands (orphaned
// transaction recovery). Thread stack traces and message verification
// results are accepted and dropped: the broker never asks for them.
func (s *Server) Telemetry(stream pb.MessagingService_TelemetryServer) error {
	ctx := stream.Context()
	c, err := s.begin(ctx)
	if err != nil {
		return rpcError(statusOf(err)) // as a refused Settings ends (below)
	}
	push := make(chan *pb.TelemetryCommand, 16)
	defer s.sessions.streamEnded(c.clientID, push, s.opts.Now())
	in := make(chan *pb.TelemetryCommand)
	errc := make(chan error, 1)
	go func() {
		for {
			cmd, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case in <- cmd:
			case <-ctx.Done():
				errc <- ctx.Err()
				return
			}
		}
	}()
	for {
		var cmd *pb.TelemetryCommand
		select {
		case <-s.quit:
			return nil
		case err := <-errc:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case cmd = <-in:
		case cmd := <-push:
			if err := stream.Send(cmd); err != nil {
				return err
			}
			continue
		}
		st := cmd.GetSettings()
		if st == nil {
			continue // a reply to a command the broker never sends
		}
		reply, err := s.settings(ctx, c, st, push)
		if err != nil {
			// Refused: the stream ends with the reason, as RocketMQ's
			// proxy ends it. The clients apply whatever settings a reply
			// carries without reading its status, so a reply would start
			// a client the broker refused (a producer with no body size
			// allowed), and a status alone would leave them waiting.
			return rpcError(statusOf(err))
		}
		if err := stream.Send(&pb.TelemetryCommand{Status: okStatus(), Command: &pb.TelemetryCommand_Settings{Settings: reply}}); err != nil {
			return err
		}
	}
}

// settings checks and records a client's Settings and returns them with
// the server's values.
func (s *Server) settings(ctx context.Context, c call, st *pb.Settings, push chan *pb.TelemetryCommand) (*pb.Settings, error) {
	var res []acl.Resource
	if sub := st.GetSubscription(); sub != nil {
		res = append(res, acl.GroupRes(resource(sub.GetGroup()), acl.Sub))
	}
	for _, r := range st.GetPublishing().GetTopics() {
		res = append(res, acl.TopicRes(resource(r), acl.Pub))
	}
	if chk := s.opts.ACL(); chk.Enabled() {
		if _, err := s.begin(ctx, res...); err != nil {
			return nil, err
		}
	}
	out := &pb.Settings{
		ClientType:     st.ClientType,
		AccessPoint:    st.AccessPoint,
		RequestTimeout: st.RequestTimeout,
		UserAgent:      st.UserAgent,
		Metric:         &pb.Metric{On: false},
	}
	switch {
	case st.GetPublishing() != nil:
		out.BackoffPolicy = &pb.RetryPolicy{
			MaxAttempts: defaultProducerBackoff,
			Strategy: &pb.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &pb.ExponentialBackoff{
				Initial: durationpb.New(10 * time.Millisecond), Max: durationpb.New(time.Second), Multiplier: 2,
			}},
		}
		out.PubSub = &pb.Settings_Publishing{Publishing: &pb.Publishing{
			Topics:              st.GetPublishing().GetTopics(),
			MaxBodySize:         int32(s.opts.MaxBodySize),
			ValidateMessageType: true,
		}}
	case st.GetSubscription() != nil:
		sub := st.GetSubscription()
		group := resource(sub.GetGroup())
		if err := s.b.CheckConsumerGroup(group); err != nil {
			return nil, refuse(pb.Code_ILLEGAL_CONSUMER_GROUP, "%v", err)
		}
		gc, _ := s.b.GroupConfig(group)
		out.BackoffPolicy = retryPolicyPB(gc.RetryPolicy(s.b.View().DelayLevels()))
		// The client's own long-polling time when it asks for one within
		// the server's bound (the Node push consumer's longPollingTimeout).
		poll := s.opts.LongPolling
		if d := sub.GetLongPollingTimeout(); d != nil && d.AsDuration() > 0 && d.AsDuration() < poll {
			poll = d.AsDuration()
		}
		out.PubSub = &pb.Settings_Subscription{Subscription: &pb.Subscription{
			Group:              sub.Group,
			Subscriptions:      sub.Subscriptions,
			Fifo:               new(gc.ConsumeMessageOrderly),
			ReceiveBatchSize:   new(int32(DefaultReceiveBatch)),
			LongPollingTimeout: durationpb.New(poll),
		}}
		if isLite(st.GetClientType()) {
			sp := out.GetSubscription()
			sp.LiteSubscriptionQuota = new(int32(s.opts.LiteSubscriptionQuota))
			sp.MaxLiteTopicSize = new(int32(broker.MaxLiteTopicLen))
		}
	}
	if err := s.sessions.settings(c.clientID, st, s.opts.Now(), push); err != nil {
		return out, err
	}
	return out, nil
}

// retryPolicyPB is a group's retry policy as Apache's proxy sends it: the
// ladder as a CUSTOMIZED backoff, else the EXPONENTIAL one.
func retryPolicyPB(p broker.RetryPolicy) *pb.RetryPolicy {
	out := &pb.RetryPolicy{MaxAttempts: int32(p.MaxAttempts)}
	if p.Exponential {
		out.Strategy = &pb.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &pb.ExponentialBackoff{
			Initial: durationpb.New(p.Initial), Max: durationpb.New(p.Max), Multiplier: float32(p.Multiplier),
		}}
		return out
	}
	next := make([]*durationpb.Duration, len(p.Next))
	for i, d := range p.Next {
		next[i] = durationpb.New(d)
	}
	out.Strategy = &pb.RetryPolicy_CustomizedBackoff{CustomizedBackoff: &pb.CustomizedBackoff{Next: next}}
	return out
}

// Heartbeat refreshes a client's session.
func (s *Server) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	c, err := s.begin(ctx)
	if err == nil && !s.sessions.touch(c.clientID, s.opts.Now()) {
		err = ErrUnknownClient
	}
	return &pb.HeartbeatResponse{Status: statusOf(err)}, nil
}

// NotifyClientTermination drops a client's session.
func (s *Server) NotifyClientTermination(ctx context.Context, req *pb.NotifyClientTerminationRequest) (*pb.NotifyClientTerminationResponse, error) {
	c, err := s.begin(ctx)
	if err == nil {
		s.sessions.drop(c.clientID)
		s.dropLite(c.clientID)
	}
	return &pb.NotifyClientTerminationResponse{Status: statusOf(err)}, nil
}
