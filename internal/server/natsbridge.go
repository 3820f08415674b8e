package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/plugins/natsbridge"
)

// BridgeOptions configures the NATS bridge; see natsbridge.Options.
type BridgeOptions = natsbridge.Options

type natsBridge = natsbridge.Bridge

// BridgeStatusCommand is the admin command that reports the NATS bridge's
// status (`broker admin bridge status`).
const BridgeStatusCommand = "bridge.status"

// BridgeSubjectCommand is the admin command that prints the subject to
// subscribe to for a group's and topic's events (`broker admin bridge
// subject`). Its arguments are BridgeSubjectArgs.
const BridgeSubjectCommand = "bridge.subject"

// BridgeSubjectArgs are BridgeSubjectCommand's arguments; each may be
// empty, meaning any.
type BridgeSubjectArgs struct {
	Kind  string `json:"kind,omitempty"` // "retry" or "dlq"
	Group string `json:"group,omitempty"`
	Topic string `json:"topic,omitempty"`
}

// BridgeSubjects is BridgeSubjectCommand's answer.
type BridgeSubjects struct {
	Subject string `json:"subject"` // the events asked for
	Resend  string `json:"resend"`  // the resend service's subject
}

// bridgeBrokerOptions turns the outbox on when the NATS bridge is
// configured: the bridge reads what the broker writes there.
func (cfg *Config) bridgeBrokerOptions(bo *broker.Options) {
	if cfg.NATSBridge != nil {
		bo.Outbox = true
	}
}

// bridgeOptions are the configured bridge's options, wired to broker b
// (nil only to validate them) and its store.
func (s *Server) bridgeOptions(b *broker.Broker) BridgeOptions {
	o := *s.cfg.NATSBridge
	src := &BridgeSource{Broker: b, Store: s.Store}
	o.Source, o.Resender = src, src
	if o.Cluster == "" {
		o.Cluster = s.cfg.Broker.ClusterName
		if o.Cluster == "" {
			o.Cluster = broker.DefaultClusterName
		}
	}
	if o.Broker == "" {
		o.Broker = s.cfg.Broker.BrokerName
		if s.cfg.Cluster != nil {
			// Every member's master serves under the set's name: the
			// message ids of a new leader's bridge are its predecessor's.
			o.Broker = s.cfg.Cluster.SetName
		}
		if o.Broker == "" {
			o.Broker = broker.DefaultBrokerName
		}
	}
	if o.Logger == nil {
		o.Logger = s.log
	}
	return o
}

// checkBridge refuses bridge options the bridge would refuse, before a
// set's member starts: its bridge starts only when it leads.
func (s *Server) checkBridge() error {
	if s.cfg.NATSBridge == nil {
		return nil
	}
	_, err := natsbridge.New(s.bridgeOptions(nil))
	return err
}

// startBridge starts the NATS bridge on broker b, if configured, and
// registers its commands with b. The bridge connects in the background, so
// an unreachable NATS server does not hold the broker up. A set's member
// runs it while it leads (cluster.go).
func (s *Server) startBridge(b *broker.Broker) error {
	if s.cfg.NATSBridge == nil {
		return nil
	}
	br, err := natsbridge.New(s.bridgeOptions(b))
	if err != nil {
		return err
	}
	if err := br.Start(); err != nil {
		return err
	}
	s.bridge.Store(br)
	b.Admin().Handle(BridgeStatusCommand, func(context.Context, json.RawMessage) (any, error) {
		return br.Status(), nil
	})
	b.Admin().Handle(BridgeSubjectCommand, func(_ context.Context, raw json.RawMessage) (any, error) {
		var a BridgeSubjectArgs
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, fmt.Errorf("bridge subject: %w", err)
			}
		}
		if a.Kind != "" && a.Kind != outbox.KindRetry && a.Kind != outbox.KindDLQ {
			return nil, fmt.Errorf("bridge subject: kind %q: want %q or %q", a.Kind, outbox.KindRetry, outbox.KindDLQ)
		}
		var ans BridgeSubjects
		ans.Subject, ans.Resend = br.Subjects(a.Kind, a.Group, a.Topic)
		return ans, nil
	})
	return nil
}

// ErrBridgeOnLeader answers the bridge's commands on a replicated set's
// member that does not lead: the bridge runs on the leader.
var ErrBridgeOnLeader = errors.New("the NATS bridge runs on the set's leader")

