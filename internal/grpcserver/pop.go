package grpcserver

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// Keys of the POP state in the store's index (doc.go has the layout).
const (
	secretMeta   = "grpc/pop/secret"
	cursorPrefix = "grpc/pop/c/"
	flightPrefix = "grpc/pop/f/"
	// maxScan bounds the queue units one receive examines per queue, so
	// a selective filter over a long backlog cannot hold the lock long.
	maxScan = 4096
)

// flight is a message handed out and not yet acknowledged.
type flight struct {
	attempt  int32  // deliveries so far, 1 on the first
	delivery uint64 // the current delivery; its receipt handle names it
	deadline int64  // Unix ms when it becomes deliverable again
	// owner, for a receive with auto_renew (push consumers), is the client
	// whose live session keeps the message invisible, renewing deadline,
	// until renewUntil (Unix ms).
	owner      string
	renewUntil int64
}

// maxRenew bounds how long a push consumer's live session keeps one
// message invisible.
const maxRenew = time.Hour

// popQueue is one queue's POP state for one group.
type popQueue struct {
	cursor  int64 // next offset never handed out
	flights map[int64]*flight
}

type popKey struct{ group, topic string }

// popTopic is the POP state of one (group, topic), behind its own lock.
type popTopic struct {
	mu     sync.Mutex
	queues map[int32]*popQueue // nil until loaded from the store
}

// lock returns the locked state of (group, topic); the caller unlocks it.
func (p *popState) lock(k popKey) *popTopic {
	p.mu.Lock()
	pt := p.mu.topics[k]
	if pt == nil {
		pt = &popTopic{}
		p.mu.topics[k] = pt
	}
	p.mu.Unlock()
	pt.mu.Lock()
	return pt
}

// popState owns the POP state of every (group, topic): what was handed
// out, until when, and the receipt handles naming it.
type popState struct {
	st     *store.Store
	b      *broker.Broker
	log    *slog.Logger
	secret []byte
	nextID atomic.Uint64
	// alive reports whether a client's session is alive (auto-renewed
	// flights); set once before serving.
	alive func(clientID string) bool

	mu struct {
		sync.Mutex
		topics map[popKey]*popTopic
	}
	waitMu  sync.Mutex
	waiters map[string]map[*waiter]struct{} // by topic
	waiting atomic.Int64
	// parked counts the waiting receives asleep until their wake-up.
	parked atomic.Int64

	attempts struct {
		sync.Mutex
		byKey map[attemptKey]*attemptEntry
		order []attemptKey // oldest first, for eviction
	}
}

// maxAttempts bounds the remembered receive attempts.
const maxAttempts = 4096

// attemptKey names a push consumer's receive attempt (attempt_id).
type attemptKey struct{ client, attempt string }

// attemptEntry is what a receive attempt handed out.
type attemptEntry struct {
	group, topic string
	ds           []delivery
}

// rememberAttempt records what a receive attempt handed out, so a retry
// of the same attempt (its answer was lost) gets the same messages.
func (p *popState) rememberAttempt(client, attempt string, r popRequest, ds []delivery) {
	if attempt == "" {
		return
	}
	a := &p.attempts
	a.Lock()
	defer a.Unlock()
	if a.byKey == nil {
		a.byKey = map[attemptKey]*attemptEntry{}
	}
	k := attemptKey{client, attempt}
	if _, ok := a.byKey[k]; !ok {
		a.order = append(a.order, k)
	}
	kept := make([]delivery, len(ds))
	for i, d := range ds {
		d.rec = nil // read again on a replay: keep no message bodies here
		kept[i] = d
	}
	a.byKey[k] = &attemptEntry{group: r.group, topic: r.topic, ds: kept}
	for len(a.order) > maxAttempts {
		delete(a.byKey, a.order[0])
		a.order = a.order[1:]
	}
}

