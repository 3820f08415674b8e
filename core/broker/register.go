package broker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/remoting"
)

// registerLoop registers with the name servers every RegisterInterval.
func (b *Broker) registerLoop() { b.every(b.opts.RegisterInterval, b.registerAll) }

// registerNow registers the current topic table with every name server
// before returning, so a topic created by a send is routable as soon as the
// send is answered.
func (b *Broker) registerNow() {
	select {
	case <-b.started:
	default:
		return // Serve registers everything when it starts
	}
	b.registerAll()
}

func (b *Broker) registerAll() {
	b.registerMu.Lock()
	defer b.registerMu.Unlock()
	topics, version := b.topics.snapshot()
	body, err := json.Marshal(remoting.RegisterBrokerBody{
		TopicConfigSerializeWrapper: remoting.TopicConfigWrapper{TopicConfigTable: topics, DataVersion: version},
		FilterServerList:            []string{},
	})
	if err != nil {
		b.log.Error("encode registration", "err", err)
		return
	}
	for _, ns := range b.opts.NameServers {
		req := remoting.NewRequest(remoting.RegisterBroker, map[string]string{
			"brokerName":   b.opts.BrokerName,
			"brokerAddr":   b.addr,
			"clusterName":  b.opts.ClusterName,
			"haServerAddr": "",
			"brokerId":     "0",
			"compressed":   "false",
		}, body)
		b.sign(req)
		ctx, cancel := context.WithTimeout(context.Background(), DefaultRegisterTimeout)
		resp, err := b.nsc.Invoke(ctx, ns, req)
		cancel()
		switch {
		case err != nil:
			b.log.Warn("register with name server failed", "namesrv", ns, "err", err)
		case resp.Code != remoting.Success:
			b.log.Warn("name server refused registration", "namesrv", ns, "code", resp.Code, "remark", resp.Remark)
		}
	}
}

// sign signs a request to a name server with the broker's own account, if
// it has one.
func (b *Broker) sign(req *remoting.Command) {
	if b.opts.AccessKey != "" {
		acl.Sign(req, b.opts.AccessKey, b.opts.SecretKey, "")
	}
}

func (b *Broker) unregister(ctx context.Context) {
	for _, ns := range b.opts.NameServers {
		req := remoting.NewRequest(remoting.UnregisterBroker, map[string]string{
			"brokerName": b.opts.BrokerName, "brokerAddr": b.addr, "clusterName": b.opts.ClusterName, "brokerId": "0",
		}, nil)
		b.sign(req)
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		if _, err := b.nsc.Invoke(cctx, ns, req); err != nil {
			b.log.Debug("unregister from name server", "namesrv", ns, "err", err)
		}
		cancel()
	}
}
