package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
)

// Message models of consumer groups.
const (
	ModelClustering   = "CLUSTERING"
	ModelBroadcasting = "BROADCASTING"
)

// subscription is a group's compiled subscription to one topic.
type subscription struct {
	topic   string
	typ     string
	expr    string
	version int64
	filter  Filter
	err     error // the expression did not compile
}

// member is one client of a group.
type member struct {
	clientID string
	conn     *remoting.Conn
	lastSeen time.Time
	language string // the latest heartbeat's language code, such as GO
	version  int16  // the latest heartbeat's RocketMQ version ordinal
}

type consumerGroup struct {
	name        string
	model       string
	consumeType string
	fromWhere   string             // the latest heartbeat's consumeFromWhere
	members     map[string]*member // by client id
	subs        map[string]*subscription
	// restoredAt is when the group was loaded from its snapshot after a
	// restart, zero once a member heartbeats (resume.go). Until then it
	// has no members and is kept for its subscriptions.
	restoredAt time.Time
}

// clientTable tracks producers and consumers from their heartbeats.
type clientTable struct {
	log    *slog.Logger
	expiry time.Duration // Options.ClientExpiry
	// onExpired is told the client ids sweep dropped, after their groups
	// were notified; it is called with no lock held.
	onExpired func(clientIDs []string)
	// notifyOff stops NOTIFY_CONSUMER_IDS_CHANGED
	// (Options.DisableNotifyConsumerIDsChanged, SetNotifyConsumerIDsChanged).
	notifyOff atomic.Bool
	// maxGroups bounds the consumer and producer groups tracked
	// (Options.MaxGroups).
	maxGroups int
	quotaLog  limitLog

	mu sync.Mutex
	// consumers by group, producers by group then client id.
	consumers map[string]*consumerGroup
	producers map[string]map[string]*member
	// requesters maps the client id of a request-reply request to the
	// connection it came on, and requesterOf the other way, so each
	// connection holds at most one entry; both lose a connection when it
	// closes.
	requesters  map[string]*remoting.Conn
	requesterOf map[*remoting.Conn]string

	// dirty marks the consumer groups whose snapshot the writer is to
	// write, dirtySig wakes it, save writes (a nil snapshot deletes) and
	// frozen stops the marking (resume.go).
	dirty    map[string]struct{}
	dirtySig chan struct{}
	save     func(map[string]*groupSnapshot) error
	frozen   atomic.Bool
}

// newClientTable returns an empty table that tracks at most maxGroups
// groups, drops clients silent for expiry and tells onExpired which ones
// it dropped.
func newClientTable(log *slog.Logger, expiry time.Duration, maxGroups int, notifyOff bool, onExpired func(clientIDs []string)) *clientTable {
	t := &clientTable{log: log, expiry: expiry, maxGroups: maxGroups, onExpired: onExpired,
		consumers: map[string]*consumerGroup{}, producers: map[string]map[string]*member{},
		requesters: map[string]*remoting.Conn{}, requesterOf: map[*remoting.Conn]string{},
		dirty: map[string]struct{}{}, dirtySig: make(chan struct{}, 1)}
	t.notifyOff.Store(notifyOff)
	return t
}

