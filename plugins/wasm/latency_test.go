package wasm

import (
	"testing"
	"time"
)

// TestLatency checks the cumulative counts Latency derives from the
// logarithmic buckets, for an exporter's fixed bounds.
func TestLatency(t *testing.T) {
	p := &Plugin{}
	for _, d := range []time.Duration{10 * time.Microsecond, 300 * time.Microsecond, 2 * time.Millisecond, 2 * time.Millisecond, time.Minute} {
		p.stats.latency.record(d)
	}
	bounds := []time.Duration{100 * time.Microsecond, time.Millisecond, 10 * time.Millisecond, time.Second}
	cum, count, sum := p.Latency(bounds, nil)
	want := []uint64{1, 2, 4, 4}
	for i := range want {
		if cum[i] != want[i] {
			t.Fatalf("cumulative counts %v, want %v", cum, want)
		}
	}
	if count != 5 || sum != 10*time.Microsecond+300*time.Microsecond+4*time.Millisecond+time.Minute {
		t.Fatalf("count %d sum %v", count, sum)
	}
	// The slice is reused.
	if again, _, _ := p.Latency(bounds, cum); &again[0] != &cum[0] {
		t.Error("Latency did not reuse its slice")
	}
}
