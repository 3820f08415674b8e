package store

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// DeleteTopic removes every consume queue of topic and every consumer
// offset on it, durably, before it returns. The topic's records stay in
// the commit log until retention deletes their segments, but no queue
// serves them again, and a queue of the same name created afterwards
// starts at offset 0.
//
// The deletion is recorded as the commit-log offset where it happened
// (the 'D' key, see doc.go): recovery re-dispatches no record of the
// topic that lies before it, so a restart cannot bring the old queues
// back from the records past the last checkpoint. Appends to the topic
// that race with DeleteTopic land either before it (and are deleted) or
// after it (in the new queues). On a replicated store appends to the
// topic wait until the set has applied the deletion; DeleteTopic returns
// ErrNotLeader off the leader and ErrDeletionSkipped if the deletion was
// not applied (see doc.go, invariant 14).
func (s *Store) DeleteTopic(topic string) error {
	if topic == "" || strings.IndexByte(topic, 0) >= 0 {
		return ErrBadName
	}
	if s.Replicated() {
		return s.replicateDelete(topic)
	}
	return s.deleteTopicAt(topic, -1)
}

// deleteTopicAt deletes topic as of commit-log offset at, or as of the
// end of the log for a negative at.
func (s *Store) deleteTopicAt(topic string, at int64) error {
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	// The append lock is held until the deletion is durable, so no record
	// of the new queues is written before it.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrClosed
	}
	if at < 0 {
		at = s.mu.next
	}

	b := s.db.NewBatch()
	defer b.Close()
	reg := append([]byte{kindQueue}, topic...)
	reg = append(reg, 0)
	blk := append([]byte{kindBlock}, topic...)
	blk = append(blk, 0)
	b.DeleteRange(reg, prefixEnd(reg), nil)
	b.DeleteRange(blk, prefixEnd(blk), nil)
	b.Set(deletedKey(topic), int64Value(at), nil)

	// Consumer offsets on the topic, of every group.
	s.progress.Lock()
	var names []string
	for name := range s.progress.values {
		if offsetTopic(name) == topic {
			names = append(names, name)
		}
	}
	for name := range s.progress.dirty {
		if _, ok := s.progress.values[name]; !ok && offsetTopic(name) == topic {
			names = append(names, name)
		}
	}
	for _, name := range names {
		b.Delete(progressKey(name), nil)
	}
	s.progress.Unlock()

	s.cq.Lock()
	defer s.cq.Unlock()
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("store: delete topic %s: %w", topic, err)
	}
	for k, q := range s.cq.queues {
		if k.topic == topic {
			q.deleted = true
			delete(s.cq.queues, k)
			delete(s.mu.queues, k)
		}
	}
	s.mu.deleted[topic] = at
	s.progress.Lock()
	for _, name := range names {
		delete(s.progress.values, name)
		delete(s.progress.dirty, name)
	}
	s.progress.Unlock()
	return nil
}

// offsetTopic returns the topic of a consumer offset's progress name, or
// "" for another kind of progress value.
func offsetTopic(name string) string {
	rest, ok := strings.CutPrefix(name, "o/")
	if !ok {
		return ""
	}
	parts := strings.Split(rest, "\x00")
	if len(parts) != 3 {
		return ""
	}
	return parts[1]
}

// lowerDeletionsLocked moves the deletion offsets that lie past the end
// of the written log back to it, after a rollback handed those offsets
// out again: the records a deletion hid there are gone, and records of
// the topic written there next belong to its new queues. The change is
// durable before the next round is written. s.mu must be held.
func (s *Store) lowerDeletionsLocked() {
	end := s.mu.next
	var b *pebble.Batch
	for topic, at := range s.mu.deleted {
		if at > end {
			if b == nil {
				b = s.db.NewBatch()
				defer b.Close()
			}
			s.mu.deleted[topic] = end
			b.Set(deletedKey(topic), int64Value(end), nil)
		}
	}
	if b == nil {
		return
	}
	if err := b.Commit(pebble.Sync); err != nil {
		s.mu.failed = fmt.Errorf("%w: topic deletion not moved after a rollback: %v", ErrFailed, err)
	}
}

// loadDeleted reads the topic deletions still in the index.
func (s *Store) loadDeleted() error {
	lo := []byte{kindDeleted}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return fmt.Errorf("store: read topic deletions: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if len(it.Value()) != 8 {
			return fmt.Errorf("%w: topic deletion %q", ErrCorruption, it.Key())
		}
		s.mu.deleted[string(it.Key()[1:])] = int64(binary.BigEndian.Uint64(it.Value()))
	}
	return it.Error()
}

// forgetDeletions adds to b the removal of the deletions the checkpoint
// ck has passed: recovery starts at ck and never sees their records.
func (s *Store) forgetDeletions(ck int64, b *pebble.Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for topic, at := range s.mu.deleted {
		if at <= ck {
			delete(s.mu.deleted, topic)
			b.Delete(deletedKey(topic), nil)
		}
	}
}
