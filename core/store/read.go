package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rmq-go/rmq/core/message"
)

// maxReadSpan bounds one coalesced read of a queue's records.
const maxReadSpan = 1 << 20

// maxReadGap is the most bytes of other records a coalesced read takes in
// between two of its queue's, so that one read serves records the queue's
// neighbours interleave with (of eight queues written in turn, 1 KiB
// records are about 9 KiB apart). A read costs a system call and the copy
// of its bytes: here the call costs as much as copying 29 KiB (2.7 µs for
// each 1.25 KiB record read alone, 0.9 µs for each of 32 read together with
// the 9 KiB after each); on a machine with cheaper calls the break-even lies
// lower, hence the margin.
const maxReadGap = 16 << 10

// QueueOffsets returns the first retained and the next offset of a queue.
// A queue that never received a message has both 0.
func (s *Store) QueueOffsets(topic string, queueID int32) (minOff, maxOff int64) {
	s.cq.RLock()
	defer s.cq.RUnlock()
	if q := s.cq.queues[queueKey{topic, queueID}]; q != nil {
		return q.min, q.next
	}
	return 0, 0
}

// MaxOffset returns the offset the next message of the queue will get.
func (s *Store) MaxOffset(topic string, queueID int32) int64 {
	_, m := s.QueueOffsets(topic, queueID)
	return m
}

// MinOffset returns the first retained offset of the queue.
func (s *Store) MinOffset(topic string, queueID int32) int64 {
	m, _ := s.QueueOffsets(topic, queueID)
	return m
}

// QueueInfo describes one consume queue.
type QueueInfo struct {
	Topic     string
	QueueID   int32
	MinOffset int64
	MaxOffset int64
}

// Queues lists every consume queue.
func (s *Store) Queues() []QueueInfo {
	s.cq.RLock()
	defer s.cq.RUnlock()
	out := make([]QueueInfo, 0, len(s.cq.queues))
	for k, q := range s.cq.queues {
		out = append(out, QueueInfo{Topic: k.topic, QueueID: k.id, MinOffset: q.min, MaxOffset: q.next})
	}
	return out
}

// units appends to dst up to max units of the queue, starting at offset
// from. It returns fewer (or none) at the end of the queue. Units with Size
// 0 are holes: positions whose record was lost to corruption. An offset
// below the queue's min offset gives ErrOffsetGone. Readers outside the
// store use a QueueIter.
func (s *Store) units(topic string, queueID int32, from int64, max int, dst []Unit) ([]Unit, error) {
	k := queueKey{topic, queueID}
	for max > 0 {
		s.cq.RLock()
		q := s.cq.queues[k]
		if q == nil || from >= q.next {
			s.cq.RUnlock()
			return dst, nil
		}
		if from < q.min {
			s.cq.RUnlock()
			return dst, fmt.Errorf("%w: %s/%d offset %d is below the min offset %d", ErrOffsetGone, topic, queueID, from, q.min)
		}
		end := min(q.next, from+int64(max), (from/blockUnits+1)*blockUnits)
		no := from / blockUnits
		if blk := q.memBlock(no); blk != nil {
			dst = appendUnits(dst, blk, no, from, end)
			s.cq.RUnlock()
		} else if blk := s.ahead.block(q, no); blk != nil {
			dst = appendUnits(dst, blk, no, from, end)
			s.cq.RUnlock()
		} else {
			complete := q.openNo // the blocks below it are final
			s.cq.RUnlock()
			var err error
			if dst, err = s.indexUnits(q, no, complete, from, end, dst); err != nil {
				return dst, err
			}
		}
		max -= int(end - from)
		from = end
	}
	return dst, nil
}

func appendUnits(dst []Unit, blk []byte, no, from, end int64) []Unit {
	for off := from; off < end; off++ {
		at := int(off-no*blockUnits) * unitLen
		if at+unitLen > len(blk) {
			dst = append(dst, Unit{QueueOffset: off}) // past a short block: a hole
			continue
		}
		dst = append(dst, getUnit(blk[at:], off))
	}
	return dst
}

