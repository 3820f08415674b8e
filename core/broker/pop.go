package broker

import (
	"bytes"
	"container/heap"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
)

// The POP engine: consumption by receive, acknowledge and change of
// invisible time, as RocketMQ 5 clients consume (doc.go, "POP"). Its
// state lives in the store's replicated index under keys a front end of
// an earlier layout wrote, so they keep their names.
const (
	popSecretMeta   = "grpc/pop/secret"
	popCursorPrefix = "grpc/pop/c/"
	popFlightPrefix = "grpc/pop/f/"
	// popMaxScan bounds the queue units one receive examines per queue,
	// so a selective filter over a long backlog cannot hold the lock long.
	popMaxScan = 4096
	// DefaultPOPInvisible is how long a message received without an
	// invisible duration stays invisible, and how far a live push
	// consumer's session renews it at a time.
	DefaultPOPInvisible = 30 * time.Second
	// DefaultPOPMaxWaiting bounds the receives waiting at once unless
	// POPOptions says otherwise: eight for each of the gRPC port's 1,024
	// connections, since a push consumer keeps a receive waiting for each
	// topic (a FIFO one for each queue) and its client retries a refused
	// one within 20 ms. A waiting gRPC receive holds about 28 KiB, client
	// and server side together (BenchmarkWaitingReceiveMemory in
	// internal/grpcserver), so all of them at most about 230 MiB.
	DefaultPOPMaxWaiting = 8192
)

// Errors of the POP engine, tested with errors.Is; their texts say why.
var (
	// ErrBadReceiptHandle: a receipt handle does not verify, or names a
	// delivery that is no longer current (acknowledged, delivered again,
	// changed, or past its invisible time).
	ErrBadReceiptHandle = errors.New("receipt handle is invalid, expired or superseded")
	// ErrBadTransactionID: a transaction id does not verify for its topic.
	ErrBadTransactionID = errors.New("transaction id is invalid")
	// ErrNoMessage: a receive's long polling ended with nothing to hand
	// out (or the front end stopped it).
	ErrNoMessage = errors.New("no message")
	// ErrTooManyWaiting: as many receives wait as POPOptions allows.
	ErrTooManyWaiting = errors.New("too many waiting receives")
)

// POP is the broker's POP consumption engine as a front end of RocketMQ
// 5 clients reaches it: receives with long polling, receipt handles,
// acknowledgements, changes of invisible time, dead-letter moves, and the
// transaction ids such a front end hands out. Open it before the first
// call; a replica's broker never opens it.
type POP struct{ b *Broker }

// POP returns the broker's POP engine.
func (b *Broker) POP() POP { return POP{b} }

// POPOptions configure the POP engine. Zero values mean the default.
type POPOptions struct {
	// Alive reports whether a client's session lives: a push consumer's
	// (auto-renewed) messages stay invisible while it does. Default: none
	// lives.
	Alive func(clientID string) bool
	// MaxWaiting bounds the receives waiting for messages at once; more
	// are refused with ErrTooManyWaiting. Default DefaultPOPMaxWaiting.
	MaxWaiting int
	// Now is the engine's clock. Default the broker's.
	Now func() time.Time
}

// Open loads the secret of receipt handles and transaction ids from the
// store, creating it the first time (a handle given before a restart or
// by the set's previous leader stays valid), and sets the options. It
// may be called again, by a new front end of the same broker.
func (p POP) Open(o POPOptions) error {
	e := p.b.pop
	if o.MaxWaiting <= 0 {
		o.MaxWaiting = DefaultPOPMaxWaiting
	}
	if o.Now == nil {
		o.Now = p.b.now
	}
	secret, err := p.b.store.Meta(popSecretMeta)
	if errors.Is(err, store.ErrNotFound) {
		secret = make([]byte, 32)
		rand.Read(secret)
		err = p.b.store.PutMeta(popSecretMeta, secret)
	}
	if err != nil {
		return fmt.Errorf("broker: POP secret: %w", err)
	}
	e.opts.Store(newPOPOpened(o, secret))
	return nil
}

// popOpened is what Open set.
type popOpened struct {
	POPOptions
	secret []byte
	macs   sync.Pool // of *popMAC keyed with secret
}

func newPOPOpened(o POPOptions, secret []byte) *popOpened {
	op := &popOpened{POPOptions: o, secret: secret}
	op.macs.New = func() any { return &popMAC{h: hmac.New(sha256.New, secret)} }
	return op
}

// popMAC is a keyed HMAC kept for reuse: after its first Reset it
// restores its keyed state instead of hashing the key's pads again, and
// buf holds what it hashes and its sum without allocating.
type popMAC struct {
	h   hash.Hash
	buf []byte
}

// opened returns what Open set, or why the engine serves nothing.
func (p *popEngine) opened() (*popOpened, error) {
	o := p.opts.Load()
	if o == nil {
		return nil, refusef(ErrUnavailable, "POP is not open on this broker")
	}
	return o, nil
}

// POPReceive is one receive.
type POPReceive struct {
	Group, Topic string
	// ReadQueues is the topic's read queue count, as the front end
	// checked it.
	ReadQueues int
	Filter     Filter // compiled by CompileFilter
	Batch      int    // at most this many messages, at least 1
	// Invisible is how long what is handed out stays invisible.
	Invisible time.Duration
	// Owner, for a push consumer (auto renew), is its client id: while
	// Alive says its session lives, its messages stay invisible, for at
	// most an hour.
	Owner string
	// Client and AttemptID name the receive attempt: a retry of one whose
	// answer was lost gets the messages it handed out again, while they
	// are current. No AttemptID: none is remembered.
	Client, AttemptID string
	// Until is when long polling ends with ErrNoMessage; Stop, when
	// closed, ends it at once the same way.
	Until time.Time
	Stop  <-chan struct{}
	// LiteTopics, for a lite consumer of the LITE topic Topic, returns
	// the lite topics it subscribes to now, sorted, or LiteWildcard alone
	// for all of them: the receive takes from their queues (each one
	// queue, ReadQueues is not used) instead of Topic's, taking turns
	// among them, and asks again each time it looks. While it waits, only
	// news of those lite topics wakes it, and it looks at those first.
	LiteTopics func() []string
}

