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
// A broker held out because a send got no answer is probed every
// faultProbeInterval (RocketMQ 5's detector): once it answers a request
// again it is available at once, so a broker back from a restart takes
// sends again within seconds, not after the 10 minutes a failure earns.
//
// Invariants:
//  1. A broker that was never recorded is available.
//  2. A recorded broker is available again once now ≥ its until time, or
//     once a probe of it got an answer; it is never forgotten, only
//     overwritten by the next send's record.
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
	// probe is the queue of a send that got no answer, asked for its max
	// offset to learn whether the broker is back; nil after a slow send.
	probe *MessageQueue
}

// faultProbeInterval is how often brokers held out for a failure are
// probed.
const faultProbeInterval = 2 * time.Second

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

// record notes a send to q's broker that took latency, or failed. A nil
// tracker records nothing.
func (f *faultTracker) record(q MessageQueue, latency time.Duration, failed bool) {
	if f == nil {
		return
	}
	it := faultItem{latency: latency}
	if failed {
		it.latency, it.probe = faultFailureLatency, &q
	}
	it.until = f.now().Add(faultPause(it.latency))
	f.mu.Lock()
	f.mu.items[q.BrokerName] = it
	f.mu.Unlock()
}

// toProbe returns a queue of each broker held out for a failure.
func (f *faultTracker) toProbe() []MessageQueue {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	var qs []MessageQueue
	for _, it := range f.mu.items {
		if it.probe != nil && now.Before(it.until) {
			qs = append(qs, *it.probe)
		}
	}
	return qs
}

// answered notes that a probe of broker got an answer: unless a send
// recorded it again since, it is available at once.
func (f *faultTracker) answered(broker string, probed MessageQueue) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if it, ok := f.mu.items[broker]; ok && it.probe != nil && *it.probe == probed {
		delete(f.mu.items, broker)
	}
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
