package grpcserver

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/broker"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// Lite consumers (RocketMQ 5's LitePushConsumer and LiteSimpleConsumer)
// bind to one LITE topic and subscribe to its lite topics one by one with
// SyncLiteSubscription; a receive on the bound topic then takes from the
// queues of the lite topics the client subscribes to now (broker's
// lite.go). "*" subscribes to every lite topic of the topic, which the
// group's consumers then share.
//
// The subscriptions live in memory, per client, at most
// LiteSubscriptionQuota each (told to the client in its settings), for
// at most MaxSessions clients. A client's subscriptions are dropped with
// its session or, for a client with no session here, a session expiry
// after its last sync. The
// clients send their whole set again every 30 s (COMPLETE_ADD), so a
// restarted broker, or a set's new leader, knows them again within that.
//
// A client syncs at the endpoint it was given (Node, C#) or at every set
// of its route (Java, Go). The set it reaches applies the sync, a replica
// by forwarding it to its set's leader, and passes it on to the masters
// of the other broker sets the topic spans (peers.go), which receive for
// the client too; one that does not take it does not fail the sync.

// liteWildcard subscribes to every lite topic of the bound topic.
const liteWildcard = broker.LiteWildcard

// liteGrace is how long a client's subscribe or unsubscribe of one lite
// topic outweighs its whole set (COMPLETE_ADD). The clients send the whole
// set from a copy taken when they start the call, on a timer, and change
// the copy only once a subscribe's answer came: a whole set sent while a
// subscribe is under way lacks its lite topic and may arrive after it,
// and one sent while an unsubscribe is under way still has it. The first
// whole set, sent at startup, races the application's first subscribes
// so. Within liteGrace of a subscribe or unsubscribe, the whole set does
// not undo it; after it, the whole set is the truth. A call takes at most
// the client's request timeout (3 s by default).
const liteGrace = 10 * time.Second

// liteSub is one client's lite subscriptions.
type liteSub struct {
	group, topic string
	set          map[string]struct{}
	// list is set, sorted; replaced, never changed, when set changes.
	list    []string
	version int64
	synced  time.Time
	// recent are the lite topics subscribed (true) or unsubscribed
	// (false) one by one within liteGrace, and when.
	recent map[string]liteChange
}

// liteChange is a subscribe (add) or unsubscribe of one lite topic.
type liteChange struct {
	add bool
	at  time.Time
}

// liteSubs holds the lite subscriptions of the clients.
type liteSubs struct {
	max, quota int
	mu         sync.Mutex
	byClient   map[string]*liteSub
}

func newLiteSubs(max, quota int) *liteSubs {
	return &liteSubs{max: max, quota: quota, byClient: map[string]*liteSub{}}
}

// sync applies a SyncLiteSubscription of client id: for another group or
// topic than the client's last, it starts over. A version older than the
// last one applied is a stale request and changes nothing.
func (t *liteSubs) sync(id, group, topic string, action pb.LiteSubscriptionAction, names []string, version *int64, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	ls := t.byClient[id]
	if ls == nil || ls.group != group || ls.topic != topic {
		if ls == nil && len(t.byClient) >= t.max {
			return refuse(pb.Code_TOO_MANY_REQUESTS, "%d clients hold lite subscriptions, the limit is %d (maxSessions)", len(t.byClient), t.max)
		}
		ls = &liteSub{group: group, topic: topic, set: map[string]struct{}{}, recent: map[string]liteChange{}}
	}
	for n, ch := range ls.recent {
		if now.Sub(ch.at) > liteGrace {
			delete(ls.recent, n)
		}
	}
	if version != nil {
		if *version < ls.version {
			return nil
		}
		ls.version = *version
	}
	next := maps.Clone(ls.set)
	recent := maps.Clone(ls.recent)
	switch action {
	case pb.LiteSubscriptionAction_PARTIAL_ADD:
		for _, n := range names {
			next[n] = struct{}{}
			recent[n] = liteChange{add: true, at: now}
		}
	case pb.LiteSubscriptionAction_PARTIAL_REMOVE:
		for _, n := range names {
			delete(next, n)
			recent[n] = liteChange{add: false, at: now}
		}
	case pb.LiteSubscriptionAction_COMPLETE_ADD:
		next = make(map[string]struct{}, len(names))
		for _, n := range names {
			next[n] = struct{}{}
		}
		for n, ch := range recent {
			if ch.add {
				next[n] = struct{}{}
			} else {
				delete(next, n)
			}
		}
	case pb.LiteSubscriptionAction_COMPLETE_REMOVE:
		next, recent = map[string]struct{}{}, map[string]liteChange{}
	default:
		return refuse(pb.Code_BAD_REQUEST, "unknown lite subscription action %v", action)
	}
	if len(next) > t.quota {
		return refuse(pb.Code_LITE_SUBSCRIPTION_QUOTA_EXCEEDED, "%d lite topics subscribed, the quota is %d (liteSubscriptionQuota); unsubscribe from some first", len(next), t.quota)
	}
	ls.set, ls.recent, ls.synced = next, recent, now
	ls.list = slices.Sorted(maps.Keys(next))
	t.byClient[id] = ls
	return nil
}