// replayAttempt returns the deliveries of an earlier receive attempt that
// are still current: neither acknowledged, changed nor handed out again.
func (p *popState) replayAttempt(client, attempt string, r popRequest, now time.Time) []delivery {
	if attempt == "" {
		return nil
	}
	p.attempts.Lock()
	e := p.attempts.byKey[attemptKey{client, attempt}]
	p.attempts.Unlock()
	if e == nil || e.group != r.group || e.topic != r.topic {
		return nil
	}
	pt := p.lock(popKey{r.group, r.topic})
	defer pt.mu.Unlock()
	var out []delivery
	for _, d := range e.ds {
		pq := pt.queues[d.queue]
		if pq == nil {
			continue
		}
		f := pq.flights[d.offset]
		if f == nil || f.delivery != d.id {
			continue
		}
		if visible, _ := p.visibleLocked(f, now, r.invisible); visible {
			continue
		}
		rec, err := p.b.View().MessageAt(r.topic, d.queue, d.offset)
		if err != nil {
			continue
		}
		d.rec, d.deadline = rec, f.deadline
		out = append(out, d)
	}
	return out
}

func newPopState(st *store.Store, b *broker.Broker, log *slog.Logger) (*popState, error) {
	p := &popState{st: st, b: b, log: log, waiters: map[string]map[*waiter]struct{}{}}
	p.mu.topics = map[popKey]*popTopic{}
	secret, err := st.Meta(secretMeta)
	if errors.Is(err, store.ErrNotFound) {
		secret = make([]byte, 32)
		rand.Read(secret)
		err = st.PutMeta(secretMeta, secret)
	}
	if err != nil {
		return nil, fmt.Errorf("grpcserver: POP secret: %w", err)
	}
	p.secret = secret
	var seed [8]byte
	rand.Read(seed[:])
	p.nextID.Store(binary.BigEndian.Uint64(seed[:]) >> 1)
	return p, nil
}

func keyBase(prefix string, k popKey) []byte {
	return []byte(prefix + k.group + "\x00" + k.topic + "\x00")
}

func cursorKey(k popKey, q int32) []byte {
	return binary.BigEndian.AppendUint32(keyBase(cursorPrefix, k), uint32(q))
}

func flightKey(k popKey, q int32, off int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(keyBase(flightPrefix, k), uint32(q)), uint64(off))
}

func (f *flight) encode() []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(f.attempt))
	b = binary.BigEndian.AppendUint64(b, f.delivery)
	b = binary.BigEndian.AppendUint64(b, uint64(f.deadline))
	if f.owner != "" {
		b = binary.BigEndian.AppendUint64(b, uint64(f.renewUntil))
		b = append(b, f.owner...)
	}
	return b
}

func decodeFlight(b []byte) (*flight, bool) {
	if len(b) < 20 || (len(b) > 20 && len(b) <= 28) {
		return nil, false
	}
	f := &flight{attempt: int32(binary.BigEndian.Uint32(b)), delivery: binary.BigEndian.Uint64(b[4:]), deadline: int64(binary.BigEndian.Uint64(b[12:]))}
	if len(b) > 28 {
		f.renewUntil, f.owner = int64(binary.BigEndian.Uint64(b[20:])), string(b[28:])
	}
	return f, true
}

// visibleLocked reports whether a flight's invisible time has ended. A
// flight of a push consumer whose session is alive is renewed instead (up
// to its renewUntil), which renew reports so the caller persists it.
func (p *popState) visibleLocked(f *flight, now time.Time, invisible time.Duration) (visible, renewed bool) {
	ms := now.UnixMilli()
	if f.deadline > ms {
		return false, false
	}
	if f.owner == "" || ms >= f.renewUntil || p.alive == nil || !p.alive(f.owner) {
		return true, false
	}
	f.deadline = min(now.Add(invisible).UnixMilli(), f.renewUntil)
	return false, true
}

