package broker

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
)

// Recalling delayed and timed messages.
//
// A send that parks a message (a delay level, or a delivery time) answers
// with a recall handle naming where it waits: its topic, this broker, the
// parking topic and queue, its offset there and its message id. Recall
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

const (
	recallPrefix = "recall/"
	// maxRecallHandle bounds a handle's length before it is decoded.
	maxRecallHandle = 1024
	recallVersion   = "1"
)

// recallHandle is a decoded recall handle.
type recallHandle struct {
	topic, broker string // the message's topic, the broker holding it
	park          string // ScheduleTopic or TimerTopic
	queue         int32  // its queue in park
	offset        int64  // its offset there
	msgID         string // its UNIQ_KEY
}

func (h recallHandle) encode() string {
	s := strings.Join([]string{recallVersion, h.topic, h.broker, h.park,
		strconv.Itoa(int(h.queue)), strconv.FormatInt(h.offset, 10), h.msgID}, "\n")
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

func parseRecallHandle(s string) (recallHandle, error) {
	if s == "" {
		return recallHandle{}, errors.New("empty")
	}
	if len(s) > maxRecallHandle {
		return recallHandle{}, fmt.Errorf("%d bytes, more than a handle holds", len(s))
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return recallHandle{}, errors.New("not one this broker made")
	}
	f := strings.Split(string(raw), "\n")
	if len(f) != 7 || f[0] != recallVersion || (f[3] != ScheduleTopic && f[3] != TimerTopic) {
		return recallHandle{}, errors.New("not one this broker made")
	}
	q, err1 := strconv.ParseInt(f[4], 10, 32)
	off, err2 := strconv.ParseInt(f[5], 10, 64)
	if err1 != nil || err2 != nil || q < 0 || off < 0 || f[1] == "" || f[6] == "" {
		return recallHandle{}, errors.New("not one this broker made")
	}
	return recallHandle{topic: f[1], broker: f[2], park: f[3], queue: int32(q), offset: off, msgID: f[6]}, nil
}

// RecallHandle returns the recall handle of a message sent to topic with
// message id msgID and answered with sent, or "" when the message was not
// parked (only delayed and timed messages can be recalled).
func (b *Broker) RecallHandle(topic, msgID string, sent LocalSent) string {
	if sent.Err != nil || msgID == "" || (sent.Topic != ScheduleTopic && sent.Topic != TimerTopic) {
		return ""
	}
	queue := int32(0)
	if sent.Topic == ScheduleTopic {
		queue = sent.ParkQueueID
	}
	return recallHandle{topic: topic, broker: b.opts.BrokerName, park: sent.Topic, queue: queue, offset: sent.QueueOffset, msgID: msgID}.encode()
}

// Recall cancels the delivery of the delayed or timed message of topic
// that handle names, and returns its message id. It refuses, with
// ErrIllegal, a handle that is malformed, names another topic or broker,
// or does not match the message it points at; with ErrNoMessage, a message
// already delivered. Recalling a message twice succeeds.
func (b *Broker) Recall(topic, handle string) (string, error) {
	h, err := parseRecallHandle(handle)
	if err != nil {
		return "", refusef(ErrIllegal, "recall handle: %v", err)
	}
	if h.topic != topic {
		return "", refusef(ErrIllegal, "the recall handle is for topic %s, not %s", h.topic, topic)
	}
	if h.broker != b.opts.BrokerName {
		return "", refusef(ErrIllegal, "the recall handle is for broker %s; recall the message there", h.broker)
	}
	b.schedMu.Lock()
	defer b.schedMu.Unlock()

	it := b.store.NewQueueIter(h.park, h.queue, store.IterOptions{MaxUnits: 1})
	defer it.Close()
	if !it.SeekGE(h.offset) || it.Offset() != h.offset {
		if err := it.Error(); err != nil && !errors.Is(err, store.ErrOffsetGone) {
			return "", refusef(ErrInternal, "recall: read the parked message: %w", err)
		}
		return "", fmt.Errorf("%w: message %s is no longer waiting here", ErrNoMessage, h.msgID)
	}
	u, rec := it.Unit(), it.Record()
	props := rec.Properties()
	if id, _ := props.Lookup(message.PropertyUniqKey); string(id) != h.msgID {
		return "", refusef(ErrIllegal, "the recall handle does not match the message it names")
	}
	if real, _ := props.Lookup(message.PropertyRealTopic); string(real) != topic {
		return "", refusef(ErrIllegal, "the recall handle does not match the message it names")
	}
	name := recallName(h.park, h.queue, h.offset)
	if _, err := b.store.Meta(name); err == nil {
		return h.msgID, nil // recalled before
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", refusef(ErrInternal, "recall: %w", err)
	}

	var indexed bool // the timer's keys are in the index
	switch h.park {
	case TimerTopic:
		from, _ := b.store.Progress(timerIndexedName)
		if indexed = h.offset < from; indexed {
			_, ok, err := b.store.Value(pendingKey(h.offset), nil)
			if err != nil {
				return "", refusef(ErrInternal, "recall: %w", err)
			}
			if !ok {
				return "", fmt.Errorf("%w: message %s was delivered already", ErrNoMessage, h.msgID)
			}
		}
	case ScheduleTopic:
		if from, _ := b.store.Progress(levelProgressName + strconv.Itoa(int(h.queue)+1)); h.offset < from {
			return "", fmt.Errorf("%w: message %s was delivered already", ErrNoMessage, h.msgID)
		}
	}
	if err := b.store.PutMeta(name, binary.BigEndian.AppendUint64(nil, uint64(u.TagCode))); err != nil {
		return "", b.storeRefusal(err)
	}
	if indexed {
		if err := b.store.DeleteKeys(timerKey(u.TagCode, h.offset), pendingKey(h.offset)); err != nil {
			// The tombstone stands: delivery skips the message and
			// deletes its keys then.
			b.log.Warn("recall: the timer's index keys stay until it is due", "offset", h.offset, "err", err)
		} else {
			b.meters.timedIndexed.Add(-1)
		}
	}
	return h.msgID, nil
}

func recallName(park string, queue int32, off int64) string {
	return recallPrefix + park + "/" + strconv.Itoa(int(queue)) + "/" + strconv.FormatInt(off, 10)
}

// recalled is the set of tombstones, read once per scheduler step.
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
// removed.
func (b *Broker) sweepRecalled() error {
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
