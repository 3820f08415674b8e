package server

import (
	"context"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// TxnPolicy adapts a txncheck plugin to the broker's transaction-check
// policy. A plugin error, or an action the broker does not know, fails the
// whole batch, which the broker treats as "unknown, ask again later".
func TxnPolicy(p *wasm.Plugin) broker.TxnPolicy { return wasmTxnPolicy{p} }

type wasmTxnPolicy struct{ p *wasm.Plugin }

// txnActions maps the plugin's actions to the broker's.
var txnActions = map[wasm.TxnAction]broker.TxnAction{
	wasm.TxnCheckNow: broker.TxnCheckNow,
	wasm.TxnWait:     broker.TxnWait,
	wasm.TxnCommit:   broker.TxnCommit,
	wasm.TxnRollback: broker.TxnRollback,
	wasm.TxnDiscard:  broker.TxnDiscard,
}

func (w wasmTxnPolicy) Decide(ctx context.Context, now time.Time, batch []broker.HalfMessage, out []broker.TxnDecision) error {
	in := make([]wasm.HalfMessage, len(batch))
	for i, m := range batch {
		in[i] = wasm.HalfMessage{
			ProducerGroup:  m.ProducerGroup,
			Topic:          m.Topic,
			MsgID:          m.MsgID,
			CheckTimes:     m.CheckTimes,
			BornTimestamp:  m.BornTimestamp,
			StoreTimestamp: m.StoreTimestamp,
			Properties:     m.Properties,
		}
	}
	res := make([]wasm.TxnDecision, len(batch))
	if err := w.p.TxnCheck(ctx, now, in, res); err != nil {
		return err
	}
	for i, d := range res {
		a, ok := txnActions[d.Action]
		if !ok {
			return fmt.Errorf("plugin %s: unknown action %v", w.p.Name(), d.Action)
		}
		out[i] = broker.TxnDecision{Action: a, Wait: d.Wait}
	}
	return nil
}

// pluginTxnPolicy decides each batch with the txncheck plugin that serves
// its producer group at that moment, so a reload takes effect at the next
// decision; groups without one get fallback.
type pluginTxnPolicy struct {
	s        *Server
	fallback broker.TxnPolicy
}

// txnPolicy returns the broker's transaction-check policy: the plugin
// list's txncheck plugins, over o.TxnPolicy (RocketMQ's rule when nil).
// The broker asks about one producer group per call.
func (s *Server) txnPolicy(o broker.Options) broker.TxnPolicy {
	fallback := o.TxnPolicy
	if fallback == nil {
		fallback = broker.NewDefaultTxnPolicy(o)
	}
	return pluginTxnPolicy{s: s, fallback: fallback}
}

func (p pluginTxnPolicy) Decide(ctx context.Context, now time.Time, batch []broker.HalfMessage, out []broker.TxnDecision) error {
	if len(batch) == 0 {
		return nil
	}
	if wp := p.s.TxnPlugin(batch[0].ProducerGroup); wp != nil {
		return TxnPolicy(wp).Decide(ctx, now, batch, out)
	}
	return p.fallback.Decide(ctx, now, batch, out)
}