// queuesLocked returns the state of (group, topic), loading it from the
// store the first time, for the topic's nq read queues.
func (p *popState) queuesLocked(pt *popTopic, k popKey, nq int) (map[int32]*popQueue, error) {
	qs := pt.queues
	if qs == nil {
		qs = map[int32]*popQueue{}
		base := keyBase(flightPrefix, k)
		var keys [][]byte
		if err := p.st.ScanKeys(base, nil, func(key []byte) bool {
			keys = append(keys, bytes.Clone(key))
			return true
		}); err != nil {
			return nil, err
		}
		for _, key := range keys {
			rest := key[len(base):]
			if len(rest) != 12 {
				continue
			}
			v, ok, err := p.st.Value(key, nil)
			if err != nil {
				return nil, err
			}
			f, good := decodeFlight(v)
			if !ok || !good {
				continue
			}
			q, off := int32(binary.BigEndian.Uint32(rest)), int64(binary.BigEndian.Uint64(rest[4:]))
			pq := qs[q]
			if pq == nil {
				pq = &popQueue{cursor: -1, flights: map[int64]*flight{}}
				qs[q] = pq
			}
			pq.flights[off] = f
		}
		pt.queues = qs
	}
	var kvs []store.KV
	for q := range int32(nq) {
		pq := qs[q]
		if pq == nil {
			pq = &popQueue{cursor: -1, flights: map[int64]*flight{}}
			qs[q] = pq
		}
		if pq.cursor >= 0 {
			continue
		}
		v, ok, err := p.st.Value(cursorKey(k, q), nil)
		if err != nil {
			return nil, err
		}
		if ok && len(v) == 8 {
			pq.cursor = int64(binary.BigEndian.Uint64(v))
			continue
		}
		pq.cursor = p.startOffset(k, q)
		kvs = append(kvs, store.KV{Key: cursorKey(k, q), Value: binary.BigEndian.AppendUint64(nil, uint64(pq.cursor))})
	}
	return qs, p.st.PutValues(kvs...)
}

// startOffset is where a group new to POP starts in a queue: where it
// left off consuming by pull, else at the start while the queue's first
// messages are still there, else at the tail.
func (p *popState) startOffset(k popKey, q int32) int64 {
	if off, ok := p.st.ConsumerOffset(k.group, k.topic, q); ok {
		return off
	}
	minOff, maxOff := p.st.QueueOffsets(k.topic, q)
	if minOff == 0 {
		return 0
	}
	return maxOff
}

// delivery is one message handed out by receive.
type delivery struct {
	rec      message.Record
	queue    int32
	offset   int64
	attempt  int32
	deadline int64
	id       uint64 // the flight's delivery id
	handle   string
}

// popRequest is what one receive asks for.
type popRequest struct {
	group, topic  string
	readQueues    int
	filter        broker.Filter
	batch         int
	invisible     time.Duration
	maxDeliveries int32 // a message due for delivery max+1 goes to %DLQ%group
	fifo          bool
	owner         string       // with auto_renew: the receiving client
	topicRes      *pb.Resource // the topic as the client named it
}

