package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/remoting"
)

// registerLoop registers the whole topic table with the name servers
// every RegisterInterval.
func (b *Broker) registerLoop() { b.every(b.opts.RegisterInterval, b.registerAll) }

// topicChanged tells the name servers that a topic was saved or deleted,
// before returning, so a topic created by a send is routable as soon as
// the send is answered. A saved topic is registered alone (an incremental
// registration), so creating n topics sends O(n) bytes rather than the
// O(n²) of re-sending the table each time; a deletion, which is rare,
// re-sends the whole table, since only a full registration makes a name
// server forget a topic.
func (b *Broker) topicChanged(topic string, deleted bool) {
	if deleted {
		b.meters.topics.Delete(topic)
	}
	select {
	case <-b.started:
	default:
		return // Serve registers everything when it starts
	}
	if deleted {
		b.registerAll()
		return
	}
	b.registerTopic(topic)
}

// registerTopic registers one topic's current configuration with every
// name server. It reads the configuration under registerMu, so
// registrations reach a name server in the order of the table's changes:
// one that was overtaken by a later change sends the later state, and a
// topic deleted meanwhile is not sent at all (the deletion's full
// registration has removed it, or will).
func (b *Broker) registerTopic(topic string) {
	b.registerMu.Lock()
	defer b.registerMu.Unlock()
	tc, version, ok := b.topics.current(topic)
	if !ok {
		return
	}
	b.registerLocked(map[string]TopicConfig{topic: tc}, version, true)
}

// registerAll registers the whole topic table with every name server.
func (b *Broker) registerAll() {
	b.registerMu.Lock()
	defer b.registerMu.Unlock()
	if b.opts.ReplicaID > 0 {
		// The leader changes the topics; a replica learns them from its
		// store, and registers what it serves.
		if _, err := b.topics.reload(); err != nil {
			b.log.Warn("replica: topic table not reloaded", "err", err)
		}
	}
	topics, version := b.topics.snapshot()
	b.registerLocked(topics, version, false)
}

// registerLocked sends one REGISTER_BROKER to every name server. An
// incremental one carries changed topics only and is marked so (the
// "incremental" header field, see core/namesrv): the name server merges
// it into what it holds for this broker instead of replacing it.
func (b *Broker) registerLocked(topics map[string]TopicConfig, version remoting.DataVersion, incremental bool) {
	body, err := json.Marshal(remoting.RegisterBrokerBody{
		TopicConfigSerializeWrapper: remoting.TopicConfigWrapper{TopicConfigTable: topics, DataVersion: version},
		FilterServerList:            []string{},
	})
	if err != nil {
		b.log.Error("encode registration", "err", err)
		return
	}
	reached := len(b.opts.NameServers) == 0 // some name server has this table
	for _, ns := range b.opts.NameServers {
		req := remoting.NewRequest(remoting.RegisterBroker, map[string]string{
			"brokerName":   b.opts.BrokerName,
			"brokerAddr":   b.addr,
			"clusterName":  b.opts.ClusterName,
			"haServerAddr": "",
			"brokerId":     strconv.FormatInt(b.opts.ReplicaID, 10),
			"compressed":   "false",
			"incremental":  strconv.FormatBool(incremental),
		}, body)
		if b.opts.GRPCAddr != "" {
			req.Set(remoting.RegisterGRPCAddrField, b.opts.GRPCAddr)
		}
		b.sign(req)
		b.regBytes.Add(int64(len(body)))
		ctx, cancel := context.WithTimeout(context.Background(), DefaultRegisterTimeout)
		resp, err := b.nsc.Invoke(ctx, ns, req)
		cancel()
		switch {
		case err != nil:
			b.log.Warn("register with name server failed", "namesrv", ns, "incremental", incremental, "err", err)
		case resp.Code != remoting.Success:
			b.log.Warn("name server refused registration", "namesrv", ns, "incremental", incremental, "code", resp.Code, "remark", resp.Remark)
		default:
			reached = true
		}
	}
	if !incremental {
		b.registered.Store(reached)
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
			"brokerName": b.opts.BrokerName, "brokerAddr": b.addr, "clusterName": b.opts.ClusterName, "brokerId": strconv.FormatInt(b.opts.ReplicaID, 10),
		}, nil)
		b.sign(req)
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		if _, err := b.nsc.Invoke(cctx, ns, req); err != nil {
			b.log.Debug("unregister from name server", "namesrv", ns, "err", err)
		}
		cancel()
	}
}

// RouteSet is one broker set's part of a topic's route, as the name
// servers know it.
type RouteSet struct {
	Name        string // the set's broker name
	ReadQueues  int
	WriteQueues int
	Readable    bool
	Writable    bool
	Master      string // its master's broker address; "" without one
	MasterGRPC  string // its master's gRPC endpoint; "" if it registered none
}

// NameServerRoute asks the broker's name servers, in turn, for the broker
// sets that serve topic, with the gRPC endpoints their members registered
// (remoting.BrokerData.GRPCAddrs): the first answer wins. A topic no
// broker serves, or a broker without name servers, is an error that
// wraps ErrNoRoute. Only this project's name server knows the gRPC
// endpoints; Apache RocketMQ's answers routes without them.
func (v View) NameServerRoute(ctx context.Context, topic string) ([]RouteSet, error) {
	b := v.b
	errs := make([]error, 0, len(b.opts.NameServers))
	for _, ns := range b.opts.NameServers {
		req := remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{
			"topic": topic, remoting.RouteGRPCAddrsField: "true",
		}, nil)
		b.sign(req)
		resp, err := b.nsc.Invoke(ctx, ns, req)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("name server %s: %w", ns, err))
			continue
		case resp.Code == remoting.TopicNotExist:
			errs = append(errs, fmt.Errorf("name server %s: %w: %s", ns, ErrNoRoute, resp.Remark))
			continue
		case resp.Code != remoting.Success:
			errs = append(errs, fmt.Errorf("name server %s: code %d: %s", ns, resp.Code, resp.Remark))
			continue
		}
		var r remoting.TopicRouteData
		if err := json.Unmarshal(resp.Body, &r); err != nil {
			errs = append(errs, fmt.Errorf("name server %s: route of %s: %w", ns, topic, err))
			continue
		}
		sets := make([]RouteSet, 0, len(r.QueueDatas))
		for _, q := range r.QueueDatas {
			rs := RouteSet{Name: q.BrokerName, ReadQueues: q.ReadQueueNums, WriteQueues: q.WriteQueueNums,
				Readable: q.Perm&remoting.PermRead != 0, Writable: q.Perm&remoting.PermWrite != 0}
			for _, bd := range r.BrokerDatas {
				if bd.BrokerName == q.BrokerName {
					rs.Master, rs.MasterGRPC = bd.BrokerAddrs[0], bd.GRPCAddrs[0]
				}
			}
			sets = append(sets, rs)
		}
		return sets, nil
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%w: no name server to ask", ErrNoRoute)
	}
	return nil, errors.Join(errs...)
}

// ErrNoRoute: the name servers know no broker serving the topic, or
// there are none to ask.
var ErrNoRoute = errors.New("broker: no route for the topic")
