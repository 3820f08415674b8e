package store

import (
	"errors"
	"fmt"
	"sync"

	"github.com/rmq-go/rmq/core/message"
)

// UnitVerdict is an IterOptions.Filter's decision on a unit.
type UnitVerdict uint8

const (
	// UnitKeep returns the unit (and reads its record).
	UnitKeep UnitVerdict = iota
	// UnitSkip passes over the unit without reading its record.
	UnitSkip
	// UnitStop ends the iteration before the unit.
	UnitStop
)

// IterOptions configure a QueueIter. The zero value returns every record
// of the queue, skipping holes and corrupt records.
type IterOptions struct {
	// Filter, if set, judges each unit from the index alone, before its
	// record is read (tag hashes, due times, pre-filter masks). Holes never
	// reach it. It is called in queue order, once per unit the iterator
	// loads, possibly ahead of the unit the iterator stands at.
	Filter func(u Unit) UnitVerdict
	// UnitsOnly makes the iterator stop at units without reading their
	// records; Record returns nil.
	UnitsOnly bool
	// MaxUnits bounds the units scanned after a SeekGE: kept, skipped and
	// holes alike. 0 means no bound.
	MaxUnits int
	// MaxRecords bounds the units kept after a SeekGE, counted before their
	// records are read (a kept record that turns out corrupt counts). 0
	// means no bound.
	MaxRecords int
	// MaxBytes bounds the record bytes kept after a SeekGE, counted from the
	// units' sizes: the iterator stops after the unit that reaches it. 0
	// means no bound.
	MaxBytes int
	// OnCorrupt, if set, is told of each hole and each record that fails
	// its checksum as the iterator passes it; err wraps ErrCorruption.
	OnCorrupt func(u Unit, err error)
	// StopOnCorruption ends the iteration at a hole or corrupt record, with
	// Error returning its error, instead of skipping it.
	StopOnCorruption bool
}

// QueueIter walks one consume queue in offset order, reading each record
// from the commit log and verifying it. It skips holes and corrupt records,
// moves over offsets that retention removed (see Gap), and reads records
// that follow each other in the log with one read. See invariants I1–I6 in
// the package documentation.
//
// The iterator starts unpositioned: call SeekGE first, then Next. A failed
// move leaves it invalid; Error tells whether it failed or reached the end
// (of the queue, of a limit, or at a Filter's UnitStop). SeekGE resets the
// error, the gap and the limits. A QueueIter is not safe for concurrent
// use. Use after Close panics.
type QueueIter struct {
	s    *Store
	k    queueKey
	opts IterOptions

	// units holds the loaded units not yet passed, holes and kept ones,
	// in order; cur is the current one.
	units []Unit
	cur   int
	// buf holds the records of units[spanLo:spanHi], adjacent in the log.
	buf            []byte
	spanLo, spanHi int

	positioned bool
	valid      bool
	rec        message.Record
	last       bool  // nothing after units: the queue's end, a limit or a UnitStop
	pos        int64 // where to resume: one past the last unit passed
	scanEnd    int64 // one past the last unit loaded and judged
	scanned    int   // units judged since SeekGE
	kept       int   // units kept since SeekGE
	bytes      int   // their sizes
	gapFrom    int64
	gapTo      int64
	err        error
	closed     bool
}

var iterPool = sync.Pool{New: func() any { return new(QueueIter) }}

// maxPooledBuf bounds the buffer an iterator keeps for reuse.
const maxPooledBuf = maxReadSpan + trailerLen

// NewQueueIter returns an iterator over a queue. It holds no lock and no
// file between calls; Close returns its buffers for reuse.
func (s *Store) NewQueueIter(topic string, queueID int32, o IterOptions) *QueueIter {
	it := iterPool.Get().(*QueueIter)
	*it = QueueIter{s: s, k: queueKey{topic, queueID}, opts: o, units: it.units[:0], buf: it.buf[:0]}
	return it
}

// SeekGE moves to the first record at or after queue offset off and
// reports whether there is one. An offset below the queue's min offset
// moves to the min offset, and Gap reports what was passed over.
func (it *QueueIter) SeekGE(off int64) bool {
	it.checkOpen()
	off = max(off, 0)
	*it = QueueIter{s: it.s, k: it.k, opts: it.opts, units: it.units[:0], buf: it.buf,
		positioned: true, pos: off, scanEnd: off}
	return it.find()
}