// POPDelivery is one message handed out by a receive.
type POPDelivery struct {
	Record   message.Record
	Queue    int32
	Offset   int64
	Attempt  int32  // 1 on the first delivery
	Deadline int64  // Unix ms when it becomes deliverable again
	Handle   string // the receipt handle naming this delivery
	// Topic is the lite queue's internal topic (LiteQueueTopic) for a
	// lite receive's delivery, "" for any other.
	Topic string
	id    uint64 // the flight's delivery id
}

// Receive hands out up to r.Batch messages of r.Topic to r.Group: first
// those whose invisible time ended, then new ones from every queue,
// waiting until r.Until for some to arrive or become visible again. It
// returns ErrNoMessage when the wait ends empty, ctx's error when ctx
// ends first, and ErrTooManyWaiting when too many receives wait.
func (p POP) Receive(ctx context.Context, r POPReceive) ([]POPDelivery, error) {
	e := p.b.pop
	o, err := e.opened()
	if err != nil {
		return nil, err
	}
	gc, _ := p.b.storedGroupConfig(r.Group)
	req := popRequest{group: r.Group, topic: r.Topic, readQueues: r.ReadQueues, filter: r.Filter, batch: r.Batch,
		invisible: r.Invisible, maxDeliveries: int32(gc.RetryMaxTimes + 1), fifo: gc.ConsumeMessageOrderly, owner: r.Owner}
	if tc, ok := p.b.topics.get(r.Topic); ok && tc.MessageType == MessageTypePriority && !req.fifo && r.LiteTopics == nil {
		req.priority, req.factor = true, gc.priorityFactor()
	}
	if e.waiting.Add(1) > int64(o.MaxWaiting) {
		e.waiting.Add(-1)
		return nil, ErrTooManyWaiting
	}
	defer e.waiting.Add(-1)
	if got := e.replayAttempt(r.Client, r.AttemptID, req, o.Now()); len(got) > 0 {
		return got, nil // a retry of a receive whose answer was lost
	}
	var w *waiter
	var stop func()
	if r.LiteTopics != nil {
		// A lite consumer's waiter outlives the receive: it hears of its
		// lite topics' news between receives too (liteListener).
		w, stop = e.liteListener(r.Group, r.Topic, r.Client)
	}
	if w == nil {
		w, stop = e.watch(r.Group, r.Topic, r.LiteTopics != nil)
	}
	defer stop()
	// due is the earliest time an in-flight message looked at becomes
	// deliverable again; a lite receive woken by its lite topics' news
	// looks at those only, so it keeps the due time of its last full
	// look, from receive to receive.
	var due time.Time
	if w.lite != nil {
		due = w.lite.due
		if !due.IsZero() && !o.Now().Before(due) {
			w.lite.all()
		}
		defer func() { w.lite.due = due }()
	}
	for {
		w.looking()
		now := o.Now()
		var got []POPDelivery
		var next time.Time
		complete := true // the look took in every queue
		if w.lite == nil {
			got, next, err = e.receive(req, now)
		} else {
			complete, got, next, err = e.lookLite(w.lite, req, r.LiteTopics(), now)
		}
		if err != nil {
			return nil, err
		}
		if complete || (!next.IsZero() && (due.IsZero() || next.Before(due))) {
			due = next
		}
		if len(got) > 0 {
			e.rememberAttempt(r.Client, r.AttemptID, req, got)
			return got, nil
		}
		now = o.Now()
		if !now.Before(r.Until) {
			return nil, refusef(ErrNoMessage, "no new message")
		}
		wait := r.Until.Sub(now)
		if !due.IsZero() {
			wait = min(wait, due.Sub(now))
		}
		wait = max(wait, time.Millisecond)
		w.sleepUntil(now.Add(wait))
		t := time.NewTimer(wait)
		e.parked.Add(1)
		select {
		case <-w.ch:
		case <-t.C:
			if w.lite != nil {
				w.lite.all() // a due time or the end: look at everything
			}
		case <-ctx.Done():
			e.parked.Add(-1)
			t.Stop()
			return nil, ctx.Err()
		case <-r.Stop:
			e.parked.Add(-1)
			t.Stop()
			return nil, refusef(ErrNoMessage, "the broker is shutting down")
		}
		e.parked.Add(-1)
		t.Stop()
	}
}

// Release makes deliveries that never reached the client deliverable
// again at once, unless a later delivery or an ack got there first.
func (p POP) Release(group, topic string, ds []POPDelivery) {
	o, err := p.b.pop.opened()
	if err != nil {
		return
	}
	for len(ds) > 0 {
		// A lite receive's deliveries come from several queues' topics.
		t, n := ds[0].Topic, 1
		for n < len(ds) && ds[n].Topic == t {
			n++
		}
		if t == "" {
			t = topic
		}
		p.b.pop.release(group, t, ds[:n], o.Now())
		ds = ds[n:]
	}
}

// Ack ends the delivery a receipt handle names; readQueues is the
// topic's read queue count. A handle not current is ErrBadReceiptHandle.
func (p POP) Ack(group, topic string, readQueues int, handle string) error {
	o, err := p.b.pop.opened()
	if err != nil {
		return err
	}
	return p.b.pop.ack(group, topic, readQueues, []string{handle}, o.Now())[0]
}

// popAckBatch is the most handles one write of AckAll ends: a client's
// AckMessage may name as many as its frame holds, and each write is held
// under the group's lock and, on a set, is one entry of raft's log.
const popAckBatch = 1024

// AckAll acknowledges the messages the receipt handles name, as Ack
// does each, in one write per popAckBatch of them: errs[i] is
// handles[i]'s error, nil once it is acknowledged.
func (p POP) AckAll(group, topic string, readQueues int, handles []string) []error {
	errs := make([]error, len(handles))
	o, err := p.b.pop.opened()
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for i := 0; i < len(handles); i += popAckBatch {
		j := min(i+popAckBatch, len(handles))
		copy(errs[i:j], p.b.pop.ack(group, topic, readQueues, handles[i:j], o.Now()))
	}
	return errs
}

