package wasm

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Stats describe a plugin for the broker's admin listing. Counters are
// cumulative over reloads.
type Stats struct {
	Name       string
	Kind       Kind
	Version    string // the plugin's own version label, from broker_info
	SHA256     string // the serving module's sha256, hex
	ABI        int    // the ABI major version the module speaks
	ABIMinor   int    // and its minor (0 for a module that does not say)
	Generation int    // 1 after Load, plus one per Reload
	SelfTests  int    // self-test vectors of its kind the serving module passed when loaded
	Instances  int    // live instances of the serving module
	Calls      uint64 // calls into the module (batches)
	Records    uint64 // records or half messages passed in those calls
	Errors     uint64 // failed calls, traps and timeouts included
	Traps      uint64
	Timeouts   uint64
	Rejected   uint64        // messages a transform refused
	P99        time.Duration // 99th percentile of one Match, Allocate, TxnCheck or Transform
	Disabled   bool          // MaxFailures traps or timeouts in a row
	LastError  string
}

// Histogram geometry: each power of two of nanoseconds is split into
// subBuckets buckets, so a percentile is known within about 19%.
const (
	subBits    = 2
	subBuckets = 1 << subBits
	numBuckets = 64 * subBuckets
)

// histogram counts durations in logarithmic buckets without locks.
type histogram struct {
	counts [numBuckets]atomic.Uint64
	sum    atomic.Int64 // ns
}

func bucketOf(ns uint64) int {
	if ns < subBuckets {
		return int(ns)
	}
	exp := bits.Len64(ns) - 1 // ns in [2^exp, 2^(exp+1))
	sub := int(ns>>(exp-subBits)) & (subBuckets - 1)
	return (exp-subBits+1)*subBuckets + sub
}

// upperBound is the largest duration in bucket i, in ns.
func upperBound(i int) uint64 {
	if i < subBuckets {
		return uint64(i)
	}
	exp := i/subBuckets + subBits - 1
	sub := uint64(i % subBuckets)
	return (1 << exp) + (sub+1)<<(exp-subBits) - 1
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))].Add(1)
	h.sum.Add(int64(d))
}

// Latency fills cum with the number of calls (one Match, Allocate or
// TxnCheck each) that took at most each of bounds, which must ascend, for
// a metrics exporter; it returns cum, the count of all calls and the sum
// of their durations. A call is counted under a bound when the upper end
// of its logarithmic bucket is, so a count is exact to within the
// buckets' 19%.
func (p *Plugin) Latency(bounds []time.Duration, cum []uint64) (_ []uint64, count uint64, sum time.Duration) {
	cum = cum[:0]
	for range bounds {
		cum = append(cum, 0)
	}
	h := &p.stats.latency
	j := 0
	for i := range h.counts {
		c := h.counts[i].Load()
		count += c
		for j < len(bounds) && time.Duration(upperBound(i)) > bounds[j] {
			j++
		}
		if j < len(bounds) {
			cum[j] += c
		}
	}
	for j := 1; j < len(cum); j++ {
		cum[j] += cum[j-1]
	}
	return cum, count, time.Duration(h.sum.Load())
}

// quantile returns the upper bound of the bucket holding quantile q.
func (h *histogram) quantile(q float64) time.Duration {
	var total uint64
	var snap [numBuckets]uint64
	for i := range h.counts {
		snap[i] = h.counts[i].Load()
		total += snap[i]
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.5)
	rank = max(rank, 1)
	var seen uint64
	for i, c := range snap {
		seen += c
		if seen >= rank {
			return time.Duration(upperBound(i))
		}
	}
	return time.Duration(upperBound(numBuckets - 1))
}

// counters are a plugin's cumulative statistics.
type counters struct {
	calls, records, errors, traps, timeouts atomic.Uint64
	rejected                                atomic.Uint64 // messages a transform refused
	latency                                 histogram
}
