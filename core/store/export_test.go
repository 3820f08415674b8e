package store

import (
	"context"

	"github.com/cockroachdb/pebble/v2"
)

// CompactIndex compacts the whole index, so that benchmarks measure reads
// of a settled LSM rather than of the compactions their loading started.
func (s *Store) CompactIndex() error {
	return s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, false)
}

// ReadAheadHolds reports whether the read-ahead table holds block no of
// the queue.
func (s *Store) ReadAheadHolds(topic string, queueID int32, no int64) bool {
	s.cq.RLock()
	q := s.cq.queues[queueKey{topic, queueID}]
	s.cq.RUnlock()
	return q != nil && s.ahead.block(q, no) != nil
}

// SyncLogOnly fsyncs the segment being written without recording the
// synced end of a replicated store: what a background sync that the
// process died in the middle of leaves behind.
func (s *Store) SyncLogOnly() error { return s.syncActive() }

// DeletedAt returns the commit-log offset of topic's last deletion while
// the store still keeps it.
func (s *Store) DeletedAt(topic string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.mu.deleted[topic]
	return at, ok
}

// TrimStep is the least the page-cache trimmer drops at once.
const TrimStep = trimStep

// HoldApply holds the lock that Apply, Promote, Demote and a proposal
// take, until release is called.
func (s *Store) HoldApply() (release func()) {
	s.applyMu.Lock()
	return s.applyMu.Unlock
}

// ReelectHeld demotes and promotes the store while HoldApply holds the
// lock: a leadership lost and won again.
func (s *Store) ReelectHeld(cause error) {
	s.demoteLocked(cause)
	s.promoteLocked()
}

// RoundTaken reports whether no round is pending: the flusher has taken
// the last one.
func (s *Store) RoundTaken() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.pending == nil
}

// OnCheckpointUnlocked makes f run in each checkpoint once it has written
// the consume-queue blocks and let go of their lock, before it writes the
// checkpoint itself. Set it before the store is used concurrently.
func (s *Store) OnCheckpointUnlocked(f func()) { s.checkpointUnlocked = f }

// ShortenIndexBlock cuts block no of a queue in the index to its first
// units units, as versions with the checkpoint's lost-update left some,
// and forgets, unless keepNote, that the index was checked for such
// blocks. Close the store and open it again to see the effect.
func (s *Store) ShortenIndexBlock(topic string, queueID int32, no int64, units int, keepNote bool) error {
	key := blockKey(queueKey{topic, queueID}, no)
	v, closer, err := s.db.Get(key)
	if err != nil {
		return err
	}
	blk := append([]byte(nil), v[:units*unitLen]...)
	closer.Close()
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(key, blk, nil)
	if !keepNote {
		b.Delete(refilledKey, nil)
	}
	return b.Commit(pebble.Sync)
}
