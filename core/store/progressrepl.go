package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// A replicated store's leader proposes its progress values (consumer
// offsets, scheduler and transaction positions) as soon as they change,
// from one goroutine and one entry at a time: the values changed while an
// entry is in flight go together into the next, the way appends gather
// into a round while the previous one is stored. A commit thus reaches
// the set within about one raft commit, however many arrive, and
// CommitOffsetSync waits for the entry that carries its value.

// progressWindow is the least time between the starts of two progress
// entries: under a steady stream of commits, one entry per window carries
// them all (about 100 a second at most), instead of one per raft commit.
const progressWindow = 10 * time.Millisecond

// kickProgress wakes progressLoop; a no-op on an unreplicated store.
func (s *Store) kickProgress() {
	if s.repl.progressKick == nil {
		return
	}
	select {
	case s.repl.progressKick <- struct{}{}:
	default:
	}
}

// progressLoop proposes changed progress values until the store closes.
func (s *Store) progressLoop() {
	for {
		select {
		case <-s.quit:
			s.progress.Lock()
			waiters := s.repl.progressWaiters
			s.repl.progressWaiters = nil
			s.progress.Unlock()
			for _, w := range waiters {
				w <- ErrClosed
			}
			return
		case <-s.repl.progressKick:
		}
		for {
			start := time.Now()
			if !s.proposeProgress() {
				break
			}
			// What changes meanwhile gathers for the next entry.
			if wait := time.Until(start.Add(progressWindow)); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-s.quit:
					t.Stop()
				}
			}
		}
	}
}

// proposeProgress proposes the progress values changed since the last
// entry and waits for it, then answers the CommitOffsetSync calls it
// carried. It reports whether it proposed one and the set took it.
func (s *Store) proposeProgress() bool {
	writable := s.Writable()
	s.progress.Lock()
	waiters := s.repl.progressWaiters
	s.repl.progressWaiters = nil
	if !writable || len(s.repl.dirty) == 0 {
		// Not leading: the values are the next leader's to propose.
		clear(s.repl.dirty)
		s.progress.Unlock()
		var err error
		if !writable {
			err = ErrNotLeader
		}
		for _, w := range waiters {
			w <- err
		}
		return false
	}
	e := []byte{entryProgress}
	e = binary.BigEndian.AppendUint32(e, uint32(len(s.repl.dirty)))
	names := make([]string, 0, len(s.repl.dirty))
	for name := range s.repl.dirty {
		v, ok := s.progress.values[name]
		e = binary.BigEndian.AppendUint16(e, uint16(len(name)))
		e = append(e, name...)
		if ok {
			e = append(e, 1)
		} else {
			e = append(e, 0)
		}
		e = binary.BigEndian.AppendUint64(e, uint64(v))
		names = append(names, name)
	}
	clear(s.repl.dirty)
	s.progress.Unlock()
	s.stats.ProgressEntries.Add(1)
	done := make(chan error, 1)
	s.opts.Replicator.Propose(e, func(err error) { done <- err })
	var err error
	select {
	case err = <-done:
	case <-s.quit:
		err = ErrClosed
	}
	if err != nil {
		if !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotLeader) {
			err = fmt.Errorf("%w: %v", ErrNotLeader, err)
		}
		// Sent again with the next entry, if this member still leads.
		s.progress.Lock()
		for _, name := range names {
			s.repl.dirty[name] = struct{}{}
		}
		s.progress.Unlock()
	}
	for _, w := range waiters {
		w <- err
	}
	return err == nil
}
