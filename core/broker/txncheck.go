package broker

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
)

// The transaction index. The store is the source of truth; three kinds
// of record and two progress values hold every decision:
//
//	+-------------+-------------------+--------------------------------------------+
//	| record      | where             | what marks it                              |
//	+-------------+-------------------+--------------------------------------------+
//	| half        | HalfTopic, q 0    | the message as sent; REAL_TOPIC, REAL_QID; |
//	|             |                   | no transaction type in its sysFlag         |
//	| check copy  | HalfTopic, q 0    | the latest record of its transaction plus  |
//	|             |                   | TRANSACTION_CHECK_TIMES=n and TXN_ORIGIN=  |
//	|             |                   | "offset,queueOffset,storeTimestamp" of the |
//	|             |                   | half message; written before check n goes  |
//	| op marker   | OpHalfTopic, q 0  | TAGS "d", TXN_OUTCOME commit|rollback|     |
//	|             |                   | discard; body: the half message's offset   |
//	+-------------+-------------------+--------------------------------------------+
//
//	+-----------+----------------------------------------------------------------+
//	| progress  | meaning                                                        |
//	+-----------+----------------------------------------------------------------+
//	| txn/half  | half-queue offset below which every record belongs to a       |
//	|           | resolved transaction or has a later copy: a restart reads the |
//	|           | half queue from here                                          |
//	| txn/op    | op-queue offset from which every marker still needed to tell  |
//	|           | a transaction with records at or after txn/half resolved can  |
//	|           | be found: a restart reads the op queue from here              |
//	+-----------+----------------------------------------------------------------+
//
// A transaction is keyed by the commit-log offset of its half message as
// first stored. Its marker goes in the same Append as its effect (the
// committed message, or the copy kept in TRANS_CHECK_MAX_TIME_TOPIC), so an
// outcome is written whole or not at all. In memory, pending holds the
// unresolved transactions and sched orders them by when their policy is
// next asked; nothing resolved stays in memory except the op offsets that
// hold txn/op back (marks). Because each check moves its transaction's
// latest record to the tail of the half queue, txn/half trails the newest
// records by about one check interval, and a restart reads only that much
// of the half queue again.
//
// Invariants:
//
//  1. Every unresolved transaction has a record at or after txn/half, and
//     every record below halfNext is indexed: pending holds every
//     unresolved transaction whose records were indexed.
//  2. A transaction is resolved by exactly one marker; once resolved, it
//     leaves pending and no record of it is indexed as pending again.
//  3. The marker of a transaction with a record at or after txn/half lies
//     at or after txn/op. txn/half is saved before txn/op, so a checkpoint
//     taken between the two keeps an older, more cautious txn/op.
//  4. A busy transaction (being checked or resolved) is out of sched and
//     gets no other copy or marker until it is released.

const (
	txnProgressHalf = "txn/half"
	txnProgressOp   = "txn/op"
	// txnBatch bounds the half messages decided and written per round.
	txnBatch = 1024
	// txnPolicyTimeout bounds one policy call.
	txnPolicyTimeout = 5 * time.Second
	// txnSendTimeout bounds queueing one CHECK_TRANSACTION_STATE.
	txnSendTimeout = 3 * time.Second
	// txnMinWait is the shortest wait a policy's TxnWait gets, so a policy
	// that always says "wait 0" does not spin.
	txnMinWait = 50 * time.Millisecond
	// txnMarksKick wakes the checker to compact marks when this many
	// pile up between its rounds.
	txnMarksKick = 1 << 16
	// txnSaveEvery spaces the progress saves, which walk every pending
	// transaction.
	txnSaveEvery = time.Second
)

// errTxnNotPending is returned by end for an offset with no pending
// transaction: unknown, or resolved already.
var errTxnNotPending = errors.New("no pending half message at that offset")

// halfTxn is one unresolved transaction.
type halfTxn struct {
	origin     int64  // commit-log offset of the half message as first stored: the key
	originQOff int64  // its half-queue offset (tranStateTableOffset)
	latest     int64  // commit-log offset of the latest record (origin or copy)
	latestQOff int64  // its half-queue offset
	group      string // PGROUP
	checks     int32
	stored     int64 // ms, when the origin was stored
	lastCheck  int64 // ms of the latest check; 0 before the first
	next       time.Time
	busy       bool
	index      int // in sched; -1 when out
}

