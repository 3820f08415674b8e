package broker

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/inflate"
)

// EventsTopic is the outbox: one queue of retry and dead-letter events,
// written in the same store append as the move each describes, so an event
// exists if and only if its move happened.
const EventsTopic = "RMQ_SYS_EVENTS"

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
func (b *Broker) outboxOn() bool { return b.opts.Outbox }

// newEvent builds the outbox record for a move. moved is the message
// stored right before it in the same append.
func (b *Broker) newEvent(ev outbox.Record, moved *message.Message) *message.Message {
	ev.MovedSize = int64(moved.RecordLen()) + 4 // the store's CRC trailer
	body := ev.Encode()
	return &message.Message{
		Topic:         EventsTopic,
		BornTimestamp: b.now().UnixMilli(),
		BornHost:      b.storeHost,
		StoreHost:     b.storeHost,
		Body:          body,
	}
}

// EventOffsets returns the first retained and the next outbox offset.
func (o Outbox) EventOffsets() (minOff, maxOff int64) {
	b := o.b
	return b.store.QueueOffsets(EventsTopic, 0)
}

// WaitEvents returns a channel closed when events are stored after the
// call. Check EventOffsets after taking it, so none is missed.
func (o Outbox) WaitEvents() <-chan struct{} {
	b := o.b
	return b.events.wait()
}

// ReadEvents appends to dst up to max outbox events starting at offset
// from, each with its moved message's body and properties. An offset
// below the retained range gives store.ErrOffsetGone.
func (o Outbox) ReadEvents(from int64, max int, dst []outbox.Event) ([]outbox.Event, error) {
	b := o.b
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
		rec, err := outbox.DecodeRecord(r.Body())
		if err != nil {
			b.log.Error("outbox event malformed; skipped", "offset", it.Offset(), "err", err)
			continue
		}
		dst = append(dst, rec.Event(it.Offset(), r.StoreTimestamp(), r.CommitLogOffset()))
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
		e.SetMoved(&m)
		if m.SysFlag&message.SysFlagCompressed != 0 {
			if body, err := inflate.Body(m.SysFlag, m.Body, maxEventBody); err == nil {
				e.Body = body
			}
		}
	}
	return dst, nil
}

// maxEventBody bounds a moved message's body as an event carries it
// decompressed; a larger one stays as stored.
const maxEventBody = 64 << 20

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
	minOff, maxOff := b.Outbox().EventOffsets()
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
