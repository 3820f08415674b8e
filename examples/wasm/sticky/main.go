package main

import (
	"errors"
	"slices"
	"strconv"

	"github.com/rmq-go/rmq/sdk"
)

// FNV-1a, 64 bits.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnv(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// mix is SplitMix64's finalizer: it spreads FNV's weak low bits.
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

// queueKey hashes a queue's identity.
func queueKey(q sdk.Queue) uint64 {
	h := fnv(fnvOffset, q.Topic)
	h = fnv(h^0xff, q.BrokerName)
	return fnv(h^0xfe, strconv.Itoa(int(q.QueueID)))
}

// weight ranks client c for a queue: the higher, the more the queue wants c.
func weight(queue uint64, client string) uint64 { return mix(fnv(queue, client)) }

// allocate places every queue and returns the current client's.
func allocate(req *sdk.AllocateRequest) ([]int, error) {
	me := slices.Index(req.Clients, req.ClientID)
	if me < 0 {
		return nil, errors.New("client " + req.ClientID + " is not in the group")
	}
	n, q := len(req.Clients), len(req.Queues)
	if q == 0 {
		return nil, nil
	}
	share := (q + n - 1) / n
	keys := make([]uint64, q)
	order := make([]int, q)
	for i := range req.Queues {
		keys[i], order[i] = queueKey(req.Queues[i]), i
	}
	// Place queues in an order of their own, not the broker's list order.
	slices.SortFunc(order, func(a, b int) int {
		if keys[a] != keys[b] {
			if keys[a] < keys[b] {
				return -1
			}
			return 1
		}
		return a - b
	})
	load := make([]int, n)
	var mine []int
	for _, qi := range order {
		best, bestW := -1, uint64(0)
		for ci, c := range req.Clients {
			if load[ci] >= share {
				continue
			}
			if w := weight(keys[qi], c); best < 0 || w > bestW || (w == bestW && c < req.Clients[best]) {
				best, bestW = ci, w
			}
		}
		load[best]++
		if best == me {
			mine = append(mine, qi)
		}
	}
	slices.Sort(mine)
	return mine, nil
}

func init() {
	sdk.RegisterAllocator(sdk.AllocatorFunc(allocate))
	sdk.SetVersion("1.0.0")
	queues := make([]sdk.Queue, 4)
	for i := range queues {
		queues[i] = sdk.Queue{Topic: "t", BrokerName: "b", QueueID: int32(i)}
	}
	// Pinned results: a change to the hashing shows up as a failed canary
	// instead of a silent reshuffle of every group.
	sdk.AddAllocateTest(sdk.AllocateTest{
		Request: sdk.AllocateRequest{Group: "g", ClientID: "c1", Clients: []string{"c1", "c2"}, Queues: queues},
		Want:    pinnedC1,
	})
}

func main() {}
