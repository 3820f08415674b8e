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

// startBridge starts the NATS bridge on the broker, if configured, and
// registers its status command. The bridge connects in the background, so
// an unreachable NATS server does not hold the broker up.
func (s *Server) startBridge() error {
	if s.cfg.NATSBridge == nil {
		return nil
	}
	o := *s.cfg.NATSBridge
	src := &BridgeSource{Broker: s.Broker, Store: s.Store}
	o.Source, o.Resender = src, src
	if o.Cluster == "" {
		o.Cluster = s.cfg.Broker.ClusterName
		if o.Cluster == "" {
			o.Cluster = broker.DefaultClusterName
		}
	}
	if o.Broker == "" {
		o.Broker = s.cfg.Broker.BrokerName
		if o.Broker == "" {
			o.Broker = broker.DefaultBrokerName
		}
	}
	if o.Logger == nil {
		o.Logger = s.log
	}
	b, err := natsbridge.New(o)
	if err != nil {
		return err
	}
	if err := b.Start(); err != nil {
		return err
	}
	s.bridge = b
	s.Broker.HandleAdmin(BridgeStatusCommand, func(context.Context, json.RawMessage) (any, error) {
		return b.Status(), nil
	})
	s.Broker.HandleAdmin(BridgeSubjectCommand, func(_ context.Context, raw json.RawMessage) (any, error) {
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
		ans.Subject, ans.Resend = b.Subjects(a.Kind, a.Group, a.Topic)
		return ans, nil
	})
	return nil
}

// stopBridge stops the bridge, writing its cursor, before the store closes.
func (s *Server) stopBridge(ctx context.Context) error {
	if s.bridge == nil {
		return nil
	}
	return s.bridge.Shutdown(ctx)
}

// Bridge returns the running NATS bridge, or nil.
func (s *Server) Bridge() *natsbridge.Bridge { return s.bridge }

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
func (a *BridgeSource) EventOffsets() (minOff, maxOff int64) { return a.Broker.EventOffsets() }

// WaitEvents returns a channel closed when events are stored after the call.
func (a *BridgeSource) WaitEvents() <-chan struct{} { return a.Broker.WaitEvents() }

// ReadEvents appends up to max outbox events from offset from to dst.
func (a *BridgeSource) ReadEvents(from int64, max int, dst []outbox.Event) ([]outbox.Event, error) {
	return a.Broker.ReadEvents(from, max, dst)
}

// ListDLQ lists a group's dead letters matching sel.
func (a *BridgeSource) ListDLQ(sel outbox.DLQSelector) ([]outbox.DeadLetter, error) {
	return a.Broker.ListDLQ(sel)
}

// ResendDLQ sends the dead letters matching sel again.
func (a *BridgeSource) ResendDLQ(sel outbox.DLQSelector, target string) ([]outbox.Resent, error) {
	return a.Broker.ResendDLQ(sel, target)
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