// ChangeInvisible makes the message a receipt handle names deliverable
// again after d and returns its new handle; the old one stops working. A
// push consumer's delivery given up this way is a failed attempt: it
// waits at least what its group's retry policy says for the attempt.
func (p POP) ChangeInvisible(group, topic string, readQueues int, handle string, d time.Duration) (string, error) {
	o, err := p.b.pop.opened()
	if err != nil {
		return "", err
	}
	gc, _ := p.b.storedGroupConfig(group)
	return p.b.pop.changeInvisible(group, topic, readQueues, handle, d, gc.RetryPolicy(p.b.levels), false, o.Now())
}

// Suspend makes the message a receipt handle names deliverable again
// after exactly d, as a lite consumer defers a message it cannot take
// now: not a failed attempt, so its next delivery keeps the attempt
// number and the retry policy does not stretch d. It returns the new
// handle.
func (p POP) Suspend(group, topic string, readQueues int, handle string, d time.Duration) (string, error) {
	o, err := p.b.pop.opened()
	if err != nil {
		return "", err
	}
	return p.b.pop.changeInvisible(group, topic, readQueues, handle, d, RetryPolicy{}, true, o.Now())
}

// DeadLetter moves the message a receipt handle names to %DLQ%<group>
// and ends its delivery.
func (p POP) DeadLetter(group, topic string, readQueues int, handle string) error {
	o, err := p.b.pop.opened()
	if err != nil {
		return err
	}
	return p.b.pop.deadLetter(group, topic, readQueues, handle, o.Now())
}

// TransactionID returns the transaction id of the half message stored
// at off for topic: the offset and a MAC, so a client can end only a
// transaction it was given. It is "" while the engine is not open.
func (p POP) TransactionID(topic string, off int64) string {
	o, err := p.b.pop.opened()
	if err != nil {
		return ""
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(off))
	mac := o.mac(b[:], "txn\x00", topic, "\x00")
	return hex.EncodeToString(b[:]) + hex.EncodeToString(mac[:12])
}

// ParseTransactionID returns the half message offset a transaction id of
// topic names, or ErrBadTransactionID.
func (p POP) ParseTransactionID(topic, id string) (int64, error) {
	o, err := p.b.pop.opened()
	if err != nil {
		return 0, err
	}
	raw, err := hex.DecodeString(id)
	if err != nil || len(raw) != 20 {
		return 0, ErrBadTransactionID
	}
	if mac := o.mac(raw[:8], "txn\x00", topic, "\x00"); !hmac.Equal(raw[8:], mac[:12]) {
		return 0, ErrBadTransactionID
	}
	return int64(binary.BigEndian.Uint64(raw[:8])), nil
}

// Waiting returns the receives waiting for messages.
func (p POP) Waiting() int64 { return p.b.pop.waiting.Load() }

// Parked returns the waiting receives asleep until their next wake-up.
func (p POP) Parked() int64 { return p.b.pop.parked.Load() }

// mac is HMAC-SHA256 under the store's secret of the concatenation of
// domain and then b; the engine is open.
func (p *popEngine) mac(b []byte, domain ...string) [sha256.Size]byte {
	return p.opts.Load().mac(b, domain...)
}

func (o *popOpened) mac(b []byte, domain ...string) (sum [sha256.Size]byte) {
	m := o.macs.Get().(*popMAC)
	m.h.Reset()
	in := m.buf[:0]
	for _, d := range domain {
		in = append(in, d...)
	}
	in = append(in, b...)
	m.h.Write(in)
	copy(sum[:], m.h.Sum(in[:0]))
	if cap(in) <= 1024 {
		m.buf = in
		o.macs.Put(m)
	}
	return sum
}

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
	// due is the deadline of the flight's entry in its queue's due heap:
	// the entry that stands for it. Other entries of the flight are stale.
	due int64
}

// alive reports whether a client's session lives, as Open's options say.
func (p *popEngine) alive(clientID string) bool {
	o := p.opts.Load()
	return o != nil && o.Alive != nil && o.Alive(clientID)
}

// popMaxRenew bounds how long a push consumer's live session keeps one
// message invisible: three hours, as RocketMQ's proxy (renewMaxTimeMillis).
const popMaxRenew = 3 * time.Hour

// popQueue is one queue's POP state for one group.
type popQueue struct {
	cursor  int64 // next offset never handed out
	flights map[int64]*flight
	// due orders the flights by deadline, so a receive finds those due
	// without looking at the others. A flight has one entry that stands
	// for it (flight.due) at or before its deadline: a deadline moved
	// later keeps its entry, which is pushed again when it comes up; one
	// moved earlier is pushed at once (schedule). Entries of flights gone,
	// or superseded, are dropped when they come up, or all at once when
	// they outnumber the flights (compact).
	due dueHeap
	// low is at most the smallest offset in flights, or -1 when unknown:
	// the committed offset (lowest) is found from there, not by a scan.
	low int64
}

func newPOPQueue() *popQueue {
	return &popQueue{cursor: -1, flights: map[int64]*flight{}, low: -1}
}

// add puts a flight of offset off in the queue, due at its deadline.
func (pq *popQueue) add(off int64, f *flight) {
	pq.flights[off] = f
	if pq.low >= 0 && off < pq.low {
		pq.low = off
	}
	pq.schedule(off, f)
}

// schedule gives f an entry at its deadline, the one that stands for it.
func (pq *popQueue) schedule(off int64, f *flight) {
	f.due = f.deadline
	heap.Push(&pq.due, dueEntry{at: f.deadline, off: off})
	if len(pq.due) > 2*len(pq.flights)+64 {
		pq.compact()
	}
}

// compact rebuilds the due heap from the flights, without stale entries.
func (pq *popQueue) compact() {
	pq.due = pq.due[:0]
	for off, f := range pq.flights {
		f.due = f.deadline
		pq.due = append(pq.due, dueEntry{at: f.deadline, off: off})
	}
	heap.Init(&pq.due)
}

