package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rmq-go/rmq/core/message"
)

// Replicator carries a replicated store's changes to the other members of
// its set, through a log they all apply in one order (core/cluster runs
// it on raft). Every member's store, the proposer's included, learns of a
// committed entry only through Store.Apply.
type Replicator interface {
	// Propose appends entry to the replicated log. It is called in log
	// order (the calls of one store never overlap), must not keep entry
	// past done, and calls done once: with nil after the entry is
	// committed and applied here, or with the error that kept it out (it
	// may still be committed later, and then reaches Apply all the same).
	Propose(entry []byte, done func(error))
}

// ErrNotLeader is returned by writes to a replicated store that is not its
// set's leader, or that stopped being one before the write was committed.
var ErrNotLeader = errors.New("store: not the leader of its broker set")

// Entry kinds (the first byte of every replicated entry).
const (
	entryRound    = 'R' // id(8) nchunks(4) {off(8) len(4) bytes}...
	entryProgress = 'P' // n(4) {nameLen(2) name set(1) value(8)}...
	entryMeta     = 'M' // n(4) {put(1) nameLen(2) name valueLen(4) value}...
	entryDelete   = 'T' // at(8) topic
	entryKeys     = 'X' // a pebble batch's representation (PutKeys, PutValues, DeleteKeys, DeleteKeyRange)
)

// replEndKey holds the end of the commit log covered by the last fsync of
// a replicated store: an entry boundary, below which every applied round
// is on disk. Recovery cuts the log there; the replicated log supplies
// the rest again.
var replEndKey = []byte{'r'}

// replState is a replicated store's own state; see doc.go, "Replication".
type replState struct {
	// writable is set by Promote and cleared by Demote; term counts the
	// Promote calls, and a round records the term it was begun in
	// (round.term): both guarded by s.mu.
	writable bool
	term     uint64
	// inflight are this store's proposed rounds not yet applied or
	// failed, in log order; closed refuses rounds after Close began.
	// Both guarded by applyMu.
	inflight []*round
	closed   bool
	nextID   uint64
	// slots bounds the rounds in flight (maxInflightRounds): while they
	// are full, appends gather in the pending round, so the set commits
	// fewer, larger entries, the way a single store's group commit waits
	// for the fsync before. A round holds a slot until applied or failed.
	slots chan struct{}
	// dirty are progress names changed since the last proposal (leader
	// only), progressWaiters the CommitOffsetSync calls waiting for the
	// next progress entry; both guarded by s.progress. progressKick wakes
	// progressLoop.
	dirty           map[string]struct{}
	progressWaiters []chan<- error
	progressKick    chan struct{}
	// openEnd is where the log ended when the store opened: a topic
	// deletion before it is a replay (see Apply). Set by Open.
	openEnd int64
	// stored is the end of the rounds WriteRound wrote ahead of their
	// apply (writeahead.go); at or below the applied end, none are.
	// Written under applyMu.
	stored atomic.Int64
	// floor is where the rounds the replicated log may apply again begin
	// (HoldRoundsFrom): retention keeps every segment ending past it.
	floor atomic.Int64
	// syncMu serialises syncReplicated; recorded is the end it last
	// wrote to the index (replEndKey), guarded by syncMu.
	syncMu   sync.Mutex
	recorded int64
}

// Replicated reports whether the store was opened with a Replicator.
func (s *Store) Replicated() bool { return s.opts.Replicator != nil }

