package broker

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/rmq-go/rmq/core/store"
)

// Retention.
//
// The store deletes old segments (core/store, RetentionHooks); the broker
// tells it what they still hold:
//
//   - Floor: records the broker reads again itself: pending delayed and
//     timed messages, unresolved transactions.
//   - Unconsumed: for each queue of a client topic, the first message a
//     consumer group has not consumed, asked only when the disk is above
//     high water.

// retentionHooks returns the hooks the broker sets on its store.
func (b *Broker) retentionHooks() store.RetentionHooks {
	return store.RetentionHooks{Floor: b.retentionFloor, Unconsumed: b.unconsumed}
}

// retentionFloor lists what retention must keep whatever its reason: the
// messages still waiting for their delay or time, and the records of
// transactions that may still resolve.
func (b *Broker) retentionFloor() []store.QueueHold {
	var holds []store.QueueHold
	for level := 1; level <= len(b.levels); level++ {
		q := int32(level - 1)
		from, _ := b.store.Progress(levelProgressName + strconv.Itoa(level))
		if from < b.store.MaxOffset(ScheduleTopic, q) {
			holds = append(holds, store.QueueHold{Topic: ScheduleTopic, QueueID: q, Offset: from,
				Holder: fmt.Sprintf("delayed messages of level %d, due within %v", level, b.levels[level-1])})
		}
	}
	if from, _ := b.store.Progress(timerIndexedName); from < b.store.MaxOffset(TimerTopic, 0) {
		holds = append(holds, store.QueueHold{Topic: TimerTopic, QueueID: 0, Offset: from, Holder: "timed messages not yet indexed"})
	}
	b.store.ScanKeys([]byte{timerPendingKey}, nil, func(k []byte) bool {
		holds = append(holds, store.QueueHold{Topic: TimerTopic, QueueID: 0, Offset: int64(binary.BigEndian.Uint64(k[1:])),
			Holder: "pending timed messages, to be moved to the tail of the log"})
		return false
	})
	// Unresolved transactions keep their half messages and the markers
	// that may still resolve them.
	if from, ok := b.store.Progress(txnProgressHalf); ok && from < b.store.MaxOffset(HalfTopic, 0) {
		holds = append(holds, store.QueueHold{Topic: HalfTopic, QueueID: 0, Offset: from,
			Holder: "unresolved transactions, until a check resolves or gives them up"})
	}
	if from, ok := b.store.Progress(txnProgressOp); ok && from < b.store.MaxOffset(OpHalfTopic, 0) {
		holds = append(holds, store.QueueHold{Topic: OpHalfTopic, QueueID: 0, Offset: from,
			Holder: "outcome markers of unresolved transactions"})
	}
	return holds
}

// unconsumed is the store's Unconsumed hook. For each queue of a topic
// clients read it returns the first message not consumed: the lowest
// offset committed on the queue by any consumer group, or the queue's
// min offset when no group committed one. Not counted: the broker's own
// topics (schedule, timer, half, op-half, events, the check-max topic,
// which have their own floors and bounds), queues consumed to their end,
// and queues without committed offsets whose topic only broadcasting
// consumers subscribe to (they keep their offsets themselves, so the
// broker cannot tell what they consumed).
func (b *Broker) unconsumed() []store.QueueHold {
	type queueKey struct {
		topic string
		id    int32
	}
	type lowest struct {
		off    int64
		group  string
		groups int
	}
	committed := make(map[queueKey]lowest)
	for _, e := range b.store.ConsumerOffsets("") {
		k := queueKey{e.Topic, e.QueueID}
		l, ok := committed[k]
		if !ok || e.Offset < l.off {
			l.off, l.group = e.Offset, e.Group
		}
		l.groups++
		committed[k] = l
	}
	var holds []store.QueueHold
	broadcastOnly := make(map[string]bool)
	for _, q := range b.store.Queues() {
		if systemTopic(q.Topic) || q.Topic == TxnCheckMaxTopic || q.Topic == AutoCreateTopicKey || q.MinOffset >= q.MaxOffset {
			continue
		}
		h := store.QueueHold{Topic: q.Topic, QueueID: q.QueueID, Offset: q.MinOffset}
		if l, ok := committed[queueKey{q.Topic, q.QueueID}]; ok {
			h.Offset = max(l.off, q.MinOffset)
			h.Holder = "group " + logName(l.group)
			if l.groups > 1 {
				h.Holder += fmt.Sprintf(" (lowest of %d groups)", l.groups)
			}
		} else {
			only, seen := broadcastOnly[q.Topic]
			if !seen {
				only = b.clients.onlyBroadcasting(q.Topic)
				broadcastOnly[q.Topic] = only
			}
			if only {
				continue
			}
			h.Holder = "no consumer group has committed an offset"
		}
		if h.Offset < q.MaxOffset {
			holds = append(holds, h)
		}
	}
	return holds
}
