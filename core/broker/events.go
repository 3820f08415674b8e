package broker

import (
	"bytes"
	"compress/zlib"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
)

// EventsTopic is the outbox: one queue of retry and dead-letter events,
// written in the same store append as the move each describes, so an event
// exists if and only if its move happened.
const EventsTopic = "RMQ_SYS_EVENTS"

// Event kinds.
const (
	EventRetry = "retry"
	EventDLQ   = "dlq"
)

// Event describes one retry or dead-letter move.
type Event struct {
	// Offset is the event's position in the outbox.
	Offset int64
	// Kind is EventRetry or EventDLQ.
	Kind string
	// Time is when the move was stored.
	Time time.Time
	// Group is the consumer group, without %RETRY% or %DLQ%.
	Group string
	// Topic is the message's original topic.
	Topic string
	// MsgID is the message id clients see (UNIQ_KEY, or the offsetMsgId).
	MsgID string
	// OriginMsgID is the id of the first delivery.
	OriginMsgID string
	// Keys and Tags are the message's KEYS and TAGS.
	Keys, Tags string
	// QueueID and QueueOffset locate the failed delivery in its queue.
	QueueID     int32
	QueueOffset int64
	// ReconsumeTimes is the number of failed attempts so far;
	// MaxReconsumeTimes the limit that applied.
	ReconsumeTimes    int32
	MaxReconsumeTimes int32
	// DelayLevel and NextAttemptAt say when a retry is due (zero for DLQ).
	DelayLevel    int32
	NextAttemptAt time.Time
	// Reason says why the message moved.
	Reason string
	// Target locates the moved copy: its topic and commit-log offset.
	TargetTopic     string
	TargetLogOffset int64
	// Body and Properties are the moved message's. Body is nil when the
	// moved record is no longer in the store.
	Body       []byte
	Properties message.Properties
}

// eventRecord is the JSON body of an outbox record. The moved message is
// the record stored right before it in the same append, MovedSize bytes
// (frame included) earlier in the commit log.
type eventRecord struct {
	Kind              string `json:"kind"`
	Group             string `json:"group"`
	Topic             string `json:"topic"`
	MsgID             string `json:"msgId"`
	OriginMsgID       string `json:"originMsgId,omitempty"`
	QueueID           int32  `json:"queueId"`
	QueueOffset       int64  `json:"queueOffset"`
	ReconsumeTimes    int32  `json:"reconsumeTimes"`
	MaxReconsumeTimes int32  `json:"maxReconsumeTimes"`
	DelayLevel        int32  `json:"delayLevel,omitempty"`
	NextAttemptMS     int64  `json:"nextAttemptAt,omitempty"`
	Reason            string `json:"reason"`
	MovedSize         int64  `json:"movedSize"`
}

// EventSink receives each retry and dead-letter event after it is stored.
// It must not block.
type EventSink interface {
	Event(e *Event)
}

// eventsSignal lets readers wait for new outbox events.
type eventsSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *eventsSignal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *eventsSignal) fire() {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}

// outboxOn reports whether moves write events.
func (b *Broker) outboxOn() bool { return b.opts.Outbox || b.opts.EventSink != nil }

// newEvent builds the outbox record for a move. moved is the message
// stored right before it in the same append.
func (b *Broker) newEvent(ev eventRecord, moved *message.Message) *message.Message {
	ev.MovedSize = int64(moved.RecordLen()) + 4 // the store's CRC trailer
	body, _ := json.Marshal(ev)
	return &message.Message{
		Topic:         EventsTopic,
		BornTimestamp: b.now().UnixMilli(),
		BornHost:      b.storeHost,
		StoreHost:     b.storeHost,
		Body:          body,
	}
}

// afterEvents tells the sink about events just stored.
func (b *Broker) afterEvents(msgs []*message.Message) {
	if b.opts.EventSink == nil {
		return
	}
	for i, m := range msgs {
		if m.Topic != EventsTopic || i == 0 {
			continue
		}
		e, err := b.decodeEvent(m.QueueOffset, m.StoreTimestamp, m.CommitLogOffset, m.Body)
		if err != nil {
			continue
		}
		fillMoved(&e, msgs[i-1])
		b.opts.EventSink.Event(&e)
	}
}

func (b *Broker) decodeEvent(qoff, storeTime, logOff int64, body []byte) (Event, error) {
	var r eventRecord
	if err := json.Unmarshal(body, &r); err != nil {
		return Event{}, fmt.Errorf("outbox event %d: %w", qoff, err)
	}
	e := Event{
		Offset: qoff, Kind: r.Kind, Time: time.UnixMilli(storeTime), Group: r.Group, Topic: r.Topic,
		MsgID: r.MsgID, OriginMsgID: r.OriginMsgID, QueueID: r.QueueID, QueueOffset: r.QueueOffset,
		ReconsumeTimes: r.ReconsumeTimes, MaxReconsumeTimes: r.MaxReconsumeTimes, DelayLevel: r.DelayLevel,
		Reason: r.Reason, TargetLogOffset: logOff - r.MovedSize,
	}
	if r.NextAttemptMS > 0 {
		e.NextAttemptAt = time.UnixMilli(r.NextAttemptMS)
	}
	return e, nil
}

