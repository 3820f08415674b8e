package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rmq-go/rmq/core/message"
)

// refilledKey marks an index whose consume-queue blocks were checked by
// refillShortBlocks. Its value is empty.
var refilledKey = []byte{kindFormat, 'r', 'e', 'f', 'i', 'l', 'l', 'e', 'd'}

// refillShortBlocks mends, once per store, the consume-queue blocks that
// versions before the fix of invariant 4 could leave short: a checkpoint
// wrote a block's partial copy over the whole block that a dispatch had
// just completed, and the units it dropped read as holes. Their records
// are still in the commit log, between the short block's last unit and
// the next block's first, so each short block below its queue's last one
// is filled again from that stretch of the log. A block that ends early
// for another reason (holes at its end, left by records lost to
// corruption) finds nothing there and stays as it is.
//
// It runs at recovery, before the scan, and commits its blocks together
// with refilledKey, so a store is read through once in its life. A store
// created by this version has no block to check and pays nothing.
func (s *Store) refillShortBlocks() error {
	if _, closer, err := s.db.Get(refilledKey); err == nil {
		closer.Close()
		return nil
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("store: read the index's format: %w", err)
	}
	began := time.Now()
	b := s.db.NewBatch()
	defer b.Close()
	lo := []byte{kindBlock}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return fmt.Errorf("store: read consume queues: %w", err)
	}
	var (
		blocks, short, refilled, units int
		prevKey                        []byte // the block before the iterator's, when it is short
		prevBlk                        []byte
	)
	for it.First(); it.Valid(); it.Next() {
		key, v := it.Key(), it.Value()
		blocks++
		if len(key) < 1+1+4+8 || key[len(key)-13] != 0 || len(v)%unitLen != 0 || len(v) > blockLen {
			it.Close()
			return fmt.Errorf("%w: index block %q", ErrCorruption, key)
		}
		if prevKey != nil && bytes.Equal(key[:len(key)-8], prevKey[:len(prevKey)-8]) {
			// prevBlk is short and a later block of its queue follows.
			short++
			if blk, n, err := s.refillBlock(prevKey, prevBlk, v); err != nil {
				s.log.Warn("consume queue: a short block could not be filled again",
					"topic", string(prevKey[1:len(prevKey)-13]), "queue", int32(binary.BigEndian.Uint32(prevKey[len(prevKey)-12:])), "block", binary.BigEndian.Uint64(prevKey[len(prevKey)-8:]), "err", err)
			} else if n > 0 {
				refilled++
				units += n
				b.Set(prevKey, blk, nil)
			}
		}
		prevKey, prevBlk = nil, nil
		if len(v) < blockLen && len(v) > 0 {
			prevKey, prevBlk = bytes.Clone(key), bytes.Clone(v)
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("store: read consume queues: %w", err)
	}
	if err := b.Set(refilledKey, nil, nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("store: write refilled consume-queue blocks: %w", err)
	}
	if short > 0 || blocks > 0 {
		s.log.Info("consume queues checked for blocks an older version left short",
			"blocks", blocks, "short", short, "refilled", refilled, "units_restored", units,
			"took", time.Since(began).Round(time.Millisecond))
	}
	return nil
}

