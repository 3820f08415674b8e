package client

import (
	"errors"
	"slices"
)

// averagely is a stand-in until the shared strategies land.
type averagely struct{}

func defaultStrategy() AllocateStrategy { return averagely{} }

func (averagely) Name() string { return "AVG" }

func (averagely) Allocate(group, clientID string, clients []string, queues []MessageQueue) ([]MessageQueue, error) {
	cs := slices.Clone(clients)
	slices.Sort(cs)
	cs = slices.Compact(cs)
	idx := slices.Index(cs, clientID)
	if idx < 0 {
		return nil, errors.New("client not in group")
	}
	qs := slices.Clone(queues)
	slices.SortFunc(qs, func(a, b MessageQueue) int {
		if a.less(b) {
			return -1
		}
		if b.less(a) {
			return 1
		}
		return 0
	})
	n, q := len(cs), len(qs)
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
	var out []MessageQueue
	for i := 0; i < size && start+i < q; i++ {
		out = append(out, qs[start+i])
	}
	return out, nil
}
