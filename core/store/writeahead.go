package store

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Rounds written ahead (Options.WriteAhead): the replicated log's rounds
// live in the commit log only. Its owner (core/cluster's raft log store)
// writes each round when the replicated log stores it, before the set
// commits it, with WriteRound, makes the rounds of a batch durable with
// one SyncRounds, and cuts rounds the set's log dropped with CutRounds;
// Apply then indexes a round without writing it. Between the applied end
// (CommitLogOffsets) and StoredEnd lie rounds that are stored and not
// applied: no reader reaches them (see doc.go, "Replication").

// ErrRoundConflict is returned by WriteRound for a round that does not
// begin where the stored rounds end.
var ErrRoundConflict = errors.New("store: round does not follow the stored rounds")

// RoundSpan is where one chunk of a round entry lies in the commit log.
// A chunk never crosses a segment boundary.
type RoundSpan struct {
	Off int64
	Len int
}

// ParseRound returns the id of a round entry and where its chunks lie in
// the commit log; ok is false for a replicated entry of another kind.
func ParseRound(entry []byte) (id uint64, spans []RoundSpan, ok bool, err error) {
	if len(entry) == 0 || entry[0] != entryRound {
		return 0, nil, false, nil
	}
	id, r, err := parseRound(entry[1:], 0)
	if err != nil {
		return 0, nil, true, err
	}
	spans = make([]RoundSpan, len(r.chunks))
	for i, c := range r.chunks {
		spans[i] = RoundSpan{Off: c.off, Len: len(c.buf)}
	}
	return id, spans, true, nil
}

// parseRound reads the body of a round entry (after its kind) into a
// round whose chunks alias p. segSize, when set, bounds each chunk to one
// segment; chunks must follow each other in the log.
func parseRound(p []byte, segSize int64) (uint64, *round, error) {
	if len(p) < 12 {
		return 0, nil, fmt.Errorf("%w: short round entry", ErrCorruption)
	}
	id := binary.BigEndian.Uint64(p)
	n := int(binary.BigEndian.Uint32(p[8:]))
	p = p[12:]
	r := &round{segSize: segSize}
	for i := 0; i < n; i++ {
		if len(p) < 12 {
			return 0, nil, fmt.Errorf("%w: short round entry", ErrCorruption)
		}
		off := int64(binary.BigEndian.Uint64(p))
		size := int(binary.BigEndian.Uint32(p[8:]))
		if len(p)-12 < size {
			return 0, nil, fmt.Errorf("%w: short round entry", ErrCorruption)
		}
		if off < 0 || off > 1<<62 {
			return 0, nil, fmt.Errorf("%w: round chunk of %d bytes at %d", ErrCorruption, size, off)
		}
		if k := len(r.chunks); k > 0 && off < r.chunks[k-1].off+int64(len(r.chunks[k-1].buf)) {
			return 0, nil, fmt.Errorf("%w: round chunk at %d overlaps the one before", ErrCorruption, off)
		}
		if segSize > 0 && off%segSize+int64(size) > segSize {
			return 0, nil, fmt.Errorf("%w: round chunk at %d crosses a segment", ErrCorruption, off)
		}
		r.chunks = append(r.chunks, chunk{off: off, buf: p[12 : 12+size]})
		p = p[12+size:]
	}
	if len(p) > 0 {
		return 0, nil, fmt.Errorf("%w: %d bytes after a round entry", ErrCorruption, len(p))
	}
	if k := len(r.chunks); k > 0 {
		last := r.chunks[k-1]
		r.start = r.chunks[0].off
		r.end = last.off + int64(len(last.buf))
	}
	return id, r, nil
}

// StoredEnd returns the end of the rounds in the commit log, applied or
// not: at least the applied end.
func (s *Store) StoredEnd() int64 {
	return max(s.written.Load(), s.repl.stored.Load())
}

