package store

import (
	"fmt"
	"hash/maphash"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// Read-ahead of consume-queue blocks. A reader behind the blocks a queue
// keeps in memory (a consumer catching up on a backlog) used to cost one
// index lookup per block of 64 units, that is one for every other pull of
// 32: a pebble Get that builds an iterator over every level. A lookup now
// reads the next readAheadBlocks complete blocks with one iterator and
// keeps them, so the pulls that follow find their units in memory.
//
// The kept blocks live in a fixed table of readAheadSlots entries, chosen
// by the queue's name; a queue takes its slot over from whatever held it.
// So the memory is bounded however many queues are read
// (readAheadSlots × readAheadBlocks × blockLen, 10 MiB), and a slot
// remembers which queue object filled it: a topic deleted and created
// again gets new queue objects, and the old blocks are never served for it.
//
// Only complete blocks (below the queue's open block) are kept: a block is
// final once complete, until retention deletes it, and units refuses
// offsets below the queue's min offset before it looks here.
const (
	readAheadBlocks = 8
	readAheadSlots  = 1024
)

// readAhead is a run of consecutive complete blocks of one queue.
type readAhead struct {
	q      *queue
	first  int64    // block number of blocks[0]
	blocks [][]byte // each a complete block's units
}

type readAheadTable struct {
	seed  maphash.Seed
	slots [readAheadSlots]atomic.Pointer[readAhead]
}

func (t *readAheadTable) slot(k queueKey) *atomic.Pointer[readAhead] {
	h := maphash.String(t.seed, k.topic) ^ uint64(uint32(k.id))*0x9E3779B97F4A7C15
	return &t.slots[h%readAheadSlots]
}

// block returns q's block no if a read-ahead holds it.
func (t *readAheadTable) block(q *queue, no int64) []byte {
	ra := t.slot(q.key).Load()
	if ra == nil || ra.q != q || no < ra.first || no >= ra.first+int64(len(ra.blocks)) {
		return nil
	}
	return ra.blocks[no-ra.first]
}

// readBlocks reads block no of q from the index, with up to
// readAheadBlocks-1 complete blocks after it (those below limit, the
// queue's open block when it was looked at), keeps them all, and returns
// block no. A missing block no is pebble.ErrNotFound.
func (s *Store) readBlocks(q *queue, no, limit int64) ([]byte, error) {
	end := min(no+readAheadBlocks, limit)
	if end <= no+1 {
		// Nothing complete after it: a plain lookup, nothing kept.
		v, closer, err := s.db.Get(blockKey(q.key, no))
		if err != nil {
			return nil, err
		}
		defer closer.Close()
		return checkBlock(q.key, no, append([]byte(nil), v...))
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: blockKey(q.key, no), UpperBound: blockKey(q.key, end)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	ra := &readAhead{q: q, first: no}
	var buf []byte
	for ok := it.First(); ok; ok = it.Next() {
		next := no + int64(len(ra.blocks))
		if string(it.Key()) != string(blockKey(q.key, next)) {
			break // a block number the queue skipped (a block closed early)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		if buf == nil {
			buf = make([]byte, 0, int(end-no)*blockLen)
		}
		at := len(buf)
		buf = append(buf, v...)
		blk, err := checkBlock(q.key, next, buf[at:len(buf):len(buf)])
		if err != nil {
			if next == no {
				return nil, err
			}
			break // a bad block after the one asked for is reported when it is read
		}
		ra.blocks = append(ra.blocks, blk)
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	if len(ra.blocks) == 0 {
		return nil, pebble.ErrNotFound
	}
	if len(ra.blocks) > 1 {
		s.ahead.slot(q.key).Store(ra)
	}
	return ra.blocks[0], nil
}

// checkBlock checks the size of block no read from the index.
func checkBlock(k queueKey, no int64, v []byte) ([]byte, error) {
	if len(v)%unitLen != 0 || len(v) > blockLen {
		return nil, fmt.Errorf("%w: %s/%d: index block %d has %d bytes", ErrCorruption, k.topic, k.id, no, len(v))
	}
	return v, nil
}