// attachReplicaBridge registers the bridge's commands with a replica's
// broker b, answering where the bridge runs.
func (s *Server) attachReplicaBridge(b *broker.Broker) {
	if s.cfg.NATSBridge == nil {
		return
	}
	where := func(context.Context, json.RawMessage) (any, error) {
		leader := s.node.LeaderID()
		if leader == "" {
			return nil, fmt.Errorf("%w, and set %s has none now", ErrBridgeOnLeader, s.cfg.Cluster.SetName)
		}
		return nil, fmt.Errorf("%w: this member is a replica of set %s; ask node %q", ErrBridgeOnLeader, s.cfg.Cluster.SetName, leader)
	}
	b.Admin().HandleOnReplica(BridgeStatusCommand, where)
	b.Admin().HandleOnReplica(BridgeSubjectCommand, where)
}

// stopBridge stops the bridge, writing its cursor, before the store closes
// (or, on a set's member, before the master's broker stops).
func (s *Server) stopBridge(ctx context.Context) error {
	br := s.bridge.Swap(nil)
	if br == nil {
		return nil
	}
	return br.Shutdown(ctx)
}

// Bridge returns the running NATS bridge, or nil (on a replicated set's
// member, nil unless it leads).
func (s *Server) Bridge() *natsbridge.Bridge { return s.bridge.Load() }

// BridgeSource adapts the broker and its store to what the NATS bridge
// consumes (natsbridge.Source and natsbridge.Resender): the broker's
// outbox events and dead letters, and the bridge's own durable counters
// (cursor, epoch) and records (resend keys), which it keeps in the store's
// index under bridgeKeyPrefix, apart from the broker's names.
type BridgeSource struct {
	Broker *broker.Broker
	Store  *store.Store
}

// bridgeKeyPrefix namespaces the bridge's progress and metadata names in
// the store. It was the broker's prefix for components wired around it:
// stores written before the bridge moved out keep their cursor.
const bridgeKeyPrefix = "ext/"

// EventOffsets returns the first retained and the next outbox offset.
func (a *BridgeSource) EventOffsets() (minOff, maxOff int64) { return a.Broker.Outbox().EventOffsets() }

// WaitEvents returns a channel closed when events are stored after the call.
func (a *BridgeSource) WaitEvents() <-chan struct{} { return a.Broker.Outbox().WaitEvents() }

// ReadEvents appends up to max outbox events from offset from to dst.
func (a *BridgeSource) ReadEvents(from int64, max int, dst []outbox.Event) ([]outbox.Event, error) {
	return a.Broker.Outbox().ReadEvents(from, max, dst)
}

// ListDLQ lists a group's dead letters matching sel.
func (a *BridgeSource) ListDLQ(sel outbox.DLQSelector) ([]outbox.DeadLetter, error) {
	return a.Broker.Outbox().ListDLQ(sel)
}

// ResendDLQ sends the dead letters matching sel again.
func (a *BridgeSource) ResendDLQ(sel outbox.DLQSelector, target string) ([]outbox.Resent, error) {
	return a.Broker.Outbox().ResendDLQ(sel, target)
}

// Progress returns a durable counter.
func (a *BridgeSource) Progress(name string) (int64, bool) {
	return a.Store.Progress(bridgeKeyPrefix + name)
}

// SetProgress sets a counter; it is written at the store's next
// checkpoint, or by FlushProgress.
func (a *BridgeSource) SetProgress(name string, v int64) {
	a.Store.SetProgress(bridgeKeyPrefix+name, v)
}

// FlushProgress writes the counters (and the index checkpoint) durably now.
func (a *BridgeSource) FlushProgress() error { return a.Store.Checkpoint() }

// Record returns a durable record; ok is false when there is none.
func (a *BridgeSource) Record(name string) (v []byte, ok bool, err error) {
	v, err = a.Store.Meta(bridgeKeyPrefix + name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	return v, err == nil, err
}

// PutRecord writes a record durably (fsync before returning).
func (a *BridgeSource) PutRecord(name string, v []byte) error {
	return a.Store.PutMeta(bridgeKeyPrefix+name, v)
}

// DeleteRecord removes a record durably.
func (a *BridgeSource) DeleteRecord(name string) error {
	return a.Store.DeleteMeta(bridgeKeyPrefix + name)
}

// EachRecord calls fn for every record whose name starts with prefix, in
// name order, stopping at the first error.
func (a *BridgeSource) EachRecord(prefix string, fn func(name string, v []byte) error) error {
	return a.Store.EachMeta(bridgeKeyPrefix+prefix, func(name string, v []byte) error {
		return fn(name[len(bridgeKeyPrefix):], v)
	})
}

var (
	_ natsbridge.Source   = (*BridgeSource)(nil)
	_ natsbridge.Resender = (*BridgeSource)(nil)
)
