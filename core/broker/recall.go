package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
)

// Recalling delayed and timed messages.
//
// A send that parks a message (a delay level, or a delivery time) answers
// with a recall handle (message.RecallHandle): RocketMQ's version 1 handle,
// which clients decode to find the broker, followed by where the message
// waits, its parking topic, queue and offset. Recall
// with that handle cancels the delivery while the message still waits. It
// writes a tombstone, metadata "recall/<parking topic>/<queue>/<offset>",
// durably (and through the set, on a replicated broker) before it answers,
// then deletes the timer's index keys. The scheduler checks the tombstones
// wherever it would index, deliver or roll a parked message, so a recalled
// message is never delivered, after a crash either: the keys' deletion
// is not synced, the tombstone is. Recall and the scheduler's steps
// exclude each other (schedMu), so a recall either finds the message still
// waiting and cancels it, or finds it delivered and says so.
//
// Tombstones stay until retention removes the parked record: a crash
// can move the scheduler's positions back by up to a checkpoint, and only
// a record that is gone cannot be indexed or delivered again.

const recallPrefix = "recall/"

// recallHandleOf is the recall handle of a parked message just stored
// (its UNIQ_KEY, REAL_TOPIC, parking queue and offset, due time), or ""
// for one without a message id.
func (b *Broker) recallHandleOf(m *message.Message) string {
	id, topic := m.Properties.Get(message.PropertyUniqKey), m.Properties.Get(message.PropertyRealTopic)
	if id == "" || topic == "" || strings.ContainsRune(id, ' ') {
		return ""
	}
	due := m.StoreTimestamp + b.levelDelay(int(m.QueueID)+1).Milliseconds()
	if m.Topic == TimerTopic {
		due, _ = strconv.ParseInt(m.Properties.Get(message.PropertyTimerDeliverMS), 10, 64)
	}
	return message.RecallHandle{Topic: topic, Broker: b.opts.BrokerName, Due: due, MsgID: id, Park: m.Topic, Queue: m.QueueID, Offset: m.QueueOffset}.String()
}