// txnHeap orders transactions by when they are next decided.
type txnHeap []*halfTxn

func (h txnHeap) Len() int           { return len(h) }
func (h txnHeap) Less(i, j int) bool { return h[i].next.Before(h[j].next) }
func (h txnHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *txnHeap) Push(x any) {
	t := x.(*halfTxn)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *txnHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}

// opMark is a marker that holds txn/op back: its op-queue offset and the
// last half-queue offset of its transaction.
type opMark struct{ op, lastHalf int64 }

// txnDeps is what the transaction service needs from the rest of the
// broker. producers, ensureTopic and schedule are called with
// txnService.mu released (LOCKING.md).
type txnDeps struct {
	log   *slog.Logger
	now   func() time.Time
	store *store.Store
	// quit is closed when the broker stops; the checker then returns.
	quit <-chan struct{}
	// timeout and checkInterval are Options.TxnTimeout and
	// TxnCheckInterval; policy and policies Options.TxnPolicy and
	// TxnPolicies.
	timeout       time.Duration
	checkInterval time.Duration
	policy        TxnPolicy
	policies      map[string]TxnPolicy
	// producers returns the live connections of a producer group's
	// heartbeating members (the client table).
	producers func(group string) []*remoting.Conn
	// ensureTopic creates a topic unless it exists (the topic table).
	ensureTopic func(TopicConfig) (TopicConfig, error)
	// schedule parks a committed message that is delayed or timed
	// (Broker.toSchedule).
	schedule func(*message.Message) error
}

// txnService indexes half messages, resolves them and checks them back.
type txnService struct {
	txnDeps
	// storeHost is the broker's advertised address, set by start before
	// any request is served.
	storeHost netip.AddrPort
	checkGap  time.Duration // after a check, the earliest next decision
	kick      chan struct{}
	// checksSent counts the checks sent to producers (metrics.go).
	checksSent atomic.Int64
	// checkHook asks an in-process front end to check a transaction
	// (Broker.OnTransactionCheck); nil: only remoting producers are asked.
	checkHook atomic.Pointer[TxnCheckFunc]
	mu        struct {
		sync.Mutex
		idle      sync.Cond // broadcast when a busy transaction is released
		pending   map[int64]*halfTxn
		sched     txnHeap
		halfNext  int64 // next half-queue offset to index
		marks     []opMark
		opSaved   int64
		resolving int       // resolutions appending outside mu
		wakeAt    time.Time // when the checker plans to wake
		savedAt   time.Time // when the progress was last saved
		groups    map[string]string
		producers map[string]map[*remoting.Conn]struct{} // seen sending END_TRANSACTION
	}
}

