package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
)

// The QueueIter contract (invariants I1–I6 in the store's doc.go).
var iterTests = []struct {
	name string
	fn   func(t *testing.T, cfg Config)
}{
	{"IterSeekAndResume", testIterSeekAndResume},
	{"IterFilter", testIterFilter},
	{"IterLimits", testIterLimits},
	{"IterGapBelowMin", testIterGapBelowMin},
	{"IterTrimUnderIt", testIterTrimUnderIt},
	{"IterRetentionUnderIt", testIterRetentionUnderIt},
	{"IterCorruptRecord", testIterCorruptRecord},
	{"IterHoles", testIterHoles},
	{"IterBufferReuse", testIterBufferReuse},
	{"IterMisuse", testIterMisuse},
}

// iterRun is what one walk of an iterator returned.
type iterRun struct {
	offsets []int64
	bodies  []string
	gaps    [][2]int64 // per move that reported one
	next    int64
	err     error
}

// walk runs it from offset from to its end.
func walk(it *store.QueueIter, from int64) iterRun {
	var r iterRun
	note := func() {
		if gf, gt := it.Gap(); gf < gt {
			r.gaps = append(r.gaps, [2]int64{gf, gt})
		}
	}
	ok := it.SeekGE(from)
	for ; ok; ok = it.Next() {
		note()
		r.offsets = append(r.offsets, it.Offset())
		if rec := it.Record(); rec != nil {
			if rec.QueueOffset() != it.Offset() {
				r.err = fmt.Errorf("record at %d says %d", it.Offset(), rec.QueueOffset())
				return r
			}
			r.bodies = append(r.bodies, string(rec.Body()))
		}
	}
	note()
	r.next, r.err = it.NextOffset(), it.Error()
	return r
}

