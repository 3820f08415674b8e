package client

import (
	"sync"
	"time"
)

// faultTracker is RocketMQ's latency fault tolerance: it remembers, per
// broker name, how long the last send took, and keeps a broker whose send
// failed or was slow out of queue selection for a while, so one sick broker
// does not take every other send down with it.
//
// Invariants:
//  1. A broker that was never recorded is available.
//  2. A recorded broker is available again once now ≥ its until time; it
//     is never forgotten, only overwritten by the next send's record.
//  3. A failed send counts as faultFailureLatency of latency.
type faultTracker struct {
	now func() time.Time // injected by tests

	mu struct {
		sync.Mutex
		items map[string]faultItem
	}
}

// faultItem is one broker's last record.
type faultItem struct {
	latency time.Duration // of the last send
	until   time.Time     // the broker is skipped before this
}

// faultFailureLatency is the latency a failed send is recorded with.
const faultFailureLatency = 30 * time.Second

// faultLatencies and faultPauses are RocketMQ's table: a send that took at
// least faultLatencies[i] keeps its broker out for faultPauses[i].
var (
	faultLatencies = [...]time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 550 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second, 15 * time.Second}
	faultPauses    = [...]time.Duration{0, 0, 30 * time.Second, 60 * time.Second, 120 * time.Second, 180 * time.Second, 600 * time.Second}
)

// newFaultTracker returns a tracker reading the time from now (time.Now
// when nil).
func newFaultTracker(now func() time.Time) *faultTracker {
	if now == nil {
		now = time.Now
	}
	f := &faultTracker{now: now}
	f.mu.items = make(map[string]faultItem)
	return f
}

// faultPause returns how long a send of the given latency keeps its broker
// out of selection.
func faultPause(latency time.Duration) time.Duration {
	for i := len(faultLatencies) - 1; i >= 0; i-- {
		if latency >= faultLatencies[i] {
			return faultPauses[i]
		}
	}
	return 0
}

// record notes a send to broker that took latency, or failed. A nil
// tracker records nothing.
func (f *faultTracker) record(broker string, latency time.Duration, failed bool) {
	if f == nil {
		return
	}
	if failed {
		latency = faultFailureLatency
	}
	now := f.now()
	f.mu.Lock()
	f.mu.items[broker] = faultItem{latency: latency, until: now.Add(faultPause(latency))}
	f.mu.Unlock()
}

// available reports whether broker may be picked. A nil tracker finds
// every broker available.
func (f *faultTracker) available(broker string) bool {
	if f == nil {
		return true
	}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	it, ok := f.mu.items[broker]
	return !ok || !now.Before(it.until)
}
