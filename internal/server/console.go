package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/console"
)

// The web console (internal/console) over this process's broker, store,
// plugins and NATS bridge, read through their Go APIs.
//
// Who may act (resend a dead letter, reload the plugins):
//
//   - With access control on, every console request needs HTTP basic
//     auth with an admin account of the broker's ACL (access key as the
//     user, secret key as the password), checked exactly as the broker
//     checks an admin command from that account and the request's address
//     (so the account's whitelist and the global whitelist apply). A
//     viewer who passes may act. Basic auth sends the secret in the
//     clear: serve the console on loopback or behind TLS.
//   - With access control off, the console serves anyone who reaches it,
//     and actions are allowed only when it listens on a loopback address
//     (the same trust as the broker's own port, which refuses a
//     non-loopback address without ACL unless Insecure). On any other
//     address it refuses every page, or with Insecure serves them
//     read-only.
//
// The ACL is read at each request, so a reload that turns it on or off
// takes effect at once.

// consoleCommand names the console in the admin request its logins are
// checked as.
const consoleCommand = "console"

// ConsoleHandler returns the web console's handler for an HTTP listener on
// listen (host:port), which decides whether actions are allowed as the
// comment above says.
func (s *Server) ConsoleHandler(listen string) http.Handler {
	return s.consoleFor(listen, s.Broker, s.Store)
}

// consoleFor is the console of broker b on store st (a replicated set's
// leader makes one each time it starts serving).
func (s *Server) consoleFor(listen string, b *broker.Broker, st *store.Store) http.Handler {
	loopback := isLoopback(listen)
	return console.New(consoleSource{s, b, st}, console.Options{
		AllowActions: true, // narrowed per request by consoleAuth
		Authenticate: s.consoleAuth(loopback),
		Logger:       s.log.With("component", "console"),
	})
}

// isLoopback reports whether host:port names a loopback address only.
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// consoleAuth returns the console's Authenticate hook.
func (s *Server) consoleAuth(loopback bool) func(r *http.Request) error {
	return func(r *http.Request) error {
		checker := s.acl.checker.Load()
		if !checker.Enabled() {
			switch {
			case loopback:
			case !s.cfg.Insecure:
				// Pages show message bodies; the broker's own port is not
				// open to the network without access control either.
				return errors.New("the console shows message bodies: on a non-loopback listener it needs access control (acl:), or --insecure to show them to anyone read-only")
			case r.Method != http.MethodGet && r.Method != http.MethodHead:
				return errors.New("actions are allowed only on a loopback listener when access control is off")
			}
			return nil
		}
		ak, sk, ok := r.BasicAuth()
		if !ok || ak == "" {
			return errors.New("log in with an admin account of the broker's ACL")
		}
		var remote netip.Addr
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			remote = ap.Addr()
		}
		req := remoting.NewRequest(broker.AdminCode, map[string]string{"command": consoleCommand}, nil)
		acl.Sign(req, ak, sk, "")
		if err := checker.Check(remote, req); err != nil {
			s.acl.refused.log(err)
			return errors.New("not an admin account of the broker's ACL, or a wrong secret")
		}
		return nil
	}
}

// consoleSource implements console.Source for broker b on store st.
type consoleSource struct {
	s  *Server
	b  *broker.Broker
	st *store.Store
}

func (c consoleSource) names() (cluster, brokerName string) {
	cluster, brokerName = c.s.cfg.Broker.ClusterName, c.s.cfg.Broker.BrokerName
	if c.s.cfg.Cluster != nil {
		brokerName = c.s.cfg.Cluster.SetName
	}
	if cluster == "" {
		cluster = broker.DefaultClusterName
	}
	if brokerName == "" {
		brokerName = broker.DefaultBrokerName
	}
	return cluster, brokerName
}

// groupNames returns the configured and the online consumer groups.
func (c consoleSource) groupNames() (all []string, configured map[string]broker.SubscriptionGroupConfig) {
	configured = map[string]broker.SubscriptionGroupConfig{}
	for _, gc := range c.b.View().GroupConfigs() {
		configured[gc.GroupName] = gc
		all = append(all, gc.GroupName)
	}
	for _, g := range c.b.View().OnlineConsumerGroups() {
		if _, ok := configured[g]; !ok {
			all = append(all, g)
		}
	}
	slices.Sort(all)
	return all, configured
}

