package client

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Process-queue timing rules, as RocketMQ's push consumer uses them.
const (
	// pqPullMaxIdle is how long a queue may go without a pull before
	// rebalance treats its pull loop as stuck.
	pqPullMaxIdle = 120 * time.Second
	// pqLockMaxLive is how long a broker-side lock on an orderly queue is
	// trusted after it was last taken or renewed.
	pqLockMaxLive = 30 * time.Second
	// expiredSendBackDelayLevel is the delay level a message swept by
	// cleanExpired is sent back with.
	expiredSendBackDelayLevel = 3
	// maxExpiredPerSweep bounds the messages one cleanExpired call looks
	// at, so a sweep never holds up a queue for long.
	maxExpiredPerSweep = 16
)

// pqEntry is one cached message.
type pqEntry struct {
	offset int64
	// msg is nil while a removal is being compacted away.
	msg *MessageExt
	// consumeStart is when the message was handed to the consume
	// service (markConsuming); zero until then.
	consumeStart time.Time
}

// processQueue holds, for one message queue assigned to a push consumer,
// the messages pulled and not yet consumed, ordered by queue offset.
//
// Invariants, under mu:
//  1. msgs and consuming are sorted by offset, strictly increasing, and
//     no offset is in both.
//  2. count and size cover msgs and consuming together: a message leaves
//     them only when it is removed (concurrent) or committed (orderly).
//  3. queueOffsetMax is the largest offset ever put, -1 before the first
//     put; it never decreases.
//
// Concurrent consumption uses put, markConsuming and remove; the offset
// remove returns is safe to commit because every message below it has been
// consumed or sent back. Orderly consumption uses put, takeMessages and
// then commit, rollback or makeMessageToConsumeAgain.
type processQueue struct {
	// orderly is fixed at construction; the expiry sweep skips orderly
	// queues, whose messages are held on purpose while a queue is
	// suspended.
	orderly bool
	// clock stamps lastConsume in remove and commit; tests replace it
	// before the queue is shared.
	clock func() time.Time

	// dropped is set when the queue is no longer assigned to this
	// consumer (or was dropped for being stuck); consume results for a
	// dropped queue are discarded and its offset is not committed.
	dropped atomic.Bool
	// locked is whether this consumer holds the broker-side lock on the
	// queue (orderly, clustering).
	locked atomic.Bool

	mu struct {
		sync.Mutex
		msgs []pqEntry
		// consuming holds the messages taken by the orderly consume
		// service and not yet committed (RocketMQ's
		// consumingMsgOrderlyTreeMap).
		consuming []pqEntry
		count     int
		size      int64
		// queueOffsetMax is the largest offset ever put, -1 if none.
		queueOffsetMax int64
		// dispatching is true from a put that asked the caller to
		// dispatch until takeMessages finds nothing left (RocketMQ's
		// consuming flag).
		dispatching bool
		lastPull    time.Time
		lastConsume time.Time
		lastLock    time.Time
	}
}

// newProcessQueue returns an empty queue; its pull, consume and lock times
// start at now.
func newProcessQueue(orderly bool, now time.Time) *processQueue {
	pq := &processQueue{orderly: orderly, clock: time.Now}
	pq.mu.queueOffsetMax = -1
	pq.mu.lastPull = now
	pq.mu.lastConsume = now
	pq.mu.lastLock = now
	return pq
}

// pqSearch returns the index of offset in entries, or where it would be
// inserted, and whether it is there.
func pqSearch(entries []pqEntry, offset int64) (int, bool) {
	return slices.BinarySearchFunc(entries, offset, func(e pqEntry, o int64) int { return cmp.Compare(e.offset, o) })
}

// put adds the messages whose offsets are not cached yet; duplicates are
// ignored. It reports whether the caller should dispatch the queue to the
// consume service: true when there are messages and no dispatch is in
// progress. The orderly consume service relies on it so that one queue is
// consumed by one task at a time; the concurrent one dispatches every batch
// and may ignore it.
func (pq *processQueue) put(msgs []*MessageExt) (dispatch bool) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, m := range msgs {
		if m == nil || m.QueueOffset < 0 {
			continue
		}
		o := m.QueueOffset
		if _, ok := pqSearch(pq.mu.consuming, o); ok {
			continue
		}
		e := pqEntry{offset: o, msg: m}
		// Pulls arrive in offset order, so the common case is an append.
		if n := len(pq.mu.msgs); n == 0 || pq.mu.msgs[n-1].offset < o {
			pq.mu.msgs = append(pq.mu.msgs, e)
		} else {
			i, ok := pqSearch(pq.mu.msgs, o)
			if ok {
				continue
			}
			pq.mu.msgs = slices.Insert(pq.mu.msgs, i, e)
		}
		pq.mu.count++
		pq.mu.size += int64(len(m.Body))
		if o > pq.mu.queueOffsetMax {
			pq.mu.queueOffsetMax = o
		}
	}
	if len(pq.mu.msgs) > 0 && !pq.mu.dispatching {
		pq.mu.dispatching = true
		return true
	}
	return false
}

