package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rmq-go/rmq/core/message"
)

// resyncWindow is how much of a segment the corruption scan reads at once.
const resyncWindow = 1 << 20

// recover rebuilds the in-memory state from the index and the commit log:
// it loads the queues and progress values, re-dispatches every record past
// the checkpoint, cuts a torn tail, and trims consume-queue units that
// point past the end of the log.
func (s *Store) recover() error {
	began := time.Now()
	ck, _, err := getInt64(s.db, checkpointKey)
	if err != nil {
		return fmt.Errorf("store: read checkpoint: %w", err)
	}
	if err := s.loadQueues(); err != nil {
		return err
	}
	if err := s.loadProgress(); err != nil {
		return err
	}
	if err := s.loadDeleted(); err != nil {
		return err
	}
	if err := s.refillShortBlocks(); err != nil {
		return err
	}

	from := max(ck, s.cl.minOffset())
	// The blocks the scan completes go to b; trimQueues reads them back
	// through it (an indexed batch), not only from the committed index.
	b := s.db.NewIndexedBatch()
	defer b.Close()
	if s.keys != nil {
		s.keys.mu.Lock()
		if at := max(s.keys.end, s.cl.minOffset()); at < from {
			s.log.Info("key index behind the checkpoint: indexing the log from where it ends", "from", at, "to", from)
			n, err := s.reindexKeys(at, from)
			if err != nil {
				s.keys.mu.Unlock()
				return err
			}
			s.log.Info("key index caught up with the checkpoint", "from", at, "to", from, "records", n)
		}
	}
	end, records, err := s.scan(from, b)
	if s.keys != nil {
		if err == nil {
			s.keys.writeLocked(end)
		}
		s.keys.mu.Unlock()
	}
	if err != nil {
		return err
	}
	stored := end
	if s.Replicated() {
		// Past the last synced end, a round may be torn anywhere: cut
		// there; the replicated log holds every round after it. Rounds
		// written ahead stay in the log, unapplied: the owner cuts them
		// to where its replicated log ends (CutRounds), and its replay
		// indexes the rest.
		if x, ok, err := getInt64(s.db, replEndKey); err != nil {
			return fmt.Errorf("store: read the synced end: %w", err)
		} else if ok && x < end {
			if s.opts.WriteAhead {
				s.log.Info("commit log holds rounds past the applied end; the set's log applies them again", "applied", x, "end", end)
			} else {
				if err := s.cutAt(x); err != nil {
					return err
				}
				s.log.Info("commit log cut at its last synced end; the set's log supplies the rest", "from", end, "to", x)
				stored = x
			}
			end = x
		}
	}
	s.trimQueues(end, b)
	if s.keys != nil {
		// After a cut, entries past end name records to be written
		// again: advisory, as QueryByKey says.
		s.keys.setEnd(end)
		// A crash may have come between a segment's deletion and the
		// deletion of the key-index files below it.
		s.keys.dropBelow(s.cl.minOffset())
	}
	// Entries of the key index as earlier versions kept it, in the
	// index itself, are dropped once.
	if err := s.dropOldKeyEntries(b); err != nil {
		return err
	}

	// This run's round markers say every round before them is durable (see
	// classify); the last run may have left its last segment unsynced.
	if err := s.syncLast(); err != nil {
		return err
	}

	next := end
	if pos := next % s.opts.SegmentSize; pos > s.opts.SegmentSize-blankLen {
		next += s.opts.SegmentSize - pos
	}
	s.mu.next = next
	s.written.Store(end)
	s.durable.Store(stored)
	s.repl.stored.Store(stored)
	s.cq.dispatched = end
	for k, q := range s.cq.queues {
		q.assigned = q.next
		s.mu.queues[k] = q
	}
	// Every record before end was re-dispatched or skipped by now, and
	// the checkpoint below moves to end, so no deletion is needed again.
	for topic, at := range s.mu.deleted {
		s.mu.deleted[topic] = min(at, end)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("store: write recovered index: %w", err)
	}
	if err := s.checkpoint(true); err != nil {
		return err
	}
	s.log.Info("store recovered", "dir", s.opts.Dir, "checkpoint", ck, "end", end,
		"records_redispatched", records, "queues", len(s.cq.queues), "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// loadQueues reads the queue registry and each queue's last block.
func (s *Store) loadQueues() error {
	lo := []byte{kindQueue}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return fmt.Errorf("store: read queue registry: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k, err := parseQueueRegKey(it.Key())
		if err != nil {
			return err
		}
		if len(it.Value()) != 8 {
			return fmt.Errorf("%w: queue registry value for %s/%d", ErrCorruption, k.topic, k.id)
		}
		q := newQueue(k)
		q.registered = true
		q.min = int64(binary.BigEndian.Uint64(it.Value()))
		q.openNo, q.next = q.min/blockUnits, q.min
		no, blk, ok, err := s.lastBlock(k)
		if err != nil {
			return err
		}
		if ok {
			q.openNo = no
			q.open = append(q.open[:0], blk...)
			q.next = max(q.min, no*blockUnits+int64(len(blk)/unitLen))
			if len(q.open) == blockLen {
				q.rotate(no + 1)
			}
		}
		s.cq.queues[k] = q
	}
	return it.Error()
}

// lastBlock returns the highest-numbered index block of a queue.
func (s *Store) lastBlock(k queueKey) (int64, []byte, bool, error) {
	lo := queuePrefix(kindBlock, k)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return 0, nil, false, err
	}
	defer it.Close()
	if !it.Last() {
		return 0, nil, false, it.Error()
	}
	key, v := it.Key(), it.Value()
	if len(key) != len(lo)+8 || len(v)%unitLen != 0 || len(v) > blockLen {
		return 0, nil, false, fmt.Errorf("%w: index block %q", ErrCorruption, key)
	}
	return int64(binary.BigEndian.Uint64(key[len(lo):])), bytes.Clone(v), true, nil
}

func (s *Store) loadProgress() error {
	lo := []byte{kindProgress}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return fmt.Errorf("store: read progress: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if len(it.Value()) != 8 {
			return fmt.Errorf("%w: progress value %q", ErrCorruption, it.Key())
		}
		s.progress.values[string(it.Key()[1:])] = int64(binary.BigEndian.Uint64(it.Value()))
	}
	return it.Error()
}

