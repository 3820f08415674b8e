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

	from := max(ck, s.cl.minOffset())
	b := s.db.NewBatch()
	defer b.Close()
	end, records, err := s.scan(from, b)
	if err != nil {
		return err
	}
	s.trimQueues(end, b)

	next := end
	if pos := next % s.opts.SegmentSize; pos > s.opts.SegmentSize-blankLen {
		next += s.opts.SegmentSize - pos
	}
	s.mu.next = next
	s.written.Store(end)
	s.durable.Store(end)
	s.cq.dispatched = end
	for k, q := range s.cq.queues {
		q.assigned = q.next
		s.mu.queues[k] = q
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
// of the log and returns where valid data ends. An invalid frame followed
// by valid ones is reported and skipped; an invalid frame with nothing
// valid after it is a torn tail, zeroed (with any segment after it
// removed), and ends the log.
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
		fsize := fi.Size()
		r := bufio.NewReaderSize(io.NewSectionReader(seg.f, off-seg.base, max(0, fsize-(off-seg.base))), 1<<20)
		for {
			pos := off - seg.base
			if pos+blankLen > fsize || pos+blankLen > segSize {
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
			var rec message.Record
			if size >= message.MinRecordLen && magic == message.MagicCode && pos+size+trailerLen <= min(fsize, segSize) {
				n := int(size + trailerLen)
				if cap(frame) < n {
					frame = make([]byte, n)
				}
				frame = frame[:n]
				if _, err := io.ReadFull(r, frame); err != nil {
					return 0, records, fmt.Errorf("store: read segment %s: %w", seg.name, err)
				}
				rec, err = checkFrame(frame, off)
				if err == nil {
					s.redispatch(rec, off, b)
					records++
					off += size + trailerLen
					continue
				}
			}
			// An invalid frame: skip it if valid data follows, else it is
			// the torn tail.
			next, found, err := s.resync(segs[i:], off)
			if err != nil {
				return 0, records, err
			}
			if !found {
				s.log.Warn("commit log: torn or corrupt tail cut", "segment", seg.name, "offset", off, "bytes", fsize-pos)
				if err := s.cutTail(segs[i:], off); err != nil {
					return 0, records, err
				}
				return off, records, nil
			}
			s.stats.Corruptions.Add(1)
			s.log.Error("CORRUPT COMMIT LOG: invalid data skipped; the records after it stay readable",
				"from", off, "to", next, "bytes", next-off)
			if next >= segEnd {
				off = next
				break
			}
			off = next
			r.Reset(io.NewSectionReader(seg.f, off-seg.base, fsize-(off-seg.base)))
		}
		if i == len(segs)-1 {
			return off, records, nil
		}
		if off < segEnd {
			off = segEnd
		}
	}
	return off, records, nil
}

// redispatch puts a recovered record into its queue.
func (s *Store) redispatch(rec message.Record, off int64, b *pebble.Batch) {
	k := queueKey{string(rec.Topic()), rec.QueueID()}
	q := s.cq.queues[k]
	if q == nil {
		q = newQueue(k)
		s.cq.queues[k] = q
	}
	u := Unit{QueueOffset: rec.QueueOffset(), CommitLogOffset: off, Size: int32(len(rec)), TagCode: s.opts.TagCode(rec)}
	if full := s.putUnitLocked(q, u); full != nil {
		b.Set(blockKey(k, q.prevNo), full, nil)
	}
	q.arrivals = false
}

// resync looks for the first valid frame after off, in segs[0] past off
// and in the later segments.
func (s *Store) resync(segs []*segment, off int64) (int64, bool, error) {
	magic := binary.BigEndian.AppendUint32(nil, message.MagicCode)
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
		// A candidate frame starts 4 bytes before a magic code.
		for w := start; w < fsize; w += resyncWindow {
			n, err := seg.f.ReadAt(win[:min(int64(len(win)), fsize-w)], w)
			if err != nil && err != io.EOF {
				return 0, false, err
			}
			buf := win[:n]
			for j := 0; ; {
				k := bytes.Index(buf[j:], magic)
				if k < 0 {
					break
				}
				j += k + 1
				c := w + int64(j-1) - 4
				if c < start {
					continue
				}
				var head [4]byte
				if _, err := seg.f.ReadAt(head[:], c); err != nil {
					continue
				}
				size := int64(int32(binary.BigEndian.Uint32(head[:])))
				if size < message.MinRecordLen || c+size+trailerLen > fsize {
					continue
				}
				frame := make([]byte, size+trailerLen)
				if _, err := seg.f.ReadAt(frame, c); err != nil {
					continue
				}
				if _, err := checkFrame(frame, seg.base+c); err == nil {
					return seg.base + c, true, nil
				}
			}
		}
	}
	return 0, false, nil
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
func (s *Store) trimQueues(end int64, b *pebble.Batch) {
	for k, q := range s.cq.queues {
		next := q.next
		for next > q.min {
			u, ok := s.unitAt(q, next-1)
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
			} else if v, closer, err := s.db.Get(blockKey(k, no)); err == nil {
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

// unitAt reads one unit of q during recovery.
func (s *Store) unitAt(q *queue, off int64) (Unit, bool) {
	no := off / blockUnits
	blk := q.memBlock(no)
	if blk == nil {
		v, closer, err := s.db.Get(blockKey(q.key, no))
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