// markConsuming records now as the consume start of the cached messages
// among msgs; cleanExpired measures from it.
func (pq *processQueue) markConsuming(msgs []*MessageExt, now time.Time) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, m := range msgs {
		if i, ok := pqSearch(pq.mu.msgs, m.QueueOffset); ok && pq.mu.msgs[i].msg == m {
			pq.mu.msgs[i].consumeStart = now
		}
	}
}

// remove drops msgs from the queue and returns the offset that is safe to
// commit: the smallest offset still cached if any, else queueOffsetMax+1,
// or -1 if nothing was ever put. Offsets not cached (unknown, or removed
// before) are ignored.
func (pq *processQueue) remove(msgs []*MessageExt) int64 {
	now := pq.clock()
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.mu.lastConsume = now
	pq.removeLocked(msgs)
	return pq.commitOffsetLocked()
}

// removeLocked drops msgs from msgs by marking, then compacting once, so a
// batch costs one pass over the cache.
func (pq *processQueue) removeLocked(msgs []*MessageExt) {
	lo, removed := len(pq.mu.msgs), 0
	for _, m := range msgs {
		if m == nil {
			continue
		}
		i, ok := pqSearch(pq.mu.msgs, m.QueueOffset)
		if !ok || pq.mu.msgs[i].msg == nil {
			continue
		}
		pq.mu.count--
		pq.mu.size -= int64(len(pq.mu.msgs[i].msg.Body))
		pq.mu.msgs[i].msg = nil
		removed++
		lo = min(lo, i)
	}
	if removed == 0 {
		return
	}
	// Consumption completes mostly in order: when the removed entries are
	// a prefix, reslice instead of moving the rest.
	if lo == 0 {
		prefix := true
		for _, e := range pq.mu.msgs[:removed] {
			if e.msg != nil {
				prefix = false
				break
			}
		}
		if prefix {
			clear(pq.mu.msgs[:removed])
			pq.mu.msgs = pq.mu.msgs[removed:]
			return
		}
	}
	// DeleteFunc zeroes the vacated tail, so removed messages can be
	// collected.
	pq.mu.msgs = slices.DeleteFunc(pq.mu.msgs, func(e pqEntry) bool { return e.msg == nil })
}

// commitOffsetLocked is remove's result for the current contents.
func (pq *processQueue) commitOffsetLocked() int64 {
	if pq.mu.queueOffsetMax < 0 {
		return -1
	}
	first := int64(-1)
	if len(pq.mu.msgs) > 0 {
		first = pq.mu.msgs[0].offset
	}
	if len(pq.mu.consuming) > 0 && (first < 0 || pq.mu.consuming[0].offset < first) {
		first = pq.mu.consuming[0].offset
	}
	if first >= 0 {
		return first
	}
	return pq.mu.queueOffsetMax + 1
}

// span returns the largest cached offset minus the smallest, 0 when fewer
// than two messages are cached. Messages taken by the orderly consume
// service are not counted, as in RocketMQ.
func (pq *processQueue) span() int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	if n := len(pq.mu.msgs); n > 1 {
		return pq.mu.msgs[n-1].offset - pq.mu.msgs[0].offset
	}
	return 0
}

// spanTooLarge reports whether span exceeds max.
func (pq *processQueue) spanTooLarge(max int64) bool { return pq.span() > max }

// count returns the number of cached messages, including those being
// consumed orderly and not yet committed.
func (pq *processQueue) count() int {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.mu.count
}

// size returns the total body bytes of the messages count covers.
func (pq *processQueue) size() int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.mu.size
}

// cleanExpired sends back messages whose consumption started more than
// timeout before now, so one stuck listener call cannot hold the queue's
// committed offset forever (RocketMQ's 15-minute sweep). It looks only at
// the first (smallest-offset) message, at most maxExpiredPerSweep times,
// stopping at the first one not expired. sendBack, called without the lock,
// must send the message back with expiredSendBackDelayLevel; after it
// succeeds the message is removed only if it is still first, since the
// consume service may have finished it meanwhile. Orderly queues are never
// swept.
//
// It returns the offset safe to commit after the last removal, or -1 if it
// removed nothing, and sendBack's error, which ends the sweep: the next
// sweep retries.
func (pq *processQueue) cleanExpired(now time.Time, timeout time.Duration, sendBack func(*MessageExt) error) (int64, error) {
	if pq.orderly {
		return -1, nil
	}
	commit := int64(-1)
	for range maxExpiredPerSweep {
		pq.mu.Lock()
		if len(pq.mu.msgs) == 0 {
			pq.mu.Unlock()
			break
		}
		first := pq.mu.msgs[0]
		pq.mu.Unlock()
		if first.consumeStart.IsZero() || now.Sub(first.consumeStart) <= timeout {
			break
		}
		if err := sendBack(first.msg); err != nil {
			return commit, err
		}
		pq.mu.Lock()
		if len(pq.mu.msgs) > 0 && pq.mu.msgs[0].msg == first.msg {
			pq.removeLocked([]*MessageExt{first.msg})
			commit = pq.commitOffsetLocked()
		}
		pq.mu.Unlock()
	}
	return commit, nil
}