// newTxnService loads the transaction index from the store.
func newTxnService(d txnDeps) (*txnService, error) {
	s := &txnService{txnDeps: d, checkGap: min(d.checkInterval, time.Second), kick: make(chan struct{}, 1)}
	s.mu.idle.L = &s.mu.Mutex
	s.mu.pending = map[int64]*halfTxn{}
	s.mu.groups = map[string]string{}
	s.mu.producers = map[string]map[*remoting.Conn]struct{}{}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// halfRecord is what a half-queue record says about its transaction.
type halfRecord struct {
	origin, originQOff, stored int64
	checks                     int32
	lastCheck                  int64
	isCopy                     bool
	group                      string
}

func parseHalfRecord(r message.Record, qoff int64) (halfRecord, error) {
	props := r.Properties()
	h := halfRecord{origin: r.CommitLogOffset(), originQOff: qoff, stored: r.StoreTimestamp(),
		group: props.Get(message.PropertyProducerGroup)}
	if v, ok := props.Lookup(message.PropertyTransactionCheckTimes); ok {
		n, err := strconv.ParseInt(string(v), 10, 32)
		if err != nil {
			return h, fmt.Errorf("bad %s %q", message.PropertyTransactionCheckTimes, v)
		}
		h.checks = int32(n)
	}
	v, ok := props.Lookup(propTxnOrigin)
	if !ok {
		return h, nil
	}
	parts := strings.Split(string(v), ",")
	var errs [3]error
	if len(parts) == 3 {
		h.origin, errs[0] = strconv.ParseInt(parts[0], 10, 64)
		h.originQOff, errs[1] = strconv.ParseInt(parts[1], 10, 64)
		h.stored, errs[2] = strconv.ParseInt(parts[2], 10, 64)
	}
	if len(parts) != 3 || errors.Join(errs[:]...) != nil {
		return h, fmt.Errorf("bad %s %q", propTxnOrigin, v)
	}
	h.isCopy, h.lastCheck = true, r.StoreTimestamp()
	return h, nil
}

// scanQueue calls fn with every record of queue 0 of topic from offset
// from on, and returns the offset after the last one. Records lost to
// corruption are logged and skipped; a queue cut by retention is read from
// its first retained offset.
func (s *txnService) scanQueue(topic string, from int64, fn func(r message.Record, qoff int64)) (next int64, err error) {
	it := s.store.NewQueueIter(topic, 0, store.IterOptions{OnCorrupt: func(u store.Unit, err error) {
		s.log.Error("transaction record lost", "topic", topic, "offset", u.QueueOffset, "err", err)
	}})
	defer it.Close()
	for ok := it.SeekGE(from); ok; ok = it.Next() {
		fn(it.Record(), it.Offset())
	}
	return it.NextOffset(), it.Error()
}

// load rebuilds the index from the saved progress: the markers from
// txn/op, then the half messages from txn/half.
func (s *txnService) load() error {
	st := s.store
	half, _ := st.Progress(txnProgressHalf)
	op, _ := st.Progress(txnProgressOp)
	resolved := map[int64]int64{} // transaction → its marker's op offset
	_, err := s.scanQueue(OpHalfTopic, op, func(r message.Record, qoff int64) {
		origin, err := strconv.ParseInt(string(r.Body()), 10, 64)
		if err != nil {
			s.log.Error("bad transaction op marker", "offset", qoff, "body", string(r.Body()))
			return
		}
		resolved[origin] = qoff
	})
	if err != nil {
		return fmt.Errorf("broker: read transaction op markers: %w", err)
	}
	lastHalf := map[int64]int64{}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.halfNext = half
	err = s.catchUpLocked(func(origin, qoff int64) bool {
		if _, ok := resolved[origin]; !ok {
			return false
		}
		lastHalf[origin] = max(lastHalf[origin], qoff)
		return true
	})
	if err != nil {
		return fmt.Errorf("broker: read half messages: %w", err)
	}
	for origin, lh := range lastHalf {
		s.mu.marks = append(s.mu.marks, opMark{op: resolved[origin], lastHalf: lh})
	}
	slices.SortFunc(s.mu.marks, func(a, b opMark) int { return int(a.op - b.op) })
	s.mu.opSaved = op
	if n := len(s.mu.pending); n > 0 || half > 0 {
		s.log.Info("transactions loaded", "pending", n, "half_from", half, "op_from", op, "half_next", s.mu.halfNext)
	}
	return nil
}

// catchUp indexes the half messages stored since the last call.
func (s *txnService) catchUp() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.catchUpLocked(nil); err != nil {
		s.log.Error("index half messages", "err", err)
	}
}

// catchUpLocked indexes the half queue from halfNext to its end. At load,
// resolvedAt tells the transactions resolved already (and copies of a
// transaction make it pending); afterwards it is nil and only first
// records add a transaction: a copy whose transaction is not pending
// belongs to one resolved since.
func (s *txnService) catchUpLocked(resolvedAt func(origin, qoff int64) bool) error {
	earliest := time.Time{}
	next, err := s.scanQueue(HalfTopic, s.mu.halfNext, func(r message.Record, qoff int64) {
		h, err := parseHalfRecord(r, qoff)
		if err != nil {
			s.log.Error("bad half message", "offset", qoff, "err", err)
			return
		}
		if t := s.mu.pending[h.origin]; t != nil {
			if qoff > t.latestQOff {
				t.latest, t.latestQOff = r.CommitLogOffset(), qoff
				t.checks, t.lastCheck = max(t.checks, h.checks), max(t.lastCheck, h.lastCheck)
			}
			return
		}
		if resolvedAt == nil && h.isCopy || resolvedAt != nil && resolvedAt(h.origin, qoff) {
			return
		}
		t := &halfTxn{origin: h.origin, originQOff: h.originQOff, latest: r.CommitLogOffset(), latestQOff: qoff,
			group: s.internLocked(h.group), checks: h.checks, stored: h.stored, lastCheck: h.lastCheck}
		if h.isCopy {
			t.next = time.UnixMilli(h.lastCheck).Add(s.checkGap)
		} else {
			t.next = time.UnixMilli(h.stored).Add(s.timeout)
		}
		s.mu.pending[t.origin] = t
		heap.Push(&s.mu.sched, t)
		if earliest.IsZero() || t.next.Before(earliest) {
			earliest = t.next
		}
	})
	s.mu.halfNext = next
	if !earliest.IsZero() && earliest.Before(s.mu.wakeAt) {
		s.wake()
	}
	return err
}