// Next moves to the next record and reports whether there is one. Once a
// move fails, Next keeps failing until the next SeekGE.
func (it *QueueIter) Next() bool {
	it.checkOpen()
	if !it.positioned {
		panic("store: QueueIter.Next before SeekGE")
	}
	it.gapFrom, it.gapTo = 0, 0
	if !it.valid {
		return false
	}
	it.pass()
	return it.find()
}

// Valid reports whether the iterator stands at a record.
func (it *QueueIter) Valid() bool { return it.valid }

// Unit returns the current record's unit. The iterator must be valid.
func (it *QueueIter) Unit() Unit {
	it.mustBeValid()
	return it.units[it.cur]
}

// Offset returns the current record's queue offset. The iterator must be
// valid.
func (it *QueueIter) Offset() int64 {
	it.mustBeValid()
	return it.units[it.cur].QueueOffset
}

// Record returns the current record, verified, or nil under UnitsOnly. It
// aliases the iterator's buffer and is valid until the next move or Close.
func (it *QueueIter) Record() message.Record {
	it.mustBeValid()
	return it.rec
}

// NextOffset returns the queue offset to resume from after what the
// iterator has returned: one past the current record while valid, else
// one past the last unit passed, filtered out units and holes included.
// At the end of the queue it is the max offset seen.
func (it *QueueIter) NextOffset() int64 {
	if it.valid {
		return it.units[it.cur].QueueOffset + 1
	}
	return it.pos
}

// Gap returns the offsets [from, to) that the last SeekGE or Next passed
// over because retention had removed them; from == to if none.
func (it *QueueIter) Gap() (from, to int64) { return it.gapFrom, it.gapTo }

// Error returns the error that ended the iteration, if any: an index or
// read failure, or corruption under StopOnCorruption.
func (it *QueueIter) Error() error { return it.err }

// Close releases the iterator and returns Error. Its records must not be
// used afterwards; a second Close panics.
func (it *QueueIter) Close() error {
	it.checkOpen()
	err := it.err
	units, buf := it.units[:0], it.buf[:0]
	*it = QueueIter{closed: true, units: units, buf: buf}
	if cap(buf) <= maxPooledBuf {
		iterPool.Put(it)
	}
	return err
}

func (it *QueueIter) checkOpen() {
	if it.closed || it.s == nil {
		panic("store: QueueIter used after Close")
	}
}

func (it *QueueIter) mustBeValid() {
	if !it.valid {
		panic("store: QueueIter is not positioned at a record")
	}
}

// pass moves past the current unit.
func (it *QueueIter) pass() {
	it.valid, it.rec = false, nil
	it.pos = it.units[it.cur].QueueOffset + 1
	it.cur++
}

// find moves to the first returnable unit from cur on, loading units as
// needed.
func (it *QueueIter) find() bool {
	for {
		if it.cur == len(it.units) {
			if it.last || !it.load() {
				if it.err == nil {
					it.pos = it.scanEnd
				}
				return false
			}
		}
		u := it.units[it.cur]
		if u.Size <= 0 {
			if !it.corrupt(u, fmt.Errorf("%w: %s/%d offset %d: record lost (hole)", ErrCorruption, it.k.topic, it.k.id, u.QueueOffset)) {
				return false
			}
			continue
		}
		if it.opts.UnitsOnly {
			it.valid = true
			return true
		}
		rec, err := it.record()
		switch {
		case err == nil:
			it.valid, it.rec = true, rec
			return true
		case errors.Is(err, ErrOffsetGone):
			// Retention deleted the segment after the unit was loaded.
			it.noteGap(u.QueueOffset, u.QueueOffset+1)
			it.pass()
		case errors.Is(err, ErrCorruption):
			if !it.corrupt(u, err) {
				return false
			}
		default:
			it.err = err
			return false
		}
	}
}