// takeMessages moves up to n smallest-offset messages into the consuming
// set and returns them. When none are left it clears the dispatch flag, so
// the next put dispatches again.
func (pq *processQueue) takeMessages(n int) []*MessageExt {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	n = min(n, len(pq.mu.msgs))
	if n <= 0 {
		pq.mu.dispatching = false
		return nil
	}
	out := make([]*MessageExt, n)
	for i, e := range pq.mu.msgs[:n] {
		out[i] = e.msg
		pq.insertConsumingLocked(e)
	}
	clear(pq.mu.msgs[:n])
	pq.mu.msgs = pq.mu.msgs[n:]
	return out
}

// insertConsumingLocked adds e to the consuming set in offset order.
func (pq *processQueue) insertConsumingLocked(e pqEntry) {
	if n := len(pq.mu.consuming); n == 0 || pq.mu.consuming[n-1].offset < e.offset {
		pq.mu.consuming = append(pq.mu.consuming, e)
		return
	}
	i, _ := pqSearch(pq.mu.consuming, e.offset)
	pq.mu.consuming = slices.Insert(pq.mu.consuming, i, e)
}

// commit forgets the consuming set, whose messages are consumed, and
// returns the offset to commit: the largest of them plus one, or -1 if the
// set was empty. If makeMessageToConsumeAgain put back a message below that,
// the commit stops at it, so a message waiting to be consumed again is never
// committed over.
func (pq *processQueue) commit() int64 {
	now := pq.clock()
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.mu.lastConsume = now
	n := len(pq.mu.consuming)
	if n == 0 {
		return -1
	}
	next := pq.mu.consuming[n-1].offset + 1
	if len(pq.mu.msgs) > 0 {
		next = min(next, pq.mu.msgs[0].offset)
	}
	for _, e := range pq.mu.consuming {
		pq.mu.count--
		pq.mu.size -= int64(len(e.msg.Body))
	}
	clear(pq.mu.consuming)
	pq.mu.consuming = pq.mu.consuming[:0]
	return next
}

// rollback returns the whole consuming set to the cache, to be taken again.
func (pq *processQueue) rollback() {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.mu.msgs = pqMerge(pq.mu.msgs, pq.mu.consuming)
	clear(pq.mu.consuming)
	pq.mu.consuming = pq.mu.consuming[:0]
}

// makeMessageToConsumeAgain returns msgs from the consuming set to the
// cache, to be taken again after the queue is suspended for a moment.
// Messages not in the consuming set are ignored, so the cache never gains a
// message count does not cover.
func (pq *processQueue) makeMessageToConsumeAgain(msgs []*MessageExt) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	var back []pqEntry
	for _, m := range msgs {
		i, ok := pqSearch(pq.mu.consuming, m.QueueOffset)
		if !ok {
			continue
		}
		back = append(back, pq.mu.consuming[i])
		pq.mu.consuming = slices.Delete(pq.mu.consuming, i, i+1)
	}
	slices.SortFunc(back, func(a, b pqEntry) int { return cmp.Compare(a.offset, b.offset) })
	pq.mu.msgs = pqMerge(pq.mu.msgs, back)
}

// pqMerge merges two sorted, disjoint entry lists into a new one.
func pqMerge(a, b []pqEntry) []pqEntry {
	if len(b) == 0 {
		return a
	}
	out := make([]pqEntry, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].offset < b[0].offset {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	out = append(out, a...)
	return append(out, b...)
}

// pulled records now as the time of the latest pull.
func (pq *processQueue) pulled(now time.Time) {
	pq.mu.Lock()
	pq.mu.lastPull = now
	pq.mu.Unlock()
}

// isPullExpired reports whether more than timeout (pqPullMaxIdle)
// passed since the latest pull.
func (pq *processQueue) isPullExpired(now time.Time, timeout time.Duration) bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return now.Sub(pq.mu.lastPull) > timeout
}

// setLocked records the outcome of a lock request: locked true also
// stamps now as the latest lock time.
func (pq *processQueue) setLocked(locked bool, now time.Time) {
	if locked {
		pq.mu.Lock()
		pq.mu.lastLock = now
		pq.mu.Unlock()
	}
	pq.locked.Store(locked)
}

// isLockExpired reports whether more than timeout (pqLockMaxLive) passed
// since the lock was last taken or renewed.
func (pq *processQueue) isLockExpired(now time.Time, timeout time.Duration) bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return now.Sub(pq.mu.lastLock) > timeout
}

// lastConsumed returns when messages were last removed or committed.
func (pq *processQueue) lastConsumed() time.Time {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.mu.lastConsume
}