// Writable reports whether a replicated store takes writes (it is its
// set's leader and caught up); an unreplicated store always does.
func (s *Store) Writable() bool {
	if !s.Replicated() {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.repl.writable
}

// Promote makes a replicated store take writes. The caller has applied
// every entry committed before (raft's Barrier): offsets are handed out
// from the end of the stored rounds (StoredEnd), which is then the end
// of what was applied.
func (s *Store) Promote() {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.promoteLocked()
}

// promoteLocked is Promote with applyMu held.
func (s *Store) promoteLocked() {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.StoredEnd()
	if pos := next % s.opts.SegmentSize; pos > s.opts.SegmentSize-blankLen {
		next += s.opts.SegmentSize - pos
	}
	s.mu.next = next
	s.cq.RLock()
	for _, q := range s.mu.queues {
		q.assigned = q.next
	}
	s.cq.RUnlock()
	s.repl.writable = true
	s.repl.term++
}

// Demote stops a replicated store taking writes and fails every append
// not yet committed with ErrNotLeader wrapping cause. Its entries may
// still be committed by the next leader; they then reach Apply like any
// other entry.
func (s *Store) Demote(cause error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.demoteLocked(cause)
}

// demoteLocked is Demote with applyMu held.
func (s *Store) demoteLocked(cause error) {
	s.mu.Lock()
	wasWritable := s.repl.writable
	s.repl.writable = false
	pending := s.mu.pending
	s.mu.pending = nil
	if pending != nil {
		s.mu.pendingBytes -= pending.bytes
	}
	s.space.Broadcast()
	s.mu.Unlock()
	failed := s.repl.inflight
	s.repl.inflight = nil
	s.releaseSlots(len(failed))
	if pending != nil {
		failed = append(failed, pending)
	}
	if wasWritable {
		s.revertProgress()
	}
	err := fmt.Errorf("%w: %v", ErrNotLeader, cause)
	for _, r := range failed {
		r.err = err
		s.finish(r)
	}
	if wasWritable || len(failed) > 0 {
		s.log.Warn("store stopped taking writes", "reason", cause, "appends_failed", len(failed))
	}
}

// maxInflightRounds is how many rounds a leader has proposed and not yet
// applied at most: enough to keep raft's pipeline busy (its leader
// stores, sends and commits in overlapping steps), few enough that rounds
// grow under load instead of their number.
const maxInflightRounds = 2

// takeSlot waits for room for one more round in flight; false when the
// store closes first.
func (s *Store) takeSlot() bool {
	select {
	case s.repl.slots <- struct{}{}:
		return true
	case <-s.quit:
		return false
	}
}

// releaseSlots frees the slots of n rounds that left the flight.
func (s *Store) releaseSlots(n int) {
	for range n {
		<-s.repl.slots
	}
}

// proposeRound hands r to the replicated log, and then the topic
// deletions that wait for it; Apply finishes it. The flusher took a slot
// for it, and took it from pending under proposeMu, which it holds.
func (s *Store) proposeRound(r *round) {
	s.applyMu.Lock()
	if s.repl.closed {
		s.applyMu.Unlock()
		s.releaseSlots(1)
		r.err = ErrClosed
		s.finish(r)
		return
	}
	// A Demote that came after the flusher took r did not see it. Its
	// offsets were handed out in a term that has ended, and a Promote
	// since hands them out again: r must not be proposed.
	s.mu.Lock()
	stale := !s.repl.writable || r.term != s.repl.term
	s.mu.Unlock()
	if stale {
		s.applyMu.Unlock()
		s.releaseSlots(1)
		r.err = fmt.Errorf("%w: leadership changed before the round was proposed", ErrNotLeader)
		s.finish(r)
		return
	}
	s.repl.nextID++
	id := s.repl.nextID
	n := 1 + 8 + 4
	for _, c := range r.chunks {
		n += 12 + len(c.buf)
	}
	e := make([]byte, 0, n)
	e = append(e, entryRound)
	e = binary.BigEndian.AppendUint64(e, id)
	e = binary.BigEndian.AppendUint32(e, uint32(len(r.chunks)))
	for _, c := range r.chunks {
		e = binary.BigEndian.AppendUint64(e, uint64(c.off))
		e = binary.BigEndian.AppendUint32(e, uint32(len(c.buf)))
		e = append(e, c.buf...)
	}
	r.id = id
	s.repl.inflight = append(s.repl.inflight, r)
	// Once proposed, r may be applied and finished at any moment: the
	// deletions are its no longer.
	dels, at := r.deletes, r.end
	r.deletes = nil
	s.applyMu.Unlock()
	s.opts.Replicator.Propose(e, func(err error) {
		if err != nil {
			s.fence(r, err)
		}
	})
	for _, d := range dels {
		s.opts.Replicator.Propose(deleteEntry(d.topic, at), d.done)
	}
}

// fence demotes the store after a proposal of r failed, unless r was
// applied or failed already.
func (s *Store) fence(r *round, cause error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	for _, x := range s.repl.inflight {
		if x == r {
			s.demoteLocked(cause)
			return
		}
	}
}

// Apply applies one committed entry of the replicated log. The Replicator
// calls it on every member, in log order, from one goroutine. Entries
// already in the store (a replay after a restart) are skipped; an entry
// that does not follow the store's log is an error, and the store then
// takes no more writes.
func (s *Store) Apply(entry []byte) error {
	if len(entry) == 0 {
		return fmt.Errorf("%w: empty replicated entry", ErrCorruption)
	}
	var err error
	switch entry[0] {
	case entryRound:
		err = s.applyRound(entry[1:])
	case entryProgress:
		err = s.applyProgress(entry[1:])
	case entryMeta:
		err = s.applyMeta(entry[1:])
	case entryKeys:
		err = s.applyKeys(entry[1:])
	case entryDelete:
		if len(entry) < 10 {
			return fmt.Errorf("%w: short topic deletion entry", ErrCorruption)
		}
		at := int64(binary.BigEndian.Uint64(entry[1:]))
		topic := string(entry[9:])
		if topic == "" || strings.IndexByte(topic, 0) >= 0 {
			return fmt.Errorf("%w: topic deletion of %q", ErrCorruption, topic)
		}
		if written := s.written.Load(); at < written {
			// Its proposer put no round past at in the log before it
			// (replicateDelete), so rounds past at that were applied
			// before the store opened came after it: a replay after a
			// restart, applied already. Rounds past at applied since
			// came first, and every member skips it.
			if at < s.repl.openEnd {
				return nil
			}
			return fmt.Errorf("%w: %s at %d, the log ends at %d", ErrDeletionSkipped, topic, at, written)
		}
		err = s.deleteTopicAt(topic, at)
	default:
		err = fmt.Errorf("%w: replicated entry of unknown kind %q", ErrCorruption, entry[0])
	}
	return err
}

// applyRound writes a round's bytes, unless WriteRound wrote them ahead,
// and dispatches its records. A round this store proposed is finished,
// waking its appenders.
func (s *Store) applyRound(p []byte) error {
	id, r, err := parseRound(p, 0)
	if err != nil {
		return err
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.repl.closed {
		return ErrClosed
	}
	if k := len(s.repl.inflight); k > 0 && s.repl.inflight[0].id == id {
		own := s.repl.inflight[0]
		s.repl.inflight[0] = nil
		s.repl.inflight = s.repl.inflight[1:]
		s.releaseSlots(1)
		if err := s.storeRound(own); err != nil {
			own.err = err
			s.finish(own)
			s.demoteLocked(err)
			s.fail(err)
			return err
		}
		s.finish(own)
		s.recycle(own)
		return nil
	}
	// A round of another member: whatever this store proposed can no
	// longer be committed before it.
	if len(s.repl.inflight) > 0 || s.Writable() {
		s.demoteLocked(errors.New("a round of another member was committed"))
	}
	if len(r.chunks) == 0 {
		return nil
	}
	r.segSize = s.opts.SegmentSize
	written := s.written.Load()
	switch stored := s.repl.stored.Load(); {
	case r.end <= written:
		return nil // applied before a restart
	case r.start != written:
		err := fmt.Errorf("%w: replicated round at %d does not follow the log's end %d", ErrCorruption, r.start, written)
		s.fail(err)
		return err
	case stored > written && stored < r.end:
		err := fmt.Errorf("%w: replicated round %d..%d only partly stored (to %d)", ErrCorruption, r.start, r.end, stored)
		s.fail(err)
		return err
	}
	if err := s.unitsOf(r); err != nil {
		s.fail(err)
		return err
	}
	if err := s.storeRound(r); err != nil {
		s.fail(err)
		return err
	}
	return nil
}

// unitsOf fills r.units from the frames of r's chunks, verifying each.
func (s *Store) unitsOf(r *round) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ci, c := range r.chunks {
		for at := 0; at+8 <= len(c.buf); {
			size := int(int32(binary.BigEndian.Uint32(c.buf[at:])))
			magic := binary.BigEndian.Uint32(c.buf[at+4:])
			off := c.off + int64(at)
			if size == 0 && magic == BlankMagic {
				break
			}
			if size < markerLen || at+size+trailerLen > len(c.buf) {
				return fmt.Errorf("%w: replicated frame at %d: bad size %d", ErrCorruption, off, size)
			}
			frame := c.buf[at : at+size+trailerLen]
			if magic == RoundMagic {
				if _, ok := checkMarker(frame, off); !ok {
					return fmt.Errorf("%w: replicated round marker at %d", ErrCorruption, off)
				}
				at += size + trailerLen
				continue
			}
			rec, err := checkFrame(frame, off)
			if err != nil {
				return err
			}
			k := queueKey{string(rec.Topic()), rec.QueueID()}
			if del, ok := s.mu.deleted[k.topic]; !ok || off >= del {
				q := s.queueLocked(k)
				qoff := rec.QueueOffset()
				q.assigned = max(q.assigned, qoff+1)
				r.units = append(r.units, pendingUnit{q: q, qoff: qoff, off: off, size: int32(size), chunk: ci, at: at})
			}
			at += size + trailerLen
		}
	}
	s.mu.next = max(s.mu.next, r.end)
	return nil
}

// storeRound writes r, unless WriteRound stored it already, and makes
// its records visible. applyMu is held.
func (s *Store) storeRound(r *round) error {
	s.stats.Rounds.Add(1)
	s.stats.RoundMessages.Observe(int64(len(r.units)))
	if s.repl.stored.Load() < r.end {
		if err := s.writeRound(r); err != nil {
			return err
		}
		s.dirtyEnd = 0
	}
	s.written.Store(r.end)
	s.dispatchRound(r)
	return nil
}

// syncReplicated fsyncs the log up to the applied end, unless
// SyncRounds did, and records that end (see replEndKey). Its calls are
// serialised, so the recorded end never goes back.
func (s *Store) syncReplicated() error {
	s.repl.syncMu.Lock()
	defer s.repl.syncMu.Unlock()
	s.applyMu.Lock()
	end := s.written.Load()
	s.applyMu.Unlock()
	if end == s.repl.recorded {
		return nil
	}
	if d := s.durable.Load(); end > d {
		s.stats.FsyncBytes.Observe(end - d)
		if err := s.syncActive(); err != nil {
			return err
		}
		s.setDurable(end)
	}
	if err := s.db.Set(replEndKey, int64Value(end), pebble.Sync); err != nil {
		return fmt.Errorf("store: record the synced end: %w", err)
	}
	s.repl.recorded = end
	return nil
}

// SyncReplicated makes every applied round durable in the commit log, so
// the replicated log may forget the entries before this point.
func (s *Store) SyncReplicated() error { return s.syncReplicated() }

// applyProgress records the values of a committed progress entry as the
// set's (progress.committed) and, on a member that does not lead, sets
// them. The leader proposed them from its own values, which may be newer
// by now.
func (s *Store) applyProgress(p []byte) error {
	leading := s.Writable()
	if len(p) < 4 {
		return fmt.Errorf("%w: short progress entry", ErrCorruption)
	}
	n := int(binary.BigEndian.Uint32(p))
	p = p[4:]
	s.progress.Lock()
	defer s.progress.Unlock()
	for i := 0; i < n; i++ {
		if len(p) < 2 {
			return fmt.Errorf("%w: short progress entry", ErrCorruption)
		}
		l := int(binary.BigEndian.Uint16(p))
		if len(p) < 2+l+9 {
			return fmt.Errorf("%w: short progress entry", ErrCorruption)
		}
		name := string(p[2 : 2+l])
		set := p[2+l] == 1
		v := int64(binary.BigEndian.Uint64(p[3+l:]))
		p = p[11+l:]
		if set {
			s.progress.committed[name] = v
		} else {
			delete(s.progress.committed, name)
		}
		s.progress.dirty[name] = struct{}{} // the checkpoint writes committed values
		if leading {
			continue
		}
		if set {
			s.progress.values[name] = v
		} else {
			delete(s.progress.values, name)
		}
	}
	return nil
}

// revertProgress sets every progress value back to the set's committed
// one: a member that stopped leading drops the changes no entry carried
// (or none committed yet; an entry committed later is applied as any
// other), so it never holds a value the set does not.
func (s *Store) revertProgress() {
	s.progress.Lock()
	defer s.progress.Unlock()
	clear(s.repl.dirty)
	for name, v := range s.progress.values {
		if c, ok := s.progress.committed[name]; !ok {
			delete(s.progress.values, name)
			s.progress.dirty[name] = struct{}{}
		} else if c != v {
			s.progress.values[name] = c
			s.progress.dirty[name] = struct{}{}
		}
	}
	for name, c := range s.progress.committed {
		if _, ok := s.progress.values[name]; !ok {
			s.progress.values[name] = c
			s.progress.dirty[name] = struct{}{}
		}
	}
}

// proposeWait proposes e and waits for its commit.
func (s *Store) proposeWait(e []byte) error {
	if !s.Writable() {
		return ErrNotLeader
	}
	done := make(chan error, 1)
	s.opts.Replicator.Propose(e, func(err error) { done <- err })
	return <-done
}

// replicateMeta proposes a metadata change; Apply writes it on every
// member.
func (s *Store) replicateMeta(puts map[string][]byte, deletes []string) error {
	e := []byte{entryMeta}
	e = binary.BigEndian.AppendUint32(e, uint32(len(puts)+len(deletes)))
	for name, v := range puts {
		e = append(e, 1)
		e = binary.BigEndian.AppendUint16(e, uint16(len(name)))
		e = append(e, name...)
		e = binary.BigEndian.AppendUint32(e, uint32(len(v)))
		e = append(e, v...)
	}
	for _, name := range deletes {
		e = append(e, 0)
		e = binary.BigEndian.AppendUint16(e, uint16(len(name)))
		e = append(e, name...)
		e = binary.BigEndian.AppendUint32(e, 0)
	}
	return s.proposeWait(e)
}

// applyMeta writes a metadata entry.
func (s *Store) applyMeta(p []byte) error {
	if len(p) < 4 {
		return fmt.Errorf("%w: short metadata entry", ErrCorruption)
	}
	n := int(binary.BigEndian.Uint32(p))
	p = p[4:]
	puts := make(map[string][]byte)
	var deletes []string
	for i := 0; i < n; i++ {
		if len(p) < 3 {
			return fmt.Errorf("%w: short metadata entry", ErrCorruption)
		}
		put := p[0] == 1
		l := int(binary.BigEndian.Uint16(p[1:]))
		if len(p) < 3+l+4 {
			return fmt.Errorf("%w: short metadata entry", ErrCorruption)
		}
		name := string(p[3 : 3+l])
		vl := int(binary.BigEndian.Uint32(p[3+l:]))
		p = p[7+l:]
		if len(p) < vl {
			return fmt.Errorf("%w: short metadata entry", ErrCorruption)
		}
		if put {
			puts[name] = p[:vl]
		} else {
			deletes = append(deletes, name)
		}
		p = p[vl:]
	}
	return s.writeMeta(puts, deletes)
}

// replicateDelete proposes a topic's deletion at the current end of the
// log, so every member drops the same records of it.
//
// The deletion goes into the log after every round below its offset and
// before any round past it. With a round pending, the deletion waits
// for it and is proposed right after it, at its end (proposeRound);
// otherwise it is proposed at once, at the log's end, under proposeMu,
// which the flusher holds to propose a round. Appends to the topic wait
// until the deletion is applied (or failed), so those after it go to
// its new queues on every member, the leader included.
func (s *Store) replicateDelete(topic string) error {
	done := make(chan error, 1)
	reply := func(err error) { done <- err }
	s.proposeMu.Lock()
	s.mu.Lock()
	switch {
	case s.mu.closed:
		s.mu.Unlock()
		s.proposeMu.Unlock()
		return ErrClosed
	case !s.repl.writable:
		s.mu.Unlock()
		s.proposeMu.Unlock()
		return ErrNotLeader
	}
	s.mu.deleting[topic]++
	r, at := s.mu.pending, s.mu.next
	if r != nil {
		r.deletes = append(r.deletes, pendingDelete{topic: topic, done: reply})
	}
	s.mu.Unlock()
	if r == nil {
		s.opts.Replicator.Propose(deleteEntry(topic, at), reply)
	}
	s.proposeMu.Unlock()
	err := <-done
	s.mu.Lock()
	if s.mu.deleting[topic]--; s.mu.deleting[topic] == 0 {
		delete(s.mu.deleting, topic)
	}
	s.space.Broadcast()
	s.mu.Unlock()
	return err
}

// pendingDelete is a topic deletion waiting for the round it follows.
type pendingDelete struct {
	topic string
	done  func(error)
}

// deleteEntry is the replicated entry of topic's deletion at offset at.
func deleteEntry(topic string, at int64) []byte {
	e := []byte{entryDelete}
	e = binary.BigEndian.AppendUint64(e, uint64(at))
	return append(e, topic...)
}

// deletingLocked reports whether a topic of msgs has a replicated
// deletion in flight. s.mu must be held.
func (s *Store) deletingLocked(msgs []*message.Message) bool {
	if len(s.mu.deleting) == 0 {
		return false
	}
	for _, m := range msgs {
		if s.mu.deleting[m.Topic] > 0 {
			return true
		}
	}
	return false
}

// newReplID seeds round ids so two runs of a store never share one.
func newReplID() uint64 { return rand.Uint64() >> 1 }

// replicateKeys proposes a batch of the keys components keep in the index
// (PutKeys and the like), already committed here without fsync. Nothing
// waits for it: those keys are written without fsync on the leader too,
// and entries proposed later (the progress values that count on them)
// follow it in the log.
func (s *Store) replicateKeys(ops []keyOp) {
	if !s.Replicated() || !s.Writable() {
		return
	}
	e := []byte{entryKeys}
	e = binary.BigEndian.AppendUint32(e, uint32(len(ops)))
	for _, op := range ops {
		e = append(e, op.kind)
		e = binary.BigEndian.AppendUint32(e, uint32(len(op.key)))
		e = append(e, op.key...)
		e = binary.BigEndian.AppendUint32(e, uint32(len(op.value)))
		e = append(e, op.value...)
	}
	s.opts.Replicator.Propose(e, func(error) {})
}

// applyKeys applies another member's key batch. Every key it touches is
// one components keep ('x'), whatever the entry says.
func (s *Store) applyKeys(p []byte) error {
	if s.Writable() {
		return nil // proposed here, and written already
	}
	if len(p) < 4 {
		return fmt.Errorf("%w: short key batch", ErrCorruption)
	}
	n := int(binary.BigEndian.Uint32(p))
	p = p[4:]
	var ops []keyOp
	for i := 0; i < n; i++ {
		var op keyOp
		if len(p) < 5 {
			return fmt.Errorf("%w: short key batch", ErrCorruption)
		}
		op.kind = p[0]
		kl := int(binary.BigEndian.Uint32(p[1:]))
		p = p[5:]
		if kl > len(p) || len(p)-kl < 4 {
			return fmt.Errorf("%w: short key batch", ErrCorruption)
		}
		op.key, p = p[:kl], p[kl:]
		vl := int(binary.BigEndian.Uint32(p))
		p = p[4:]
		if vl > len(p) {
			return fmt.Errorf("%w: short key batch", ErrCorruption)
		}
		op.value, p = p[:vl], p[vl:]
		switch {
		case op.kind != keySet && op.kind != keyDelete && op.kind != keyDeleteRange:
			return fmt.Errorf("%w: key batch operation %q", ErrCorruption, op.kind)
		case len(op.key) == 0 || op.key[0] != kindKeys,
			op.kind == keyDeleteRange && (len(op.value) == 0 || op.value[0] != kindKeys && op.value[0] != kindKeys+1):
			return fmt.Errorf("%w: key batch outside the components' keys", ErrCorruption)
		}
		ops = append(ops, op)
	}
	return s.commitKeys(ops)
}
