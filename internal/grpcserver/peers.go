package grpcserver

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/ratelog"
)

// A topic may span several broker sets (`broker admin topics create
// --cluster`), but a RocketMQ 5 client asks one endpoint for its routes.
// So QueryRoute and QueryAssignment add to this set's queues those of the
// other sets, each named with the gRPC endpoint its master registered
// with the name servers (broker.View.NameServerRoute). The client then
// sends, receives and acknowledges at each set's own endpoint, as it does
// behind Apache's proxies, and each set checks access itself.
//
// The sets are asked of the name servers at most once per topic every
// peerTTL; the answer, or the failure, is kept that long, for at most
// maxPeerTopics topics. A set that registered no gRPC endpoint (one with
// the gRPC port off, or a name server of Apache's, which keeps none) or
// has no master is left out: its replicas would refuse POP.

const (
	// peerTTL is how long a topic's other sets are kept.
	peerTTL = 5 * time.Second
	// maxPeerTopics bounds the topics kept.
	maxPeerTopics = 4096
	// peerLookupTimeout bounds one lookup at the name servers.
	peerLookupTimeout = time.Second
)

// peerSet is one other broker set's part of a topic.
type peerSet struct {
	name     string // broker (set) name
	endpoint string // its master's gRPC address
	read     int
	write    int
	readable bool
	writable bool
}

// peerEntry is a topic's other sets as of at; done is closed once they
// are known, so concurrent lookups of a topic share one.
type peerEntry struct {
	sets []peerSet
	at   time.Time
	done chan struct{}
}

// peerCache keeps the other sets of recently routed topics.
type peerCache struct {
	self   string // this set's name, left out of the answers
	lookup func(ctx context.Context, topic string) ([]broker.RouteSet, error)
	now    func() time.Time
	warn   *ratelog.Log

	mu     sync.Mutex
	topics map[string]*peerEntry
}

func newPeerCache(b *broker.Broker, self string, now func() time.Time, log *slog.Logger) *peerCache {
	return &peerCache{
		self: self, lookup: b.View().NameServerRoute, now: now,
		warn:   ratelog.New(log, time.Minute),
		topics: make(map[string]*peerEntry),
	}
}

// sets returns topic's other broker sets, from the cache or the name
// servers. A failed lookup gives none: the client still gets this set's
// queues.
func (c *peerCache) sets(ctx context.Context, topic string) []peerSet {
	now := c.now()
	c.mu.Lock()
	e := c.topics[topic]
	if e != nil && (!isClosed(e.done) || now.Sub(e.at) < peerTTL) {
		c.mu.Unlock()
		select {
		case <-e.done:
			return e.sets
		case <-ctx.Done():
			return nil
		}
	}
	if len(c.topics) >= maxPeerTopics {
		c.pruneLocked(now)
	}
	e = &peerEntry{at: now, done: make(chan struct{})}
	c.topics[topic] = e
	c.mu.Unlock()

	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), peerLookupTimeout)
	defer cancel()
	r, err := c.lookup(lctx, topic)
	if err != nil {
		// A topic the name servers do not know yet (this broker
		// registers a new one as it creates it) has no other sets.
		if !errors.Is(err, broker.ErrNoRoute) {
			c.warn.Warn("peers", "grpc: routes of the other broker sets unavailable; answering this set's queues only", "topic", topic, "err", err)
		}
	} else {
		e.sets = c.fromRoute(r)
	}
	close(e.done)
	return e.sets
}

// fromRoute picks the other sets with a master's gRPC endpoint out of a
// name server's route.
func (c *peerCache) fromRoute(sets []broker.RouteSet) []peerSet {
	var out []peerSet
	for _, rs := range sets {
		if rs.Name == c.self || rs.Master == "" || rs.MasterGRPC == "" {
			continue
		}
		out = append(out, peerSet{name: rs.Name, endpoint: rs.MasterGRPC, read: rs.ReadQueues, write: rs.WriteQueues, readable: rs.Readable, writable: rs.Writable})
	}
	return out
}

// pruneLocked drops the entries past their time; if none is, it drops
// them all, so the map stays bounded whatever the topics asked.
func (c *peerCache) pruneLocked(now time.Time) {
	for t, e := range c.topics {
		if now.Sub(e.at) >= peerTTL && isClosed(e.done) {
			delete(c.topics, t)
		}
	}
	if len(c.topics) >= maxPeerTopics {
		for t, e := range c.topics {
			if isClosed(e.done) {
				delete(c.topics, t)
			}
		}
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
