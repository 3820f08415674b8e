package broker

import (
	"time"

	"github.com/rmq-go/rmq/core/store"
)

// Test hooks: they let this directory's tests (package broker_test) look
// inside the broker. They are not part of its API.

// LastPullOffset returns the offset a consumer group last pulled a queue
// from.
func (b *Broker) LastPullOffset(group, topic string, queue int32) (int64, bool) {
	v, ok := b.pulled.Load(pullKey{group, topic, queue})
	if !ok {
		return 0, false
	}
	return v.(*pulls).offset.Load(), true
}

// PrefilterSkipped returns how many messages pulls skipped on their
// pre-filter mask, without reading them.
func (b *Broker) PrefilterSkipped() int64 {
	if b.prefilter == nil {
		return 0
	}
	return b.prefilter.skipped.Load()
}

// PrefilterProgress returns the next offset the pre-filter indexer will
// evaluate in a queue, and false if it never looked at the queue.
func (b *Broker) PrefilterProgress(topic string, q int32) (int64, bool) {
	return b.store.Progress(pfProgressName(topic, q))
}

// TrimOutboxNow applies the outbox size bound now rather than at the next
// periodic check.
func (b *Broker) TrimOutboxNow() { b.trimOutbox() }

// PendingTransactions returns the number of half messages not yet
// committed, rolled back or discarded.
func (b *Broker) PendingTransactions() int { return b.txn.pending() }

// QueueLocks returns which client holds each locked queue of a consumer
// group.
func (b *Broker) QueueLocks(group string) map[Queue]string { return b.locks.holders(group, b.now()) }

// HeldPulls returns the number of pulls held (long polling).
func (b *Broker) HeldPulls() int { return b.holds.count() }

// RegisteredBytes returns the bytes of registration bodies the broker has
// sent to its name servers, all of them counted.
func (b *Broker) RegisteredBytes() int64 { return b.regBytes.Load() }

// PutTopicUnchecked saves a topic configuration without checking it, as
// an older version of the broker may have saved it.
func (b *Broker) PutTopicUnchecked(tc TopicConfig) error {
	b.topics.mu.Lock()
	defer b.topics.mu.Unlock()
	b.topics.topics[tc.TopicName] = tc
	return b.topics.persist(tc)
}

// PendingTimers returns the number of timed messages indexed and not yet
// delivered.
func (b *Broker) PendingTimers() int {
	n := 0
	b.store.ScanKeys([]byte{timerPendingKey}, nil, func([]byte) bool { n++; return true })
	return n
}

// UnconsumedHolds returns what the broker reports to retention as not yet
// consumed.
func (b *Broker) UnconsumedHolds() []store.QueueHold { return b.unconsumed() }

// SetRelayTimeout changes how long a relay waits for a client's answer.
func (b *Broker) SetRelayTimeout(d time.Duration) { b.relays.wait.Store(int64(d)) }

// OccupyRelays takes n relay slots, as n relays waiting for clients
// would, until release is called.
func (b *Broker) OccupyRelays(n int) (release func()) {
	for range n {
		b.relays.slots <- struct{}{}
	}
	return func() {
		for range n {
			<-b.relays.slots
		}
	}
}

// MaxRelays is the bound on relays in flight.
const MaxRelays = maxRelays

// TimerKeys are the index keys of a timed message due at due, parked at
// offset off of the timer topic.
func TimerKeys(due, off int64) [][]byte { return [][]byte{timerKey(due, off), pendingKey(off)} }

// WakeScheduler wakes the scheduler for a pass now.
func (b *Broker) WakeScheduler() {
	select {
	case b.sched <- struct{}{}:
	default:
	}
}

// SchedulerPasses counts the scheduler's passes so far.
func (b *Broker) SchedulerPasses() int64 { return b.schedPasses.Load() }

// OnSchedulePass makes f run in each scheduler pass once it has read the
// recalls' tombstones, before its first step, with the pass's time.
func (b *Broker) OnSchedulePass(f func(now time.Time)) { b.passLoaded.Store(&f) }

// ExpireLiteTopics runs one pass of the lite topic expiry.
func (b *Broker) ExpireLiteTopics() { b.expireLiteTopics() }