func (b *Broker) handleHeartbeat(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var hb remoting.HeartbeatData
	if err := json.Unmarshal(req.Body, &hb); err != nil {
		// A client whose heartbeat never decodes never registers: say
		// which client it is.
		if b.heartbeatLog.allow(b.now()) {
			b.log.Warn("heartbeat body refused", "remote", c.RemoteAddr().String(), "language", req.Language, "version", req.Version, "err", err)
		}
		return response(req, remoting.SystemError, "heartbeat: bad body: %v", err)
	}
	if hb.ClientID == "" || len(hb.ClientID) > maxClientIDLen {
		return response(req, remoting.SystemError, "heartbeat: a clientID of 1 to %d bytes is required (got %d)", maxClientIDLen, len(hb.ClientID))
	}
	if nc, np := len(hb.ConsumerDataSet), len(hb.ProducerDataSet); nc > MaxHeartbeatGroups || np > MaxHeartbeatGroups {
		if b.heartbeatLog.allow(b.now()) {
			b.log.Warn("heartbeat over the group bound refused", "client", logName(hb.ClientID), "consumer_groups", nc, "producer_groups", np, "limit", MaxHeartbeatGroups)
		}
		return response(req, remoting.SystemError, "heartbeat: %d consumer and %d producer groups; one heartbeat may name at most %d of each",
			nc, np, MaxHeartbeatGroups)
	}
	now := b.now()
	// The groups a heartbeat names are registered one by one. The answer
	// reports the first group refused, or else the first problem of a
	// registered one (a subscription that does not compile, a retry topic
	// that could not be created): as its code when no group registered
	// cleanly, else in the remark of a SUCCESS.
	var refused, problems firstError
	clean := 0 // groups registered without a problem
	for _, cd := range hb.ConsumerDataSet {
		before := refused.n + problems.n // every refusal below adds one
		if err := checkGroup(cd.GroupName); err != nil {
			refused.add(remoting.SubscriptionGroupNotExist, "consumer "+err.Error())
			continue
		}
		if err := b.checkConsumerGroup(cd); err != nil {
			refused.add(remoting.SubscriptionGroupNotExist, err.Error())
			continue
		}
		if err := b.checkSubscriptions(cd); err != nil {
			if b.heartbeatLog.allow(now) {
				b.log.Warn("heartbeat's consumer group refused", "client", logName(hb.ClientID), "err", err)
			}
			refused.add(remoting.SystemError, err.Error())
			continue
		}
		if err := b.clients.admits(groupConsumer, cd.GroupName, now); err != nil {
			refused.add(remoting.SystemError, err.Error())
			continue
		}
		subs := make(map[string]*subscription, len(cd.SubscriptionDataSet))
		for _, sd := range cd.SubscriptionDataSet {
			sub := &subscription{topic: sd.Topic, typ: normalizeType(sd.ExpressionType), expr: sd.SubString, version: sd.SubVersion}
			sub.filter, sub.err = b.filters.compile(sub.typ, sub.expr)
			if sub.err != nil {
				// The client logs the remark; pulls of the bad subscription
				// are refused with SUBSCRIPTION_PARSE_FAILED naming the same
				// problem.
				problems.add(remoting.SubscriptionParseFailed, "bad subscription: group "+cd.GroupName+", topic "+logName(sd.Topic)+": "+sub.err.Error())
			} else {
				b.prefilter.register(sd.Topic, sub.typ, sub.expr, sub.filter)
			}
			subs[sd.Topic] = sub
		}
		changed, err := b.clients.registerConsumer(cd, subs, hb.ClientID, c, req, now)
		if err != nil {
			refused.add(remoting.SystemError, err.Error())
			continue
		}
		if changed {
			b.clients.persist(cd.GroupName)
		}
		b.ensureGroupConfig(cd.GroupName)
		if cd.MessageModel != ModelBroadcasting {
			if err := b.ensureRetryTopic(cd.GroupName); err != nil {
				problems.add(remotingCode(creationError(err)), "group "+cd.GroupName+" has no retry topic: "+err.Error())
			}
		}
		if refused.n+problems.n == before {
			clean++
		}
	}
	for _, pd := range hb.ProducerDataSet {
		if err := checkGroup(pd.GroupName); err != nil {
			refused.add(remoting.SubscriptionGroupNotExist, "producer "+err.Error())
			continue
		}
		if err := b.clients.registerProducer(pd.GroupName, hb.ClientID, c, req, now); err != nil {
			refused.add(remoting.SystemError, err.Error())
			continue
		}
		clean++
	}
	for _, e := range []firstError{refused, problems} {
		if e.n == 0 {
			continue
		}
		if clean > 0 {
			// One heartbeat names every group of a client process, and the
			// Java client records the broker's version only from one that
			// succeeds (without it, it refuses its own SQL92 pulls to this
			// broker): with a group registered cleanly the heartbeat
			// succeeds, its remark naming the others' problem. RocketMQ's
			// broker answers SUCCESS whatever it refused.
			if b.heartbeatLog.allow(now) {
				b.log.Warn("heartbeat partly refused", "client", logName(hb.ClientID), "problem", e.remark, "more", e.n-1)
			}
			return response(req, remoting.Success, "heartbeat: %s%s", e.remark, e.more())
		}
		// The groups that were not refused are registered all the same.
		return response(req, e.code, "heartbeat: %s%s", e.remark, e.more())
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// checkConsumerGroup reports why a heartbeat's consumer group may not
// register by its group's configuration, or nil: with
// Options.DisableAutoCreateGroup it must have one, and one that disables
// broadcasting refuses broadcasting consumers.
func (b *Broker) checkConsumerGroup(cd remoting.ConsumerData) error {
	if err := b.checkConfigured(cd.GroupName); err != nil {
		return err
	}
	if cd.MessageModel == ModelBroadcasting {
		if gc, ok := b.groupConfig(cd.GroupName); ok && !gc.ConsumeBroadcastEnable {
			return fmt.Errorf("consumer group %s may not consume in broadcasting mode (consumeBroadcastEnable is false)", cd.GroupName)
		}
	}
	return nil
}

// checkSubscriptions reports why a heartbeat's consumer group may not
// subscribe as it asks, or nil: too many topics, or a topic name clients
// may not use (a group's %RETRY% topic is a valid name: the official
// client subscribes to it). Expressions are bounded when compiled.
func (b *Broker) checkSubscriptions(cd remoting.ConsumerData) error {
	if n := len(cd.SubscriptionDataSet); n > b.opts.MaxSubscriptionsPerGroup {
		return fmt.Errorf("consumer group %s subscribes to %d topics, the limit is %d (maxSubscriptionsPerGroup)",
			cd.GroupName, n, b.opts.MaxSubscriptionsPerGroup)
	}
	for _, sd := range cd.SubscriptionDataSet {
		if err := ValidateTopic(sd.Topic); err != nil {
			return fmt.Errorf("consumer group %s subscribes to a topic clients may not use: %w", cd.GroupName, err)
		}
	}
	return nil
}

// firstError keeps the first of a request's several errors for its
// answer, and counts the others.
type firstError struct {
	code   int16
	remark string
	n      int
}

func (e *firstError) add(code int16, remark string) {
	if e.n == 0 {
		e.code, e.remark = code, remark
	}
	e.n++
}

// more says how many errors followed the first, if any.
func (e *firstError) more() string {
	if e.n < 2 {
		return ""
	}
	return fmt.Sprintf(" (and %d more)", e.n-1)
}

// ensureRetryTopic creates a consumer group's retry topic so the route the
// client looks up exists; a group without retries gets none.
func (b *Broker) ensureRetryTopic(group string) error {
	if _, ok := b.topics.get(RetryGroupTopicPrefix + group); ok {
		return nil
	}
	_, err := b.ensureRetry(group)
	if errors.Is(err, ErrNoRetry) {
		return nil
	}
	if err != nil && !errors.Is(err, ErrTopicQuota) { // the quota logs its own, rate-limited
		b.log.Warn("create retry topic", "group", group, "err", err)
	}
	return err
}

// Kinds of groups, for the group quota's errors.
const (
	groupConsumer = "consumer"
	groupProducer = "producer"
)

// admits reports why a heartbeat may not register group, or nil: a group
// already tracked always may, a new one while the quota has room. It lets
// the heartbeat skip compiling a refused group's subscriptions; the
// registration checks again.
func (t *clientTable) admits(kind, group string, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if kind == groupConsumer && t.consumers[group] != nil || kind == groupProducer && t.producers[group] != nil {
		return nil
	}
	return t.roomLocked(kind, group, now)
}

// roomLocked reports why a group not yet tracked may not be added, or nil.
func (t *clientTable) roomLocked(kind, group string, now time.Time) error {
	n := len(t.consumers) + len(t.producers)
	if n < t.maxGroups {
		return nil
	}
	if t.quotaLog.allow(now) {
		t.log.Warn("group quota reached; heartbeat refused", "kind", kind, "group", logName(group), "groups", n, "limit", t.maxGroups)
	}
	return fmt.Errorf("%w: %d groups are registered, the limit is %d (maxGroups); %s group %s refused", ErrGroupQuota, n, t.maxGroups, kind, logName(group))
}

// registerConsumer adds or refreshes a consumer of a group, or reports
// that the group quota refuses a new group. hb is the heartbeat request,
// whose language and version the member keeps for connection lists.
// changed reports that the group's snapshot (resume.go) changed.
func (t *clientTable) registerConsumer(cd remoting.ConsumerData, subs map[string]*subscription, clientID string, c *remoting.Conn, hb *remoting.Command, now time.Time) (changed bool, err error) {
	t.mu.Lock()
	g := t.consumers[cd.GroupName]
	if g == nil {
		if err := t.roomLocked(groupConsumer, cd.GroupName, now); err != nil {
			t.mu.Unlock()
			return false, err
		}
		g = &consumerGroup{name: cd.GroupName, members: map[string]*member{}}
		t.consumers[cd.GroupName] = g
	}
	changed = g.model != cd.MessageModel || g.consumeType != cd.ConsumeType || g.fromWhere != cd.ConsumeFromWhere || !sameSubs(g.subs, subs)
	g.model, g.consumeType, g.fromWhere = cd.MessageModel, cd.ConsumeType, cd.ConsumeFromWhere
	g.restoredAt = time.Time{}
	joined := false
	m := g.members[clientID]
	if m == nil {
		m = &member{clientID: clientID}
		g.members[clientID] = m
		joined = true
		t.log.Info("consumer joined", "group", g.name, "client", clientID, "model", cd.MessageModel)
	}
	m.conn, m.lastSeen, m.language, m.version = c, now, hb.Language, hb.Version
	// The latest heartbeat's subscriptions replace the group's, keeping the
	// compiled filter of an unchanged expression.
	for topic, sub := range subs {
		if old, ok := g.subs[topic]; ok && old.typ == sub.typ && old.expr == sub.expr && old.err == nil {
			old.version = sub.version
			subs[topic] = old
		}
	}
	g.subs = subs
	var notify []*remoting.Conn
	if joined {
		// The newcomer rebalances on its own as it starts; the others
		// learn of it now.
		for id, other := range g.members {
			if id != clientID {
				notify = append(notify, other.conn)
			}
		}
	}
	t.mu.Unlock()
	t.notify(cd.GroupName, notify)
	return changed, nil
}

// registerProducer adds or refreshes a producer of a group, or reports
// that the group quota refuses a new group; hb is as for registerConsumer.
func (t *clientTable) registerProducer(group, clientID string, c *remoting.Conn, hb *remoting.Command, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.producers[group]
	if g == nil {
		if err := t.roomLocked(groupProducer, group, now); err != nil {
			return err
		}
		g = map[string]*member{}
		t.producers[group] = g
	}
	m := g[clientID]
	if m == nil {
		m = &member{clientID: clientID}
		g[clientID] = m
	}
	m.conn, m.lastSeen, m.language, m.version = c, now, hb.Language, hb.Version
	return nil
}

func (g *consumerGroup) connsLocked() []*remoting.Conn {
	conns := make([]*remoting.Conn, 0, len(g.members))
	for _, m := range g.members {
		conns = append(conns, m.conn)
	}
	return conns
}

// notify tells a group's members that its membership changed, so they
// rebalance at once.
func (t *clientTable) notify(group string, conns []*remoting.Conn) {
	if t.notifyOff.Load() {
		return
	}
	for _, c := range conns {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			req := remoting.NewRequest(remoting.NotifyConsumerIdsChanged, map[string]string{"consumerGroup": group}, nil)
			if err := c.Oneway(ctx, req); err != nil {
				t.log.Debug("notify consumer ids changed", "group", group, "err", err)
			}
		}()
	}
}

// broadcasting reports whether a group's members consume in broadcasting
// mode.
func (t *clientTable) broadcasting(group string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.consumers[group]
	return g != nil && g.model == ModelBroadcasting
}

// onlyBroadcasting reports whether topic has subscribers, all of them
// groups consuming in broadcasting mode.
func (t *clientTable) onlyBroadcasting(topic string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	found := false
	for _, g := range t.consumers {
		if _, ok := g.subs[topic]; ok {
			if g.model != ModelBroadcasting {
				return false
			}
			found = true
		}
	}
	return found
}

// subscription returns a group's subscription to topic.
func (t *clientTable) subscription(group, topic string) (*subscription, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.consumers[group]
	if g == nil {
		return nil, false
	}
	s, ok := g.subs[topic]
	return s, ok
}

// hasConsumerGroup reports whether a consumer group has registered.
func (t *clientTable) hasConsumerGroup(group string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.consumers[group] != nil
}

// producerConns returns the live connections of a producer group's
// members.
func (t *clientTable) producerConns(group string) []*remoting.Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	var conns []*remoting.Conn
	for _, m := range t.producers[group] {
		if !isClosed(m.conn) {
			conns = append(conns, m.conn)
		}
	}
	return conns
}