// scan verifies and re-dispatches every frame from offset from to the end
// of the log and returns where valid data ends.
//
// An invalid frame is the torn tail of the log unless a later round proves
// otherwise: under FlushSync a round is written only after the fsync of
// every earlier one returned, so a valid FlushSync round marker after the
// invalid frame means the frame's round was durable and the frame is
// corruption. Corruption is reported and skipped, and scanning resumes at
// the next valid frame. A torn tail is zeroed, with any segment after it
// removed, and ends the log.
func (s *Store) scan(from int64, b *pebble.Batch) (end int64, records int, err error) {
	s.cl.mu.RLock()
	segs := append([]*segment(nil), s.cl.segs...)
	s.cl.mu.RUnlock()
	segSize := s.opts.SegmentSize
	off := from
	frame := make([]byte, 0, 64<<10)
	for i := 0; i < len(segs); i++ {
		seg := segs[i]
		segEnd := seg.base + segSize
		if off >= segEnd {
			continue
		}
		off = max(off, seg.base)
		fi, err := seg.f.Stat()
		if err != nil {
			return 0, records, fmt.Errorf("store: stat segment %s: %w", seg.name, err)
		}
		fsize := min(fi.Size(), segSize)
		r := bufio.NewReaderSize(io.NewSectionReader(seg.f, off-seg.base, max(0, fsize-(off-seg.base))), 1<<20)
		for {
			pos := off - seg.base
			if pos+blankLen > fsize {
				break // the segment's data ends
			}
			head, err := r.Peek(8)
			if err != nil {
				return 0, records, fmt.Errorf("store: read segment %s: %w", seg.name, err)
			}
			size := int64(int32(binary.BigEndian.Uint32(head)))
			magic := binary.BigEndian.Uint32(head[4:])
			if size == 0 && magic == BlankMagic {
				off = segEnd
				break
			}
			if size >= markerLen && pos+size+trailerLen <= fsize && (magic == message.MagicCode || magic == RoundMagic) {
				n := int(size + trailerLen)
				if cap(frame) < n {
					frame = make([]byte, n)
				}
				frame = frame[:n]
				if _, err := io.ReadFull(r, frame); err != nil {
					return 0, records, fmt.Errorf("store: read segment %s: %w", seg.name, err)
				}
				if magic == RoundMagic {
					if _, ok := checkMarker(frame, off); ok {
						off += size + trailerLen
						continue
					}
				} else if rec, err := checkFrame(frame, off); err == nil {
					s.redispatch(rec, off, b)
					records++
					off += size + trailerLen
					continue
				}
			}
			next, corrupt, err := s.classify(segs[i:], off)
			if err != nil {
				return 0, records, err
			}
			if !corrupt {
				s.log.Warn("commit log: torn tail cut", "segment", seg.name, "offset", off, "bytes", fsize-pos)
				if err := s.cutTail(segs[i:], off); err != nil {
					return 0, records, err
				}
				return off, records, nil
			}
			s.stats.Corruptions.Add(1)
			s.log.Error("CORRUPT COMMIT LOG: invalid data skipped; the records after it stay readable",
				"from", off, "to", next, "bytes", next-off)
			off = next
			if next >= segEnd {
				break
			}
			r.Reset(io.NewSectionReader(seg.f, off-seg.base, fsize-(off-seg.base)))
		}
		if i == len(segs)-1 {
			return off, records, nil
		}
		off = max(off, segEnd)
	}
	return off, records, nil
}

