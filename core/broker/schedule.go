package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
)

// Scheduling.
//
// Delayed messages wait in SCHEDULE_TOPIC_XXXX, queue level-1. Every
// message of a level waits as long, so each queue is due in order: the
// scheduler delivers from the head of each queue while the head is due and
// keeps the next offset per level as a progress value ("sched/level/N").
// The unit's tag code holds the due time, so the queue is scanned without
// reading the commit log.
//
// Timed messages (any due time up to MaxTimerDelay) wait in TimerTopic,
// queue 0, in arrival order. An indexer turns each unit into two keys in
// the index: "t" due(8) offset(8) orders them by due time, "u" offset(8)
// finds the oldest pending one. The scheduler walks the "t" keys up to now,
// delivers, and deletes both keys. Nothing per pending timer lives in
// memory. The keys are written without fsync; the indexer's progress
// ("sched/timer/indexed") is written later in the index's order, so after
// a crash the indexer re-adds what it may have lost.
//
// A timed message due far ahead would keep its commit-log segment, and
// every later one, from retention until it is due. When retention wants
// such a segment gone, the scheduler rolls the pending timed messages in
// it: it appends copies to the tail of the timer topic and deletes the
// originals' keys (retention.go).
//
// After a crash a message may be delivered once more (its delivery or
// roll was stored but the progress or key deletion was not), never lost.
const (
	scheduleBatch     = 128
	schedulePoll      = time.Second // wake up at least this often
	scheduleRetryWait = time.Second // after a failed re-put
	// scheduleDiskFullWait is the wait after a re-put refused for a full
	// disk, and the least time between two logs of one.
	scheduleDiskFullWait = 10 * time.Second
	// recallSweepEvery is how often the tombstones of recalled messages
	// whose records retention removed are dropped.
	recallSweepEvery  = time.Minute
	levelProgressName = "sched/level/"
	timerIndexedName  = "sched/timer/indexed"
	timerDueKey       = 't'
	timerPendingKey   = 'u'
)

func timerKey(due, qoff int64) []byte {
	k := make([]byte, 17)
	k[0] = timerDueKey
	binary.BigEndian.PutUint64(k[1:], uint64(due))
	binary.BigEndian.PutUint64(k[9:], uint64(qoff))
	return k
}

func pendingKey(qoff int64) []byte {
	k := make([]byte, 9)
	k[0] = timerPendingKey
	binary.BigEndian.PutUint64(k[1:], uint64(qoff))
	return k
}

// scheduleLoop delivers delayed and timed messages when they are due.
func (b *Broker) scheduleLoop() {
	t := time.NewTimer(0)
	defer t.Stop()
	var diskLogged time.Time
	for {
		next := b.runSchedule(&diskLogged)
		wait := schedulePoll
		if !next.IsZero() {
			wait = min(max(time.Until(next), time.Millisecond), schedulePoll)
		}
		t.Reset(wait)
		select {
		case <-b.quit:
			return
		case <-b.sched:
			if !t.Stop() {
				<-t.C
			}
		case <-t.C:
		}
	}
}