// handleRecall serves RECALL_MESSAGE: the send's recall handle and the
// topic; the answer's msgId is the recalled message's.
func (b *Broker) handleRecall(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	id, err := b.Recall(req.Get("topic"), req.Get("recallHandle"))
	if err != nil {
		return refused(req, "recall", err)
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.SetFields("msgId", id)
	return resp
}

// Recall cancels the delivery of the delayed or timed message of topic
// that handle names, and returns its message id. It refuses, with
// ErrIllegal, a handle that is malformed, names another topic or broker,
// or does not match the message it points at; with ErrNoMessage, a message
// already delivered. Recalling a message twice succeeds.
func (b *Broker) Recall(topic, handle string) (string, error) {
	h, err := message.ParseRecallHandle(handle)
	if err != nil || (h.Park != ScheduleTopic && h.Park != TimerTopic) {
		return "", refusef(ErrIllegal, "%w: not one this broker made", message.ErrBadRecallHandle)
	}
	if h.Topic != topic {
		return "", refusef(ErrIllegal, "the recall handle is for topic %s, not %s", h.Topic, topic)
	}
	if h.Broker != b.opts.BrokerName {
		return "", refusef(ErrIllegal, "the recall handle is for broker %s; recall the message there", h.Broker)
	}
	// The parked record never changes: it is read and checked before the
	// lock, so a handle that names no message of topic never holds up
	// the scheduler.
	it := b.store.NewQueueIter(h.Park, h.Queue, store.IterOptions{MaxUnits: 1})
	defer it.Close()
	if !it.SeekGE(h.Offset) || it.Offset() != h.Offset {
		if err := it.Error(); err != nil && !errors.Is(err, store.ErrOffsetGone) {
			return "", refusef(ErrInternal, "recall: read the parked message: %w", err)
		}
		return "", fmt.Errorf("%w: message %s is no longer waiting here", ErrNoMessage, h.MsgID)
	}
	u, rec := it.Unit(), it.Record()
	props := rec.Properties()
	if id, _ := props.Lookup(message.PropertyUniqKey); string(id) != h.MsgID {
		return "", refusef(ErrIllegal, "the recall handle does not match the message it names")
	}
	if real, _ := props.Lookup(message.PropertyRealTopic); string(real) != topic {
		return "", refusef(ErrIllegal, "the recall handle does not match the message it names")
	}

	b.schedMu.Lock()
	defer b.schedMu.Unlock()
	name := recallName(h.Park, h.Queue, h.Offset)
	if _, err := b.store.Meta(name); err == nil {
		return h.MsgID, nil // recalled before
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", refusef(ErrInternal, "recall: %w", err)
	}

	var indexed bool // the timer's keys are in the index
	switch h.Park {
	case TimerTopic:
		from, _ := b.store.Progress(timerIndexedName)
		if indexed = h.Offset < from; indexed {
			_, ok, err := b.store.Value(pendingKey(h.Offset), nil)
			if err != nil {
				return "", refusef(ErrInternal, "recall: %w", err)
			}
			if !ok {
				return "", fmt.Errorf("%w: message %s was delivered already", ErrNoMessage, h.MsgID)
			}
		}
	case ScheduleTopic:
		if from, _ := b.store.Progress(levelProgressName + strconv.Itoa(int(h.Queue)+1)); h.Offset < from {
			return "", fmt.Errorf("%w: message %s was delivered already", ErrNoMessage, h.MsgID)
		}
	}
	if err := b.store.PutMeta(name, binary.BigEndian.AppendUint64(nil, uint64(u.TagCode))); err != nil {
		return "", b.storeRefusal(err)
	}
	if b.recalls == nil {
		b.recalls = recalled{}
	}
	b.recalls[name] = struct{}{} // the steps of this pass skip it too
	b.meters.recalled.Add(1)
	if indexed {
		if err := b.store.DeleteKeys(timerKey(u.TagCode, h.Offset), pendingKey(h.Offset)); err != nil {
			// The tombstone stands: delivery skips the message and
			// deletes its keys then.
			b.log.Warn("recall: the timer's index keys stay until it is due", "offset", h.Offset, "err", err)
		} else {
			b.meters.timedIndexed.Add(-1)
		}
	}
	return h.MsgID, nil
}

func recallName(park string, queue int32, off int64) string {
	return recallPrefix + park + "/" + strconv.Itoa(int(queue)) + "/" + strconv.FormatInt(off, 10)
}

// recalled is the set of tombstones' names.
type recalled map[string]struct{}

// loadRecalled reads the tombstones; nil when there are none.
func (b *Broker) loadRecalled() (recalled, error) {
	var set recalled
	err := b.store.EachMeta(recallPrefix, func(name string, _ []byte) error {
		if set == nil {
			set = recalled{}
		}
		set[name] = struct{}{}
		return nil
	})
	return set, err
}

func (r recalled) has(park string, queue int32, off int64) bool {
	if len(r) == 0 {
		return false
	}
	_, ok := r[recallName(park, queue, off)]
	return ok
}

// sweepRecalled deletes the tombstones of parked records that retention
// removed. A set's leader does it for the set.
func (b *Broker) sweepRecalled() error {
	if !b.store.Writable() {
		return nil
	}
	var gone []string
	err := b.store.EachMeta(recallPrefix, func(name string, _ []byte) error {
		f := strings.Split(strings.TrimPrefix(name, recallPrefix), "/")
		if len(f) != 3 {
			return nil
		}
		q, err1 := strconv.ParseInt(f[1], 10, 32)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 == nil && err2 == nil && off < b.store.MinOffset(f[0], int32(q)) {
			gone = append(gone, name)
		}
		return nil
	})
	if err != nil || len(gone) == 0 {
		return err
	}
	return b.store.WriteMeta(nil, gone)
}