func (c consoleSource) Overview() console.Overview {
	b, st := c.b, c.st
	cluster, name := c.names()
	minOff, maxOff := st.CommitLogOffsets()
	groups, _ := c.groupNames()
	ov := console.Overview{
		BrokerName: name, Cluster: cluster, Addr: c.b.Addr(), Version: "RocketMQ 4.x protocol",
		Started: b.View().BootTime(), Topics: len(b.Topics()), Groups: len(groups), OnlineGroups: len(b.View().OnlineConsumerGroups()),
		Connections: b.View().ConnCount(), Stored: st.Stats().Appends.Load(), CommitLogBytes: maxOff - minOff,
		ACL: c.s.ACLEnabled(), TLS: c.s.tls != nil, Plugins: len(c.s.plugins.list()), Bridge: c.s.bridge.Load() != nil,
	}
	if used, total, err := st.FilesystemUsage(); err == nil {
		ov.DiskUsed, ov.DiskTotal = int64(used), int64(total)
	}
	return ov
}

func (c consoleSource) Topics() []console.Topic {
	topics := c.b.Topics()
	type sums struct{ msgs, max int64 }
	byTopic := make(map[string]sums, len(topics))
	lites := map[string]int{}
	for _, q := range c.st.Queues() {
		topic := q.Topic
		if parent, _, ok := broker.SplitLiteQueue(topic); ok {
			// A lite topic's queue counts for its LITE topic.
			topic = parent
			lites[parent]++
		}
		sm := byTopic[topic]
		sm.msgs += max(0, q.MaxOffset-q.MinOffset)
		sm.max += q.MaxOffset
		byTopic[topic] = sm
	}
	out := make([]console.Topic, 0, len(topics))
	for name, tc := range topics {
		sm := byTopic[name]
		out = append(out, console.Topic{Name: name, ReadQueues: tc.ReadQueueNums, WriteQueues: tc.WriteQueueNums,
			Perm: tc.Perm, Order: tc.Order, MessageType: tc.MessageType, Messages: sm.msgs, MaxOffsets: sm.max, LiteTopics: lites[name]})
	}
	return out
}

func (c consoleSource) Topic(name string) (console.TopicDetail, error) {
	tc, ok := c.b.Topics()[name]
	if !ok {
		return console.TopicDetail{}, console.ErrNotFound
	}
	d := console.TopicDetail{Topic: console.Topic{Name: name, ReadQueues: tc.ReadQueueNums, WriteQueues: tc.WriteQueueNums, Perm: tc.Perm, Order: tc.Order, MessageType: tc.MessageType}}
	for qid := range int32(max(tc.ReadQueueNums, tc.WriteQueueNums)) {
		minOff, maxOff := c.st.QueueOffsets(name, qid)
		q := console.Queue{ID: qid, MinOffset: minOff, MaxOffset: maxOff}
		if maxOff > minOff {
			if r, err := c.b.View().MessageAt(name, qid, maxOff-1); err == nil {
				q.LastStored = time.UnixMilli(r.StoreTimestamp())
			}
		}
		d.Messages += max(0, maxOff-minOff)
		d.MaxOffsets += maxOff
		d.Queues = append(d.Queues, q)
	}
	if tc.MessageType == broker.MessageTypeLite {
		lites := c.b.View().LiteTopics(name)
		d.LiteTopics = len(lites)
		for _, l := range lites {
			minOff, maxOff := c.st.QueueOffsets(broker.LiteQueueTopic(name, l), 0)
			d.Messages += max(0, maxOff-minOff)
			d.MaxOffsets += maxOff
		}
	}
	lag := map[string]int64{}
	for _, e := range c.b.View().QueueLags(nil, "") {
		if parent, _, ok := broker.SplitLiteQueue(e.Topic); e.Topic == name || ok && parent == name {
			lag[e.Group] += e.Lag
		}
	}
	for g, l := range lag {
		d.Groups = append(d.Groups, console.GroupLag{Group: g, Lag: l, Committed: true})
	}
	for _, g := range c.b.View().OnlineConsumerGroups() {
		if _, ok := lag[g]; ok {
			continue
		}
		if cc, ok := c.b.View().ConsumerConnection(g); ok {
			if _, sub := cc.SubscriptionTable[name]; sub {
				d.Groups = append(d.Groups, console.GroupLag{Group: g})
			}
		}
	}
	slices.SortFunc(d.Groups, func(a, b console.GroupLag) int { return cmp.Compare(a.Group, b.Group) })
	return d, nil
}