// runSchedule delivers everything due and returns when the next message
// is due (zero when nothing is pending). diskLogged is when a step refused
// for a full disk was last logged.
func (b *Broker) runSchedule(diskLogged *time.Time) time.Time {
	now := b.now()
	var next time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	// failed logs a failed step and returns when to try it again; on a
	// full disk, where every step fails alike until space is freed, at
	// most every scheduleDiskFullWait.
	failed := func(msg string, err error, args ...any) time.Time {
		if errors.Is(err, store.ErrDiskFull) {
			if now.Sub(*diskLogged) >= scheduleDiskFullWait {
				*diskLogged = now
				b.log.Error(msg, append(args, "err", err)...)
			}
			return now.Add(scheduleDiskFullWait)
		}
		b.log.Error(msg, append(args, "err", err)...)
		return now.Add(scheduleRetryWait)
	}
	// Each step excludes Recall and skips the messages recalled: the
	// tombstones read once a pass, and those Recall added since (recall.go).
	b.schedMu.Lock()
	rc, err := b.loadRecalled()
	b.recalls = rc
	b.schedMu.Unlock()
	if err != nil {
		return failed("reading the recalled messages failed; retrying", err)
	}
	if f := b.passLoaded.Load(); f != nil {
		(*f)(now)
	}
	step := func(f func(rc recalled) (time.Time, error)) (time.Time, error) {
		b.schedMu.Lock()
		defer b.schedMu.Unlock()
		return f(b.recalls)
	}
	for level := 1; level <= len(b.levels); level++ {
		t, err := step(func(rc recalled) (time.Time, error) { return b.deliverLevel(level, now, rc) })
		if err != nil {
			t = failed("delayed delivery failed; retrying", err, "level", level)
		}
		earliest(t)
	}
	if _, err := step(func(rc recalled) (time.Time, error) { return time.Time{}, b.indexTimers(rc) }); err != nil {
		earliest(failed("timer index failed; retrying", err))
	}
	t, err := step(func(rc recalled) (time.Time, error) { return b.deliverTimers(now, rc) })
	if err != nil {
		t = failed("timed delivery failed; retrying", err)
	}
	earliest(t)
	if _, err := step(func(rc recalled) (time.Time, error) { return time.Time{}, b.rollRequested(rc) }); err != nil {
		earliest(failed("moving timed messages forward for retention failed; retrying", err))
	}
	if now.Sub(b.recallSwept) >= recallSweepEvery {
		b.recallSwept = now
		if err := b.sweepRecalled(); err != nil {
			b.log.Warn("dropping the tombstones of recalled messages failed; retrying later", "err", err)
		}
	}
	b.schedPasses.Add(1)
	return next
}

// deliverLevel delivers the due head of one level's queue and returns when
// its next message is due.
func (b *Broker) deliverLevel(level int, now time.Time, rc recalled) (time.Time, error) {
	name := levelProgressName + strconv.Itoa(level)
	from, _ := b.store.Progress(name)
	var next time.Time
	it := b.store.NewQueueIter(ScheduleTopic, int32(level-1), store.IterOptions{
		MaxRecords: scheduleBatch,
		Filter: func(u store.Unit) store.UnitVerdict {
			if u.TagCode > now.UnixMilli() {
				next = time.UnixMilli(u.TagCode)
				return store.UnitStop
			}
			return store.UnitKeep
		},
		OnCorrupt: b.parkedLost(ScheduleTopic),
	})
	defer it.Close()
	var msgs []*message.Message
	for next.IsZero() {
		msgs = msgs[:0]
		for ok := it.SeekGE(from); ok; ok = it.Next() {
			if rc.has(ScheduleTopic, int32(level-1), it.Offset()) {
				continue // recalled
			}
			if m := b.unpark(bytes.Clone(it.Record())); m != nil {
				msgs = append(msgs, m)
			}
		}
		if err := it.Error(); err != nil {
			return time.Time{}, err
		}
		if it.NextOffset() == from {
			break
		}
		if err := b.redeliver(msgs); err != nil {
			return time.Time{}, err
		}
		from = it.NextOffset()
		b.store.SetProgress(name, from)
	}
	return next, nil
}

// indexTimers adds the index keys of timed messages stored since the last
// call.
func (b *Broker) indexTimers(rc recalled) error {
	from, _ := b.store.Progress(timerIndexedName)
	it := b.store.NewQueueIter(TimerTopic, 0, store.IterOptions{UnitsOnly: true, MaxUnits: 256})
	defer it.Close()
	var keys [][]byte
	for {
		keys = keys[:0]
		for ok := it.SeekGE(from); ok; ok = it.Next() {
			u := it.Unit()
			if rc.has(TimerTopic, 0, u.QueueOffset) {
				continue // recalled before it was indexed
			}
			keys = append(keys, timerKey(u.TagCode, u.QueueOffset), pendingKey(u.QueueOffset))
		}
		if err := it.Error(); err != nil || it.NextOffset() == from {
			return err
		}
		if err := b.store.PutKeys(keys...); err != nil {
			return err
		}
		b.meters.timedIndexed.Add(int64(len(keys) / 2))
		from = it.NextOffset()
		b.store.SetProgress(timerIndexedName, from)
	}
}

