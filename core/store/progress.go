package store

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// SetProgress records a progress value (a consumer offset, a scheduler
// position). Values are kept in memory and written with fsync every
// CheckpointInterval, so a crash loses at most that much of them. A
// replicated store's leader proposes a changed value to its set at once
// (progressLoop), a store that does not lead ignores it: its values are
// the leader's.
func (s *Store) SetProgress(name string, v int64) { s.setProgress(name, v, false) }

// setProgress is SetProgress; forward leaves a value that is already at
// or past v alone.
func (s *Store) setProgress(name string, v int64, forward bool) {
	if s.Replicated() && !s.Writable() {
		return
	}
	s.progress.Lock()
	changed := false
	if old, ok := s.progress.values[name]; !ok || old < v || (old > v && !forward) {
		s.progress.values[name] = v
		s.progress.dirty[name] = struct{}{}
		if s.repl.dirty != nil {
			s.repl.dirty[name] = struct{}{}
			changed = true
		}
	}
	s.progress.Unlock()
	if changed {
		s.kickProgress()
	}
}

// Progress returns a progress value.
func (s *Store) Progress(name string) (int64, bool) {
	s.progress.Lock()
	defer s.progress.Unlock()
	v, ok := s.progress.values[name]
	return v, ok
}

// DeleteProgress removes every progress value whose name starts with
// prefix (on a replicated store, only while it leads, as SetProgress).
func (s *Store) DeleteProgress(prefix string) {
	if s.Replicated() && !s.Writable() {
		return
	}
	defer s.kickProgress()
	s.progress.Lock()
	defer s.progress.Unlock()
	for name := range s.progress.values {
		if strings.HasPrefix(name, prefix) {
			delete(s.progress.values, name)
			s.progress.dirty[name] = struct{}{} // dirty and absent: deleted at the next checkpoint
			if s.repl.dirty != nil {
				s.repl.dirty[name] = struct{}{}
			}
		}
	}
}

// EachProgress calls fn for every progress value whose name starts with
// prefix, in no particular order.
func (s *Store) EachProgress(prefix string, fn func(name string, v int64)) {
	s.progress.Lock()
	type kv struct {
		k string
		v int64
	}
	var found []kv
	for name, v := range s.progress.values {
		if strings.HasPrefix(name, prefix) {
			found = append(found, kv{name, v})
		}
	}
	s.progress.Unlock()
	for _, e := range found {
		fn(e.k, e.v)
	}
}

// offsetNamesOK reports whether a group and topic may name a consumer
// offset: neither empty nor holding the key separator (NUL).
func offsetNamesOK(group, topic string) bool {
	return group != "" && topic != "" && strings.IndexByte(group, 0) < 0 && strings.IndexByte(topic, 0) < 0
}

// consumerOffsetName is the progress name of a consumer offset.
func consumerOffsetName(group, topic string, queueID int32) string {
	return "o/" + group + "\x00" + topic + "\x00" + strconv.Itoa(int(queueID))
}

// CommitOffset records a consumer group's next offset for a queue. It
// refuses, with ErrBadName, a group or topic that is empty or holds the
// key separator (NUL): such names would let two pairs share one key. A
// replicated store that does not lead its set refuses it with
// ErrNotLeader; its leader proposes it to the set without waiting.
func (s *Store) CommitOffset(group, topic string, queueID int32, off int64) error {
	return s.commitOffset(group, topic, queueID, off, false)
}

// AdvanceOffset is CommitOffset for an offset that may only move the
// group's offset forward: one already at or past off is left alone. A
// pull carries its client's offset as it stood when the pull left, and
// may be served after a later, higher commit of the same client.
func (s *Store) AdvanceOffset(group, topic string, queueID int32, off int64) error {
	return s.commitOffset(group, topic, queueID, off, true)
}

func (s *Store) commitOffset(group, topic string, queueID int32, off int64, forward bool) error {
	if !offsetNamesOK(group, topic) {
		return ErrBadName
	}
	if s.Replicated() && !s.Writable() {
		return ErrNotLeader
	}
	s.setProgress(consumerOffsetName(group, topic, queueID), off, forward)
	return nil
}

