package histogram_test

import (
	"fmt"

	"github.com/rmq-go/rmq/internal/histogram"
)

// A component counts sizes on its hot path; an exporter reads a snapshot
// when it is asked.
func Example() {
	h := histogram.New(histogram.Powers(4, 64)...) // 1, 4, 16, 64, and above
	for _, v := range []int64{1, 3, 4, 5, 100} {
		h.Observe(v)
	}
	var s histogram.Snapshot
	h.Snapshot(&s)
	fmt.Println(s.Bounds, s.Counts, s.Count, s.Sum)
	// Output: [1 4 16 64] [1 2 1 0 1] 5 113
}
