package wasm

import (
	"context"
	"slices"

	"github.com/rmq-go/rmq/sdk/abi"
)

// Queue is one message queue offered to an allocation strategy.
type Queue struct {
	Topic      string
	BrokerName string
	QueueID    int32
}

// AllocateRequest is the input of an allocation strategy.
type AllocateRequest struct {
	Group    string   // consumer group
	ClientID string   // the client whose queues are wanted
	Clients  []string // every client of the group, sorted
	Queues   []Queue  // every queue of the topic, in the broker's order
}

// Allocate runs the plugin's allocation strategy and returns the indices
// into req.Queues assigned to req.ClientID, in the plugin's order. The
// indices are checked: each is in range and appears once. On error the
// caller keeps the previous assignment.
func (p *Plugin) Allocate(ctx context.Context, req AllocateRequest) ([]int, error) {
	if p.kind != KindAllocate {
		return nil, &Error{Plugin: p.name, Op: "allocate", Err: wrapf(ErrKind, "plugin is a %s plugin", p.kind)}
	}
	areq := abi.AllocateRequest{Group: req.Group, ClientID: req.ClientID, Clients: req.Clients,
		Queues: make([]abi.Queue, len(req.Queues))}
	for i, q := range req.Queues {
		areq.Queues[i] = abi.Queue(q)
	}
	in, err := abi.AppendAllocateRequest(nil, &areq)
	if err == nil && len(in) > abi.MaxAllocateLen {
		err = wrapf(ErrOptions, "allocate input of %d bytes is over %d", len(in), abi.MaxAllocateLen)
	}
	if err != nil {
		return nil, &Error{Plugin: p.name, Op: "allocate", Err: wrapf(ErrOptions, "request: %v", err)}
	}
	var idx []int
	err = p.run(ctx, "allocate", func(g *generation, inst *instance) (int, error) {
		if err := inst.ensureBuffer(ctx, uint32(len(in))); err != nil {
			return 0, err
		}
		copy(inst.view(0, uint32(len(in))), in)
		out, err := inst.allocate(ctx, uint32(len(in)), len(req.Queues))
		if err != nil {
			return 0, err
		}
		idx = make([]int, len(out)/4)
		seen := make([]bool, len(req.Queues))
		for i := range idx {
			v := abi.ReadIndex(out, i)
			if uint64(v) >= uint64(len(req.Queues)) || seen[v] {
				return 0, wrapf(ErrOutput, "broker_allocate returned index %d (of %d queues) out of range or twice", v, len(req.Queues))
			}
			seen[v] = true
			idx[i] = int(v)
		}
		return len(req.Queues), nil
	})
	if err != nil {
		return nil, err
	}
	return idx, nil
}

// AllocateQueues is Allocate returning the queues instead of their indices.
func (p *Plugin) AllocateQueues(ctx context.Context, req AllocateRequest) ([]Queue, error) {
	idx, err := p.Allocate(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make([]Queue, len(idx))
	for i, j := range idx {
		out[i] = req.Queues[j]
	}
	return slices.Clip(out), nil
}