// CommitOffsetSync is CommitOffset for a client that waits for the
// answer: a replicated store returns once its set committed the offset
// (with the other values changed meanwhile, in one entry), or with
// ErrNotLeader if it stopped leading first. An unreplicated store returns
// at once, as CommitOffset.
func (s *Store) CommitOffsetSync(group, topic string, queueID int32, off int64) error {
	if !s.Replicated() {
		return s.CommitOffset(group, topic, queueID, off)
	}
	if !offsetNamesOK(group, topic) {
		return ErrBadName
	}
	if !s.Writable() {
		return ErrNotLeader
	}
	name := consumerOffsetName(group, topic, queueID)
	done := make(chan error, 1)
	s.progress.Lock()
	if old, ok := s.progress.values[name]; !ok || old != off {
		s.progress.values[name] = off
		s.progress.dirty[name] = struct{}{}
	}
	// Proposed again even if unchanged: the next entry then carries it.
	s.repl.dirty[name] = struct{}{}
	s.repl.progressWaiters = append(s.repl.progressWaiters, done)
	s.progress.Unlock()
	s.kickProgress()
	select {
	case err := <-done:
		return err
	case <-s.quit:
		return ErrClosed
	}
}

// ConsumerOffset returns a consumer group's committed offset for a queue.
func (s *Store) ConsumerOffset(group, topic string, queueID int32) (int64, bool) {
	return s.Progress(consumerOffsetName(group, topic, queueID))
}

// ConsumerOffsetEntry is one committed consumer offset.
type ConsumerOffsetEntry struct {
	Group   string
	Topic   string
	QueueID int32
	Offset  int64
}

// ConsumerOffsets lists the committed offsets of a group ("" for all).
func (s *Store) ConsumerOffsets(group string) []ConsumerOffsetEntry {
	prefix := "o/"
	if group != "" {
		prefix += group + "\x00"
	}
	var out []ConsumerOffsetEntry
	s.EachProgress(prefix, func(name string, v int64) {
		parts := strings.Split(name[2:], "\x00")
		if len(parts) != 3 {
			return
		}
		id, err := strconv.Atoi(parts[2])
		if err != nil {
			return
		}
		out = append(out, ConsumerOffsetEntry{Group: parts[0], Topic: parts[1], QueueID: int32(id), Offset: v})
	})
	return out
}

// DeleteConsumerOffsets removes a group's offsets for a topic ("" for all
// topics).
func (s *Store) DeleteConsumerOffsets(group, topic string) {
	prefix := "o/" + group + "\x00"
	if topic != "" {
		prefix += topic + "\x00"
	}
	s.DeleteProgress(prefix)
}

// PutMeta stores a metadata value durably (fsync before returning; on a
// replicated store, once the set committed it).
func (s *Store) PutMeta(name string, value []byte) error {
	if s.Replicated() {
		return s.replicateMeta(map[string][]byte{name: value}, nil)
	}
	if err := s.db.Set(metaKey(name), value, pebble.Sync); err != nil {
		return fmt.Errorf("store: write metadata %q: %w", name, err)
	}
	return nil
}

// WriteMeta sets and deletes metadata values in one durable batch (fsync
// before returning).
func (s *Store) WriteMeta(puts map[string][]byte, deletes []string) error {
	if len(puts) == 0 && len(deletes) == 0 {
		return nil
	}
	if s.Replicated() {
		return s.replicateMeta(puts, deletes)
	}
	return s.writeMeta(puts, deletes)
}

