package broker

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Consumers across restarts.
//
// The official Go client names its subscriptions in heartbeats, every
// 30 s, and not in its pulls. A broker that forgot its consumers when it
// restarted would refuse their pulls until the next heartbeat, and
// consumption would stall for up to half a minute after every restart.
// So the broker keeps each consumer group's subscriptions (with its message
// model) in its store, rewritten whenever they change and deleted when the
// group's last member leaves, and loads them at start: pulls are served
// with the remembered subscriptions at once. A restored group has no
// members until they heartbeat, as in RocketMQ, so its consumer list and
// rebalancing are what they would be without this; nobody who left is
// kept. A group nobody heartbeats to within Options.ClientExpiry is
// forgotten.
//
// A remembered subscription is the one the group's members last declared;
// a member started with a different one declares it in the heartbeat it
// sends as it starts, which replaces it.

// pullGrace is how long a graceful shutdown keeps answering pulls (with
// SYSTEM_BUSY) before it stops reading connections, when consumers are
// connected; see Shutdown.
const pullGrace = 300 * time.Millisecond

// consumersMetaKey prefixes a consumer group's snapshot in the store's
// metadata.
const consumersMetaKey = "consumers/"

// groupSnapshot is what the broker keeps of a consumer group across
// restarts.
type groupSnapshot struct {
	Model       string        `json:"model"`
	ConsumeType string        `json:"consumeType,omitempty"`
	FromWhere   string        `json:"fromWhere,omitempty"`
	Subs        []snapshotSub `json:"subs"`
}

type snapshotSub struct {
	Topic   string `json:"topic"`
	Type    string `json:"type"`
	Expr    string `json:"expr"`
	Version int64  `json:"version,omitempty"`
}

// snapshotLocked returns the group's snapshot; the table's lock is held.
func (g *consumerGroup) snapshotLocked() *groupSnapshot {
	s := &groupSnapshot{Model: g.model, ConsumeType: g.consumeType, FromWhere: g.fromWhere}
	for _, sub := range g.subs {
		s.Subs = append(s.Subs, snapshotSub{Topic: sub.topic, Type: sub.typ, Expr: sub.expr, Version: sub.version})
	}
	slices.SortFunc(s.Subs, func(a, b snapshotSub) int { return strings.Compare(a.Topic, b.Topic) })
	return s
}

// sameSubs reports whether two subscription sets declare the same
// expressions (versions aside).
func sameSubs(a, b map[string]*subscription) bool {
	if len(a) != len(b) {
		return false
	}
	for topic, x := range a {
		y, ok := b[topic]
		if !ok || x.typ != y.typ || x.expr != y.expr {
			return false
		}
	}
	return true
}

// persist marks consumer groups whose snapshot changed (or who are gone)
// for the snapshot writer, without waiting for it: no heartbeat waits for
// a disk write, and a client that changes its subscriptions on every
// heartbeat costs one write per writer round, not one per heartbeat. Once
// frozen (the broker is shutting down and its connections are closing)
// nothing is marked: the members are leaving with the broker, not the
// group.
func (t *clientTable) persist(groups ...string) {
	if len(groups) == 0 || t.frozen.Load() {
		return
	}
	t.mu.Lock()
	for _, g := range groups {
		t.dirty[g] = struct{}{}
	}
	t.mu.Unlock()
	select {
	case t.dirtySig <- struct{}{}:
	default:
	}
}

// writeSnapshots runs the snapshot writer until quit closes, then writes
// what was marked before it stops. Each round writes every marked group's
// current snapshot (or its deletion) in one durable batch.
func (t *clientTable) writeSnapshots(quit <-chan struct{}) {
	for {
		select {
		case <-t.dirtySig:
			t.flushSnapshots()
		case <-quit:
			t.flushSnapshots()
			return
		}
	}
}

// flushSnapshots writes the marked groups' snapshots.
func (t *clientTable) flushSnapshots() {
	t.mu.Lock()
	if len(t.dirty) == 0 {
		t.mu.Unlock()
		return
	}
	snaps := make(map[string]*groupSnapshot, len(t.dirty))
	for name := range t.dirty {
		var snap *groupSnapshot
		if g := t.consumers[name]; g != nil {
			snap = g.snapshotLocked()
		}
		snaps[name] = snap
	}
	clear(t.dirty)
	t.mu.Unlock()
	if err := t.save(snaps); err != nil {
		t.log.Warn("consumer group snapshots not written; after a restart these groups' pulls wait for their next heartbeat", "groups", len(snaps), "err", err)
	}
}

// anyConsumer reports whether a consumer is connected.
func (t *clientTable) anyConsumer() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, g := range t.consumers {
		if len(g.members) > 0 {
			return true
		}
	}
	return false
}

// restore adds a group from its snapshot, without members, or reports that
// the group quota is full.
func (t *clientTable) restore(name string, s *groupSnapshot, subs map[string]*subscription, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.consumers[name] != nil {
		return nil
	}
	if err := t.roomLocked(groupConsumer, name, now); err != nil {
		return err
	}
	t.consumers[name] = &consumerGroup{name: name, model: s.Model, consumeType: s.ConsumeType, fromWhere: s.FromWhere,
		members: map[string]*member{}, subs: subs, restoredAt: now}
	return nil
}

// saveConsumerGroups writes consumer groups' snapshots, deleting those of
// nil, in one durable batch.
func (b *Broker) saveConsumerGroups(snaps map[string]*groupSnapshot) error {
	puts := make(map[string][]byte, len(snaps))
	var deletes []string
	for group, s := range snaps {
		if s == nil {
			deletes = append(deletes, consumersMetaKey+group)
			continue
		}
		v, err := json.Marshal(s)
		if err != nil {
			return err
		}
		puts[consumersMetaKey+group] = v
	}
	return b.store.WriteMeta(puts, deletes)
}

// restoreConsumers loads the consumer groups the broker knew when it
// stopped. A snapshot that cannot be read is skipped, and its group waits
// for its next heartbeat as before.
func (b *Broker) restoreConsumers() error {
	now := b.now()
	groups := 0
	err := b.store.EachMeta(consumersMetaKey, func(name string, v []byte) error {
		group := strings.TrimPrefix(name, consumersMetaKey)
		var s groupSnapshot
		if err := json.Unmarshal(v, &s); err != nil {
			b.log.Warn("consumer group snapshot unreadable; skipped", "group", logName(group), "err", err)
			return nil
		}
		subs := make(map[string]*subscription, len(s.Subs))
		for _, sd := range s.Subs {
			sub := &subscription{topic: sd.Topic, typ: sd.Type, expr: sd.Expr, version: sd.Version}
			sub.filter, sub.err = b.filters.compile(sub.typ, sub.expr)
			if sub.err == nil {
				b.prefilter.register(sd.Topic, sub.typ, sub.expr, sub.filter)
			}
			subs[sd.Topic] = sub
		}
		if err := b.clients.restore(group, &s, subs, now); err != nil {
			b.log.Warn("consumer group snapshot not restored", "group", logName(group), "err", err)
			return nil
		}
		groups++
		return nil
	})
	if groups > 0 {
		b.log.Info("consumer groups restored; their pulls are served before their next heartbeat", "groups", groups)
	}
	return err
}