// topics returns what client id subscribes to of group's topic: its
// lite topics, sorted, or the wildcard alone; nil for none.
func (t *liteSubs) topics(id, group, topic string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	ls := t.byClient[id]
	if ls == nil || ls.group != group || ls.topic != topic {
		return nil
	}
	if _, ok := ls.set[liteWildcard]; ok {
		return []string{liteWildcard}
	}
	return ls.list
}

// expired takes an expired lite topic of topic out of every client's
// subscriptions and returns the clients that had it.
func (t *liteSubs) expired(topic, lite string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var had []string
	for id, ls := range t.byClient {
		if _, ok := ls.set[lite]; !ok || ls.topic != topic {
			continue
		}
		next := maps.Clone(ls.set)
		delete(next, lite)
		ls.set, ls.list = next, slices.Sorted(maps.Keys(next))
		delete(ls.recent, lite)
		had = append(had, id)
	}
	return had
}

// liteExpired tells the clients subscribed to a lite topic the broker
// deleted as expired to unsubscribe from it (NotifyUnsubscribeLiteCommand,
// as RocketMQ does), and drops it from their subscriptions here.
func (s *Server) liteExpired(topic, lite string) {
	for _, id := range s.lite.expired(topic, lite) {
		cmd := &pb.TelemetryCommand{Status: okStatus(), Command: &pb.TelemetryCommand_NotifyUnsubscribeLiteCommand{
			NotifyUnsubscribeLiteCommand: &pb.NotifyUnsubscribeLiteCommand{LiteTopic: lite}}}
		if !s.sessions.pushTo(id, cmd) {
			s.log.Debug("lite topic expired; its subscriber has no Telemetry stream to tell", "topic", topic, "lite_topic", lite, "client_id", id)
		}
	}
}

// drop forgets a client's subscriptions.
func (t *liteSubs) drop(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byClient, id)
}

// dropLite forgets a client's lite subscriptions and the broker's
// listener of its receives.
func (s *Server) dropLite(id string) {
	s.lite.drop(id)
	if s.opts.Leader == nil {
		s.b.POP().ForgetLite(id)
	}
}

// sweep forgets the subscriptions of clients without a session here that
// have not synced within expiry.
func (t *liteSubs) sweep(now time.Time, expiry time.Duration, alive func(id string) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, ls := range t.byClient {
		if now.Sub(ls.synced) > expiry && !alive(id) {
			delete(t.byClient, id)
		}
	}
}

// isLite reports whether a client type is a lite consumer's.
func isLite(t pb.ClientType) bool {
	return t == pb.ClientType_LITE_PUSH_CONSUMER || t == pb.ClientType_LITE_SIMPLE_CONSUMER
}