// WriteRound writes the bytes of a round entry into the commit log at
// their offsets, before the entry is committed. The round must begin at
// StoredEnd (ErrRoundConflict otherwise); one that lies wholly below the
// applied end is a replay and is skipped. The bytes are durable only
// after SyncRounds, and readable only once Apply applied the entry. A
// failed write fails the store, as a failed write at Apply does, and
// leaves StoredEnd where it was.
func (s *Store) WriteRound(entry []byte) error {
	if len(entry) == 0 || entry[0] != entryRound {
		return fmt.Errorf("%w: WriteRound of a replicated entry that is not a round", ErrCorruption)
	}
	_, r, err := parseRound(entry[1:], s.opts.SegmentSize)
	if err != nil {
		return err
	}
	if len(r.chunks) == 0 {
		return nil
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.repl.closed {
		return ErrClosed
	}
	if err := s.Failed(); err != nil {
		return err
	}
	end := s.StoredEnd()
	switch {
	case r.end <= s.written.Load():
		return nil // applied already
	case r.start != end:
		return fmt.Errorf("%w: round at %d, the stored rounds end at %d", ErrRoundConflict, r.start, end)
	}
	if err := s.writeRound(r); err != nil {
		// As a write at Apply does, a failed write fails the store.
		s.dirtyEnd = max(s.dirtyEnd, r.end)
		s.fail(err)
		return err
	}
	s.dirtyEnd = 0
	s.repl.stored.Store(r.end)
	return nil
}

// SyncRounds makes every round WriteRound wrote before the call durable,
// with one fsync. A failed fsync fails the store: what it left on disk is
// unknown.
func (s *Store) SyncRounds() error {
	s.applyMu.Lock()
	end := s.StoredEnd()
	s.applyMu.Unlock()
	if end <= s.durable.Load() {
		return nil
	}
	s.stats.FsyncBytes.Observe(end - s.durable.Load())
	if err := s.syncActive(); err != nil {
		err = fmt.Errorf("%w: %v", ErrFailed, err)
		s.fail(err)
		return err
	}
	s.setDurable(end)
	return nil
}

// CutRounds removes the stored rounds past off, which must not be below
// the applied end: the replicated log dropped their entries, and the
// next rounds take these offsets with other bytes. The bytes are zeroed
// and synced before it returns. Cutting at or past StoredEnd does
// nothing.
func (s *Store) CutRounds(off int64) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if w := s.written.Load(); off < w {
		return fmt.Errorf("store: cut the stored rounds at %d, below the applied end %d", off, w)
	}
	end := s.StoredEnd()
	if off >= end && s.dirtyEnd <= off {
		return nil
	}
	to := max(end, s.dirtyEnd)
	if err := s.zeroTail(off, to); err != nil {
		s.dirtyEnd = max(s.dirtyEnd, to)
		return err
	}
	if err := s.syncRange(off, to); err != nil {
		err = fmt.Errorf("%w: %v", ErrFailed, err)
		s.fail(err)
		return err
	}
	s.dirtyEnd = 0
	s.repl.stored.Store(off)
	if s.durable.Load() > off {
		s.durable.Store(off)
	}
	s.log.Warn("stored rounds cut: the set's log dropped them", "from", end, "to", off)
	return nil
}

// syncRange fsyncs the segments holding [from, to).
func (s *Store) syncRange(from, to int64) error {
	s.cl.mu.RLock()
	defer s.cl.mu.RUnlock()
	for _, seg := range s.cl.segs {
		if seg.base+s.opts.SegmentSize <= from || seg.base >= to {
			continue
		}
		if err := seg.f.SyncData(); err != nil {
			return fmt.Errorf("store: fsync segment %s: %w", seg.name, err)
		}
	}
	return nil
}

// ReadRound rebuilds the round entry of id whose chunks lie at spans, from
// the commit log: the entry WriteRound was given. Every span must end at
// or before StoredEnd (ErrNotFound otherwise); one that retention deleted
// gives ErrOffsetGone.
func (s *Store) ReadRound(id uint64, spans []RoundSpan) ([]byte, error) {
	n := 1 + 8 + 4
	end := s.StoredEnd()
	for _, sp := range spans {
		if sp.Off < 0 || sp.Len < 0 || sp.Off > end || int64(sp.Len) > end-sp.Off {
			return nil, fmt.Errorf("%w: round chunk of %d bytes at %d: the stored rounds end at %d", ErrNotFound, sp.Len, sp.Off, end)
		}
		if sp.Off%s.opts.SegmentSize+int64(sp.Len) > s.opts.SegmentSize {
			return nil, fmt.Errorf("%w: round chunk at %d crosses a segment", ErrCorruption, sp.Off)
		}
		n += 12 + sp.Len
	}
	e := make([]byte, 0, n)
	e = append(e, entryRound)
	e = binary.BigEndian.AppendUint64(e, id)
	e = binary.BigEndian.AppendUint32(e, uint32(len(spans)))
	for _, sp := range spans {
		e = binary.BigEndian.AppendUint64(e, uint64(sp.Off))
		e = binary.BigEndian.AppendUint32(e, uint32(sp.Len))
		at := len(e)
		e = e[:at+sp.Len]
		if err := s.cl.readAt(e[at:], sp.Off); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// HoldRoundsFrom sets where the rounds the replicated log may still apply
// again begin: its owner's last snapshot ends there, and a restart
// replays every entry after it, reading their rounds from the commit
// log. Retention of a write-ahead store never deletes a segment ending
// past it, whatever the reason (age or a full disk); until the first
// call it deletes none. The floor never moves back.
func (s *Store) HoldRoundsFrom(off int64) {
	for {
		cur := s.repl.floor.Load()
		if off <= cur || s.repl.floor.CompareAndSwap(cur, off) {
			return
		}
	}
}
