package server

import (
	"context"
	"encoding/json"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/plugins/natsbridge"
)

// BridgeOptions configures the NATS bridge; see natsbridge.Options.
type BridgeOptions = natsbridge.Options

type natsBridge = natsbridge.Bridge

// BridgeStatusCommand is the admin command that reports the NATS bridge's
// status (`broker admin bridge status`).
const BridgeStatusCommand = "bridge.status"

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
	o.Source, o.Resender = s.Broker, s.Broker
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
