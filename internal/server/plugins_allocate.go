package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// assignKey names one client's assignment of one topic.
type assignKey struct{ group, topic, clientID string }

// maxRemembered bounds the assignments kept for failing allocators.
const maxRemembered = 4096

// AllocateArgs are the arguments of the allocate admin command.
type AllocateArgs struct {
	Group    string `json:"group"`
	Topic    string `json:"topic"`
	ClientID string `json:"clientId"`
}

// AllocateResult is the answer of the allocate admin command.
type AllocateResult struct {
	Group    string         `json:"group"`
	Topic    string         `json:"topic"`
	ClientID string         `json:"clientId"`
	Strategy string         `json:"strategy"` // "averagely" or "plugin <name>"
	Clients  []string       `json:"clients"`  // the group's live consumers, sorted
	Queues   []broker.Queue `json:"queues"`   // assigned to ClientID
	// Error is set when the strategy failed: Queues is then the client's
	// previous assignment, which a failing allocator keeps.
	Error string `json:"error,omitempty"`
}

// allocator returns the strategy of a consumer group and its name.
func (h *pluginHost) allocator(group string) (broker.Allocator, string) {
	if p := byGroup(h.set.Load().allocate, group); p != nil {
		return pluginAllocator{p}, "plugin " + p.Name()
	}
	return averagely{}, "averagely"
}

func (h *pluginHost) handleAllocate(ctx context.Context, raw json.RawMessage) (any, error) {
	var a AllocateArgs
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("allocate: bad arguments: %w", err)
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"group", a.Group}, {"topic", a.Topic}, {"clientId", a.ClientID}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("allocate: %s required", strings.Join(missing, ", "))
	}
	tc, ok := h.b.Topics()[a.Topic]
	if !ok {
		return nil, fmt.Errorf("allocate: topic %s does not exist", a.Topic)
	}
	clients := h.b.ConsumerIDs(a.Group)
	if len(clients) == 0 {
		return nil, fmt.Errorf("allocate: consumer group %s has no live consumers", a.Group)
	}
	if !slices.Contains(clients, a.ClientID) {
		return nil, fmt.Errorf("allocate: %s is not a live consumer of group %s (its consumers: %s)", a.ClientID, a.Group, strings.Join(clients, ", "))
	}
	queues := make([]broker.Queue, tc.ReadQueueNums)
	for i := range queues {
		queues[i] = broker.Queue{Topic: a.Topic, BrokerName: h.brokerName, QueueID: int32(i)}
	}
	alloc, strategy := h.allocator(a.Group)
	res := AllocateResult{Group: a.Group, Topic: a.Topic, ClientID: a.ClientID, Strategy: strategy, Clients: clients, Queues: []broker.Queue{}}
	key := assignKey{a.Group, a.Topic, a.ClientID}
	idx, err := alloc.Allocate(ctx, a.Group, a.ClientID, clients, queues)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		prev, ok := h.mu.assigned[key]
		if !ok {
			return nil, fmt.Errorf("allocate: %s failed and %s has no previous assignment to keep: %w", strategy, a.ClientID, err)
		}
		res.Queues, res.Error = prev, err.Error()
		return res, nil
	}
	for _, i := range idx {
		res.Queues = append(res.Queues, queues[i])
	}
	if len(h.mu.assigned) >= maxRemembered {
		clear(h.mu.assigned)
	}
	h.mu.assigned[key] = res.Queues
	return res, nil
}

// pluginAllocator is a broker.Allocator backed by an allocate plugin.
type pluginAllocator struct{ p *wasm.Plugin }

// Allocate runs the plugin; its answer is checked by package wasm.
func (a pluginAllocator) Allocate(ctx context.Context, group, clientID string, clientIDs []string, queues []broker.Queue) ([]int, error) {
	qs := make([]wasm.Queue, len(queues))
	for i, q := range queues {
		qs[i] = wasm.Queue(q)
	}
	return a.p.Allocate(ctx, wasm.AllocateRequest{Group: group, ClientID: clientID, Clients: clientIDs, Queues: qs})
}

// averagely is RocketMQ's default strategy (AllocateMessageQueueAveragely):
// contiguous runs of queues, the first clients taking one more when the
// queues do not divide evenly.
type averagely struct{}

// Allocate assigns clientID its run of queues.
func (averagely) Allocate(_ context.Context, group, clientID string, clientIDs []string, queues []broker.Queue) ([]int, error) {
	idx := slices.Index(clientIDs, clientID)
	if idx < 0 {
		return nil, fmt.Errorf("%s is not a consumer of group %s", clientID, group)
	}
	n, q := len(clientIDs), len(queues)
	mod := q % n
	size := 1
	if q > n {
		size = q / n
		if mod > 0 && idx < mod {
			size++
		}
	}
	start := idx*size + mod
	if mod > 0 && idx < mod {
		start = idx * size
	}
	out := []int{}
	for i := 0; i < size && start+i < q; i++ {
		out = append(out, start+i)
	}
	return out, nil
}

// groupAllocator dispatches each call to the strategy configured for the
// call's group at that moment.
type groupAllocator struct{ h *pluginHost }

func (g groupAllocator) Allocate(ctx context.Context, group, clientID string, clientIDs []string, queues []broker.Queue) ([]int, error) {
	a, _ := g.h.allocator(group)
	return a.Allocate(ctx, group, clientID, clientIDs, queues)
}