func fillMoved(e *Event, m *message.Message) {
	e.TargetTopic = m.Topic
	e.Body = m.Body
	e.Properties = m.Properties
	e.Keys = m.Properties.Get(message.PropertyKeys)
	e.Tags = m.Properties.Get(message.PropertyTags)
}

// EventOffsets returns the first retained and the next outbox offset.
func (b *Broker) EventOffsets() (minOff, maxOff int64) {
	return b.store.QueueOffsets(EventsTopic, 0)
}

// WaitEvents returns a channel closed when events are stored after the
// call. Check EventOffsets after taking it, so none is missed.
func (b *Broker) WaitEvents() <-chan struct{} { return b.events.wait() }

// ReadEvents appends to dst up to max outbox events starting at offset
// from, each with its moved message's body and properties. An offset
// below the retained range gives store.ErrOffsetGone.
func (b *Broker) ReadEvents(from int64, max int, dst []Event) ([]Event, error) {
	n0 := len(dst)
	if max <= 0 {
		return dst, nil
	}
	it := b.store.NewQueueIter(EventsTopic, 0, store.IterOptions{MaxUnits: max, OnCorrupt: func(u store.Unit, err error) {
		b.log.Error("outbox event unreadable; skipped", "offset", u.QueueOffset, "err", err)
	}})
	defer it.Close()
	for ok := it.SeekGE(from); ok; ok = it.Next() {
		if gapFrom, gapTo := it.Gap(); gapFrom < gapTo {
			break
		}
		r := it.Record()
		e, err := b.decodeEvent(it.Offset(), r.StoreTimestamp(), r.CommitLogOffset(), r.Body())
		if err != nil {
			b.log.Error("outbox event malformed; skipped", "offset", it.Offset(), "err", err)
			continue
		}
		dst = append(dst, e)
	}
	if gapFrom, gapTo := it.Gap(); gapFrom < gapTo {
		return dst[:n0], fmt.Errorf("%w: outbox offsets %d to %d", store.ErrOffsetGone, gapFrom, gapTo-1)
	}
	if err := it.Error(); err != nil {
		return dst[:n0], err
	}
	for i := range dst {
		e := &dst[i]
		if e.Body != nil || e.TargetLogOffset < 0 {
			continue
		}
		moved, err := b.store.ReadRecordAt(e.TargetLogOffset)
		if err != nil {
			if !errors.Is(err, store.ErrOffsetGone) {
				b.log.Warn("outbox event's message unreadable", "offset", e.Offset, "err", err)
			}
			continue
		}
		var m message.Message
		moved.Decode(&m)
		fillMoved(e, &m)
		if m.SysFlag&message.SysFlagCompressed != 0 {
			if body, err := inflate(m.Body); err == nil {
				e.Body = body
			}
		}
	}
	return dst, nil
}

// Progress and SetProgress keep small durable counters (cursors, for
// example) for components wired around the broker, in the store's index.
// Values are written every checkpoint; FlushProgress writes them now.
func (b *Broker) Progress(name string) (int64, bool) { return b.store.Progress("ext/" + name) }

// SetProgress records a counter; see Progress.
func (b *Broker) SetProgress(name string, v int64) { b.store.SetProgress("ext/"+name, v) }

// FlushProgress writes counters (and the index checkpoint) durably now.
func (b *Broker) FlushProgress() error { return b.store.Checkpoint() }

// inflate undoes the zlib compression clients apply to large bodies.
func inflate(b []byte) ([]byte, error) {
	r, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, 64<<20))
}

// DefaultOutboxMaxBytes bounds the outbox; the oldest events go first.
const DefaultOutboxMaxBytes = 1 << 30

// outboxTrimInterval is how often the outbox size is checked.
const outboxTrimInterval = 10 * time.Second

// outboxLoop keeps the outbox under OutboxMaxBytes. Events dropped unread
// show up to readers as a gap below EventOffsets' min, which they count
// and report; broker writes never wait for readers.
func (b *Broker) outboxLoop() { b.every(outboxTrimInterval, b.trimOutbox) }

// trimOutbox drops the oldest events beyond the size bound, estimating the
// size from the latest events' record sizes.
func (b *Broker) trimOutbox() {
	minOff, maxOff := b.EventOffsets()
	if maxOff-minOff < 2 {
		return
	}
	var bytes, n int64
	it := b.store.NewQueueIter(EventsTopic, 0, store.IterOptions{UnitsOnly: true, MaxUnits: 64})
	for ok := it.SeekGE(max(minOff, maxOff-64)); ok; ok = it.Next() {
		bytes += int64(it.Unit().Size)
		n++
	}
	it.Close()
	if n == 0 {
		return
	}
	avg := max(bytes/n, 1)
	keep := b.opts.OutboxMaxBytes / avg
	if maxOff-minOff <= keep {
		return
	}
	newMin := maxOff - keep
	if err := b.store.TrimQueue(EventsTopic, 0, newMin); err != nil {
		b.log.Error("outbox trim failed", "err", err)
		return
	}
	b.log.Warn("outbox over its size bound: oldest events dropped", "from", minOff, "to", newMin-1, "max_bytes", b.opts.OutboxMaxBytes)
}

// TrimOutboxNow applies the outbox size bound now rather than at the next
// periodic check.
func (b *Broker) TrimOutboxNow() { b.trimOutbox() }