// receive hands out up to r.batch messages: first those whose invisible
// time ended (delivery attempt + 1, or the dead-letter topic past the
// limit), then new ones from every queue. next is the earliest time an
// in-flight message becomes deliverable again (zero: none).
func (p *popState) receive(r popRequest, now time.Time) (out []delivery, next time.Time, err error) {
	k := popKey{r.group, r.topic}
	pt := p.lock(k)
	defer pt.mu.Unlock()
	qs, err := p.queuesLocked(pt, k, r.readQueues)
	if err != nil {
		return nil, next, err
	}
	deadline := now.Add(r.invisible).UnixMilli()
	renewUntil := int64(0)
	if r.owner != "" {
		renewUntil = now.Add(maxRenew).UnixMilli()
	}
	var put []store.KV
	var del [][]byte
	touched := map[int32]bool{}
	qids := make([]int32, 0, len(qs))
	for q := range qs {
		qids = append(qids, q)
	}
	slices.Sort(qids)

	// Redeliveries, oldest offset first in each queue.
	for _, q := range qids {
		pq := qs[q]
		offs := make([]int64, 0, len(pq.flights))
		for off, f := range pq.flights {
			visible, renewed := p.visibleLocked(f, now, r.invisible)
			if renewed {
				put = append(put, store.KV{Key: flightKey(k, q, off), Value: f.encode()})
			}
			if visible {
				offs = append(offs, off)
			} else if t := time.UnixMilli(f.deadline); next.IsZero() || t.Before(next) {
				next = t
			}
		}
		slices.Sort(offs)
		for _, off := range offs {
			if len(out) >= r.batch {
				if t := time.UnixMilli(pq.flights[off].deadline); next.IsZero() || t.Before(next) {
					next = t
				}
				continue
			}
			f := pq.flights[off]
			rec, err := p.b.View().MessageAt(r.topic, q, off)
			if err != nil {
				// Gone with retention, or unreadable: nothing to deliver.
				p.log.Warn("in-flight message unreadable; dropped", "group", r.group, "topic", r.topic, "queue", q, "offset", off, "err", err)
				delete(pq.flights, off)
				del = append(del, flightKey(k, q, off))
				touched[q] = true
				continue
			}
			if f.attempt+1 > r.maxDeliveries {
				if err := p.b.DeadLetter(r.group, rec, fmt.Sprintf("delivered %d times over gRPC, the limit is %d", f.attempt, r.maxDeliveries)); err != nil {
					return out, next, err
				}
				delete(pq.flights, off)
				del = append(del, flightKey(k, q, off))
				touched[q] = true
				continue
			}
			f.attempt++
			f.delivery = p.nextID.Add(1)
			f.deadline = deadline
			f.owner, f.renewUntil = r.owner, renewUntil
			put = append(put, store.KV{Key: flightKey(k, q, off), Value: f.encode()})
			out = append(out, delivery{rec: rec, queue: q, offset: off, attempt: f.attempt, deadline: deadline})
		}
	}

	// New messages, from every queue.
	for _, q := range qids {
		if len(out) >= r.batch {
			break
		}
		pq := qs[q]
		if pq.cursor < 0 {
			continue // not a read queue of the topic (any more)
		}
		minOff, maxOff := p.st.QueueOffsets(r.topic, q)
		if pq.cursor > maxOff {
			// The queue is shorter than the cursor: the topic was deleted
			// and created again. Start over at what it holds.
			p.log.Info("POP cursor past the queue's end; the topic was recreated", "group", r.group, "topic", r.topic, "queue", q, "cursor", pq.cursor, "max", maxOff)
			pq.cursor = minOff
			touched[q] = true
			put = append(put, store.KV{Key: cursorKey(k, q), Value: binary.BigEndian.AppendUint64(nil, uint64(minOff))})
		}
		if r.fifo && len(pq.flights) > 0 {
			continue // an earlier message of this queue is in flight
		}
		if pq.cursor >= maxOff {
			continue
		}
		want := r.batch - len(out)
		got, cursor, err := p.scan(r, q, pq.cursor, want)
		if err != nil {
			return out, next, err
		}
		for _, rec := range got {
			off := rec.QueueOffset()
			f := &flight{attempt: 1, delivery: p.nextID.Add(1), deadline: deadline, owner: r.owner, renewUntil: renewUntil}
			pq.flights[off] = f
			put = append(put, store.KV{Key: flightKey(k, q, off), Value: f.encode()})
			out = append(out, delivery{rec: rec, queue: q, offset: off, attempt: 1, deadline: deadline})
		}
		if cursor != pq.cursor {
			pq.cursor = cursor
			touched[q] = true
			// The cursor and the flights it passed go in one batch, so a
			// crash never leaves the cursor past a message not in flight.
			put = append(put, store.KV{Key: cursorKey(k, q), Value: binary.BigEndian.AppendUint64(nil, uint64(cursor))})
		}
	}
	for i := range out {
		d := &out[i]
		f := qs[d.queue].flights[d.offset]
		d.id, d.handle = f.delivery, p.handle(k, d.queue, d.offset, f)
	}
	if err := p.st.PutValues(put...); err != nil {
		return nil, next, err
	}
	if err := p.st.DeleteKeys(del...); err != nil {
		return nil, next, err
	}
	for q := range touched {
		p.commitLocked(k, q, qs[q])
	}
	return out, next, nil
}