func span(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// fill appends n messages to queue 0 of topic, in batches.
func fill(t testing.TB, s *store.Store, topic string, n int, body func(i int) string) {
	t.Helper()
	for i := 0; i < n; i += 50 {
		var batch []*message.Message
		for j := i; j < min(i+50, n); j++ {
			batch = append(batch, Msg(topic, 0, body(j)))
		}
		if err := s.Append(batch); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
}

func testIterSeekAndResume(t *testing.T, cfg Config) {
	s := Open(t, cfg.Options(t))
	defer s.Close()
	it := s.NewQueueIter("I", 0, store.IterOptions{})
	defer it.Close()
	if r := walk(it, 0); len(r.offsets) != 0 || r.next != 0 || r.err != nil {
		t.Fatalf("empty queue: %+v", r)
	}
	fill(t, s, "I", 150, func(i int) string { return fmt.Sprint("i", i) })
	r := walk(it, 0)
	if !slices.Equal(r.offsets, span(0, 150)) || r.bodies[149] != "i149" || r.next != 150 || r.err != nil {
		t.Fatalf("full walk: %d records, next %d, %v", len(r.offsets), r.next, r.err)
	}
	// From inside a block, and from past the end.
	if r := walk(it, 70); !slices.Equal(r.offsets, span(70, 150)) || r.next != 150 {
		t.Fatalf("walk from 70: %d records from %v, next %d", len(r.offsets), r.offsets[:1], r.next)
	}
	if r := walk(it, 500); len(r.offsets) != 0 || r.next != 500 || r.err != nil {
		t.Fatalf("walk from past the end: %+v", r)
	}
	// An exhausted iterator stays so until it seeks; then it sees new
	// records from where it stopped.
	walk(it, 0)
	fill(t, s, "I", 5, func(i int) string { return fmt.Sprint("late", i) })
	if it.Next() || it.Valid() {
		t.Fatal("Next after the end moved")
	}
	if r := walk(it, 150); !slices.Equal(r.offsets, span(150, 155)) || r.bodies[0] != "late0" {
		t.Fatalf("resume: %+v", r)
	}
	// NextOffset while valid is one past the current record.
	if !it.SeekGE(10) || it.Offset() != 10 || it.NextOffset() != 11 || it.Unit().QueueOffset != 10 {
		t.Fatalf("SeekGE(10): at %d, next %d", it.Offset(), it.NextOffset())
	}
}

func testIterFilter(t *testing.T, cfg Config) {
	s := Open(t, cfg.Options(t))
	defer s.Close()
	fill(t, s, "F", 200, func(i int) string { return fmt.Sprint("f", i) })
	var judged []int64
	even := func(u store.Unit) store.UnitVerdict {
		judged = append(judged, u.QueueOffset)
		if u.QueueOffset%2 == 0 {
			return store.UnitKeep
		}
		return store.UnitSkip
	}
	it := s.NewQueueIter("F", 0, store.IterOptions{Filter: even})
	r := walk(it, 1)
	it.Close()
	if len(r.offsets) != 99 || r.offsets[0] != 2 || r.offsets[98] != 198 || r.next != 200 || r.err != nil {
		t.Fatalf("even offsets from 1: %d, first %d, next %d, %v", len(r.offsets), r.offsets[0], r.next, r.err)
	}
	if !slices.Equal(judged, span(1, 200)) {
		t.Fatalf("filter saw %d units, want each of [1, 200) once", len(judged))
	}
	// The filter sees units only: the tag code is there, no record.
	it = s.NewQueueIter("F", 0, store.IterOptions{Filter: func(u store.Unit) store.UnitVerdict {
		if u.Size <= 0 || u.CommitLogOffset < 0 {
			t.Errorf("filter got unit %+v", u)
		}
		if u.QueueOffset >= 42 {
			return store.UnitStop
		}
		return store.UnitKeep
	}})
	r = walk(it, 30)
	it.Close()
	if !slices.Equal(r.offsets, span(30, 42)) || r.next != 42 {
		t.Fatalf("stop at 42: %v next %d", r.offsets, r.next)
	}
	// A filter that skips the rest leaves NextOffset at the end.
	it = s.NewQueueIter("F", 0, store.IterOptions{Filter: func(store.Unit) store.UnitVerdict { return store.UnitSkip }})
	r = walk(it, 0)
	it.Close()
	if len(r.offsets) != 0 || r.next != 200 {
		t.Fatalf("skip all: %v next %d", r.offsets, r.next)
	}
}

func testIterLimits(t *testing.T, cfg Config) {
	s := Open(t, cfg.Options(t))
	defer s.Close()
	fill(t, s, "L", 300, func(i int) string { return fmt.Sprintf("l%03d", i) })
	odd := func(u store.Unit) store.UnitVerdict {
		if u.QueueOffset%2 == 1 {
			return store.UnitKeep
		}
		return store.UnitSkip
	}
	it := s.NewQueueIter("L", 0, store.IterOptions{Filter: odd, MaxUnits: 100})
	r := walk(it, 10)
	if len(r.offsets) != 50 || r.offsets[0] != 11 || r.next != 110 {
		t.Fatalf("MaxUnits 100 from 10: %d records, first %d, next %d", len(r.offsets), r.offsets[0], r.next)
	}
	// Limits count from each SeekGE.
	if r := walk(it, r.next); len(r.offsets) != 50 || r.offsets[0] != 111 || r.next != 210 {
		t.Fatalf("second MaxUnits window: %d records, next %d", len(r.offsets), r.next)
	}
	it.Close()
	it = s.NewQueueIter("L", 0, store.IterOptions{Filter: odd, MaxRecords: 7})
	if r := walk(it, 0); len(r.offsets) != 7 || r.offsets[6] != 13 || r.next != 14 {
		t.Fatalf("MaxRecords 7: %v next %d", r.offsets, r.next)
	}
	it.Close()
	// MaxBytes stops after the unit that reaches it.
	var size int
	it = s.NewQueueIter("L", 0, store.IterOptions{UnitsOnly: true})
	if it.SeekGE(0) {
		size = int(it.Unit().Size)
	}
	it.Close()
	it = s.NewQueueIter("L", 0, store.IterOptions{MaxBytes: 3*size + 1})
	if r := walk(it, 5); !slices.Equal(r.offsets, span(5, 9)) || r.next != 9 {
		t.Fatalf("MaxBytes of 3 records and a byte: %v next %d", r.offsets, r.next)
	}
	it.Close()
}

func testIterGapBelowMin(t *testing.T, cfg Config) {
	s := Open(t, cfg.Options(t))
	defer s.Close()
	fill(t, s, "G", 200, func(i int) string { return fmt.Sprint("g", i) })
	if err := s.TrimQueue("G", 0, 130); err != nil {
		t.Fatal(err)
	}
	it := s.NewQueueIter("G", 0, store.IterOptions{})
	defer it.Close()
	r := walk(it, 5)
	if len(r.gaps) != 1 || r.gaps[0] != [2]int64{5, 130} || !slices.Equal(r.offsets, span(130, 200)) {
		t.Fatalf("from below the min: gaps %v, %d records from %v", r.gaps, len(r.offsets), r.offsets[:1])
	}
	// UnitsOnly sees the same gap.
	un := s.NewQueueIter("G", 0, store.IterOptions{UnitsOnly: true, MaxUnits: 1})
	defer un.Close()
	if !un.SeekGE(0) || un.Offset() != 130 || un.Record() != nil {
		t.Fatal("UnitsOnly SeekGE below the min")
	}
	if gf, gt := un.Gap(); gf != 0 || gt != 130 {
		t.Fatalf("UnitsOnly gap [%d, %d)", gf, gt)
	}
	// Every queue trimmed away: the gap, then the end.
	if err := s.TrimQueue("G", 0, 200); err != nil {
		t.Fatal(err)
	}
	if r := walk(it, 150); len(r.offsets) != 0 || len(r.gaps) != 1 || r.gaps[0] != [2]int64{150, 200} || r.next != 200 {
		t.Fatalf("fully trimmed: %+v", r)
	}
}

// testIterTrimUnderIt moves a queue's min offset while an iterator walks it:
// the iterator jumps to the new min at its next load and says so.
func testIterTrimUnderIt(t *testing.T, cfg Config) {
	s := Open(t, cfg.Options(t))
	defer s.Close()
	fill(t, s, "T", 300, func(i int) string { return fmt.Sprint("t", i) })
	it := s.NewQueueIter("T", 0, store.IterOptions{})
	defer it.Close()
	var got []int64
	var gaps [][2]int64
	for ok := it.SeekGE(0); ok; ok = it.Next() {
		if gf, gt := it.Gap(); gf < gt {
			gaps = append(gaps, [2]int64{gf, gt})
		}
		got = append(got, it.Offset())
		if it.Offset() == 10 {
			if err := s.TrimQueue("T", 0, 200); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	// Whatever it returned is in order, without repeats, and every offset
	// it did not return from 200 on is missing.
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("offsets out of order: %v", got)
		}
	}
	if !slices.Equal(got[len(got)-100:], span(200, 300)) {
		t.Fatalf("tail after the trim: %v", got[len(got)-100:])
	}
	if len(gaps) != 1 || gaps[0][1] != 200 || gaps[0][0] <= 10 || gaps[0][0] != got[len(got)-101]+1 {
		t.Fatalf("gaps %v after reading up to %d", gaps, got[len(got)-101])
	}
}

// testIterRetentionUnderIt deletes segments while an iterator stands in
// them: records already read stay valid, the deleted ones become a gap,
// and the walk goes on at the first retained record.
func testIterRetentionUnderIt(t *testing.T, cfg Config) {
	o := cfg.Options(t)
	o.SegmentSize = 8 << 10
	o.Retention = time.Hour
	o.RetentionInterval = time.Hour // run by hand below
	o.DiskHighWater = -1
	var mu sync.Mutex
	now := time.Now()
	o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := Open(t, o)
	defer s.Close()
	body := string(make([]byte, 1000))
	for i := 0; i < 40; i++ {
		appendOne(t, s, Msg("R", 0, fmt.Sprintf("%02d%s", i, body)))
	}

	it := s.NewQueueIter("R", 0, store.IterOptions{})
	defer it.Close()
	var got []int64
	var gaps [][2]int64
	for ok := it.SeekGE(0); ok; ok = it.Next() {
		if gf, gt := it.Gap(); gf < gt {
			gaps = append(gaps, [2]int64{gf, gt})
		}
		got = append(got, it.Offset())
		if want := fmt.Sprintf("%02d", it.Offset()); string(it.Record().Body()[:2]) != want {
			t.Fatalf("offset %d holds %q", it.Offset(), it.Record().Body()[:2])
		}
		if it.Offset() == 0 {
			mu.Lock()
			now = now.Add(2 * time.Hour)
			mu.Unlock()
			if n, err := s.RunRetention(); err != nil || n < 2 {
				t.Fatalf("retention deleted %d, %v", n, err)
			}
		}
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	mn, mx := s.QueueOffsets("R", 0)
	if len(gaps) != 1 || gaps[0][1] > mn || !slices.Equal(got[len(got)-int(mx-mn):], span(mn, mx)) {
		t.Fatalf("min %d: read %v with gaps %v", mn, got, gaps)
	}
	if gaps[0][0] != got[len(got)-int(mx-mn)-1]+1 {
		t.Fatalf("gap %v does not start after the last record before it, in %v", gaps[0], got)
	}
}

// corruptAt flips a bit in the properties of queue 0's record at a queue
// offset.
func corruptAt(t *testing.T, o store.Options, s *store.Store, topic string, off int64) {
	t.Helper()
	CorruptRecord(t, o, s, topic, 0, off)
}

// CorruptRecord flips a bit in the properties of the record at a queue
// offset of a queue, in the segment file itself, so that reading it fails
// its checksum. o is what s was opened with.
func CorruptRecord(t testing.TB, o store.Options, s *store.Store, topic string, queueID int32, off int64) {
	t.Helper()
	it := s.NewQueueIter(topic, queueID, store.IterOptions{MaxRecords: 1})
	defer it.Close()
	if !it.SeekGE(off) || it.Offset() != off {
		t.Fatalf("no record at %d", off)
	}
	u := it.Unit()
	fs := o.FS
	if fs == nil {
		fs = vfs.Default
	}
	seg := u.CommitLogOffset / s.SegmentSize() * s.SegmentSize()
	f, err := fs.OpenReadWrite(fs.PathJoin(o.Dir, "commitlog", fmt.Sprintf("%020d", seg)), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := u.CommitLogOffset - seg + int64(u.Size) - 3
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

func withSegmentSize(o store.Options) store.Options {
	if o.SegmentSize == 0 {
		o.SegmentSize = store.DefaultSegmentSize
	}
	return o
}

// testIterCorruptRecord: a corrupt record is reported once and skipped, or
// ends the walk under StopOnCorruption; one the filter skips is never read.
func testIterCorruptRecord(t *testing.T, cfg Config) {
	o := withSegmentSize(cfg.Options(t))
	s := Open(t, o)
	defer s.Close()
	fill(t, s, "C", 20, func(i int) string { return fmt.Sprint("c", i) })
	corruptAt(t, o, s, "C", 7)
	corruptAt(t, o, s, "C", 12)

	var reported []int64
	it := s.NewQueueIter("C", 0, store.IterOptions{OnCorrupt: func(u store.Unit, err error) {
		if !errors.Is(err, store.ErrCorruption) {
			t.Errorf("offset %d: %v", u.QueueOffset, err)
		}
		reported = append(reported, u.QueueOffset)
	}})
	before := s.Stats().Corruptions.Load()
	r := walk(it, 0)
	it.Close()
	want := slices.DeleteFunc(span(0, 20), func(o int64) bool { return o == 7 || o == 12 })
	if !slices.Equal(r.offsets, want) || !slices.Equal(reported, []int64{7, 12}) || r.next != 20 || r.err != nil {
		t.Fatalf("read %v, reported %v, next %d, %v", r.offsets, reported, r.next, r.err)
	}
	if n := s.Stats().Corruptions.Load() - before; n != 2 {
		t.Fatalf("%d corruptions counted, want 2", n)
	}

	it = s.NewQueueIter("C", 0, store.IterOptions{StopOnCorruption: true})
	r = walk(it, 3)
	if !slices.Equal(r.offsets, span(3, 7)) || r.next != 7 || !errors.Is(r.err, store.ErrCorruption) {
		t.Fatalf("stop on corruption: %v next %d, %v", r.offsets, r.next, r.err)
	}
	// SeekGE clears the error.
	if r := walk(it, 8); !slices.Equal(r.offsets, span(8, 12)) || !errors.Is(r.err, store.ErrCorruption) {
		t.Fatalf("after seeking past it: %v, %v", r.offsets, r.err)
	}
	if err := it.Close(); !errors.Is(err, store.ErrCorruption) {
		t.Fatalf("Close returned %v", err)
	}

	// A record the filter passes over is never read, so its corruption goes
	// unnoticed.
	before = s.Stats().Corruptions.Load()
	it = s.NewQueueIter("C", 0, store.IterOptions{StopOnCorruption: true, Filter: func(u store.Unit) store.UnitVerdict {
		if u.QueueOffset == 7 || u.QueueOffset == 12 {
			return store.UnitSkip
		}
		return store.UnitKeep
	}})
	r = walk(it, 0)
	it.Close()
	if !slices.Equal(r.offsets, want) || r.err != nil || s.Stats().Corruptions.Load() != before {
		t.Fatalf("filtered walk: %v, %v", r.offsets, r.err)
	}
}

// testIterHoles: positions lost to corruption (the index rebuilt by
// recovery) are reported and skipped in both modes, and count as scanned.
func testIterHoles(t *testing.T, cfg Config) {
	o := withSegmentSize(cfg.Options(t))
	o.Flush = store.FlushSync // a bad frame in a durable round becomes a hole
	s := Open(t, o)
	for i := 0; i < 10; i++ { // one round each, so the bad one is not the last
		appendOne(t, s, Msg("H", 0, fmt.Sprint("h", i)))
	}
	corruptAt(t, o, s, "H", 4)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fs := o.FS
	if fs == nil {
		fs = vfs.Default
	}
	if err := fs.RemoveAll(fs.PathJoin(o.Dir, "index")); err != nil {
		t.Fatal(err)
	}
	s = Open(t, o)
	defer s.Close()
	for _, unitsOnly := range []bool{false, true} {
		var holes []int64
		it := s.NewQueueIter("H", 0, store.IterOptions{UnitsOnly: unitsOnly, OnCorrupt: func(u store.Unit, err error) {
			if u.Size != 0 || !errors.Is(err, store.ErrCorruption) {
				t.Errorf("hole report %+v, %v", u, err)
			}
			holes = append(holes, u.QueueOffset)
		}})
		r := walk(it, 0)
		it.Close()
		want := slices.DeleteFunc(span(0, 10), func(o int64) bool { return o == 4 })
		if !slices.Equal(r.offsets, want) || !slices.Equal(holes, []int64{4}) || r.next != 10 || r.err != nil {
			t.Fatalf("unitsOnly=%v: read %v, holes %v, next %d, %v", unitsOnly, r.offsets, holes, r.next, r.err)
		}
	}
	it := s.NewQueueIter("H", 0, store.IterOptions{MaxUnits: 2})
	if r := walk(it, 3); !slices.Equal(r.offsets, []int64{3}) || r.next != 5 {
		t.Fatalf("a hole counts as scanned: %v next %d", r.offsets, r.next)
	}
	it.Close()
	it = s.NewQueueIter("H", 0, store.IterOptions{StopOnCorruption: true})
	if r := walk(it, 0); !slices.Equal(r.offsets, span(0, 4)) || r.next != 4 || !errors.Is(r.err, store.ErrCorruption) {
		t.Fatalf("stop at the hole: %v next %d, %v", r.offsets, r.next, r.err)
	}
	it.Close()
}

// testIterBufferReuse: a walk reuses the iterator's buffers, so it does not
// allocate per record.
func testIterBufferReuse(t *testing.T, cfg Config) {
	s := Open(t, cfg.Options(t))
	defer s.Close()
	const n = 1000
	fill(t, s, "B", n, func(i int) string { return fmt.Sprint("b", i) })
	s.Checkpoint() // most blocks now come from the index
	it := s.NewQueueIter("B", 0, store.IterOptions{Filter: func(u store.Unit) store.UnitVerdict {
		if u.QueueOffset%3 == 0 {
			return store.UnitSkip
		}
		return store.UnitKeep
	}})
	defer it.Close()
	var count int
	allocs := testing.AllocsPerRun(5, func() {
		count = 0
		for ok := it.SeekGE(0); ok; ok = it.Next() {
			if it.Record() != nil {
				count++
			}
		}
	})
	if count != n-(n+2)/3 {
		t.Fatalf("walked %d records", count)
	}
	// The index lookups may allocate per block of 64 units; nothing is
	// allocated per record.
	if perRecord := allocs / float64(count); perRecord > 0.1 {
		t.Fatalf("%.0f allocations per walk of %d records", allocs, count)
	}
}

func testIterMisuse(t *testing.T, cfg Config) {
	s := Open(t, cfg.Options(t))
	defer s.Close()
	mustPanic := func(what string, fn func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Fatalf("%s did not panic", what)
			}
		}()
		fn()
	}
	it := s.NewQueueIter("M", 0, store.IterOptions{})
	mustPanic("Next before SeekGE", func() { it.Next() })
	mustPanic("Record when not valid", func() { it.Record() })
	it.Close()
	mustPanic("double Close", func() { it.Close() })
	mustPanic("SeekGE after Close", func() { it.SeekGE(0) })
}