// dlqCount is how many dead letters a group's dead-letter queue retains.
func (c consoleSource) dlqCount(group string) int64 {
	minOff, maxOff := c.st.QueueOffsets(broker.DLQGroupTopicPrefix+group, 0)
	return max(0, maxOff-minOff)
}

func (c consoleSource) Groups() []console.Group {
	names, configured := c.groupNames()
	lag := map[string]int64{}
	for _, e := range c.b.View().QueueLags(nil, "") {
		lag[e.Group] += e.Lag
	}
	out := make([]console.Group, 0, len(names))
	for _, g := range names {
		_, isConfigured := configured[g]
		row := console.Group{Name: g, Configured: isConfigured, Lag: lag[g], DeadLetters: c.dlqCount(g),
			Strategy: c.b.View().GroupStrategy(g).Effective}
		if cc, ok := c.b.View().ConsumerConnection(g); ok {
			row.Online, row.Model = len(cc.ConnectionSet), cc.MessageModel
		}
		out = append(out, row)
	}
	return out
}

func (c consoleSource) Group(name string) (console.GroupDetail, error) {
	var gc *broker.SubscriptionGroupConfig
	for _, g := range c.b.View().GroupConfigs() {
		if g.GroupName == name {
			gc = &g
			break
		}
	}
	cc, online := c.b.View().ConsumerConnection(name)
	lags := c.b.View().QueueLags(nil, name)
	if gc == nil && !online && len(lags) == 0 {
		return console.GroupDetail{}, console.ErrNotFound
	}
	strategy := c.b.View().GroupStrategy(name)
	d := console.GroupDetail{Group: console.Group{Name: name, Strategy: strategy.Effective, DeadLetters: c.dlqCount(name)},
		StrategySource: strategy.Source}
	if g := gc; g != nil {
		d.Configured = true
		d.Config = []console.Field{
			{Name: "Consume enabled", Value: strconv.FormatBool(g.ConsumeEnable)},
			{Name: "Broadcast enabled", Value: strconv.FormatBool(g.ConsumeBroadcastEnable)},
			{Name: "Retry queues", Value: strconv.Itoa(g.RetryQueueNums)},
			{Name: "Retry max times", Value: strconv.Itoa(g.RetryMaxTimes)},
		}
		if g.AllocateStrategy != "" {
			d.Config = append(d.Config, console.Field{Name: "Configured strategy", Value: g.AllocateStrategy})
		}
	}
	if online {
		d.Online, d.Model, d.ConsumeType, d.FromWhere = len(cc.ConnectionSet), cc.MessageModel, cc.ConsumeType, cc.ConsumeFromWhere
		for _, m := range cc.ConnectionSet {
			d.Members = append(d.Members, console.Member{ClientID: m.ClientID, Addr: m.ClientAddr, Language: m.Language, Version: strconv.Itoa(int(m.Version))})
		}
		for topic, sd := range cc.SubscriptionTable {
			d.Subscriptions = append(d.Subscriptions, console.Subscription{Topic: topic, Type: sd.ExpressionType, Expression: sd.SubString})
		}
		slices.SortFunc(d.Subscriptions, func(a, b console.Subscription) int { return cmp.Compare(a.Topic, b.Topic) })
	}
	for _, e := range lags {
		d.Lag += e.Lag
		d.Queues = append(d.Queues, console.QueueLag{Topic: e.Topic, QueueID: e.QueueID, BrokerOffset: e.BrokerOffset, ConsumerOffset: e.ConsumerOffset, Lag: e.Lag})
	}
	slices.SortFunc(d.Queues, func(a, b console.QueueLag) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.QueueID, b.QueueID))
	})
	return d, nil
}