func (s *txnService) internLocked(g string) string {
	if v, ok := s.mu.groups[g]; ok {
		return v
	}
	s.mu.groups[g] = g
	return g
}

// wake makes the checker run a round now.
func (s *txnService) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *txnService) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.pending)
}

// rememberProducer records that a producer of group answers on c: it sent
// one of the group's half messages on c, even before its first heartbeat
// reached this broker.
func (s *txnService) rememberProducer(group string, c *remoting.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.mu.producers[group]
	if set == nil {
		set = map[*remoting.Conn]struct{}{}
		s.mu.producers[group] = set
	}
	set[c] = struct{}{}
}

// isProducer reports whether c sent a half message of group.
func (s *txnService) isProducer(group string, c *remoting.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.mu.producers[group][c]
	return ok
}

// forgetConn drops a closed connection.
func (s *txnService) forgetConn(c *remoting.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for g, set := range s.mu.producers {
		delete(set, c)
		if len(set) == 0 {
			delete(s.mu.producers, g)
		}
	}
}

// producerConn picks a live connection of a producer of group: one that
// heartbeats, or one that sent one of its half messages.
func (s *txnService) producerConn(group string) *remoting.Conn {
	conns := s.producers(group)
	s.mu.Lock()
	for c := range s.mu.producers[group] {
		if !isClosed(c) && !slices.Contains(conns, c) {
			conns = append(conns, c)
		}
	}
	s.mu.Unlock()
	if len(conns) == 0 {
		return nil
	}
	return conns[rand.IntN(len(conns))]
}

// lookupLocked finds the pending transaction an END_TRANSACTION names:
// by its key, or by the offset of one of its copies.
func (s *txnService) lookupLocked(off int64) *halfTxn {
	if t := s.mu.pending[off]; t != nil {
		return t
	}
	r, err := s.store.ReadRecordAt(off)
	if err != nil || string(r.Topic()) != HalfTopic {
		return nil
	}
	h, err := parseHalfRecord(r, r.QueueOffset())
	if err != nil {
		return nil
	}
	return s.mu.pending[h.origin]
}