// classify decides what the invalid frame at off is. It returns
// corrupt=true with the offset of the next valid frame when a later
// FlushSync round marker proves the frame's round was durable; otherwise
// the frame begins the torn tail.
func (s *Store) classify(segs []*segment, off int64) (next int64, corrupt bool, err error) {
	next, found, err := s.findFrame(segs, off, false)
	if err != nil || !found {
		return 0, false, err
	}
	_, proven, err := s.findFrame(segs, off, true)
	if err != nil || !proven {
		return 0, false, err
	}
	return next, true, nil
}

// findFrame looks for the first valid frame after off, in segs[0] past off
// and in the later segments; with syncMarker, only for a FlushSync round
// marker.
func (s *Store) findFrame(segs []*segment, off int64, syncMarker bool) (int64, bool, error) {
	var magics [][]byte
	if !syncMarker {
		magics = append(magics, binary.BigEndian.AppendUint32(nil, message.MagicCode))
	}
	magics = append(magics, binary.BigEndian.AppendUint32(nil, RoundMagic))
	win := make([]byte, resyncWindow+8)
	for i, seg := range segs {
		fi, err := seg.f.Stat()
		if err != nil {
			return 0, false, err
		}
		fsize := min(fi.Size(), s.opts.SegmentSize)
		start := int64(0)
		if i == 0 {
			start = off - seg.base + 1
		}
		// A candidate frame starts 4 bytes before its magic code.
		for w := max(0, start-4); w < fsize; w += resyncWindow {
			n, err := seg.f.ReadAt(win[:min(int64(len(win)), fsize-w)], w)
			if err != nil && err != io.EOF {
				return 0, false, err
			}
			best := int64(-1)
			for _, magic := range magics {
				buf := win[:n]
				for j := 0; ; {
					k := bytes.Index(buf[j:], magic)
					if k < 0 {
						break
					}
					c := w + int64(j+k) - 4
					j += k + 1
					if c < start || (best >= 0 && c >= best) {
						continue
					}
					if ok, err := s.validFrameAt(seg, c, fsize, syncMarker); err != nil {
						return 0, false, err
					} else if ok {
						best = c
						break
					}
				}
			}
			if best >= 0 {
				return seg.base + best, true, nil
			}
		}
	}
	return 0, false, nil
}

// validFrameAt reports whether a valid frame (a record or a round marker;
// with syncMarker, a FlushSync round marker) starts at c in seg.
func (s *Store) validFrameAt(seg *segment, c, fsize int64, syncMarker bool) (bool, error) {
	var head [8]byte
	if _, err := seg.f.ReadAt(head[:], c); err != nil {
		return false, nil
	}
	size := int64(int32(binary.BigEndian.Uint32(head[:])))
	magic := binary.BigEndian.Uint32(head[4:])
	if size < markerLen || c+size+trailerLen > fsize {
		return false, nil
	}
	frame := make([]byte, size+trailerLen)
	if _, err := seg.f.ReadAt(frame, c); err != nil {
		return false, nil
	}
	if magic == RoundMagic {
		flags, ok := checkMarker(frame, seg.base+c)
		return ok && (!syncMarker || flags&markerSync != 0), nil
	}
	if syncMarker {
		return false, nil
	}
	_, err := checkFrame(frame, seg.base+c)
	return err == nil, nil
}

// redispatch puts a recovered record into its queue, unless its topic
// was deleted after it was written.
func (s *Store) redispatch(rec message.Record, off int64, b *pebble.Batch) {
	k := queueKey{string(rec.Topic()), rec.QueueID()}
	if at, ok := s.mu.deleted[k.topic]; ok && off < at {
		return // its topic was deleted after it was written
	}
	q := s.cq.queues[k]
	if q == nil {
		q = newQueue(k)
		s.cq.queues[k] = q
	}
	u := Unit{QueueOffset: rec.QueueOffset(), CommitLogOffset: off, Size: int32(len(rec)), TagCode: s.opts.TagCode(rec)}
	s.putUnitLocked(q, u, func(no int64, blk []byte) { b.Set(blockKey(k, no), blk, nil) })
	if s.keys != nil && off >= s.keys.end {
		s.indexRecord(rec, off)
	}
	s.cq.lastStoreTime = rec.StoreTimestamp()
	q.arrivals = false
}