// scan reads up to want matching messages of queue q from off; cursor is
// the offset after the last unit examined.
func (p *popState) scan(r popRequest, q int32, off int64, want int) (got []message.Record, cursor int64, err error) {
	it := p.st.NewQueueIter(r.topic, q, store.IterOptions{
		MaxUnits: maxScan,
		Filter: func(u store.Unit) store.UnitVerdict {
			if r.filter.MatchTagHash(u.TagCode) {
				return store.UnitKeep
			}
			return store.UnitSkip
		},
	})
	defer it.Close()
	cursor = off
	var match [1]bool
	for ok := it.SeekGE(off); ok; ok = it.Next() {
		rec := it.Record()
		if r.filter.NeedsRecord() {
			if err := r.filter.Match([]message.Record{rec}, match[:]); err != nil {
				return got, cursor, nil // not filtered: stop before it
			}
			if !match[0] {
				cursor = it.Offset() + 1
				continue
			}
		}
		got = append(got, bytes.Clone(rec))
		cursor = it.Offset() + 1
		if len(got) >= want {
			return got, cursor, nil
		}
	}
	if err := it.Error(); err != nil {
		return got, cursor, err
	}
	// The iterator stopped at the end or at its scan bound: units it
	// skipped by tag hash are passed too.
	return got, max(cursor, it.NextOffset()), nil
}

// commitLocked records the group's consumer offset of q: the lowest
// offset in flight, else the cursor, so retention, lag figures and a
// 4.x consumer of the group see what POP consumed.
func (p *popState) commitLocked(k popKey, q int32, pq *popQueue) {
	if pq.cursor < 0 {
		return // not a read queue: nothing of it is consumed here
	}
	low := pq.cursor
	for off := range pq.flights {
		low = min(low, off)
	}
	if err := p.st.CommitOffset(k.group, k.topic, q, low); err != nil {
		p.log.Warn("commit POP offset", "group", k.group, "topic", k.topic, "err", err)
	}
}

// Receipt handles: see doc.go for the layout.
const (
	handleVersion = 1
	handleBody    = 1 + 4 + 8 + 8 + 8
	handleMAC     = 16
)