// SyncLiteSubscription changes the lite topics a lite consumer subscribes
// to, here and at the other masters of its topic; a replica forwards it to
// its leader. The names must be lite topic names or "*"; an offset
// option with PARTIAL_ADD moves the group's consumption of those lite
// topics to where it says.
func (s *Server) SyncLiteSubscription(ctx context.Context, req *pb.SyncLiteSubscriptionRequest) (*pb.SyncLiteSubscriptionResponse, error) {
	fail := func(err error) (*pb.SyncLiteSubscriptionResponse, error) {
		return &pb.SyncLiteSubscriptionResponse{Status: statusOf(err)}, nil
	}
	group, topic := resource(req.GetGroup()), resource(req.GetTopic())
	c, err := s.begin(ctx, acl.TopicRes(topic, acl.Sub), acl.GroupRes(group, acl.Sub))
	if err != nil {
		return fail(err)
	}
	if c.clientID == "" {
		return fail(ErrClientIDRequired)
	}
	tc, err := s.consumerTopicConfig(group, topic)
	if err != nil {
		return fail(err)
	}
	if tc.MessageType != broker.MessageTypeLite {
		return fail(refuse(pb.Code_BAD_REQUEST, "topic %s is not of type LITE; lite consumers bind to a LITE topic", topic))
	}
	names := req.GetLiteTopicSet()
	if len(names) > s.opts.LiteSubscriptionQuota {
		// Refused before it costs anything to look at.
		return fail(refuse(pb.Code_LITE_SUBSCRIPTION_QUOTA_EXCEEDED, "%d lite topics named, the quota is %d (liteSubscriptionQuota)", len(names), s.opts.LiteSubscriptionQuota))
	}
	for _, n := range names {
		if n == liteWildcard {
			continue
		}
		if err := broker.ValidateLiteTopic(n); err != nil {
			return fail(refuse(pb.Code_ILLEGAL_LITE_TOPIC, "%v", err))
		}
	}
	seek, err := liteOffset(req.GetOffsetOption())
	if err != nil {
		return fail(err)
	}
	if err := s.lite.sync(c.clientID, group, topic, req.GetAction(), names, req.Version, s.opts.Now()); err != nil {
		return fail(err)
	}
	s.b.POP().LiteChanged(group, topic, c.clientID)
	if req.GetAction() == pb.LiteSubscriptionAction_PARTIAL_ADD {
		// Each set moves the group's offsets in its own lite queues.
		for _, n := range names {
			if n == liteWildcard {
				continue
			}
			if err := s.b.POP().SeekLite(group, topic, n, seek); err != nil {
				return fail(err)
			}
		}
	}
	if s.forwardable(ctx, hopSet) {
		s.forwardLitePeers(ctx, topic, req)
	}
	return &pb.SyncLiteSubscriptionResponse{Status: okStatus()}, nil
}

// forwardLitePeers passes a sync on to the other broker sets of topic, at
// once, and waits for them within the call's time. A set that does not
// take it does not fail the client's sync, which this set took: the Java
// and Go clients sync at every set of the route themselves, so a set this
// one cannot reach may still be theirs, and for the clients that sync at
// their endpoint alone (Node, C#) such a set learns the subscription at
// their next whole set, within 30 s.
func (s *Server) forwardLitePeers(ctx context.Context, topic string, req *pb.SyncLiteSubscriptionRequest) {
	peers := s.peers.sets(ctx, topic)
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Go(func() {
			resp, st := forwardCall(s, ctx, hopSet, p.endpoint, "the lite subscription to broker "+p.name, func(ctx context.Context, cl pb.MessagingServiceClient) (*pb.SyncLiteSubscriptionResponse, error) {
				return cl.SyncLiteSubscription(ctx, req)
			})
			if st == nil {
				st = resp.GetStatus()
			}
			if st.GetCode() != pb.Code_OK {
				s.peers.warn.Warn("lite-forward", "grpc: another broker set did not take a lite subscription; it learns it from the client", "topic", topic, "broker", p.name, "code", st.GetCode().String(), "err", st.GetMessage())
			}
		})
	}
	wg.Wait()
}

