package store

import "testing"

// TestPutUnitSkippingToABlockEnd puts a unit that skips past the open
// block and completes the next one at once: both blocks reach the index.
func TestPutUnitSkippingToABlockEnd(t *testing.T) {
	s := &Store{}
	q := newQueue(queueKey{"T", 0})
	written := map[int64][]byte{}
	put := func(off int64) {
		s.putUnitLocked(q, Unit{QueueOffset: off, CommitLogOffset: 100 * off, Size: 10}, func(no int64, blk []byte) {
			written[no] = append([]byte(nil), blk...)
		})
	}
	put(0)
	put(1)
	put(2*blockUnits - 1) // the last unit of block 1
	if len(written[0]) != 2*unitLen {
		t.Fatalf("block 0 written with %d bytes, want its 2 units", len(written[0]))
	}
	blk := written[1]
	if len(blk) != blockLen {
		t.Fatalf("block 1 written with %d bytes, want %d", len(blk), blockLen)
	}
	if u := getUnit(blk[(blockUnits-1)*unitLen:], 2*blockUnits-1); u.CommitLogOffset != 100*(2*blockUnits-1) {
		t.Fatalf("block 1's last unit: %+v", u)
	}
	if q.openNo != 2 || len(q.open) != 0 {
		t.Fatalf("open block %d with %d bytes, want block 2, empty", q.openNo, len(q.open))
	}
}
