package sdk

import (
	"fmt"

	"github.com/rmq-go/rmq/sdk/abi"
)

// Queue is one message queue offered for allocation.
type Queue = abi.Queue

// AllocateRequest is what an allocation strategy decides over: the consumer
// group, the client asking, every client of the group (sorted) and every
// queue of the topic.
type AllocateRequest = abi.AllocateRequest

// Allocator is a queue-allocation strategy. Allocate returns the indices into
// req.Queues of the queues assigned to req.ClientID. Every client of a group
// runs the same strategy over the same input, so a strategy must be
// deterministic and its assignments disjoint. An error keeps the group's
// previous assignment.
type Allocator interface {
	Allocate(req *AllocateRequest) ([]int, error)
}

// AllocatorFunc adapts a function to Allocator.
type AllocatorFunc func(req *AllocateRequest) ([]int, error)

// Allocate calls f.
func (f AllocatorFunc) Allocate(req *AllocateRequest) ([]int, error) { return f(req) }

// runAllocate is broker_allocate. It returns the output indices' bytes (which
// stay in state.allocOut) or a status.
func runAllocate(in []byte) ([]byte, abi.Status) {
	if state.allocator == nil {
		return nil, fail(abi.StatusNotImplemented, "this module registers no allocator")
	}
	req, err := abi.ReadAllocateRequest(in)
	if err != nil {
		return nil, fail(abi.StatusBadInput, "allocate input does not parse")
	}
	idx, err := state.allocator.Allocate(&req)
	if err != nil {
		return nil, fail(abi.StatusFailed, err.Error())
	}
	out := state.allocOut[:0]
	for _, i := range idx {
		if i < 0 || i >= len(req.Queues) {
			return nil, fail(abi.StatusFailed, fmt.Sprintf("allocator returned index %d of %d queues", i, len(req.Queues)))
		}
		out = abi.AppendIndex(out, uint32(i))
	}
	state.allocOut = out
	return out, abi.StatusOK
}