// popDue takes the next entry due at or before ms that stands for a
// flight; ok is false when none is due. The flight has no entry after
// this: the caller schedules it again unless it ends.
func (pq *popQueue) popDue(ms int64) (off int64, f *flight, ok bool) {
	for len(pq.due) > 0 && pq.due[0].at <= ms {
		e := heap.Pop(&pq.due).(dueEntry)
		f := pq.flights[e.off]
		if f == nil || f.due != e.at {
			continue // acknowledged, or another entry stands for it
		}
		return e.off, f, true
	}
	return 0, nil, false
}

// nextDue returns the time of the earliest entry (zero: none). It may be
// a stale one: a receive then wakes early and finds nothing due.
func (pq *popQueue) nextDue() time.Time {
	if len(pq.due) == 0 {
		return time.Time{}
	}
	return time.UnixMilli(pq.due[0].at)
}

// lowest returns the smallest offset in flight, or the cursor when none
// is, walking forward from low: acknowledgements in about the order of
// delivery make it a step or two, and it scans the flights only when the
// walk gets longer than they are many.
func (pq *popQueue) lowest() int64 {
	if len(pq.flights) == 0 {
		return pq.cursor
	}
	if pq.low >= 0 {
		for steps := 0; steps <= len(pq.flights) && pq.low < pq.cursor; steps++ {
			if _, ok := pq.flights[pq.low]; ok {
				return min(pq.low, pq.cursor)
			}
			pq.low++
		}
	}
	low := int64(math.MaxInt64)
	for off := range pq.flights {
		low = min(low, off)
	}
	pq.low = low
	return min(low, pq.cursor)
}

// dueEntry is a due heap's entry: a flight's offset and when it is due.
type dueEntry struct{ at, off int64 }

// dueHeap is a min-heap of entries by time, then offset, so flights due
// together go out oldest first (container/heap).
type dueHeap []dueEntry

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].off < h[j].off
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(dueEntry)) }
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type popKey struct{ group, topic string }

// popTopic is the POP state of one (group, topic), behind its own lock.
type popTopic struct {
	mu     sync.Mutex          // guards queues and receives
	queues map[int32]*popQueue // nil until loaded from the store
	// receives counts the receives from a PRIORITY topic, for the
	// group's priority factor.
	receives uint64
	// fifo is whether the group was FIFO at its last receive here: an
	// ack that frees a queue then wakes its waiting receives (fifoFreed).
	fifo bool
}

