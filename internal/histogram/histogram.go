package histogram

import (
	"slices"
	"sync/atomic"
	"time"
)

// Histogram counts observations in buckets with fixed upper bounds. The
// zero value is not usable: build one with New. Its methods are safe for
// concurrent use.
type Histogram struct {
	bounds []int64 // inclusive upper bounds, ascending
	counts []atomic.Uint64
	sum    atomic.Int64
}

// New returns a histogram with the given inclusive upper bounds, which
// must ascend; a last bucket above them counts the rest.
func New(bounds ...int64) *Histogram {
	if !slices.IsSorted(bounds) {
		panic("histogram: bounds must ascend")
	}
	return &Histogram{bounds: slices.Clone(bounds), counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Durations are the bounds of a latency histogram, in nanoseconds: 50 µs
// to 10 s in steps of about 2.5×.
var Durations = []int64{
	int64(50 * time.Microsecond), int64(100 * time.Microsecond), int64(250 * time.Microsecond), int64(500 * time.Microsecond),
	int64(time.Millisecond), int64(2500 * time.Microsecond), int64(5 * time.Millisecond), int64(10 * time.Millisecond),
	int64(25 * time.Millisecond), int64(50 * time.Millisecond), int64(100 * time.Millisecond), int64(250 * time.Millisecond),
	int64(500 * time.Millisecond), int64(time.Second), int64(2500 * time.Millisecond), int64(5 * time.Second), int64(10 * time.Second),
}

// Powers returns the bounds 1, f, f², … up to and including max.
func Powers(f, max int64) []int64 {
	var out []int64
	for v := int64(1); v <= max; v *= f {
		out = append(out, v)
	}
	return out
}

// Observe counts v.
func (h *Histogram) Observe(v int64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	h.counts[i].Add(1)
	h.sum.Add(v)
}

// Since counts the time elapsed since start, in nanoseconds.
func (h *Histogram) Since(start time.Time) { h.Observe(int64(time.Since(start))) }

// Snapshot is a histogram's state at one moment.
type Snapshot struct {
	Bounds []int64  // the histogram's upper bounds (shared: do not modify)
	Counts []uint64 // per bucket, not cumulative; one more than Bounds
	Count  uint64   // the sum of Counts
	Sum    int64    // the sum of the values observed
}

// Snapshot reads the counts into s, reusing its slice.
func (h *Histogram) Snapshot(s *Snapshot) {
	s.Bounds = h.bounds
	s.Counts = slices.Grow(s.Counts[:0], len(h.counts))[:len(h.counts)]
	s.Count = 0
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
		s.Count += s.Counts[i]
	}
	// Read after the counts: a concurrent Observe may show in the sum and
	// not yet in a count, never the other way round by more than it.
	s.Sum = h.sum.Load()
}
