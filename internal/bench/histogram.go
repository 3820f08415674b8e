package bench

import (
	"math"
	"math/bits"
	"time"
)

// Histogram layout: values below 2^(subBits+1) nanoseconds have a bucket
// each; above that, every power-of-two range [2^k, 2^(k+1)) is cut into
// 2^subBits buckets of equal width 2^(k-subBits).
const (
	subBits  = 7
	subCount = 1 << subBits
	// MaxTrackable is the largest latency a Histogram tells apart, about
	// 137 s. Longer ones are counted in the last bucket; Max stays exact.
	MaxTrackable = time.Duration(1<<37 - 1)
	numBuckets   = (37-subBits-1)*subCount + 2*subCount
)

// Histogram counts durations in log-linear buckets, after HdrHistogram: a
// percentile is known to within 1/128 (0.8 %) of its true value, below 256 ns
// exactly, and the memory is fixed (about 31 KiB) however many values are
// recorded. The zero value is empty and ready to use. A Histogram is not
// safe for concurrent use.
type Histogram struct {
	counts [numBuckets]uint64
	total  uint64
	max    time.Duration
}

// bucketOf returns the bucket index of d, clamped to [0, MaxTrackable].
func bucketOf(d time.Duration) int {
	v := uint64(max(min(d, MaxTrackable), 0))
	if v < subCount {
		return int(v)
	}
	shift := bits.Len64(v) - subBits - 1
	return shift*subCount + int(v>>shift)
}

// bucketTop returns the largest value that falls in bucket i.
func bucketTop(i int) time.Duration {
	if i < subCount {
		return time.Duration(i)
	}
	shift := i/subCount - 1
	m := i - shift*subCount
	return time.Duration(m+1)<<shift - 1
}

// Record adds one value. Negative values count as zero.
func (h *Histogram) Record(d time.Duration) {
	h.counts[bucketOf(d)]++
	h.total++
	if d > h.max {
		h.max = d
	}
}

// Merge adds every value recorded in o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.max = max(h.max, o.max)
}

// Reset empties h.
func (h *Histogram) Reset() { *h = Histogram{} }

// Count returns the number of values recorded.
func (h *Histogram) Count() uint64 { return h.total }

// Max returns the largest value recorded, exactly, or 0 when empty.
func (h *Histogram) Max() time.Duration { return h.max }

// Quantile returns the value at quantile q (0.99 for p99): the smallest
// recorded value that at least q of all values do not exceed, reported as
// the top of its bucket but never above Max. It returns 0 when h is empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = min(max(rank, 1), h.total)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(bucketTop(i), h.max)
		}
	}
	return h.max
}