// end resolves the transaction of the half message at off with outcome,
// writing its effect and its marker in one append.
func (s *txnService) end(group string, off int64, outcome string) error {
	s.mu.Lock()
	if err := s.catchUpLocked(nil); err != nil {
		s.mu.Unlock()
		return err
	}
	t := s.lookupLocked(off)
	for t != nil && t.busy {
		s.mu.idle.Wait()
		t = s.mu.pending[t.origin]
	}
	if t == nil {
		s.mu.Unlock()
		return errTxnNotPending
	}
	if t.group != group {
		s.mu.Unlock()
		return fmt.Errorf("half message %d belongs to producer group %q, not %q", t.origin, t.group, group)
	}
	t.busy = true
	heap.Remove(&s.mu.sched, t.index)
	s.mu.resolving++
	latest := t.latest
	s.mu.Unlock()

	now := s.now()
	msgs, err := s.effect(t, latest, outcome, now)
	if err == nil {
		err = s.store.Append(msgs)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.resolving--
	t.busy = false
	s.mu.idle.Broadcast()
	if err != nil {
		heap.Push(&s.mu.sched, t)
		return err
	}
	s.resolvedLocked(t, msgs[len(msgs)-1].QueueOffset)
	return nil
}

// effect builds what resolving t with outcome writes: the committed
// message for a commit, the kept copy for a discard, then the marker.
func (s *txnService) effect(t *halfTxn, latest int64, outcome string, now time.Time) ([]*message.Message, error) {
	marker := opMarker(t.origin, outcome, now, s.storeHost)
	switch outcome {
	case outcomeCommit, outcomeDiscard:
		rec, err := s.store.ReadRecordAt(latest)
		if err != nil {
			return nil, fmt.Errorf("read half message %d: %w", latest, err)
		}
		if outcome == outcomeDiscard {
			return []*message.Message{s.discarded(rec), marker}, nil
		}
		m, err := committed(rec, t.origin, s.storeHost)
		if err != nil {
			return nil, err
		}
		if err := s.schedule(m); err != nil {
			return nil, fmt.Errorf("schedule committed message: %w", err)
		}
		return []*message.Message{m, marker}, nil
	}
	return []*message.Message{marker}, nil
}

// discarded is the copy of a given-up half message kept in
// TRANS_CHECK_MAX_TIME_TOPIC.
func (s *txnService) discarded(rec message.Record) *message.Message {
	var m message.Message
	rec.Decode(&m)
	m.Topic, m.QueueID, m.StoreHost = TxnCheckMaxTopic, 0, s.storeHost
	m.Properties = m.Properties.Without(propTxnOrigin)
	if _, err := s.ensureTopic(TopicConfig{TopicName: TxnCheckMaxTopic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: permRW}); err != nil {
		s.log.Warn("create topic", "topic", TxnCheckMaxTopic, "err", err)
	}
	return &m
}

// resolvedLocked drops a resolved transaction, keeping its marker's op
// offset while the progress may still need it.
func (s *txnService) resolvedLocked(t *halfTxn, markerOp int64) {
	delete(s.mu.pending, t.origin)
	m := opMark{op: markerOp, lastHalf: t.latestQOff}
	i, _ := slices.BinarySearchFunc(s.mu.marks, m, func(a, b opMark) int { return int(a.op - b.op) })
	s.mu.marks = slices.Insert(s.mu.marks, i, m)
	if len(s.mu.marks) == txnMarksKick {
		s.wake()
	}
}

// saveProgressLocked moves txn/half to the oldest record still needed and
// txn/op past the markers no restart needs (invariant 3).
func (s *txnService) saveProgressLocked() {
	half := s.mu.halfNext
	for _, t := range s.mu.pending {
		half = min(half, t.latestQOff)
	}
	s.store.SetProgress(txnProgressHalf, half)
	if s.mu.resolving > 0 {
		return // a marker may be appended but not yet in marks
	}
	s.mu.marks = slices.DeleteFunc(s.mu.marks, func(m opMark) bool { return m.lastHalf < half })
	op := s.store.MaxOffset(OpHalfTopic, 0)
	if len(s.mu.marks) > 0 {
		op = s.mu.marks[0].op
	}
	if op > s.mu.opSaved {
		s.mu.opSaved = op
		s.store.SetProgress(txnProgressOp, op)
	}
}

// start records the broker's advertised address; Serve calls it before
// serving requests or running the checker.
func (s *txnService) start(storeHost netip.AddrPort) { s.storeHost = storeHost }

// run is the checker: it decides the due half messages, writes the
// outcome and sends the checks, then sleeps until the next is due, the
// check interval passes, or it is woken. It returns when quit is closed.
func (s *txnService) run() {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-s.quit:
			s.mu.Lock()
			s.saveProgressLocked()
			s.mu.Unlock()
			return
		case <-timer.C:
		case <-s.kick:
		}
		timer.Reset(s.round())
	}
}