func (p *popState) handle(k popKey, q int32, off int64, f *flight) string {
	b := make([]byte, 0, handleBody+handleMAC)
	b = append(b, handleVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(q))
	b = binary.BigEndian.AppendUint64(b, uint64(off))
	b = binary.BigEndian.AppendUint64(b, f.delivery)
	b = binary.BigEndian.AppendUint64(b, uint64(f.deadline))
	b = append(b, p.mac(keyBase("rh/", k), b)[:handleMAC]...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// parsedHandle is a verified receipt handle.
type parsedHandle struct {
	queue    int32
	offset   int64
	delivery uint64
	deadline int64
}

func (p *popState) parseHandle(k popKey, h string) (parsedHandle, error) {
	b, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil || len(b) != handleBody+handleMAC || b[0] != handleVersion {
		return parsedHandle{}, ErrBadReceiptHandle
	}
	if !hmac.Equal(b[handleBody:], p.mac(keyBase("rh/", k), b[:handleBody])[:handleMAC]) {
		return parsedHandle{}, ErrBadReceiptHandle
	}
	return parsedHandle{
		queue:    int32(binary.BigEndian.Uint32(b[1:])),
		offset:   int64(binary.BigEndian.Uint64(b[5:])),
		delivery: binary.BigEndian.Uint64(b[13:]),
		deadline: int64(binary.BigEndian.Uint64(b[21:])),
	}, nil
}

// current returns the flight a handle names while its delivery is the
// current one and its invisible time has not ended.
func (p *popState) currentLocked(pt *popTopic, k popKey, h parsedHandle, nq int, now time.Time) (*popQueue, *flight, error) {
	qs, err := p.queuesLocked(pt, k, nq)
	if err != nil {
		return nil, nil, err
	}
	pq := qs[h.queue]
	if pq == nil {
		return nil, nil, ErrBadReceiptHandle
	}
	f := pq.flights[h.offset]
	switch {
	case f == nil:
		return nil, nil, fmt.Errorf("%w: the message is not in flight (acknowledged or moved)", ErrBadReceiptHandle)
	case f.delivery != h.delivery:
		return nil, nil, fmt.Errorf("%w: superseded by a later delivery or a changed invisible duration", ErrBadReceiptHandle)
	}
	visible, renewed := p.visibleLocked(f, now, DefaultInvisible)
	if visible {
		return nil, nil, fmt.Errorf("%w: the invisible duration has ended", ErrBadReceiptHandle)
	}
	if renewed {
		if err := p.st.PutValues(store.KV{Key: flightKey(k, h.queue, h.offset), Value: f.encode()}); err != nil {
			return nil, nil, err
		}
	}
	return pq, f, nil
}

// ack ends the flight a handle names.
func (p *popState) ack(group, topic string, nq int, handle string, now time.Time) error {
	k := popKey{group, topic}
	h, err := p.parseHandle(k, handle)
	if err != nil {
		return err
	}
	pt := p.lock(k)
	defer pt.mu.Unlock()
	pq, _, err := p.currentLocked(pt, k, h, nq, now)
	if err != nil {
		return err
	}
	delete(pq.flights, h.offset)
	if err := p.st.DeleteKeys(flightKey(k, h.queue, h.offset)); err != nil {
		return err
	}
	p.commitLocked(k, h.queue, pq)
	return nil
}

// changeInvisible makes the message a handle names deliverable again
// after d and returns its new handle; the old one stops working. A push
// consumer's delivery (auto-renewed) given up this way is a failed
// attempt: it waits at least what retry says for its attempt.
func (p *popState) changeInvisible(group, topic string, nq int, handle string, d time.Duration, retry broker.RetryPolicy, now time.Time) (string, error) {
	k := popKey{group, topic}
	h, err := p.parseHandle(k, handle)
	if err != nil {
		return "", err
	}
	pt := p.lock(k)
	defer pt.mu.Unlock()
	_, f, err := p.currentLocked(pt, k, h, nq, now)
	if err != nil {
		return "", err
	}
	if f.owner != "" {
		d = max(d, retry.Delay(int(f.attempt)))
	}
	old := f.deadline
	f.delivery = p.nextID.Add(1)
	f.deadline = now.Add(d).UnixMilli()
	f.owner, f.renewUntil = "", 0 // the client chose when it comes back
	if err := p.st.PutValues(store.KV{Key: flightKey(k, h.queue, h.offset), Value: f.encode()}); err != nil {
		return "", err
	}
	if f.deadline < old {
		// Receives that sleep past the new deadline look again.
		p.wakeBefore(k, f.deadline)
	}
	return p.handle(k, h.queue, h.offset, f), nil
}

// deadLetter moves the message a handle names to %DLQ%group and ends
// its flight.
func (p *popState) deadLetter(group, topic string, nq int, handle string, now time.Time) error {
	k := popKey{group, topic}
	h, err := p.parseHandle(k, handle)
	if err != nil {
		return err
	}
	pt := p.lock(k)
	defer pt.mu.Unlock()
	pq, f, err := p.currentLocked(pt, k, h, nq, now)
	if err != nil {
		return err
	}
	rec, err := p.b.View().MessageAt(topic, h.queue, h.offset)
	if err == nil {
		err = p.b.DeadLetter(group, rec, fmt.Sprintf("the client gave up after %d deliveries", f.attempt))
	}
	if err != nil {
		return err
	}
	delete(pq.flights, h.offset)
	if err := p.st.DeleteKeys(flightKey(k, h.queue, h.offset)); err != nil {
		return err
	}
	p.commitLocked(k, h.queue, pq)
	return nil
}

// release makes deliveries that never reached the client deliverable
// again at once, unless a later delivery or an ack got there first.
func (p *popState) release(group, topic string, ds []delivery, now time.Time) {
	k := popKey{group, topic}
	pt := p.lock(k)
	defer pt.mu.Unlock()
	var put []store.KV
	for _, d := range ds {
		pq := pt.queues[d.queue]
		if pq == nil {
			continue
		}
		if f := pq.flights[d.offset]; f != nil && f.deadline == d.deadline && f.attempt == d.attempt {
			f.deadline, f.owner, f.renewUntil = now.UnixMilli(), "", 0
			put = append(put, store.KV{Key: flightKey(k, d.queue, d.offset), Value: f.encode()})
		}
	}
	if err := p.st.PutValues(put...); err != nil {
		p.log.Warn("release undelivered messages", "group", group, "topic", topic, "err", err)
	}
	if len(put) > 0 {
		p.wake(topic)
	}
}

// dropTopic forgets every group's POP state of a deleted topic, in memory
// and in the store, so the topic created again starts over.
func (p *popState) dropTopic(topic string) {
	p.mu.Lock()
	var pts []*popTopic
	for k, pt := range p.mu.topics {
		if k.topic == topic {
			pts = append(pts, pt)
			delete(p.mu.topics, k)
		}
	}
	p.mu.Unlock()
	for _, pt := range pts {
		pt.mu.Lock()
		defer pt.mu.Unlock()
		pt.queues = nil
	}
	var keys [][]byte
	for _, prefix := range []string{cursorPrefix, flightPrefix} {
		err := p.st.ScanKeys([]byte(prefix), nil, func(key []byte) bool {
			rest := key[len(prefix):] // group NUL topic NUL ...
			if _, after, ok := bytes.Cut(rest, []byte{0}); ok && bytes.HasPrefix(after, []byte(topic+"\x00")) {
				keys = append(keys, bytes.Clone(key))
			}
			return true
		})
		if err != nil {
			p.log.Warn("drop the POP state of a deleted topic", "topic", topic, "err", err)
		}
	}
	if err := p.st.DeleteKeys(keys...); err != nil {
		p.log.Warn("drop the POP state of a deleted topic", "topic", topic, "err", err)
	}
}

// waiter is a receive waiting on a topic for messages of its group.
type waiter struct {
	group string
	// ch is told when the receive should look again; it holds one signal.
	ch chan struct{}
	// wakeAt is when the receive wakes by itself (Unix ms); math.MaxInt64
	// while it is looking, so that a change meanwhile is not missed.
	wakeAt atomic.Int64
}

// sleepUntil notes that the receive sleeps until t; it is woken earlier
// by an arrival or by a flight of its group made visible before t.
func (w *waiter) sleepUntil(t time.Time) { w.wakeAt.Store(t.UnixMilli()) }

// looking notes that the receive looks at the queues.
func (w *waiter) looking() { w.wakeAt.Store(math.MaxInt64) }

// watch registers a receive of group waiting on topic; stop unregisters
// it.
func (p *popState) watch(group, topic string) (w *waiter, stop func()) {
	w = &waiter{group: group, ch: make(chan struct{}, 1)}
	w.looking()
	p.waitMu.Lock()
	m := p.waiters[topic]
	if m == nil {
		m = map[*waiter]struct{}{}
		p.waiters[topic] = m
	}
	m[w] = struct{}{}
	p.waitMu.Unlock()
	return w, func() {
		p.waitMu.Lock()
		defer p.waitMu.Unlock()
		delete(m, w)
		if len(m) == 0 && p.waiters[topic] != nil && len(p.waiters[topic]) == 0 {
			delete(p.waiters, topic)
		}
	}
}

// arrived is the broker's arrival callback; it must not block.
func (p *popState) arrived(topic string, _ int32) { p.wake(topic) }

// wake tells every receive waiting on topic to look again.
func (p *popState) wake(topic string) {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	for w := range p.waiters[topic] {
		w.signal()
	}
}

// wakeBefore tells the receives of k's group waiting on its topic that
// would sleep past deadline (Unix ms) to look again.
func (p *popState) wakeBefore(k popKey, deadline int64) {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	for w := range p.waiters[k.topic] {
		if w.group == k.group && w.wakeAt.Load() > deadline {
			w.signal()
		}
	}
}

func (w *waiter) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}
