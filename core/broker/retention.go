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
// tells it what they still hold: records the broker reads again itself
// (Floor).

// retentionHooks returns the hooks the broker sets on its store.
func (b *Broker) retentionHooks() store.RetentionHooks {
	return store.RetentionHooks{Floor: b.retentionFloor}
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
