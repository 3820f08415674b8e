package client

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rmq-go/rmq/core/remoting"
)

// topicRoute is a topic's route as this client uses it.
type topicRoute struct {
	topic string
	data  *remoting.TopicRouteData
	// writeQueues are the queues a producer may send to: the writable
	// queues of brokers with a master, in broker-name order.
	writeQueues []MessageQueue
	// readQueues are the queues a consumer may read: the readable queues
	// of every broker, in broker-name order.
	readQueues []MessageQueue
}

// maxRouteQueues bounds the queues one broker may list for a topic in a
// route, as brokers bound them (1024), so a corrupt or hostile route cannot
// make the client allocate without bound.
const maxRouteQueues = 1024

// newTopicRoute derives the queue lists of a route.
func newTopicRoute(topic string, rd *remoting.TopicRouteData) *topicRoute {
	r := &topicRoute{topic: topic, data: rd}
	masters := map[string]bool{}
	for _, bd := range rd.BrokerDatas {
		if _, ok := bd.BrokerAddrs[0]; ok {
			masters[bd.BrokerName] = true
		}
	}
	qds := slices.Clone(rd.QueueDatas)
	slices.SortFunc(qds, func(a, b remoting.QueueData) int {
		switch {
		case a.BrokerName < b.BrokerName:
			return -1
		case a.BrokerName > b.BrokerName:
			return 1
		}
		return 0
	})
	for _, qd := range qds {
		if qd.Perm&remoting.PermWrite != 0 && masters[qd.BrokerName] {
			for i := range min(qd.WriteQueueNums, maxRouteQueues) {
				r.writeQueues = append(r.writeQueues, MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueID: int32(i)})
			}
		}
		if qd.Perm&remoting.PermRead != 0 {
			for i := range min(qd.ReadQueueNums, maxRouteQueues) {
				r.readQueues = append(r.readQueues, MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueID: int32(i)})
			}
		}
	}
	return r
}

// route returns topic's route, fetching it when it is not known yet.
func (in *instance) route(ctx context.Context, topic string) (*topicRoute, error) {
	in.mu.Lock()
	r := in.mu.routes[topic]
	in.mu.Unlock()
	if r != nil {
		return r, nil
	}
	return in.updateRoute(ctx, topic)
}

// cachedRoute returns topic's route if it is known.
func (in *instance) cachedRoute(topic string) *topicRoute {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.mu.routes[topic]
}

// updateRoute fetches topic's route from the name servers, trying each in
// turn, and records it and its brokers' addresses.
func (in *instance) updateRoute(ctx context.Context, topic string) (*topicRoute, error) {
	rd, err := in.fetchRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	return in.storeRoute(topic, rd), nil
}

// storeRoute records rd as topic's route, and its brokers' addresses.
func (in *instance) storeRoute(topic string, rd *remoting.TopicRouteData) *topicRoute {
	r := newTopicRoute(topic, rd)
	in.mu.Lock()
	in.mu.routes[topic] = r
	for _, bd := range rd.BrokerDatas {
		ids := make(map[int64]string, len(bd.BrokerAddrs))
		for id, addr := range bd.BrokerAddrs {
			ids[id] = addr
		}
		in.mu.brokers[bd.BrokerName] = ids
	}
	in.mu.Unlock()
	return r
}

// fetchRoute asks the name servers for topic's route, starting with the
// one that answered last and moving on when one fails.
func (in *instance) fetchRoute(ctx context.Context, topic string) (*remoting.TopicRouteData, error) {
	in.mu.Lock()
	start := in.mu.nsIndex
	in.mu.Unlock()
	ns := in.opts.NameServers
	var lastErr error
	for i := range ns {
		idx := (start + i) % len(ns)
		req := remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
		resp, err := in.invoke(ctx, ns[idx], req)
		if err != nil {
			lastErr = fmt.Errorf("name server %s: %w", ns[idx], err)
			continue
		}
		in.mu.Lock()
		in.mu.nsIndex = idx
		in.mu.Unlock()
		switch resp.Code {
		case remoting.Success:
		case remoting.TopicNotExist:
			return nil, fmt.Errorf("%w: %s", ErrTopicNotExist, topic)
		default:
			return nil, fmt.Errorf("name server %s: %w", ns[idx], brokerError(resp))
		}
		rd, err := decodeRouteData(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("name server %s: route of %s: %w", ns[idx], topic, err)
		}
		return rd, nil
	}
	return nil, fmt.Errorf("client: no name server answered for %s: %w", topic, lastErr)
}

// masterAddr returns the address of brokerName's master.
func (in *instance) masterAddr(brokerName string) (string, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	addr, ok := in.mu.brokers[brokerName][0]
	return addr, ok
}

// masterAddrFor returns the address of brokerName's master, refreshing
// topic's route once when it is not known.
func (in *instance) masterAddrFor(ctx context.Context, brokerName, topic string) (string, error) {
	if addr, ok := in.masterAddr(brokerName); ok {
		return addr, nil
	}
	if _, err := in.updateRoute(ctx, topic); err != nil && !errors.Is(err, ErrTopicNotExist) {
		return "", err
	}
	if addr, ok := in.masterAddr(brokerName); ok {
		return addr, nil
	}
	return "", fmt.Errorf("%w: no master of %s", ErrBrokerNotFound, brokerName)
}

// brokerAddr returns the master of brokerName, else any of its members.
func (in *instance) brokerAddr(brokerName string) (string, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	ids := in.mu.brokers[brokerName]
	if addr, ok := ids[0]; ok {
		return addr, true
	}
	best := int64(-1)
	for id := range ids {
		if best < 0 || id < best {
			best = id
		}
	}
	if best < 0 {
		return "", false
	}
	return ids[best], true
}

// brokerAddrFor returns an address for brokerName, refreshing topic's
// route once when the broker is not known.
func (in *instance) brokerAddrFor(ctx context.Context, brokerName, topic string) (string, error) {
	if addr, ok := in.brokerAddr(brokerName); ok {
		return addr, nil
	}
	if topic != "" {
		if _, err := in.updateRoute(ctx, topic); err != nil {
			return "", err
		}
		if addr, ok := in.brokerAddr(brokerName); ok {
			return addr, nil
		}
	}
	return "", fmt.Errorf("%w: %s", ErrBrokerNotFound, brokerName)
}
