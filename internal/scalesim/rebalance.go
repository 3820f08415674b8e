package scalesim

import (
	"fmt"
	"time"

	"github.com/rmq-go/rmq/core/allocate"
	"github.com/rmq-go/rmq/internal/cputime"
)

// Rebalance is what one consumer group's rebalance of one topic costs,
// under one strategy.
type Rebalance struct {
	Strategy  string
	Queues    int // the topic's queues over all sets
	Consumers int
	// AllocateCPU is one Allocate call: what each consumer spends on the
	// topic at every rebalance. Each consumer computes its own share, so
	// this is also the time one rebalance takes on one client.
	AllocateCPU time.Duration
	// MovedOnJoin and MovedOnLeave are the queues that change owner when
	// one consumer joins or leaves a group of Consumers. The one that
	// joins or leaves sorts in the middle of the client ids.
	MovedOnJoin, MovedOnLeave int
}

// ClientID is consumer i's client id.
func ClientID(i int) string { return fmt.Sprintf("c-%04d", i) }

// RebalanceQueues is one topic's queues on sets sets of perSet queues.
func RebalanceQueues(sets, perSet int) []allocate.Queue {
	qs := make([]allocate.Queue, 0, sets*perSet)
	for s := range sets {
		for q := range perSet {
			qs = append(qs, allocate.Queue{Topic: "topic", BrokerName: SetName(s), QueueID: int32(q)})
		}
	}
	return qs
}

// RunRebalance measures s over sets × perSet queues and consumers
// clients. Allocate is called, by each client in turn, until the calls
// have taken budget of CPU, and at least five times.
func RunRebalance(s allocate.Strategy, sets, perSet, consumers int, budget time.Duration) (Rebalance, error) {
	qs := RebalanceQueues(sets, perSet)
	r := Rebalance{Strategy: s.Name(), Queues: len(qs), Consumers: consumers}
	clients := make([]string, consumers)
	for i := range clients {
		clients[i] = ClientID(i)
	}
	cpu0 := cputime.Process()
	calls := 0
	for ; calls < 5 || cputime.Process()-cpu0 < budget; calls++ {
		if _, err := s.Allocate("group", clients[calls%consumers], clients, qs); err != nil {
			return r, err
		}
	}
	r.AllocateCPU = (cputime.Process() - cpu0) / time.Duration(calls)

	mid := ClientID(consumers / 2)
	joined := append(clients[:len(clients):len(clients)], mid+"-new") // sorts right after mid
	var left []string
	for _, c := range clients {
		if c != mid {
			left = append(left, c)
		}
	}
	var err error
	if r.MovedOnJoin, err = Moved(s, clients, joined, qs); err != nil {
		return r, err
	}
	if r.MovedOnLeave, err = Moved(s, clients, left, qs); err != nil {
		return r, err
	}
	return r, nil
}

// Moved counts the queues whose owner differs between the allocation to
// before and the one to after. A queue no client owns counts as owned by
// nobody.
//
// Under CONSISTENT_HASH a change of one client moves only the queues that
// client gains or loses, so Moved asks that client alone instead of
// computing both allocations in full (each client's call rebuilds the
// whole ring); MovedFull checks the two agree.
func Moved(s allocate.Strategy, before, after []string, qs []allocate.Queue) (int, error) {
	if s.Name() == allocate.NameConsistentHash {
		if c, ok := oneChange(before, after); ok {
			clients := after
			if len(before) > len(after) {
				clients = before
			}
			mine, err := s.Allocate("group", c, clients, qs)
			return len(mine), err
		}
	}
	return MovedFull(s, before, after, qs)
}

// MovedFull is Moved computed from both allocations in full.
func MovedFull(s allocate.Strategy, before, after []string, qs []allocate.Queue) (int, error) {
	b, err := owners(s, before, qs)
	if err != nil {
		return 0, err
	}
	a, err := owners(s, after, qs)
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, q := range qs {
		if a[q] != b[q] {
			moved++
		}
	}
	return moved, nil
}

// owners maps each queue to the client that s gives it to.
func owners(s allocate.Strategy, clients []string, qs []allocate.Queue) (map[allocate.Queue]string, error) {
	own := make(map[allocate.Queue]string, len(qs))
	for _, c := range clients {
		mine, err := s.Allocate("group", c, clients, qs)
		if err != nil {
			return nil, err
		}
		for _, q := range mine {
			own[q] = c
		}
	}
	return own, nil
}

// oneChange returns the client in exactly one of a and b, when the two
// differ by exactly one client.
func oneChange(a, b []string) (string, bool) {
	if len(a) < len(b) {
		a, b = b, a
	}
	if len(a) != len(b)+1 {
		return "", false
	}
	in := make(map[string]bool, len(b))
	for _, c := range b {
		in[c] = true
	}
	var extra []string
	for _, c := range a {
		if !in[c] {
			extra = append(extra, c)
		}
	}
	if len(extra) != 1 {
		return "", false
	}
	return extra[0], true
}