// refillBlock fills the short block blk (key key) from the commit log,
// with the records of its queue that lie between its last unit and the
// first unit of next, a later block of the queue. It returns the block
// and how many units it gained.
func (s *Store) refillBlock(key, blk, next []byte) ([]byte, int, error) {
	topic := key[1 : len(key)-13]
	id := int32(binary.BigEndian.Uint32(key[len(key)-12:]))
	no := int64(binary.BigEndian.Uint64(key[len(key)-8:]))
	last := getUnit(blk[len(blk)-unitLen:], 0)
	if last.Size <= 0 {
		return blk, 0, nil // ends in a hole: no place in the log to start from
	}
	hi := int64(-1)
	for at := 0; at+unitLen <= len(next); at += unitLen {
		if u := getUnit(next[at:], 0); u.Size > 0 {
			hi = u.CommitLogOffset
			break
		}
	}
	if hi < 0 {
		return blk, 0, nil
	}
	from := last.CommitLogOffset + int64(last.Size) + trailerLen
	want := no*blockUnits + int64(len(blk)/unitLen)
	end := (no + 1) * blockUnits
	out := append(make([]byte, 0, blockLen), blk...)
	gained := 0
	err := s.walkFrames(from, hi, func(rec message.Record, off int64) bool {
		if rec.QueueID() != id || !bytes.Equal(rec.Topic(), topic) {
			return true
		}
		qo := rec.QueueOffset()
		if qo < want || qo >= end {
			return qo < end
		}
		for ; want < qo; want++ {
			out = append(out, make([]byte, unitLen)...) // a hole
		}
		u := Unit{QueueOffset: qo, CommitLogOffset: off, Size: int32(len(rec)), TagCode: s.opts.TagCode(rec)}
		out = out[:len(out)+unitLen]
		putUnit(out[len(out)-unitLen:], u)
		want++
		gained++
		return want < end
	})
	if gained == 0 {
		return blk, 0, err
	}
	// Units found before an unreadable stretch are kept; the rest stay
	// holes, as they read before.
	if err != nil {
		s.log.Warn("consume queue: a short block was filled again only in part",
			"topic", string(topic), "queue", id, "block", no, "err", err)
	}
	// Holes up to the block's end, if the log held fewer records than
	// the block lacked, are left out: a short block reads as holes.
	return out, gained, nil
}

// walkFrames calls fn with each record whose frame starts in [from, to),
// in log order, until fn returns false. It stops with an error at a frame
// it cannot read or verify. Round markers are passed over.
func (s *Store) walkFrames(from, to int64, fn func(rec message.Record, off int64) bool) error {
	s.cl.mu.RLock()
	segs := append([]*segment(nil), s.cl.segs...)
	s.cl.mu.RUnlock()
	segSize := s.opts.SegmentSize
	off := max(from, s.cl.minOffset())
	var frame []byte
	for _, seg := range segs {
		segEnd := seg.base + segSize
		if off >= segEnd {
			continue
		}
		if off >= to {
			return nil
		}
		off = max(off, seg.base)
		fi, err := seg.f.Stat()
		if err != nil {
			return fmt.Errorf("store: stat segment %s: %w", seg.name, err)
		}
		fsize := min(fi.Size(), segSize)
		r := bufio.NewReaderSize(io.NewSectionReader(seg.f, off-seg.base, max(0, fsize-(off-seg.base))), 256<<10)
		for off < to {
			pos := off - seg.base
			if pos+blankLen > fsize {
				break
			}
			head, err := r.Peek(8)
			if err != nil {
				return fmt.Errorf("store: read segment %s at %d: %w", seg.name, pos, err)
			}
			size := int64(int32(binary.BigEndian.Uint32(head)))
			magic := binary.BigEndian.Uint32(head[4:])
			if size == 0 {
				break // the end-of-segment marker, or the segment's end
			}
			if size < markerLen || pos+size+trailerLen > fsize || (magic != message.MagicCode && magic != RoundMagic) {
				return fmt.Errorf("%w: commit-log offset %d: no frame", ErrCorruption, off)
			}
			n := int(size + trailerLen)
			if cap(frame) < n {
				frame = make([]byte, n)
			}
			frame = frame[:n]
			if _, err := io.ReadFull(r, frame); err != nil {
				return fmt.Errorf("store: read segment %s at %d: %w", seg.name, pos, err)
			}
			if magic == RoundMagic {
				if _, ok := checkMarker(frame, off); !ok {
					return fmt.Errorf("%w: commit-log offset %d: round marker", ErrCorruption, off)
				}
			} else {
				rec, err := checkFrame(frame, off)
				if err != nil {
					return err
				}
				if !fn(rec, off) {
					return nil
				}
			}
			off += size + trailerLen
		}
		off = max(off, segEnd)
	}
	return nil
}
