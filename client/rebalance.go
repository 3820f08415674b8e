package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// AllocateStrategy assigns a consumer group's queues of one topic to its
// members. Every member runs it with the same inputs, so every member
// must get the same answer for the same inputs whatever their order, and
// (for the partitioning strategies) each queue must go to exactly one
// member.
type AllocateStrategy interface {
	// Name is the strategy's RocketMQ name (AVG, AVG_BY_CIRCLE, ...); it
	// is also sent to brokers that assign queues.
	Name() string
	// Allocate returns clientID's queues.
	Allocate(group, clientID string, clients []string, queues []MessageQueue) ([]MessageQueue, error)
}

// queueTable is the consumer side of a rebalance: the queues a consumer
// holds, and how it takes up and gives up one.
type queueTable interface {
	// held returns the queues of topic the consumer holds.
	held(topic string) []MessageQueue
	// add takes up q; an error leaves it for the next rebalance.
	add(q MessageQueue) error
	// drop gives up q; false leaves it held for the next rebalance (an
	// orderly queue whose handler is still running).
	drop(q MessageQueue) bool
}

// errShutDown is returned by a queue table that is shutting down.
var errShutDown = errors.New("client: consumer shut down")

// rebalancer runs a consumer's rebalance: for every subscribed topic it
// works out the queues this client should hold, under the broker's
// assignment when the broker offers one and the client's strategy
// otherwise, and makes the queue table match.
type rebalancer struct {
	c     *consumerCore
	table queueTable
	// brokerAssigns is cleared when a broker answers that it does not
	// serve QUERY_ASSIGNMENT; the client then allocates by itself.
	brokerAssigns atomic.Bool
	// rounds counts finished rebalances, for tests.
	rounds atomic.Int64
	// failures counts the rebalances in a row that left a topic unsettled;
	// retryPending is set while a retry is scheduled.
	failures     atomic.Int64
	retryPending atomic.Bool
}

// rebalanceRetry is how soon a rebalance that could not settle a topic
// (a broker that did not answer, an offset that could not be read) runs
// again; it doubles with each failure in a row, up to rebalanceRetryMax
// (and never past RebalanceInterval). Waiting for the next periodic
// rebalance would leave a queue unread for up to 20 s after a broker
// restart that interrupted one; a longer backoff would too, since every
// rebalance tried while the broker is down counts as a failure. The cap
// is the pace at which RocketMQ's clients retry a failed pull.
const (
	rebalanceRetry    = time.Second
	rebalanceRetryMax = 2 * time.Second
)

// retryDelay is the wait before the retry that follows the nth failure in
// a row, for a client whose periodic rebalance runs every interval.
func retryDelay(n int64, interval time.Duration) time.Duration {
	d := min(rebalanceRetry<<min(max(n-1, 0), 10), rebalanceRetryMax)
	if interval > 0 && d > interval {
		d = interval
	}
	return d
}

func newRebalancer(c *consumerCore, t queueTable) *rebalancer {
	r := &rebalancer{c: c, table: t}
	r.brokerAssigns.Store(!c.opts.ClientAllocation)
	return r
}

// run rebalances every subscribed topic. A topic whose assignment cannot
// be worked out keeps what it holds.
func (r *rebalancer) run() {
	failed := false
	for _, s := range r.c.subscriptions() {
		if err := r.topic(s.topic); err != nil && !errors.Is(err, errShutDown) {
			failed = true
			r.c.in.log.Warn("rebalance failed; keeping the current queues and trying again", "group", r.c.opts.Group, "topic", s.topic, "err", err)
		}
	}
	if failed {
		r.retryLater()
	} else {
		r.failures.Store(0)
	}
	r.rounds.Add(1)
}

// retryLater asks for another rebalance after retryDelay, preceded by a
// heartbeat, unless one is already scheduled.
func (r *rebalancer) retryLater() {
	n := r.failures.Add(1)
	if !r.retryPending.CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(retryDelay(n, r.c.opts.RebalanceInterval), func() {
		r.retryPending.Store(false)
		select {
		case <-r.c.quit:
			return
		default:
		}
		// A rebalance fails mostly because a broker went away. One that
		// restarted learns this client again only from a heartbeat, and
		// until then assigns it no queue, so heartbeat first.
		_ = r.c.in.heartbeat()
		r.c.rebalanceSoon()
	})
}

// topic rebalances one topic.
func (r *rebalancer) topic(topic string) error {
	target, err := r.assignment(topic)
	if err != nil {
		return err
	}
	want := make(map[MessageQueue]bool, len(target))
	for _, q := range target {
		want[q] = true
	}
	held := r.table.held(topic)
	for _, q := range held {
		if !want[q] {
			r.table.drop(q)
		}
	}
	var errs []error
	for _, q := range target {
		if !slices.Contains(held, q) {
			if err := r.table.add(q); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", q, err))
			}
		}
	}
	return errors.Join(errs...)
}

// assignment returns the queues of topic this client should hold.
func (r *rebalancer) assignment(topic string) ([]MessageQueue, error) {
	in, group := r.c.in, r.c.opts.Group
	ctx, cancel := in.ctx()
	defer cancel()
	route := in.cachedRoute(topic)
	if route == nil {
		var err error
		if route, err = in.updateRoute(ctx, topic); err != nil {
			return nil, err
		}
	}
	if r.c.opts.Model == Broadcasting {
		return route.readQueues, nil
	}
	if r.brokerAssigns.Load() {
		qs, err := in.queryAssignment(ctx, group, topic, r.c.opts.Strategy.Name(), r.c.opts.Model.String())
		switch {
		case err == nil:
			return qs, nil
		case errors.Is(err, errNoAssignment):
			in.log.Info("the broker does not assign queues; allocating in the client", "group", group, "strategy", r.c.opts.Strategy.Name())
			r.brokerAssigns.Store(false)
		default:
			return nil, err
		}
	}
	ids, err := in.consumerIDs(ctx, group, topic)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("the broker lists no consumer of group %s yet", group)
	}
	return r.c.opts.Strategy.Allocate(group, in.id, ids, route.readQueues)
}

// heldQueues lists every queue a table holds for the given topics.
func heldQueues(t queueTable, topics []string) []MessageQueue {
	var out []MessageQueue
	for _, topic := range topics {
		out = append(out, t.held(topic)...)
	}
	return out
}

// withTimeout is context.WithTimeout from the background, bounded by the
// instance's request timeout.
func (c *consumerCore) reqCtx() (context.Context, context.CancelFunc) { return c.in.ctx() }