// writeMeta is WriteMeta on this member alone.
func (s *Store) writeMeta(puts map[string][]byte, deletes []string) error {
	b := s.db.NewBatch()
	defer b.Close()
	for name, v := range puts {
		if err := b.Set(metaKey(name), v, nil); err != nil {
			return fmt.Errorf("store: write metadata %q: %w", name, err)
		}
	}
	for _, name := range deletes {
		if err := b.Delete(metaKey(name), nil); err != nil {
			return fmt.Errorf("store: delete metadata %q: %w", name, err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("store: write metadata: %w", err)
	}
	return nil
}

// DeleteMeta removes a metadata value durably.
func (s *Store) DeleteMeta(name string) error {
	if s.Replicated() {
		return s.replicateMeta(nil, []string{name})
	}
	if err := s.db.Delete(metaKey(name), pebble.Sync); err != nil {
		return fmt.Errorf("store: delete metadata %q: %w", name, err)
	}
	return nil
}

// Meta returns a metadata value, or ErrNotFound.
func (s *Store) Meta(name string) ([]byte, error) {
	v, closer, err := s.db.Get(metaKey(name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("%w: metadata %q", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("store: read metadata %q: %w", name, err)
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

// EachMeta calls fn for every metadata value whose name starts with
// prefix, in name order, stopping at the first error.
func (s *Store) EachMeta(prefix string, fn func(name string, value []byte) error) error {
	lo := metaKey(prefix)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return fmt.Errorf("store: read metadata: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if err := fn(string(it.Key()[1:]), it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

// Checkpoint persists the index now: partial consume-queue blocks, the
// dispatch checkpoint and progress values (with fsync when any changed).
func (s *Store) Checkpoint() error { return s.checkpoint(false) }

// checkpointLoop persists the index every CheckpointInterval.
func (s *Store) checkpointLoop() {
	s.every(s.opts.CheckpointInterval, func() {
		if err := s.checkpoint(false); err != nil {
			s.log.Error("index checkpoint failed", "err", err)
		}
	})
}

// checkpoint writes the partial consume-queue blocks, then the dispatch
// checkpoint and dirty progress values. The checkpoint never
// passes the durable end of the log, so everything before it survives a
// crash in both the log and the index.
func (s *Store) checkpoint(final bool) error {
	if s.Replicated() && !final && s.Writable() {
		s.kickProgress() // values a failed entry left behind
	}
	if s.keys != nil {
		// Its own end goes into its own header: it need not keep up
		// with the checkpoint, which never waits for it.
		if err := s.keys.sync(); err != nil {
			s.log.Error("key index sync failed", "err", err)
		}
	}
	s.indexMu.Lock()
	defer s.indexMu.Unlock()

	// The partial blocks are committed before cq is let go. A block
	// completed after this copy is then committed after it, by
	// dispatchRound, also under cq; committed later, the copy would put
	// the block's earlier state over the whole one, and once the block
	// left memory its later units would read as holes.
	s.cq.Lock()
	var blocks *pebble.Batch
	var written []*queue
	for _, q := range s.cq.queues {
		if q.registered && !q.dirty {
			continue
		}
		if blocks == nil {
			blocks = s.db.NewBatch()
		}
		if !q.registered {
			blocks.Set(queueRegKey(q.key), int64Value(q.min), nil)
		}
		if q.dirty {
			blocks.Set(blockKey(q.key, q.openNo), q.open, nil)
		}
		written = append(written, q)
	}
	if blocks != nil {
		err := blocks.Commit(pebble.NoSync)
		blocks.Close()
		if err != nil {
			s.cq.Unlock()
			return fmt.Errorf("store: write index checkpoint: %w", err)
		}
	}
	for _, q := range written {
		q.dirty, q.registered = false, true
	}
	ck := min(s.cq.dispatched, s.durable.Load())
	if s.opts.Flush == FlushAsync && final {
		ck = s.cq.dispatched // Close synced the log first
	}
	s.cq.Unlock()
	if s.checkpointUnlocked != nil {
		s.checkpointUnlocked()
	}

	// The checkpoint and the progress values go in a second batch, after
	// the blocks in the index's log: whatever recovery finds of it, it
	// finds the blocks too.
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(checkpointKey, int64Value(ck), nil)
	s.forgetDeletions(ck, b)

	s.progress.Lock()
	names := make([]string, 0, len(s.progress.dirty))
	values := s.progress.values
	if s.Replicated() {
		// Only what the set committed: a member restarted must not hold
		// a value of its own the set never took.
		values = s.progress.committed
	}
	for name := range s.progress.dirty {
		if v, ok := values[name]; ok {
			b.Set(progressKey(name), int64Value(v), nil)
		} else {
			b.Delete(progressKey(name), nil)
		}
		names = append(names, name)
	}
	clear(s.progress.dirty)
	s.progress.Unlock()

	opts := pebble.NoSync
	if len(names) > 0 || final {
		opts = pebble.Sync
	}
	if err := b.Commit(opts); err != nil {
		// Put the values back so the next checkpoint retries them.
		s.progress.Lock()
		for _, name := range names {
			s.progress.dirty[name] = struct{}{}
		}
		s.progress.Unlock()
		return fmt.Errorf("store: write index checkpoint: %w", err)
	}
	s.lastCkpt.Store(ck)
	return nil
}