// cutAt cuts the log at off (see cutTail).
func (s *Store) cutAt(off int64) error {
	s.cl.mu.RLock()
	var segs []*segment
	for _, seg := range s.cl.segs {
		if seg.base+s.opts.SegmentSize > off {
			segs = append(segs, seg)
		}
	}
	s.cl.mu.RUnlock()
	if len(segs) == 0 || segs[0].base > off {
		return nil
	}
	return s.cutTail(segs, off)
}

// syncLast fsyncs the last segment: every one before it was synced before
// its successor was written to.
func (s *Store) syncLast() error {
	s.cl.mu.RLock()
	defer s.cl.mu.RUnlock()
	if len(s.cl.segs) == 0 {
		return nil
	}
	seg := s.cl.segs[len(s.cl.segs)-1]
	if err := seg.f.SyncData(); err != nil {
		return fmt.Errorf("store: sync %s: %w", seg.name, err)
	}
	return nil
}

// cutTail zeroes segs[0] from off to its end and removes the segments
// after it, which hold no valid frame.
func (s *Store) cutTail(segs []*segment, off int64) error {
	seg := segs[0]
	fi, err := seg.f.Stat()
	if err != nil {
		return err
	}
	if n := fi.Size() - (off - seg.base); n > 0 {
		if _, err := seg.f.WriteAt(make([]byte, n), off-seg.base); err != nil {
			return fmt.Errorf("store: zero torn tail of %s: %w", seg.name, err)
		}
		if err := seg.f.SyncData(); err != nil {
			return fmt.Errorf("store: sync %s: %w", seg.name, err)
		}
	}
	if len(segs) == 1 {
		return nil
	}
	s.cl.mu.Lock()
	defer s.cl.mu.Unlock()
	for _, dead := range segs[1:] {
		s.log.Warn("commit log: removing segment after the torn tail", "segment", dead.name)
		dead.f.Close()
		if err := s.cl.fs.Remove(s.cl.fs.PathJoin(s.cl.dir, dead.name)); err != nil {
			return fmt.Errorf("store: remove %s: %w", dead.name, err)
		}
		for j, x := range s.cl.segs {
			if x == dead {
				s.cl.segs = append(s.cl.segs[:j], s.cl.segs[j+1:]...)
				break
			}
		}
	}
	return s.cl.syncDir()
}

// trimQueues drops consume-queue units that point at or past end, the end
// of valid data, so queue offsets continue from the last recovered record.
// b is the recovery's indexed batch: the blocks the scan rebuilt are in
// it, and a unit below end in one of them is kept like any other.
func (s *Store) trimQueues(end int64, b *pebble.Batch) {
	for k, q := range s.cq.queues {
		next := q.next
		for next > q.min {
			u, ok := s.unitAt(q, next-1, b)
			if ok && u.Size > 0 && u.CommitLogOffset < end {
				break
			}
			next--
		}
		if next == q.next {
			continue
		}
		s.log.Warn("consume queue trimmed to the recovered commit log", "topic", k.topic, "queue", k.id, "from", q.next, "to", next)
		// Rebuild the tail: the block holding next-1 becomes the open block.
		no := next / blockUnits
		var blk []byte
		if next > q.min {
			no = (next - 1) / blockUnits
			if m := q.memBlock(no); m != nil {
				blk = bytes.Clone(m)
			} else if v, closer, err := b.Get(blockKey(k, no)); err == nil {
				blk = bytes.Clone(v)
				closer.Close()
			}
			blk = blk[:min(len(blk), int(next-no*blockUnits)*unitLen)]
		}
		b.DeleteRange(blockKey(k, no), prefixEnd(queuePrefix(kindBlock, k)), nil)
		q.prev, q.prevNo = nil, -1
		q.open, q.openNo, q.next = append(make([]byte, 0, blockLen), blk...), no, next
		q.dirty = len(blk) > 0
		if len(q.open) == blockLen {
			b.Set(blockKey(k, no), q.open, nil)
			q.rotate(no + 1)
		}
	}
}

// unitAt reads one unit of q during recovery: from memory, or through
// the recovery's indexed batch b, which holds the blocks the scan
// completed over those of the index.
func (s *Store) unitAt(q *queue, off int64, b *pebble.Batch) (Unit, bool) {
	no := off / blockUnits
	blk := q.memBlock(no)
	if blk == nil {
		v, closer, err := b.Get(blockKey(q.key, no))
		if err != nil {
			return Unit{}, false
		}
		defer closer.Close()
		blk = v
	}
	at := int(off-no*blockUnits) * unitLen
	if at+unitLen > len(blk) {
		return Unit{}, false
	}
	return getUnit(blk[at:], off), true
}