// lock returns the locked state of (group, topic); the caller unlocks it.
func (p *popEngine) lock(k popKey) *popTopic {
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

// popEngine owns the POP state of every (group, topic): what was handed
// out, until when, and the receipt handles naming it.
type popEngine struct {
	b      *Broker
	nextID atomic.Uint64
	// opts is what Open set; nil until then.
	opts atomic.Pointer[popOpened]

	// mu guards the map of (group, topic) states; each state has its own
	// lock (popTopic.mu).
	mu struct {
		sync.Mutex
		topics map[popKey]*popTopic
	}
	// waits guards the receives waiting, by topic.
	waits struct {
		sync.Mutex
		byTopic map[string]map[*waiter]struct{}
		// lite holds the lite consumers' listeners (liteListener), each
		// registered in byTopic too.
		lite map[liteKey]*waiter
	}
	waiting atomic.Int64
	// parked counts the waiting receives asleep until their wake-up.
	parked atomic.Int64

	// attempts guards the remembered receive attempts.
	attempts struct {
		sync.Mutex
		byKey map[attemptKey]*attemptEntry
		order []attemptKey // oldest first, for eviction
	}
}

// newPopEngine returns the broker's POP engine, closed until Open.
func newPopEngine(b *Broker) *popEngine {
	p := &popEngine{b: b}
	p.mu.topics = map[popKey]*popTopic{}
	p.waits.byTopic = map[string]map[*waiter]struct{}{}
	var seed [8]byte
	rand.Read(seed[:])
	p.nextID.Store(binary.BigEndian.Uint64(seed[:]) >> 1)
	return p
}

// popMaxAttempts bounds the remembered receive attempts.
const popMaxAttempts = 4096

// attemptKey names a push consumer's receive attempt (attempt_id).
type attemptKey struct{ client, attempt string }

// attemptEntry is what a receive attempt handed out.
type attemptEntry struct {
	group, topic string
	ds           []POPDelivery
}

// rememberAttempt records what a receive attempt handed out, so a retry
// of the same attempt (its answer was lost) gets the same messages.
func (p *popEngine) rememberAttempt(client, attempt string, r popRequest, ds []POPDelivery) {
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
	kept := make([]POPDelivery, len(ds))
	for i, d := range ds {
		d.Record = nil // read again on a replay: keep no message bodies here
		kept[i] = d
	}
	a.byKey[k] = &attemptEntry{group: r.group, topic: r.topic, ds: kept}
	for len(a.order) > popMaxAttempts {
		delete(a.byKey, a.order[0])
		a.order = a.order[1:]
	}
}

// replayAttempt returns the deliveries of an earlier receive attempt that
// are still current: neither acknowledged, changed nor handed out again.
func (p *popEngine) replayAttempt(client, attempt string, r popRequest, now time.Time) []POPDelivery {
	if attempt == "" {
		return nil
	}
	p.attempts.Lock()
	e := p.attempts.byKey[attemptKey{client, attempt}]
	p.attempts.Unlock()
	if e == nil || e.group != r.group || e.topic != r.topic {
		return nil
	}
	var out []POPDelivery
	for _, d := range e.ds {
		topic := r.topic
		if d.Topic != "" {
			topic = d.Topic // a lite queue's
		}
		if rec, deadline, ok := p.current(popKey{r.group, topic}, d, r.invisible, now); ok {
			d.Record, d.Deadline = rec, deadline
			out = append(out, d)
		}
	}
	return out
}

// current returns the message of a delivery and its deadline while the
// delivery is current: neither acknowledged, changed nor handed out
// again, and invisible.
func (p *popEngine) current(k popKey, d POPDelivery, invisible time.Duration, now time.Time) (message.Record, int64, bool) {
	pt := p.lock(k)
	defer pt.mu.Unlock()
	pq := pt.queues[d.Queue]
	if pq == nil {
		return nil, 0, false
	}
	f := pq.flights[d.Offset]
	if f == nil || f.delivery != d.id {
		return nil, 0, false
	}
	if visible, _ := p.visibleLocked(f, now, invisible); visible {
		return nil, 0, false
	}
	rec, err := p.b.View().MessageAt(k.topic, d.Queue, d.Offset)
	if err != nil {
		return nil, 0, false
	}
	return rec, f.deadline, true
}

func popKeyBase(prefix string, k popKey) []byte {
	return []byte(prefix + k.group + "\x00" + k.topic + "\x00")
}

func popCursorKey(k popKey, q int32) []byte {
	return binary.BigEndian.AppendUint32(popKeyBase(popCursorPrefix, k), uint32(q))
}

func popFlightKey(k popKey, q int32, off int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(popKeyBase(popFlightPrefix, k), uint32(q)), uint64(off))
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

func decodePOPFlight(b []byte) (*flight, bool) {
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
func (p *popEngine) visibleLocked(f *flight, now time.Time, invisible time.Duration) (visible, renewed bool) {
	ms := now.UnixMilli()
	if f.deadline > ms {
		return false, false
	}
	if f.owner == "" || ms >= f.renewUntil || !p.alive(f.owner) {
		return true, false
	}
	f.deadline = min(now.Add(invisible).UnixMilli(), f.renewUntil)
	return false, true
}

// queuesLocked returns the state of (group, topic), loading it from the
// store the first time, for the topic's nq read queues.
func (p *popEngine) queuesLocked(pt *popTopic, k popKey, nq int) (map[int32]*popQueue, error) {
	qs := pt.queues
	if qs == nil {
		qs = map[int32]*popQueue{}
		base := popKeyBase(popFlightPrefix, k)
		var keys [][]byte
		if err := p.b.store.ScanKeys(base, nil, func(key []byte) bool {
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
			v, ok, err := p.b.store.Value(key, nil)
			if err != nil {
				return nil, err
			}
			f, good := decodePOPFlight(v)
			if !ok || !good {
				continue
			}
			q, off := int32(binary.BigEndian.Uint32(rest)), int64(binary.BigEndian.Uint64(rest[4:]))
			pq := qs[q]
			if pq == nil {
				pq = newPOPQueue()
				qs[q] = pq
			}
			pq.add(off, f)
		}
		pt.queues = qs
	}
	var kvs []store.KV
	for q := range int32(nq) {
		pq := qs[q]
		if pq == nil {
			pq = newPOPQueue()
			qs[q] = pq
		}
		if pq.cursor >= 0 {
			continue
		}
		v, ok, err := p.b.store.Value(popCursorKey(k, q), nil)
		if err != nil {
			return nil, err
		}
		if ok && len(v) == 8 {
			pq.cursor = int64(binary.BigEndian.Uint64(v))
			continue
		}
		pq.cursor = p.startOffset(k, q)
		kvs = append(kvs, store.KV{Key: popCursorKey(k, q), Value: binary.BigEndian.AppendUint64(nil, uint64(pq.cursor))})
	}
	return qs, p.b.store.PutValues(kvs...)
}

// startOffset is where a group new to POP starts in a queue: where it
// left off consuming by pull, else at the start while the queue's first
// messages are still there, else at the tail.
func (p *popEngine) startOffset(k popKey, q int32) int64 {
	if off, ok := p.b.store.ConsumerOffset(k.group, k.topic, q); ok {
		return off
	}
	minOff, maxOff := p.b.store.QueueOffsets(k.topic, q)
	if minOff == 0 {
		return 0
	}
	return maxOff
}

// popRequest is what one receive asks for.
type popRequest struct {
	group, topic  string
	readQueues    int
	filter        Filter
	batch         int
	invisible     time.Duration
	maxDeliveries int32 // a message due for delivery max+1 goes to %DLQ%group
	fifo          bool
	priority      bool   // the topic's queues are priorities: the highest first
	factor        int    // of every 100 such receives, how many follow priorities
	owner         string // with auto_renew: the receiving client
}

// receive hands out up to r.batch messages: first those whose invisible
// time ended (delivery attempt + 1, or the dead-letter topic past the
// limit), then new ones from every queue. next is the earliest time an
// in-flight message becomes deliverable again (zero: none).
func (p *popEngine) receive(r popRequest, now time.Time) (out []POPDelivery, next time.Time, err error) {
	k := popKey{r.group, r.topic}
	pt := p.lock(k)
	defer pt.mu.Unlock()
	pt.fifo = r.fifo
	qs, err := p.queuesLocked(pt, k, r.readQueues)
	if err != nil {
		return nil, next, err
	}
	deadline := now.Add(r.invisible).UnixMilli()
	renewUntil := int64(0)
	if r.owner != "" {
		renewUntil = now.Add(popMaxRenew).UnixMilli()
	}
	var put []store.KV
	var del [][]byte
	touched := map[int32]bool{}
	qids := make([]int32, 0, len(qs))
	for q := range qs {
		qids = append(qids, q)
	}
	slices.Sort(qids)

	// redeliver hands out q's messages whose invisible time ended,
	// earliest due first (oldest offset first among those due together).
	redeliver := func(q int32) error {
		pq := qs[q]
		for len(out) < r.batch {
			off, f, ok := pq.popDue(now.UnixMilli())
			if !ok {
				return nil
			}
			visible, renewed := p.visibleLocked(f, now, r.invisible)
			if renewed {
				put = append(put, store.KV{Key: popFlightKey(k, q, off), Value: f.encode()})
			}
			if !visible {
				pq.schedule(off, f) // renewed, or its deadline moved later
				continue
			}
			rec, err := p.b.View().MessageAt(r.topic, q, off)
			if err != nil {
				// Gone with retention, or unreadable: nothing to deliver.
				p.b.log.Warn("in-flight message unreadable; dropped", "group", r.group, "topic", r.topic, "queue", q, "offset", off, "err", err)
				delete(pq.flights, off)
				del = append(del, popFlightKey(k, q, off))
				touched[q] = true
				continue
			}
			if f.attempt+1 > r.maxDeliveries {
				if err := p.b.DeadLetter(r.group, rec, fmt.Sprintf("delivered %d times over gRPC, the limit is %d", f.attempt, r.maxDeliveries)); err != nil {
					pq.schedule(off, f)
					return err
				}
				delete(pq.flights, off)
				del = append(del, popFlightKey(k, q, off))
				touched[q] = true
				continue
			}
			f.attempt++
			f.delivery = p.nextID.Add(1)
			f.deadline = deadline
			f.owner, f.renewUntil = r.owner, renewUntil
			pq.schedule(off, f)
			put = append(put, store.KV{Key: popFlightKey(k, q, off), Value: f.encode()})
			out = append(out, POPDelivery{Record: rec, Queue: q, Offset: off, Attempt: f.attempt, Deadline: deadline})
		}
		return nil
	}

	// fresh hands out q's messages not yet delivered, from its cursor.
	fresh := func(q int32) error {
		pq := qs[q]
		if len(out) >= r.batch || pq.cursor < 0 {
			return nil // full, or not a read queue of the topic (any more)
		}
		minOff, maxOff := p.b.store.QueueOffsets(r.topic, q)
		if pq.cursor > maxOff {
			// The queue is shorter than the cursor: the topic was deleted
			// and created again. Start over at what it holds.
			p.b.log.Info("POP cursor past the queue's end; the topic was recreated", "group", r.group, "topic", r.topic, "queue", q, "cursor", pq.cursor, "max", maxOff)
			pq.cursor, pq.low = minOff, -1
			touched[q] = true
			put = append(put, store.KV{Key: popCursorKey(k, q), Value: binary.BigEndian.AppendUint64(nil, uint64(minOff))})
		}
		if r.fifo && len(pq.flights) > 0 {
			return nil // an earlier message of this queue is in flight
		}
		if pq.cursor >= maxOff {
			return nil
		}
		got, cursor, err := p.scan(r, q, pq.cursor, r.batch-len(out))
		if err != nil {
			return err
		}
		for _, rec := range got {
			off := rec.QueueOffset()
			f := &flight{attempt: 1, delivery: p.nextID.Add(1), deadline: deadline, owner: r.owner, renewUntil: renewUntil}
			pq.add(off, f)
			put = append(put, store.KV{Key: popFlightKey(k, q, off), Value: f.encode()})
			out = append(out, POPDelivery{Record: rec, Queue: q, Offset: off, Attempt: 1, Deadline: deadline})
		}
		if cursor != pq.cursor {
			pq.cursor = cursor
			touched[q] = true
			// The cursor and the flights it passed go in one batch, so a
			// crash never leaves the cursor past a message not in flight.
			put = append(put, store.KV{Key: popCursorKey(k, q), Value: binary.BigEndian.AppendUint64(nil, uint64(cursor))})
		}
		return nil
	}

	priority := r.priority
	if priority && r.factor < 100 {
		// The first factor receives of every 100 follow priorities; the
		// others start at a queue further on each time, as RocketMQ's do.
		n := pt.receives
		pt.receives++
		if priority = int(n%100) < r.factor; !priority && len(qids) > 0 {
			at := int(n % uint64(len(qids)))
			qids = slices.Concat(qids[at:], qids[:at])
		}
	}
	if priority {
		// A priority topic's queue is its messages' priority: the highest
		// queue first, each queue's redeliveries before its new messages,
		// so a message keeps its priority when delivered again.
		for _, q := range slices.Backward(qids) {
			if err := redeliver(q); err != nil {
				return out, next, err
			}
			if err := fresh(q); err != nil {
				return out, next, err
			}
		}
	} else {
		// Redeliveries of every queue first, then new messages.
		for _, q := range qids {
			if err := redeliver(q); err != nil {
				return out, next, err
			}
		}
		for _, q := range qids {
			if err := fresh(q); err != nil {
				return out, next, err
			}
		}
	}
	for i := range out {
		d := &out[i]
		f := qs[d.Queue].flights[d.Offset]
		d.id, d.Handle = f.delivery, p.handle(k, d.Queue, d.Offset, f)
	}
	if err := p.b.store.PutValues(put...); err != nil {
		return nil, next, err
	}
	if err := p.b.store.DeleteKeys(del...); err != nil {
		return nil, next, err
	}
	for q := range touched {
		p.commitLocked(k, q, qs[q])
	}
	for _, q := range qids {
		if t := qs[q].nextDue(); !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return out, next, nil
}

// scan reads up to want matching messages of queue q from off; cursor is
// the offset after the last unit examined.
func (p *popEngine) scan(r popRequest, q int32, off int64, want int) (got []message.Record, cursor int64, err error) {
	it := p.b.store.NewQueueIter(r.topic, q, store.IterOptions{
		MaxUnits: popMaxScan,
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
func (p *popEngine) commitLocked(k popKey, q int32, pq *popQueue) {
	if pq.cursor < 0 {
		return // not a read queue: nothing of it is consumed here
	}
	low := pq.lowest()
	if err := p.b.store.CommitOffset(k.group, k.topic, q, low); err != nil {
		p.b.log.Warn("commit POP offset", "group", k.group, "topic", k.topic, "err", err)
	}
}

// Receipt handles: see doc.go for the layout.
const (
	popHandleVersion     = 1 // a queue of a topic
	popHandleVersionLite = 2 // a lite topic's queue: its name follows
	popHandleBody        = 1 + 4 + 8 + 8 + 8
	popHandleMAC         = 16
)

func (p *popEngine) handle(k popKey, q int32, off int64, f *flight) string {
	_, lite, isLite := SplitLiteQueue(k.topic)
	b := make([]byte, 0, popHandleBody+1+len(lite)+popHandleMAC)
	b = append(b, popHandleVersion)
	if isLite {
		b[0] = popHandleVersionLite
	}
	b = binary.BigEndian.AppendUint32(b, uint32(q))
	b = binary.BigEndian.AppendUint64(b, uint64(off))
	b = binary.BigEndian.AppendUint64(b, f.delivery)
	b = binary.BigEndian.AppendUint64(b, uint64(f.deadline))
	if isLite {
		b = append(b, byte(len(lite)))
		b = append(b, lite...)
	}
	mac := p.mac(b, "rh/", k.group, "\x00", k.topic, "\x00")
	b = append(b, mac[:popHandleMAC]...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// HandleLiteTopic returns the lite topic a receipt handle of a lite
// message names, or "" for any other handle. It does not verify the
// handle: an ack, change or dead letter that uses the name verifies it
// under the lite topic's queue, and a forged name fails there. The C#
// LitePushConsumer names no lite topic in those requests, nor Python's
// in its changes; the handle does.
func HandleLiteTopic(handle string) string {
	if len(handle) > base64.RawURLEncoding.EncodedLen(popHandleBody+1+MaxLiteTopicLen+popHandleMAC) {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(handle)
	if err != nil || len(b) < popHandleBody+1+popHandleMAC || b[0] != popHandleVersionLite {
		return ""
	}
	n := int(b[popHandleBody])
	if len(b) != popHandleBody+1+n+popHandleMAC {
		return ""
	}
	return string(b[popHandleBody+1 : popHandleBody+1+n])
}

// parsedHandle is a verified receipt handle.
type parsedHandle struct {
	queue    int32
	offset   int64
	delivery uint64
	deadline int64
}

func (p *popEngine) parseHandle(k popKey, h string) (parsedHandle, error) {
	b, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil || len(b) < popHandleBody+popHandleMAC {
		return parsedHandle{}, ErrBadReceiptHandle
	}
	body := popHandleBody
	switch b[0] {
	case popHandleVersion:
	case popHandleVersionLite:
		body += 1 + int(b[popHandleBody])
	default:
		return parsedHandle{}, ErrBadReceiptHandle
	}
	if len(b) != body+popHandleMAC {
		return parsedHandle{}, ErrBadReceiptHandle
	}
	// The MAC covers the lite topic's name and binds the handle to the
	// queue's topic, so a handle names only the lite topic it was made for.
	if mac := p.mac(b[:body], "rh/", k.group, "\x00", k.topic, "\x00"); !hmac.Equal(b[body:], mac[:popHandleMAC]) {
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
func (p *popEngine) currentLocked(pt *popTopic, k popKey, h parsedHandle, nq int, now time.Time) (*popQueue, *flight, error) {
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
	visible, renewed := p.visibleLocked(f, now, DefaultPOPInvisible)
	if visible {
		return nil, nil, fmt.Errorf("%w: the invisible duration has ended", ErrBadReceiptHandle)
	}
	if renewed {
		if err := p.b.store.PutValues(store.KV{Key: popFlightKey(k, h.queue, h.offset), Value: f.encode()}); err != nil {
			return nil, nil, err
		}
	}
	return pq, f, nil
}

// ack ends the flights the handles name, under one lock, with one write
// of their keys and one offset commit per queue they touch: an AckMessage
// of a received batch costs a key batch (and, on a replicated set, one
// entry of its log), not one per message. errs[i] is handles[i]'s; a
// handle named twice is acknowledged once, the second time refused as
// one acknowledged already is.
func (p *popEngine) ack(group, topic string, nq int, handles []string, now time.Time) []error {
	k := popKey{group, topic}
	errs := make([]error, len(handles))
	hs := make([]parsedHandle, len(handles))
	for i, handle := range handles {
		hs[i], errs[i] = p.parseHandle(k, handle)
	}
	pt := p.lock(k)
	defer pt.mu.Unlock()
	var (
		keys    [][]byte
		acked   []int
		touched = map[int32]*popQueue{}
	)
	for i, h := range hs {
		if errs[i] != nil {
			continue
		}
		pq, _, err := p.currentLocked(pt, k, h, nq, now)
		if err != nil {
			errs[i] = err
			continue
		}
		delete(pq.flights, h.offset)
		keys = append(keys, popFlightKey(k, h.queue, h.offset))
		acked = append(acked, i)
		touched[h.queue] = pq
	}
	if err := p.b.store.DeleteKeys(keys...); err != nil {
		for _, i := range acked {
			errs[i] = err
		}
		return errs
	}
	emptied := false
	for q, pq := range touched {
		p.commitLocked(k, q, pq)
		emptied = emptied || len(pq.flights) == 0
	}
	if emptied && pt.fifo {
		p.fifoFreed(k, now)
	}
	return errs
}

// changeInvisible makes the message a handle names deliverable again
// after d and returns its new handle; the old one stops working. A push
// consumer's delivery (auto-renewed) given up this way is a failed
// attempt: it waits at least what retry says for its attempt.
func (p *popEngine) changeInvisible(group, topic string, nq int, handle string, d time.Duration, retry RetryPolicy, suspend bool, now time.Time) (string, error) {
	k := popKey{group, topic}
	h, err := p.parseHandle(k, handle)
	if err != nil {
		return "", err
	}
	pt := p.lock(k)
	defer pt.mu.Unlock()
	pq, f, err := p.currentLocked(pt, k, h, nq, now)
	if err != nil {
		return "", err
	}
	switch {
	case suspend:
		// The next delivery counts as this one again.
		f.attempt = max(f.attempt-1, 0)
	case f.owner != "":
		d = max(d, retry.Delay(int(f.attempt)))
	}
	old := f.deadline
	f.delivery = p.nextID.Add(1)
	f.deadline = now.Add(d).UnixMilli()
	f.owner, f.renewUntil = "", 0 // the client chose when it comes back
	if f.deadline < f.due {
		pq.schedule(h.offset, f)
	}
	if err := p.b.store.PutValues(store.KV{Key: popFlightKey(k, h.queue, h.offset), Value: f.encode()}); err != nil {
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
func (p *popEngine) deadLetter(group, topic string, nq int, handle string, now time.Time) error {
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
	if err := p.b.store.DeleteKeys(popFlightKey(k, h.queue, h.offset)); err != nil {
		return err
	}
	p.commitLocked(k, h.queue, pq)
	if len(pq.flights) == 0 && pt.fifo {
		p.fifoFreed(k, now)
	}
	return nil
}

// fifoFreed wakes the waiting receives of a FIFO group when a queue of
// k has nothing in flight any more: its next messages, held back while
// the ones before were in flight, are deliverable now. A receive waiting
// for any of the group's queues (a push consumer's next one, a lite
// consumer's for all its lite topics) would otherwise see them only at
// its next wake-up. The caller knows the group FIFO from its last
// receive (popTopic.fifo), not from a read of its configuration.
func (p *popEngine) fifoFreed(k popKey, now time.Time) {
	p.wakeBefore(k, now.UnixMilli())
}

// release makes deliveries that never reached the client deliverable
// again at once, unless a later delivery or an ack got there first.
func (p *popEngine) release(group, topic string, ds []POPDelivery, now time.Time) {
	k := popKey{group, topic}
	pt := p.lock(k)
	defer pt.mu.Unlock()
	var put []store.KV
	for _, d := range ds {
		pq := pt.queues[d.Queue]
		if pq == nil {
			continue
		}
		if f := pq.flights[d.Offset]; f != nil && f.deadline == d.Deadline && f.attempt == d.Attempt {
			f.deadline, f.owner, f.renewUntil = now.UnixMilli(), "", 0
			if f.deadline < f.due {
				pq.schedule(d.Offset, f)
			}
			put = append(put, store.KV{Key: popFlightKey(k, d.Queue, d.Offset), Value: f.encode()})
		}
	}
	if err := p.b.store.PutValues(put...); err != nil {
		p.b.log.Warn("release undelivered messages", "group", group, "topic", topic, "err", err)
	}
	if len(put) > 0 {
		if parent, lite, ok := SplitLiteQueue(topic); ok {
			p.wakeLite(parent, lite)
		} else {
			p.wake(topic)
		}
	}
}

// dropTopic forgets every group's POP state of a deleted topic, in memory
// and in the store, so the topic created again starts over.
func (p *popEngine) dropTopic(topic string) {
	p.dropTopics(func(t string) bool { return t == topic })
}

// dropTopics forgets every group's POP state of the topics drop names, as
// dropTopic does one's, in one pass over the state.
func (p *popEngine) dropTopics(drop func(topic string) bool) {
	p.mu.Lock()
	var pts []*popTopic
	for k, pt := range p.mu.topics {
		if drop(k.topic) {
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
	for _, prefix := range []string{popCursorPrefix, popFlightPrefix} {
		err := p.b.store.ScanKeys([]byte(prefix), nil, func(key []byte) bool {
			rest := key[len(prefix):] // group NUL topic NUL ...
			if _, after, ok := bytes.Cut(rest, []byte{0}); ok {
				if topic, _, ok := bytes.Cut(after, []byte{0}); ok && drop(string(topic)) {
					keys = append(keys, bytes.Clone(key))
				}
			}
			return true
		})
		if err != nil {
			p.b.log.Warn("drop the POP state of a deleted topic", "err", err)
		}
	}
	if err := p.b.store.DeleteKeys(keys...); err != nil {
		p.b.log.Warn("drop the POP state of a deleted topic", "err", err)
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
	// lite is a lite receive's state (lite.go), nil for any other.
	lite *liteWait
}

// by an arrival or by a flight of its group made visible before t.
func (w *waiter) sleepUntil(t time.Time) { w.wakeAt.Store(t.UnixMilli()) }

// looking notes that the receive looks at the queues.
func (w *waiter) looking() { w.wakeAt.Store(math.MaxInt64) }

// watch registers a receive of group waiting on topic (a lite receive's:
// on the LITE topic); stop unregisters it.
func (p *popEngine) watch(group, topic string, lite bool) (w *waiter, stop func()) {
	w = &waiter{group: group, ch: make(chan struct{}, 1)}
	if lite {
		w.lite = newLiteWait()
	}
	w.looking()
	p.waits.Lock()
	p.registerLocked(topic, w)
	p.waits.Unlock()
	return w, func() {
		p.waits.Lock()
		defer p.waits.Unlock()
		p.unregisterLocked(topic, w)
	}
}

// registerLocked and unregisterLocked add and remove a waiter on topic.
// p.waits must be held.
func (p *popEngine) registerLocked(topic string, w *waiter) {
	m := p.waits.byTopic[topic]
	if m == nil {
		m = map[*waiter]struct{}{}
		p.waits.byTopic[topic] = m
	}
	m[w] = struct{}{}
}

func (p *popEngine) unregisterLocked(topic string, w *waiter) {
	m := p.waits.byTopic[topic]
	delete(m, w)
	if len(m) == 0 {
		delete(p.waits.byTopic, topic)
	}
}

// wake tells every receive waiting on topic to look again; it runs on
// the store's append path (Broker.arrived) and does not block.
func (p *popEngine) wake(topic string) {
	p.waits.Lock()
	defer p.waits.Unlock()
	for w := range p.waits.byTopic[topic] {
		if w.lite != nil {
			w.lite.all()
		}
		w.signal()
	}
}

// wakeLite tells the receives waiting on a LITE topic that subscribe to
// its lite topic lite to look at it again; it runs on the store's append
// path (Broker.arrived) and does not block.
func (p *popEngine) wakeLite(parent, lite string) {
	p.waits.Lock()
	defer p.waits.Unlock()
	for w := range p.waits.byTopic[parent] {
		if w.lite == nil || w.lite.hint(lite) {
			w.signal()
		}
	}
}

// wakeBefore tells the receives of k's group waiting on its topic that
// would sleep past deadline (Unix ms) to look again.
func (p *popEngine) wakeBefore(k popKey, deadline int64) {
	p.waits.Lock()
	defer p.waits.Unlock()
	parent, lite, isLite := SplitLiteQueue(k.topic)
	if !isLite {
		parent = k.topic
	}
	for w := range p.waits.byTopic[parent] {
		switch {
		case w.group != k.group:
		case w.lite != nil && isLite:
			// Told whether it waits or not: a lite listener between
			// receives keeps the news for its next one.
			if w.lite.hint(lite) {
				w.signal()
			}
		case w.wakeAt.Load() > deadline:
			if w.lite != nil {
				w.lite.all()
			}
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