// viewMessage turns a record into the console's message.
func viewMessage(r message.Record, preview int) console.Message {
	var m message.Message
	r.Decode(&m)
	v := console.Message{
		Topic: m.Topic, QueueID: m.QueueID, QueueOffset: m.QueueOffset, CommitLogOffset: m.CommitLogOffset,
		MsgID: m.Properties.Get(message.PropertyUniqKey), OffsetMsgID: message.OffsetMsgID(m.StoreHost, m.CommitLogOffset),
		Tags: m.Properties.Get(message.PropertyTags), Keys: m.Properties.Get(message.PropertyKeys),
		BornHost: m.BornHost.String(), StoreHost: m.StoreHost.String(),
		Born: time.UnixMilli(m.BornTimestamp), Stored: time.UnixMilli(m.StoreTimestamp),
		ReconsumeTimes: m.ReconsumeTimes, BodySize: len(m.Body),
		Body: slices.Clone(m.Body[:min(len(m.Body), preview)]),
	}
	m.Properties.Each(func(k, val []byte) bool {
		v.Properties = append(v.Properties, console.Field{Name: string(k), Value: string(val)})
		return true
	})
	slices.SortFunc(v.Properties, func(a, b console.Field) int { return cmp.Compare(a.Name, b.Name) })
	return v
}

func (c consoleSource) FindMessages(q console.MessageQuery) ([]console.Message, error) {
	var recs []message.Record
	switch {
	case q.ByOffset:
		r, err := c.b.View().MessageAt(q.Topic, q.QueueID, q.Offset)
		if err != nil {
			return nil, notFound(err)
		}
		recs = append(recs, r)
	case q.ID != "":
		// A client's message id (UNIQ_KEY) and an offsetMsgId are both 32
		// hex digits: try the id both ways.
		if _, off, err := message.ParseOffsetMsgID(q.ID); err == nil {
			r, err := c.b.View().MessageByCommitOffset(off)
			if err == nil && strings.EqualFold(message.OffsetMsgID(r.StoreHost(), r.CommitLogOffset()), q.ID) &&
				(q.Topic == "" || string(r.Topic()) == q.Topic) {
				recs = append(recs, r)
			}
		}
		if q.Topic != "" {
			rs, err := c.b.View().MessagesByKey(q.Topic, q.ID, true, q.Limit)
			if err != nil {
				return nil, err
			}
			recs = append(recs, rs...)
		} else if len(recs) == 0 {
			return nil, errors.New("no message has that offsetMsgId; a message id (UNIQ_KEY) is looked up in a topic: give the topic")
		}
	case q.Key != "":
		rs, err := c.b.View().MessagesByKey(q.Topic, q.Key, false, q.Limit)
		if err != nil {
			return nil, err
		}
		recs = rs
	}
	out := make([]console.Message, 0, len(recs))
	for _, r := range recs {
		out = append(out, viewMessage(r, console.DefaultBodyPreview))
	}
	return out, nil
}

// notFound maps the store's not-found errors onto the console's.
func notFound(err error) error {
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrOffsetGone) {
		return fmt.Errorf("%w: %v", console.ErrNotFound, err)
	}
	return err
}

func (c consoleSource) DeadLetters(group string, from int64, limit int) ([]console.DeadLetter, error) {
	it := c.st.NewQueueIter(broker.DLQGroupTopicPrefix+group, 0, store.IterOptions{MaxRecords: limit})
	defer it.Close()
	var out []console.DeadLetter
	for ok := it.SeekGE(from); ok; ok = it.Next() {
		var m message.Message
		it.Record().Decode(&m)
		topic := m.Properties.Get(message.PropertyRetryTopic)
		if topic == "" {
			topic = m.Topic
		}
		id := m.Properties.Get(message.PropertyUniqKey)
		if id == "" {
			id = message.OffsetMsgID(m.StoreHost, m.CommitLogOffset)
		}
		out = append(out, console.DeadLetter{QueueOffset: it.Offset(), MsgID: id, Topic: topic,
			Tags: m.Properties.Get(message.PropertyTags), Keys: m.Properties.Get(message.PropertyKeys),
			ReconsumeTimes: m.ReconsumeTimes, Stored: time.UnixMilli(m.StoreTimestamp), BodySize: len(m.Body)})
	}
	return out, it.Error()
}

func (c consoleSource) ResendDeadLetter(group string, queueOffset int64) (console.Resent, error) {
	rs, err := c.b.Outbox().ResendDLQ(outbox.DLQSelector{Group: group, QueueOffset: &queueOffset, Limit: 1}, outbox.ResendOrigin)
	if err != nil {
		return console.Resent{}, err
	}
	r := rs[0]
	return console.Resent{OldMsgID: r.OldMsgID, NewMsgID: r.NewMsgID, Topic: r.Topic, QueueID: r.QueueID}, nil
}

