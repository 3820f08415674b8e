package broker

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
)

// rollBatchBytes bounds the records one roll appends at once.
const rollBatchBytes = 1 << 20

// Retention.
//
// The store deletes old segments (core/store, RetentionHooks); the broker
// tells it what they still hold:
//
//   - Floor: records the broker reads again itself. Delayed messages wait
//     at most the longest delay level, and unresolved transactions are
//     copied to the tail at every check until the transaction policy
//     resolves or gives them up, so both hold a segment for a bounded
//     time and are never moved. Timed messages may wait MaxTimerDelay
//     (72 h); when one holds a segment retention wants gone, the store
//     calls Held and the scheduler rolls it (rollTimers), so no timer
//     pins the log for longer than one retention pass.
//   - Unconsumed: for each queue of a client topic, the first message a
//     consumer group has not consumed, asked only when the disk is above
//     high water.

// retentionHooks returns the hooks the broker sets on its store.
func (b *Broker) retentionHooks() store.RetentionHooks {
	return store.RetentionHooks{Floor: b.retentionFloor, Unconsumed: b.unconsumed, Held: b.retentionHeld}
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
// queues without committed offsets whose topic only broadcasting
// consumers subscribe to (they keep their offsets themselves, so the
// broker cannot tell what they consumed), and queues of the reply topic
// without committed offsets (each reply was pushed to its requester).
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
			if only || q.Topic == b.topics.replyTopic {
				// A reply was handed to its requester when it was
				// stored; unless a group reads the topic, nobody will.
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

// retentionHeld is the store's Held hook. When pending timed messages keep
// a segment retention wants gone, it asks the scheduler to roll them; it
// never blocks the retention goroutine.
func (b *Broker) retentionHeld(end int64, holds []store.QueueHold) {
	for _, h := range holds {
		if h.Topic == TimerTopic {
			b.requestRoll(end)
			select {
			case b.sched <- struct{}{}:
			default:
			}
			return
		}
	}
}

// requestRoll records that pending timed messages below the commit-log
// offset end should be rolled.
func (b *Broker) requestRoll(end int64) {
	for {
		cur := b.rollTimersTo.Load()
		if end <= cur || b.rollTimersTo.CompareAndSwap(cur, end) {
			return
		}
	}
}

// rollRequested rolls the timed messages below the end retention last
// asked for, if any. It runs on the scheduler's goroutine, so it never
// races delivery for the same index keys. A failed roll is asked for
// again at the scheduler's next turn.
func (b *Broker) rollRequested(rc recalled) error {
	end := b.rollTimersTo.Swap(0)
	if end <= 0 {
		return nil
	}
	if err := b.rollTimers(end, rc); err != nil {
		b.requestRoll(end)
		return err
	}
	return nil
}

// rollTimers moves every pending timed message stored before the
// commit-log offset end to the tail of the timer topic: it appends a copy
// (same body and properties, so the indexer files it under the same due
// time) and, once the copy is stored, deletes the original's index keys.
// Retention can then delete the original's segment. A crash between the
// two leaves both indexed, and the message is delivered twice, never
// lost, the same rule as delivery's.
func (b *Broker) rollTimers(end int64, rc recalled) error {
	it := b.store.NewQueueIter(TimerTopic, 0, store.IterOptions{MaxUnits: 1, OnCorrupt: b.parkedLost(TimerTopic)})
	defer it.Close()
	maxBytes := int(min(b.store.SegmentSize()/2, rollBatchBytes))
	var (
		msgs  []*message.Message
		keys  [][]byte
		size  int
		moved int
	)
	flush := func() error {
		if len(msgs) == 0 {
			return nil
		}
		if err := b.store.Append(msgs); err != nil {
			return fmt.Errorf("roll %d timed messages: %w", len(msgs), err)
		}
		if err := b.store.DeleteKeys(keys...); err != nil {
			return err
		}
		b.meters.timedIndexed.Add(-int64(len(msgs))) // indexed again as copies
		moved += len(msgs)
		msgs, keys, size = msgs[:0], keys[:0], 0
		return nil
	}
	from := []byte{timerPendingKey}
	for {
		var offs []int64
		err := b.store.ScanKeys([]byte{timerPendingKey}, from, func(k []byte) bool {
			offs = append(offs, int64(binary.BigEndian.Uint64(k[1:])))
			return len(offs) < scheduleBatch
		})
		if err != nil {
			return err
		}
		done := len(offs) == 0
		for _, off := range offs {
			if !it.SeekGE(off) || it.Offset() != off {
				if err := it.Error(); err != nil {
					return err
				}
				// Unreadable: it would hold retention until its due time
				// for nothing. Its due key stays, so delivery reports the
				// loss when it is due.
				b.log.Error("timed message unreadable; it no longer holds retention", "offset", off)
				if err := b.store.DeleteKeys(pendingKey(off)); err != nil {
					return err
				}
				continue
			}
			u, r := it.Unit(), it.Record()
			if u.CommitLogOffset >= end {
				done = true // pending keys follow the log's order
				break
			}
			if rc.has(TimerTopic, 0, off) {
				// Recalled, its keys back after a crash: dropped, not moved.
				if err := b.store.DeleteKeys(timerKey(u.TagCode, off), pendingKey(off)); err != nil {
					return err
				}
				continue
			}
			if size > 0 && size+len(r) > maxBytes {
				if err := flush(); err != nil {
					return err
				}
			}
			var m message.Message
			message.Record(bytes.Clone(r)).Decode(&m)
			if !m.Properties.Has(message.PropertyTimerDeliverMS) {
				// Keep the due time the original was indexed under.
				m.Properties = m.Properties.With(message.PropertyTimerDeliverMS, strconv.FormatInt(u.TagCode, 10))
			}
			msgs = append(msgs, &m)
			keys = append(keys, timerKey(u.TagCode, off), pendingKey(off))
			size += len(r)
		}
		if err := flush(); err != nil {
			return err
		}
		if done {
			break
		}
		from = pendingKey(offs[len(offs)-1] + 1)
	}
	if moved > 0 {
		b.log.Info("timed messages moved to the tail of the log so retention can delete their segment", "messages", moved, "before", end)
	}
	return nil
}