// deliverTimers delivers every timed message due by now and returns when
// the next one is due.
func (b *Broker) deliverTimers(now time.Time, rc recalled) (time.Time, error) {
	it := b.store.NewQueueIter(TimerTopic, 0, store.IterOptions{MaxUnits: 1, OnCorrupt: b.parkedLost(TimerTopic)})
	defer it.Close()
	for {
		var due []int64
		var next time.Time
		err := b.store.ScanKeys([]byte{timerDueKey}, nil, func(k []byte) bool {
			at := int64(binary.BigEndian.Uint64(k[1:]))
			if at > now.UnixMilli() {
				next = time.UnixMilli(at)
				return false
			}
			due = append(due, at, int64(binary.BigEndian.Uint64(k[9:])))
			return len(due) < 2*scheduleBatch
		})
		if err != nil || len(due) == 0 {
			return next, err
		}
		msgs := make([]*message.Message, 0, len(due)/2)
		keys := make([][]byte, 0, len(due))
		for i := 0; i < len(due); i += 2 {
			if off := due[i+1]; rc.has(TimerTopic, 0, off) {
				// Recalled, its keys back after a crash: not delivered.
			} else if it.SeekGE(off) && it.Offset() == off {
				if m := b.unpark(bytes.Clone(it.Record())); m != nil {
					msgs = append(msgs, m)
				}
			} else {
				b.log.Error("timed message lost before delivery", "offset", off, "err", it.Error())
			}
			keys = append(keys, timerKey(due[i], due[i+1]), pendingKey(due[i+1]))
		}
		if err := b.redeliver(msgs); err != nil {
			return time.Time{}, err
		}
		if err := b.store.DeleteKeys(keys...); err != nil {
			return time.Time{}, err
		}
		b.meters.timedIndexed.Add(-int64(len(keys) / 2))
	}
}

// countTimedIndexed counts the timer index's due keys, once at start.
func (b *Broker) countTimedIndexed() error {
	var n int64
	err := b.store.ScanKeys([]byte{timerDueKey}, nil, func([]byte) bool { n++; return true })
	b.meters.timedIndexed.Store(n)
	return err
}

// parkedLost returns the OnCorrupt report of a parking topic's iterator.
func (b *Broker) parkedLost(parking string) func(store.Unit, error) {
	return func(u store.Unit, err error) {
		b.log.Error("parked message unreadable; skipped", "topic", parking, "offset", u.QueueOffset, "err", err)
	}
}

// redeliver stores copies of parked messages in their real topics, in one
// append. A failed append leaves the progress where it was, so the
// messages are tried again, not skipped.
func (b *Broker) redeliver(msgs []*message.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if err := b.store.Append(msgs); err != nil {
		return fmt.Errorf("re-put %d messages: %w", len(msgs), err)
	}
	return nil
}

// unpark builds the copy of a parked message for its real topic: DELAY
// removed, REAL_TOPIC and REAL_QID kept, everything else as sent.
func (b *Broker) unpark(r message.Record) *message.Message {
	var old message.Message
	r.Decode(&old)
	topic := old.Properties.Get(message.PropertyRealTopic)
	qid, err := strconv.Atoi(old.Properties.Get(message.PropertyRealQueueID))
	if topic == "" || err != nil {
		b.log.Error("parked message without REAL_TOPIC/REAL_QID; dropped", "topic", old.Topic, "offset", old.QueueOffset)
		return nil
	}
	tc, ok := b.topics.get(topic)
	if !ok {
		var cerr error
		if tc, cerr = b.autoCreate(topic, AutoCreateTopicKey, 0); cerr != nil {
			b.log.Warn("parked message's topic could not be created; storing anyway", "topic", topic, "err", cerr)
			tc = TopicConfig{WriteQueueNums: qid + 1}
		}
	}
	if n := tc.ReadQueueNums; n > 0 && qid >= n {
		qid %= n // the topic shrank meanwhile: keep the message readable
	}
	return &message.Message{
		Topic:                     topic,
		QueueID:                   int32(qid),
		Flag:                      old.Flag,
		SysFlag:                   old.SysFlag,
		BornTimestamp:             old.BornTimestamp,
		BornHost:                  old.BornHost,
		StoreHost:                 b.storeHost,
		ReconsumeTimes:            old.ReconsumeTimes,
		PreparedTransactionOffset: old.PreparedTransactionOffset,
		Body:                      old.Body,
		Properties:                old.Properties.Without(message.PropertyDelayLevel),
	}
}
