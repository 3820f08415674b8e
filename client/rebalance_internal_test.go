package client

import (
	"testing"
	"time"
)

// TestRetryDelay: a failed rebalance is retried after 1 s, then 2 s, and
// never later than that however many failed in a row (each rebalance
// tried while a broker restarts fails), nor later than the periodic
// rebalance.
func TestRetryDelay(t *testing.T) {
	for _, c := range []struct {
		n        int64
		interval time.Duration
		want     time.Duration
	}{
		{1, 20 * time.Second, time.Second},
		{2, 20 * time.Second, 2 * time.Second},
		{3, 20 * time.Second, 2 * time.Second},
		{100, 20 * time.Second, 2 * time.Second},
		{0, 20 * time.Second, time.Second},
		{5, 500 * time.Millisecond, 500 * time.Millisecond},
		{5, 0, 2 * time.Second},
	} {
		if got := retryDelay(c.n, c.interval); got != c.want {
			t.Errorf("retryDelay(%d, %v) = %v, want %v", c.n, c.interval, got, c.want)
		}
	}
}
