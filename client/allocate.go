package client

import (
	"github.com/rmq-go/rmq/core/allocate"
)

// Strategy adapts one of core/allocate's strategies (the ones the broker
// uses for QUERY_ASSIGNMENT too) to an AllocateStrategy:
//
//	opts.Strategy = client.Strategy(allocate.ByCircle)
//	opts.Strategy = client.Strategy(allocate.ConsistentHash(0))
func Strategy(s allocate.Strategy) AllocateStrategy { return sharedStrategy{s} }

// StrategyByName returns the built-in strategy of that RocketMQ name (AVG,
// AVG_BY_CIRCLE, CONSISTENT_HASH; any case).
func StrategyByName(name string) (AllocateStrategy, bool) {
	s, ok := allocate.ByName(name)
	if !ok {
		return nil, false
	}
	return Strategy(s), true
}

// defaultStrategy is AVG, RocketMQ's default.
func defaultStrategy() AllocateStrategy { return Strategy(allocate.Averagely) }

// sharedStrategy runs a core/allocate strategy over MessageQueues.
type sharedStrategy struct{ s allocate.Strategy }

func (a sharedStrategy) Name() string { return a.s.Name() }

func (a sharedStrategy) Allocate(group, clientID string, clients []string, queues []MessageQueue) ([]MessageQueue, error) {
	qs := make([]allocate.Queue, len(queues))
	for i, q := range queues {
		qs[i] = allocate.Queue(q)
	}
	got, err := a.s.Allocate(group, clientID, clients, qs)
	if err != nil {
		return nil, err
	}
	out := make([]MessageQueue, len(got))
	for i, q := range got {
		out[i] = MessageQueue(q)
	}
	return out, nil
}