// consoleTimedLimit bounds the count of pending timed messages.
const consoleTimedLimit = 10_000

func (c consoleSource) Scheduled() console.Scheduled {
	var s console.Scheduled
	for _, l := range c.b.View().PendingDelayed() {
		s.Levels = append(s.Levels, console.DelayLevel{Level: l.Level, Delay: l.Delay, Pending: l.Pending})
	}
	s.Timed, s.TimedNextDue, s.TimedMore, _ = c.b.View().PendingTimed(consoleTimedLimit)
	return s
}

func (c consoleSource) Transactions(limit int) console.Transactions {
	total, oldest := c.b.View().UnresolvedTransactions(limit)
	t := console.Transactions{Total: total}
	for _, p := range oldest {
		t.Oldest = append(t.Oldest, console.Transaction{ProducerGroup: p.ProducerGroup, CommitLogOffset: p.CommitLogOffset,
			Stored: p.Stored, Checks: p.Checks, LastCheck: p.LastCheck})
	}
	return t
}

func (c consoleSource) Plugins() []console.Plugin {
	var out []console.Plugin
	for _, p := range c.s.plugins.list() {
		serves := p.ExpressionType
		if p.Kind == "transform" {
			serves = "topics " + strings.Join(p.Topics, ", ") + "; on failure " + p.FailurePolicy
		} else if p.Kind != "filter" {
			serves = "groups " + strings.Join(p.Groups, ", ")
			if len(p.Groups) == 0 {
				serves = "default"
			}
		}
		out = append(out, console.Plugin{Name: p.Name, Kind: p.Kind, Serves: serves, Module: p.Module, Version: p.Version,
			SHA256: p.SHA256, Generation: p.Generation, Calls: p.Calls, Errors: p.Errors, Traps: p.Traps, Timeouts: p.Timeouts, Rejected: p.Rejected,
			P99: time.Duration(p.P99Nanos), Disabled: p.Disabled, LastError: p.LastError})
	}
	return out
}

func (c consoleSource) ReloadPlugins(ctx context.Context) (string, error) {
	r, err := c.s.ReloadPlugins(ctx)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, line := range []struct {
		what  string
		names []string
	}{{"added", r.Added}, {"reloaded", r.Reloaded}, {"removed", r.Removed}, {"unchanged", r.Unchanged}} {
		if len(line.names) > 0 {
			parts = append(parts, line.what+" "+strings.Join(line.names, ", "))
		}
	}
	if len(parts) == 0 {
		return "no plugins configured", nil
	}
	return strings.Join(parts, "; "), nil
}

func (c consoleSource) Bridge() ([]console.Field, bool) {
	br := c.s.bridge.Load()
	if br == nil {
		return nil, false
	}
	st := br.Status()
	conn := st.Connection
	if st.URL != "" {
		conn += " to " + st.URL
	}
	if st.BackingOff {
		conn += " (backing off after an error)"
	}
	mode := string(st.Mode)
	if st.Stream != "" {
		mode += ", stream " + st.Stream
	}
	f := []console.Field{
		{Name: "Connection", Value: conn},
		{Name: "Mode", Value: mode},
		{Name: "Cursor", Value: fmt.Sprintf("%d of %d (epoch %s)", st.Cursor, st.Head, st.Epoch)},
		{Name: "Lag", Value: fmt.Sprintf("%d events, %s", st.LagEvents, time.Duration(st.LagSeconds*float64(time.Second)).Round(time.Millisecond))},
		{Name: "In flight", Value: fmt.Sprint(st.InFlight)},
		{Name: "Published", Value: fmt.Sprint(st.Published)},
		{Name: "Duplicates", Value: fmt.Sprint(st.Duplicates)},
		{Name: "Expired", Value: fmt.Sprint(st.Expired)},
		{Name: "Filtered", Value: fmt.Sprint(st.Filtered)},
		{Name: "Unreadable", Value: fmt.Sprint(st.Unreadable)},
		{Name: "Failures", Value: fmt.Sprint(st.Failures)},
		{Name: "Resends", Value: fmt.Sprint(st.Resends)},
	}
	if st.LastError != "" {
		f = append(f, console.Field{Name: "Last error", Value: st.LastErrorAt.UTC().Format(time.RFC3339) + " " + st.LastError})
	}
	return f, true
}