// round decides every due half message and returns how long to sleep.
func (s *txnService) round() time.Duration {
	for {
		now := s.now()
		batch := s.takeDue(now)
		if len(batch) == 0 {
			break
		}
		s.process(now, batch)
		select {
		case <-s.quit:
			return time.Hour
		default:
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if now.Sub(s.mu.savedAt) >= txnSaveEvery {
		s.saveProgressLocked()
		s.mu.savedAt = now
	}
	sleep := s.checkInterval
	if len(s.mu.sched) > 0 {
		sleep = min(sleep, s.mu.sched[0].next.Sub(now))
	}
	sleep = max(sleep, txnMinWait)
	s.mu.wakeAt = now.Add(sleep)
	return sleep
}

// takeDue indexes new half messages and takes up to txnBatch due ones,
// marking them busy.
func (s *txnService) takeDue(now time.Time) []*halfTxn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.catchUpLocked(nil); err != nil {
		s.log.Error("index half messages", "err", err)
	}
	var batch []*halfTxn
	for len(s.mu.sched) > 0 && len(batch) < txnBatch && !s.mu.sched[0].next.After(now) {
		t := heap.Pop(&s.mu.sched).(*halfTxn)
		t.busy = true
		batch = append(batch, t)
	}
	return batch
}

// txnUnknown marks a decision that could not be made.
const txnUnknown TxnAction = -1

// process decides a batch of busy transactions and applies the decisions.
func (s *txnService) process(now time.Time, batch []*halfTxn) {
	recs := make([]message.Record, len(batch))
	hms := make([]HalfMessage, len(batch))
	dec := make([]TxnDecision, len(batch))
	byGroup := map[string][]int{}
	for i, t := range batch {
		rec, err := s.store.ReadRecordAt(t.latest)
		if err != nil {
			// The record is gone (retention or corruption): the message can
			// never be committed.
			s.log.Error("half message unreadable; discarding its transaction", "offset", t.latest, "err", err)
			dec[i] = TxnDecision{Action: TxnRollback}
			continue
		}
		recs[i] = rec
		props := rec.Properties()
		hms[i] = HalfMessage{
			ProducerGroup:      t.group,
			Topic:              props.Get(message.PropertyRealTopic),
			MsgID:              props.Get(message.PropertyUniqKey),
			CheckTimes:         t.checks,
			BornTimestamp:      rec.BornTimestamp(),
			StoreTimestamp:     t.stored,
			LastCheckTimestamp: t.lastCheck,
			Properties:         props,
		}
		byGroup[t.group] = append(byGroup[t.group], i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), txnPolicyTimeout)
	for group, idx := range byGroup {
		in := make([]HalfMessage, len(idx))
		out := make([]TxnDecision, len(idx))
		for j, i := range idx {
			in[j] = hms[i]
		}
		err := s.decide(ctx, group, now, in, out)
		for j, i := range idx {
			d := out[j]
			if err != nil || d.Action < TxnCheckNow || d.Action > TxnDiscard {
				d = TxnDecision{Action: txnUnknown}
			}
			dec[i] = d
		}
		if err != nil {
			s.log.Warn("transaction-check policy failed; asking again later", "group", group, "messages", len(idx), "err", err)
		}
	}
	cancel()

	// One append holds every copy, committed message and marker of the
	// batch.
	var msgs []*message.Message
	written := make([]int, len(batch)) // index in msgs of each one's last message, or -1
	for i, t := range batch {
		written[i] = -1
		var add []*message.Message
		var err error
		switch dec[i].Action {
		case TxnCheckNow:
			add = []*message.Message{s.checkCopy(recs[i], t, now)}
		case TxnCommit:
			add, err = s.effect(t, t.latest, outcomeCommit, now)
		case TxnRollback:
			add, err = s.effect(t, t.latest, outcomeRollback, now)
		case TxnDiscard:
			add, err = s.effect(t, t.latest, outcomeDiscard, now)
		}
		if err != nil {
			s.log.Error("resolve half message", "offset", t.origin, "action", dec[i].Action, "err", err)
			dec[i] = TxnDecision{Action: txnUnknown}
			continue
		}
		if len(add) > 0 {
			msgs = append(msgs, add...)
			written[i] = len(msgs) - 1
		}
	}
	if len(msgs) > 0 {
		if err := s.store.Append(msgs); err != nil {
			s.log.Error("write transaction checks", "messages", len(msgs), "err", err)
			for i := range dec {
				if written[i] >= 0 {
					dec[i], written[i] = TxnDecision{Action: txnUnknown}, -1
				}
			}
		}
	}

	type check struct {
		t    halfTxn
		copy *message.Message
	}
	var checks []check
	s.mu.Lock()
	for i, t := range batch {
		t.busy = false
		switch a := dec[i].Action; {
		case a == TxnCheckNow:
			c := msgs[written[i]]
			t.latest, t.latestQOff, t.checks, t.lastCheck = c.CommitLogOffset, c.QueueOffset, t.checks+1, c.StoreTimestamp
			t.next = now.Add(s.checkGap)
			checks = append(checks, check{*t, c})
		case a == TxnCommit || a == TxnRollback || a == TxnDiscard:
			s.resolvedLocked(t, msgs[written[i]].QueueOffset)
			s.log.Info("transaction resolved by the check policy", "group", t.group, "offset", t.origin, "action", a, "checks", t.checks)
			continue
		case a == TxnWait:
			t.next = now.Add(max(dec[i].Wait, txnMinWait))
		default:
			t.next = now.Add(s.checkInterval)
		}
		heap.Push(&s.mu.sched, t)
	}
	s.mu.idle.Broadcast()
	s.mu.Unlock()

	unreachable := map[string]int{} // group → checks counted without a producer to ask
	for _, c := range checks {
		if !s.sendCheck(&c.t, c.copy) {
			unreachable[c.t.group]++
		}
	}
	for group, n := range unreachable {
		s.log.Warn("no live producer to check transactions with; counted as checked", "group", group, "messages", n)
	}
}

// decide runs the group's policy; a panic is a failure like an error.
func (s *txnService) decide(ctx context.Context, group string, now time.Time, in []HalfMessage, out []TxnDecision) (err error) {
	p := s.policy
	if gp, ok := s.policies[group]; ok {
		p = gp
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("policy panicked: %v", r)
		}
	}()
	return p.Decide(ctx, now, in, out)
}

