package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// AllocateArgs are the arguments of the allocate admin command.
type AllocateArgs struct {
	Group    string `json:"group"`
	Topic    string `json:"topic"`
	ClientID string `json:"clientId"`
}

// AllocateResult is the answer of the allocate admin command: the
// broker's assignment, chosen exactly as QUERY_ASSIGNMENT chooses it
// (Broker.Assign) for a client that names no strategy.
type AllocateResult = broker.Assignment

// groupAllocator is the broker's Options.GroupAllocator: the allocate
// plugin serving group at this moment, and whether it names the group.
func (h *pluginHost) groupAllocator(group string) (broker.Allocator, string, bool) {
	m := h.set.Load().allocate
	if p, ok := m[group]; ok {
		return pluginAllocator{p}, "plugin " + p.Name(), true
	}
	if p := m[""]; p != nil {
		return pluginAllocator{p}, "plugin " + p.Name(), false
	}
	return nil, "", false
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
	res, err := h.b.Assign(ctx, broker.AssignmentQuery{Group: a.Group, Topic: a.Topic, ClientID: a.ClientID})
	if err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}
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