// corrupt reports a hole or a corrupt record and passes it, or ends the
// iteration under StopOnCorruption.
func (it *QueueIter) corrupt(u Unit, err error) bool {
	if !it.opts.UnitsOnly {
		if u.Size <= 0 {
			it.s.stats.Corruptions.Add(1)
		} else {
			it.s.reportCorruption(err)
		}
	}
	if it.opts.OnCorrupt != nil {
		it.opts.OnCorrupt(u, err)
	}
	if it.opts.StopOnCorruption {
		it.err = err
		return false
	}
	it.pass()
	return true
}

func (it *QueueIter) noteGap(from, to int64) {
	if it.gapFrom == it.gapTo {
		it.gapFrom = from
	}
	it.gapTo = max(it.gapTo, to)
}

// load reads the next units from scanEnd, one index block at most, and
// judges them. It reports false at the end, a limit or an error.
func (it *QueueIter) load() bool {
	it.cur, it.spanLo, it.spanHi = 0, 0, 0
	for {
		from := it.scanEnd
		n := blockUnits - int(from%blockUnits)
		if it.opts.MaxUnits > 0 {
			if n = min(n, it.opts.MaxUnits-it.scanned); n <= 0 {
				it.units, it.last = it.units[:0], true
				return false
			}
		}
		var err error
		it.units, err = it.s.units(it.k.topic, it.k.id, from, n, it.units[:0])
		if errors.Is(err, ErrOffsetGone) {
			// Retention moved the queue's min offset past from.
			newMin := it.s.MinOffset(it.k.topic, it.k.id)
			if newMin <= from {
				it.err = err
				return false
			}
			it.noteGap(from, newMin)
			it.scanEnd, it.pos = newMin, newMin
			continue
		}
		if err != nil {
			it.err = err
			return false
		}
		if len(it.units) == 0 {
			it.last = true
			return false
		}
		it.judge()
		if len(it.units) > 0 {
			return true
		}
		if it.last {
			return false
		}
	}
}

// judge drops the units the Filter skips, cuts the batch at a UnitStop or
// a limit, and advances scanEnd over what it judged.
func (it *QueueIter) judge() {
	o := &it.opts
	kept := it.units[:0]
	for _, u := range it.units {
		it.scanned++
		if u.Size > 0 && o.Filter != nil {
			switch o.Filter(u) {
			case UnitSkip:
				it.scanEnd = u.QueueOffset + 1
				continue
			case UnitStop:
				it.units, it.last = kept, true
				return
			}
		}
		kept = append(kept, u)
		it.scanEnd = u.QueueOffset + 1
		if u.Size > 0 {
			it.kept++
			it.bytes += int(u.Size)
			if o.MaxRecords > 0 && it.kept >= o.MaxRecords || o.MaxBytes > 0 && it.bytes >= o.MaxBytes {
				it.last = true
				break
			}
		}
	}
	it.units = kept
}

// record returns the verified record of the current unit, reading it and
// the kept records that follow it in the log when it is not in buf.
func (it *QueueIter) record() (message.Record, error) {
	if it.cur >= it.spanHi {
		if err := it.readSpan(); err != nil {
			return nil, err
		}
	}
	u := it.units[it.cur]
	at := u.CommitLogOffset - it.units[it.spanLo].CommitLogOffset
	return checkFrame(it.buf[at:at+int64(u.Size)+trailerLen], u.CommitLogOffset)
}

func (it *QueueIter) readSpan() error {
	it.spanLo, it.spanHi = it.cur, it.cur
	u := it.units[it.cur]
	seg := it.s.opts.SegmentSize
	j := it.cur + 1
	span := int64(u.Size) + trailerLen
	for ; j < len(it.units); j++ {
		n := it.units[j]
		gap := n.CommitLogOffset - (u.CommitLogOffset + span)
		if n.Size <= 0 || gap < 0 || gap > maxReadGap || span+gap+int64(n.Size)+trailerLen > maxReadSpan ||
			n.CommitLogOffset/seg != u.CommitLogOffset/seg {
			break
		}
		span += gap + int64(n.Size) + trailerLen
	}
	if int64(cap(it.buf)) < span {
		it.buf = make([]byte, span)
	}
	it.buf = it.buf[:span]
	if err := it.s.cl.readAt(it.buf, u.CommitLogOffset); err != nil {
		return err
	}
	it.spanHi = j
	return nil
}