// forwardLite serves SyncLiteSubscription on a replica: the leader's
// answer.
func (s *Server) forwardLite(ctx context.Context, req *pb.SyncLiteSubscriptionRequest) *pb.SyncLiteSubscriptionResponse {
	addr, _ := s.opts.Leader()
	if addr == "" || !s.forwardable(ctx, hopLeader) {
		return &pb.SyncLiteSubscriptionResponse{Status: s.notLeader()}
	}
	resp, st := forwardCall(s, ctx, hopLeader, addr, "the lite subscription to the set's leader", func(ctx context.Context, cl pb.MessagingServiceClient) (*pb.SyncLiteSubscriptionResponse, error) {
		return cl.SyncLiteSubscription(ctx, req)
	})
	if st != nil {
		return &pb.SyncLiteSubscriptionResponse{Status: st}
	}
	return resp
}

// liteOffset reads an OffsetOption.
func liteOffset(o *pb.OffsetOption) (broker.LiteOffset, error) {
	switch t := o.GetOffsetType().(type) {
	case nil:
		return broker.LiteOffset{}, nil
	case *pb.OffsetOption_Policy_:
		switch t.Policy {
		case pb.OffsetOption_LAST:
			return broker.LiteOffset{}, nil
		case pb.OffsetOption_MIN, pb.OffsetOption_MAX:
			return broker.LiteOffset{Policy: t.Policy.String()}, nil
		}
		return broker.LiteOffset{}, refuse(pb.Code_ILLEGAL_OFFSET, "unknown offset policy %v", t.Policy)
	case *pb.OffsetOption_Offset:
		if t.Offset < 0 {
			return broker.LiteOffset{}, refuse(pb.Code_ILLEGAL_OFFSET, "offset %d is negative", t.Offset)
		}
		return broker.LiteOffset{Set: "Offset", Offset: t.Offset}, nil
	case *pb.OffsetOption_TailN:
		if t.TailN < 0 {
			return broker.LiteOffset{}, refuse(pb.Code_ILLEGAL_OFFSET, "tail_n %d is negative", t.TailN)
		}
		return broker.LiteOffset{Set: "TailN", TailN: t.TailN}, nil
	case *pb.OffsetOption_Timestamp:
		return broker.LiteOffset{Set: "Timestamp", Timestamp: t.Timestamp}, nil
	}
	return broker.LiteOffset{}, refuse(pb.Code_ILLEGAL_OFFSET, "unknown offset option")
}

// liteTopics returns, for a receive of a lite consumer, what it
// subscribes to now (the wildcard alone, the broker knows, stands for
// every lite topic the topic holds).
func (s *Server) liteTopics(clientID, group, topic string) func() []string {
	return func() []string { return s.lite.topics(clientID, group, topic) }
}

// liteQueue returns the internal topic of a lite consumer's ack, change
// of invisible time or dead letter: the lite topic's queue when the
// request or, failing that, the receipt handle names one (the C# and
// Python clients leave the request's out), the topic itself otherwise.
func liteQueue(topic, lite, handle string) (string, error) {
	if lite == "" {
		lite = broker.HandleLiteTopic(handle)
	}
	if lite == "" {
		return topic, nil
	}
	if err := broker.ValidateLiteTopic(lite); err != nil {
		return "", refuse(pb.Code_ILLEGAL_LITE_TOPIC, "%v", err)
	}
	return broker.LiteQueueTopic(topic, lite), nil
}

// liteRefusal is why a receive of topic by a client of type typ is
// refused: a LITE topic is read only by lite consumers, and a lite
// consumer reads only a LITE topic.
func liteRefusal(tc broker.TopicConfig, typ pb.ClientType) error {
	lite := tc.MessageType == broker.MessageTypeLite
	switch {
	case lite && !isLite(typ):
		return refuse(pb.Code_BAD_REQUEST, "topic %s holds lite topics: receive from it with a lite consumer (LitePushConsumer, LiteSimpleConsumer), which subscribes to its lite topics", tc.TopicName)
	case !lite && isLite(typ):
		return refuse(pb.Code_BAD_REQUEST, "a lite consumer binds to a topic of type LITE; %s is %s", tc.TopicName, fmt.Sprint(acceptedTypes(tc)))
	}
	return nil
}