// checkCopy is the copy of a half message written when it is checked:
// its check count raised and its transaction's key kept.
func (s *txnService) checkCopy(rec message.Record, t *halfTxn, now time.Time) *message.Message {
	var m message.Message
	rec.Decode(&m)
	m.StoreHost = s.storeHost
	m.Properties = m.Properties.
		With(message.PropertyTransactionCheckTimes, strconv.Itoa(int(t.checks+1))).
		With(propTxnOrigin, strconv.FormatInt(t.origin, 10)+","+strconv.FormatInt(t.originQOff, 10)+","+strconv.FormatInt(t.stored, 10))
	return &m
}

// sendCheck asks a producer of the transaction's group for its state
// (spec §7.3), and reports whether one was connected. The body is the copy just written, addressed as the
// message the producer sent: its real topic and queue, and the offsets of
// the half message as first stored, which the producer echoes back in its
// END_TRANSACTION.
func (s *txnService) sendCheck(t *halfTxn, cp *message.Message) (reached bool) {
	m := *cp
	m.Topic = m.Properties.Get(message.PropertyRealTopic)
	if q, err := strconv.ParseInt(m.Properties.Get(message.PropertyRealQueueID), 10, 32); err == nil {
		m.QueueID = int32(q)
	}
	m.CommitLogOffset, m.QueueOffset = t.origin, t.originQOff
	m.Properties = m.Properties.Without(propTxnOrigin)
	if fn := s.checkHook.Load(); fn != nil && (*fn)(t.group, &m, t.origin) {
		return true
	}
	c := s.producerConn(t.group)
	if c == nil {
		return false
	}
	body, err := message.AppendRecord(nil, &m)
	if err != nil {
		s.log.Error("encode transaction check", "offset", t.origin, "err", err)
		return true
	}
	uniq := m.Properties.Get(message.PropertyUniqKey)
	req := remoting.NewRequest(remoting.CheckTransactionState, map[string]string{
		"tranStateTableOffset": strconv.FormatInt(t.originQOff, 10),
		"commitLogOffset":      strconv.FormatInt(t.origin, 10),
		"msgId":                uniq,
		"transactionId":        uniq,
		"offsetMsgId":          message.OffsetMsgID(s.storeHost, t.origin),
	}, body)
	ctx, cancel := context.WithTimeout(context.Background(), txnSendTimeout)
	defer cancel()
	if err := c.Oneway(ctx, req); err != nil {
		s.log.Warn("send transaction check", "group", t.group, "offset", t.origin, "err", err)
		return true
	}
	s.checksSent.Add(1)
	s.log.Debug("transaction check sent", "group", t.group, "offset", t.origin, "checks", t.checks, "peer", c.RemoteAddr())
	return true
}