// clientConn returns a live connection of the client with this id: one
// its producer heartbeats came on, or else one of its consumers', or else
// the one its last request-reply request came on. A client id names one
// client instance, which answers broker requests on any of its
// connections.
func (t *clientTable) clientConn(clientID string) (*remoting.Conn, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, g := range t.producers {
		if m := g[clientID]; m != nil && !isClosed(m.conn) {
			return m.conn, true
		}
	}
	for _, g := range t.consumers {
		if m := g.members[clientID]; m != nil && !isClosed(m.conn) {
			return m.conn, true
		}
	}
	if c := t.requesters[clientID]; c != nil && !isClosed(c) {
		return c, true
	}
	return nil, false
}

// rememberRequester records that a request-reply request of clientID came
// on c. The official Go client's producer heartbeats only every 30 s and
// not before its first request, so without this its first replies would
// find no connection.
func (t *clientTable) rememberRequester(clientID []byte, c *remoting.Conn) {
	if len(clientID) > maxClientIDLen {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// Checked under the lock: OnClose (forgetRequester) runs after Done
	// is closed, so an entry is never added after its connection's
	// forgetRequester ran.
	if isClosed(c) || t.requesters[string(clientID)] == c {
		return
	}
	id := string(clientID)
	if old, ok := t.requesterOf[c]; ok {
		delete(t.requesters, old)
	}
	if prev := t.requesters[id]; prev != nil {
		delete(t.requesterOf, prev)
	}
	t.requesters[id] = c
	t.requesterOf[c] = id
}

// forgetRequester drops the request-reply entry of a closed connection.
func (t *clientTable) forgetRequester(c *remoting.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.requesterOf[c]; ok {
		delete(t.requesterOf, c)
		if t.requesters[id] == c {
			delete(t.requesters, id)
		}
	}
}

// consumerIDs returns a group's client ids, sorted.
func (t *clientTable) consumerIDs(group string) ([]string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.consumers[group]
	if g == nil {
		return nil, false
	}
	if len(g.members) == 0 {
		return nil, false // restored after a restart, nobody back yet
	}
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, true
}

// drop removes members matching fn and notifies the groups that changed.
func (t *clientTable) drop(reason string, fn func(m *member) bool) {
	type change struct {
		group string
		conns []*remoting.Conn
	}
	var changes []change
	var gone []string
	t.mu.Lock()
	for name, g := range t.consumers {
		removed := false
		for id, m := range g.members {
			if fn(m) {
				delete(g.members, id)
				removed = true
				t.log.Info("consumer left", "group", name, "client", id, "reason", reason)
			}
		}
		if len(g.members) == 0 && g.restoredAt.IsZero() {
			delete(t.consumers, name)
			gone = append(gone, name)
			continue
		}
		if removed {
			changes = append(changes, change{name, g.connsLocked()})
		}
	}
	for name, g := range t.producers {
		for id, m := range g {
			if fn(m) {
				delete(g, id)
			}
		}
		if len(g) == 0 {
			delete(t.producers, name)
		}
	}
	t.mu.Unlock()
	for _, ch := range changes {
		t.notify(ch.group, ch.conns)
	}
	t.persist(gone...)
}

// connClosed drops every client registered on a closed connection.
func (b *Broker) connClosed(c *remoting.Conn) {
	// Queue locks go first, so the members told of the change find the
	// queues free when they rebalance.
	b.locks.releaseConn(c)
	b.txn.forgetConn(c)
	b.clients.forgetRequester(c)
	b.clients.drop("connection closed", func(m *member) bool { return m.conn == c })
}

// sweepGap is how often sweep runs.
func (t *clientTable) sweepGap() time.Duration {
	return min(defaultHeartbeatSweepGap, t.expiry/4)
}

// sweep drops clients that stopped heartbeating, and groups restored
// after a restart that nobody came back to.
func (t *clientTable) sweep(now time.Time) {
	deadline := now.Add(-t.expiry)
	var gone []string // client ids whose queue locks go with them
	t.dropRestored(deadline)
	t.drop("heartbeat expired", func(m *member) bool {
		if m.lastSeen.Before(deadline) {
			gone = append(gone, m.clientID)
			return true
		}
		return false
	})
	t.onExpired(gone)
}

// dropRestored removes groups restored before deadline that no member
// has heartbeated to since.
func (t *clientTable) dropRestored(deadline time.Time) {
	var gone []string
	t.mu.Lock()
	for name, g := range t.consumers {
		if len(g.members) == 0 && !g.restoredAt.IsZero() && g.restoredAt.Before(deadline) {
			delete(t.consumers, name)
			gone = append(gone, name)
			t.log.Info("consumer group forgotten", "group", name, "reason", "no heartbeat since the broker restarted")
		}
	}
	t.mu.Unlock()
	t.persist(gone...)
}

// handleCheckClientConfig serves CHECK_CLIENT_CONFIG, which a Java
// consumer sends before it starts for each subscription that is not TAG;
// it does not start unless every broker answers SUCCESS. As RocketMQ's
// broker does, a TAG subscription (or none) passes, an SQL92 one needs
// the property filter on, and the expression must compile.
func (b *Broker) handleCheckClientConfig(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body remoting.CheckClientBody
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return response(req, remoting.SystemError, "check client config: bad body: %v", err)
	}
	sd := body.SubscriptionData
	if sd == nil {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	typ := normalizeType(sd.ExpressionType)
	if typ == ExpressionTag {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	if typ == ExpressionSQL92 && b.opts.DisablePropertyFilter {
		return response(req, remoting.SystemError, "check client config: this broker does not filter by SQL92 (enablePropertyFilter is off)")
	}
	if _, err := b.filters.compile(typ, sd.SubString); err != nil {
		return response(req, remoting.SubscriptionParseFailed, "check client config: group %s, topic %s: %v", logName(body.Group), logName(sd.Topic), err)
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

func (b *Broker) handleUnregister(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	id := req.Get("clientID")
	pg, cg := req.Get("producerGroup"), req.Get("consumerGroup")
	b.clients.unregister(pg, cg, id)
	return remoting.NewResponse(req, remoting.Success, "")
}

// unregister removes a client from a producer group and a consumer group
// and notifies the consumer group's other members.
func (t *clientTable) unregister(producerGroup, consumerGroup, clientID string) {
	t.mu.Lock()
	if g := t.producers[producerGroup]; g != nil {
		delete(g, clientID)
	}
	var conns []*remoting.Conn
	gone := false
	if g := t.consumers[consumerGroup]; g != nil {
		if _, ok := g.members[clientID]; ok {
			delete(g.members, clientID)
			t.log.Info("consumer left", "group", consumerGroup, "client", clientID, "reason", "unregistered")
			conns = g.connsLocked()
			if len(g.members) == 0 {
				delete(t.consumers, consumerGroup)
				gone = true
			}
		}
	}
	t.mu.Unlock()
	t.notify(consumerGroup, conns)
	if gone {
		t.persist(consumerGroup)
	}
}

func (b *Broker) handleConsumerList(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.Get("consumerGroup")
	ids, ok := b.clients.consumerIDs(group)
	if !ok {
		return response(req, remoting.SystemError, "no consumer in group %s", group)
	}
	body, _ := json.Marshal(remoting.ConsumerListBody{ConsumerIDList: ids})
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// readOne reads the record at a queue offset.
func (b *Broker) readOne(topic string, qid int32, off int64) (message.Record, error) {
	it := b.store.NewQueueIter(topic, qid, store.IterOptions{MaxUnits: 1, StopOnCorruption: true})
	defer it.Close()
	if !it.SeekGE(off) || it.Offset() != off {
		if err := it.Error(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s/%d offset %d", store.ErrNotFound, topic, qid, off)
	}
	return append(message.Record(nil), it.Record()...), nil
}

func (b *Broker) handleViewMessage(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	off, err := req.Int64("offset")
	if err != nil {
		return response(req, remoting.SystemError, "view message: %v", err)
	}
	r, err := b.store.ReadRecordAt(off)
	if err != nil {
		return response(req, remoting.SystemError, "view message at %d: %v", off, err)
	}
	if topic := string(r.Topic()); systemTopic(topic) || topic == TxnCheckMaxTopic {
		// Half messages, parked delays and outbox events are the broker's:
		// serving them would let anyone read uncommitted transactions.
		return response(req, remoting.NoPermission, "view message at %d: it is in %s, reserved for the broker", off, topic)
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = r
	return resp
}

// ConsumerIDs returns the client ids of a consumer group's live members.
func (v View) ConsumerIDs(group string) []string {
	b := v.b
	ids, _ := b.clients.consumerIDs(group)
	return ids
}

// SetNotifyConsumerIDsChanged turns NOTIFY_CONSUMER_IDS_CHANGED on or off.
// Without it, consumers still rebalance every 20 s.
func (h Hooks) SetNotifyConsumerIDsChanged(on bool) {
	b := h.b
	b.clients.notifyOff.Store(!on)
}
