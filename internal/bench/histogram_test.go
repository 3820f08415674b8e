package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogramExactBelow256ns(t *testing.T) {
	var h Histogram
	for v := 1; v <= 100; v++ {
		h.Record(time.Duration(v))
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.01, 1}, {0.5, 50}, {0.9, 90}, {0.99, 99}, {0.999, 100}, {1, 100}} {
		if got := h.Quantile(tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if h.Count() != 100 || h.Max() != 100 {
		t.Errorf("Count %d Max %v", h.Count(), h.Max())
	}
}

// TestHistogramPrecision checks every percentile of a large random sample
// against the sorted sample: within 1/128 above, never below.
func TestHistogramPrecision(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	vals := make([]time.Duration, 100000)
	for i := range vals {
		// Log-uniform from 1 µs to about 1 s.
		vals[i] = time.Duration(float64(time.Microsecond) * math.Exp2(r.Float64()*20))
		h.Record(vals[i])
	}
	slices.Sort(vals)
	for _, q := range []float64{0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
		exact := vals[max(int(q*float64(len(vals))+0.999999)-1, 0)]
		got := h.Quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/128 {
			t.Errorf("Quantile(%v) = %v, exact %v", q, got, exact)
		}
	}
	if h.Max() != vals[len(vals)-1] {
		t.Errorf("Max %v, want %v", h.Max(), vals[len(vals)-1])
	}
}

func TestHistogramBuckets(t *testing.T) {
	// Every bucket's top maps back to it, and the next value starts the
	// next bucket.
	for i := range numBuckets - 1 {
		top := bucketTop(i)
		if bucketOf(top) != i || bucketOf(top+1) != i+1 {
			t.Fatalf("bucket %d: top %d maps to %d, top+1 to %d", i, top, bucketOf(top), bucketOf(top+1))
		}
	}
	if bucketTop(numBuckets-1) != MaxTrackable {
		t.Errorf("last bucket tops at %v, want MaxTrackable", bucketTop(numBuckets-1))
	}
	if bucketOf(-5) != 0 || bucketOf(time.Hour) != numBuckets-1 {
		t.Errorf("clamping: %d %d", bucketOf(-5), bucketOf(time.Hour))
	}
}

func TestHistogramMergeReset(t *testing.T) {
	var a, b Histogram
	for range 90 {
		a.Record(time.Millisecond)
	}
	for range 10 {
		b.Record(time.Second)
	}
	b.Record(3 * time.Minute) // beyond MaxTrackable: counted, Max exact
	a.Merge(&b)
	if a.Count() != 101 || a.Max() != 3*time.Minute {
		t.Fatalf("after Merge: Count %d Max %v", a.Count(), a.Max())
	}
	if p := a.Quantile(0.5); p < time.Millisecond || p > time.Millisecond+time.Millisecond/128 {
		t.Errorf("p50 %v, want about 1ms", p)
	}
	if p := a.Quantile(0.95); p < time.Second || p > time.Second+time.Second/128 {
		t.Errorf("p95 %v, want about 1s", p)
	}
	if p := a.Quantile(1); p != MaxTrackable {
		t.Errorf("p100 %v, want MaxTrackable (the value is past the last bucket)", p)
	}
	a.Reset()
	if a.Count() != 0 || a.Quantile(0.5) != 0 || a.Max() != 0 {
		t.Errorf("after Reset: Count %d p50 %v Max %v", a.Count(), a.Quantile(0.5), a.Max())
	}
}

func TestHistogramRecordDoesNotAllocate(t *testing.T) {
	h := new(Histogram)
	if n := testing.AllocsPerRun(1000, func() { h.Record(1234567) }); n != 0 {
		t.Errorf("Record allocates %v times", n)
	}
}

func ExampleHistogram() {
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	fmt.Println(short(h.Quantile(0.5)), short(h.Quantile(0.99)), h.Max())
	// Output: 502µs 991µs 1ms
}