func (s *Store) indexUnits(q *queue, no, complete, from, end int64, dst []Unit) ([]Unit, error) {
	k := q.key
	blk, err := s.readBlocks(q, no, complete)
	if errors.Is(err, pebble.ErrNotFound) {
		// The topic may have been deleted since the queue was read: its
		// new queue, if any, ends before from.
		if s.MaxOffset(k.topic, k.id) <= from {
			return dst, nil
		}
		// Retention may have removed it since the min offset was read.
		if from < s.MinOffset(k.topic, k.id) {
			return dst, fmt.Errorf("%w: %s/%d offset %d", ErrOffsetGone, k.topic, k.id, from)
		}
		return dst, fmt.Errorf("%w: %s/%d: index block %d is missing", ErrCorruption, k.topic, k.id, no)
	}
	if errors.Is(err, ErrCorruption) {
		return dst, err
	}
	if err != nil {
		return dst, fmt.Errorf("store: read index: %w", err)
	}
	return appendUnits(dst, blk, no, from, end), nil
}

func (s *Store) reportCorruption(err error) {
	s.stats.Corruptions.Add(1)
	s.log.Error("CORRUPT RECORD: not served", "err", err)
}

// ReadRecordAt reads the record at a commit-log offset, verifying its
// checksum. The result is a new buffer.
func (s *Store) ReadRecordAt(off int64) (message.Record, error) {
	if off < 0 {
		return nil, fmt.Errorf("%w: commit-log offset %d", ErrNotFound, off)
	}
	if off >= s.written.Load() {
		return nil, fmt.Errorf("%w: commit-log offset %d is past the end", ErrNotFound, off)
	}
	var head [8]byte
	if err := s.cl.readAt(head[:], off); err != nil {
		return nil, err
	}
	size := int64(int32(binary.BigEndian.Uint32(head[:])))
	if size < message.MinRecordLen || off%s.opts.SegmentSize+size+trailerLen > s.opts.SegmentSize ||
		binary.BigEndian.Uint32(head[4:]) != message.MagicCode {
		return nil, fmt.Errorf("%w: no record starts at commit-log offset %d", ErrNotFound, off)
	}
	frame := make([]byte, size+trailerLen)
	if err := s.cl.readAt(frame, off); err != nil {
		return nil, err
	}
	rec, err := checkFrame(frame, off)
	if err != nil {
		s.reportCorruption(err)
		return nil, err
	}
	return rec, nil
}

// OffsetForTimestamp returns the first offset of the queue whose record was
// stored at or after ts (ms); the max offset if every record is older, and
// 0 for an empty queue. A hole or corrupt record counts as older.
func (s *Store) OffsetForTimestamp(topic string, queueID int32, ts int64) (int64, error) {
	lo, hi := s.QueueOffsets(topic, queueID)
	it := s.NewQueueIter(topic, queueID, IterOptions{MaxUnits: 1})
	defer it.Close()
	// Invariant: records before lo are older than ts, records at and after
	// hi are not.
	for lo < hi {
		mid := lo + (hi-lo)/2
		ok := it.SeekGE(mid)
		if from, to := it.Gap(); from < to {
			return 0, fmt.Errorf("%w: %s/%d offset %d", ErrOffsetGone, topic, queueID, mid)
		}
		if err := it.Error(); err != nil {
			return 0, err
		}
		if !ok && it.NextOffset() == mid {
			return 0, fmt.Errorf("%w: %s/%d offset %d", ErrNotFound, topic, queueID, mid)
		}
		if !ok || it.Record().StoreTimestamp() < ts {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// DiskUsage describes the store's files, from what it holds in memory.
type DiskUsage struct {
	Segments       int   // commit-log segment files
	CommitLogBytes int64 // the retained commit log: its end minus its first segment's base
	IndexBytes     int64 // the index's files: pebble's, as it counts them, and the key index's
}

// DiskUsage returns the store's disk usage. It reads no directory: the
// commit log's figure is the span of offsets its segments hold, which
// over-counts a segment's unwritten tail.
func (s *Store) DiskUsage() DiskUsage {
	s.cl.mu.RLock()
	u := DiskUsage{Segments: len(s.cl.segs)}
	if len(s.cl.segs) > 0 {
		u.CommitLogBytes = max(s.written.Load()-s.cl.segs[0].base, 0)
	}
	s.cl.mu.RUnlock()
	u.IndexBytes = int64(s.db.Metrics().DiskSpaceUsage())
	if s.keys != nil {
		u.IndexBytes += s.keys.bytes()
	}
	return u
}

// CommitLogOffsets returns the first retained offset of the commit log and
// the offset after its last record.
func (s *Store) CommitLogOffsets() (minOff, maxOff int64) {
	return s.cl.minOffset(), s.written.Load()
}
