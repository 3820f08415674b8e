// Package storetest is the contract every store configuration must keep.
// Run it with the options of each configuration: the OS filesystem and the
// in-memory one, each flush mode, small and default segments.
package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
)

// Config opens stores for the suite. Options returns the options of a new,
// empty data directory; reopening uses the same options.
type Config struct {
	Name    string
	Options func(t testing.TB) store.Options
}

// Run runs the contract suite against cfg.
func Run(t *testing.T, cfg Config) {
	tests := []struct {
		name string
		fn   func(t *testing.T, cfg Config)
	}{
		{"AppendAndRead", testAppendAndRead},
		{"Batch", testBatch},
		{"ManyBlocks", testManyBlocks},
		{"Reopen", testReopen},
		{"SegmentRoll", testSegmentRoll},
		{"SegmentExactlyFull", testSegmentExactlyFull},
		{"Concurrent", testConcurrent},
		{"OffsetForTimestamp", testOffsetForTimestamp},
		{"ProgressAndMeta", testProgressAndMeta},
		{"Arrivals", testArrivals},
		{"Limits", testLimits},
		{"Retention", testRetention},
		{"TrimQueue", testTrimQueue},
		{"DeleteTopic", testDeleteTopic},
		{"AppendAsync", testAppendAsync},
	}
	tests = append(tests, iterTests...)
	tests = append(tests, retentionTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, cfg) })
	}
}

// Msg builds a message for tests.
func Msg(topic string, queueID int32, body string) *message.Message {
	return &message.Message{
		Topic:         topic,
		QueueID:       queueID,
		Body:          []byte(body),
		BornTimestamp: time.Now().UnixMilli(),
		BornHost:      netip.MustParseAddrPort("10.0.0.1:4000"),
		StoreHost:     netip.MustParseAddrPort("127.0.0.1:10911"),
		Properties:    message.EncodeProperties(map[string]string{"TAGS": "T" + body[:min(1, len(body))], "body": body}),
	}
}

// Open opens a store and fails the test on error.
func Open(t testing.TB, o store.Options) *store.Store {
	t.Helper()
	s, err := store.Open(o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

// ReadQueue returns the bodies of every record in a queue from offset from.
// A gap, a hole or a corrupt record fails the test.
func ReadQueue(t testing.TB, s *store.Store, topic string, queueID int32, from int64) []string {
	t.Helper()
	var out []string
	it := s.NewQueueIter(topic, queueID, store.IterOptions{StopOnCorruption: true})
	defer it.Close()
	for ok := it.SeekGE(from); ok; ok = it.Next() {
		if gf, gt := it.Gap(); gf < gt {
			t.Fatalf("read %s/%d: offsets [%d, %d) gone", topic, queueID, gf, gt)
		}
		u, r := it.Unit(), it.Record()
		if r.QueueOffset() != u.QueueOffset || string(r.Topic()) != topic || r.QueueID() != queueID {
			t.Fatalf("unit %d holds record %s/%d@%d", u.QueueOffset, r.Topic(), r.QueueID(), r.QueueOffset())
		}
		if !r.CheckBodyCRC() {
			t.Fatalf("body CRC of offset %d", u.QueueOffset)
		}
		out = append(out, string(r.Body()))
	}
	if err := it.Error(); err != nil {
		t.Fatalf("read %s/%d: %v", topic, queueID, err)
	}
	if gf, gt := it.Gap(); gf < gt {
		t.Fatalf("read %s/%d: offsets [%d, %d) gone", topic, queueID, gf, gt)
	}
	return out
}

func appendOne(t testing.TB, s *store.Store, m *message.Message) {
	t.Helper()
	if err := s.Append([]*message.Message{m}); err != nil {
		t.Fatalf("append: %v", err)
	}
}

func testAppendAndRead(t *testing.T, cfg Config) {
	s := Open(t, cfg.Options(t))
	defer s.Close()
	var last int64 = -1
	for i := 0; i < 10; i++ {
		m := Msg("A", int32(i%2), fmt.Sprintf("m%d", i))
		appendOne(t, s, m)
		if m.QueueOffset != int64(i/2) {
			t.Fatalf("message %d got queue offset %d", i, m.QueueOffset)
		}
		if m.CommitLogOffset <= last {
			t.Fatalf("commit-log offset %d after %d", m.CommitLogOffset, last)
		}
		last = m.CommitLogOffset
		r, err := s.ReadRecordAt(m.CommitLogOffset)
		if err != nil || string(r.Body()) != string(m.Body) {
			t.Fatalf("ReadRecordAt(%d) = %v, %v", m.CommitLogOffset, r, err)
		}
	}
	if got := ReadQueue(t, s, "A", 0, 0); fmt.Sprint(got) != "[m0 m2 m4 m6 m8]" {
		t.Fatalf("queue 0 = %v", got)
	}
	if got := ReadQueue(t, s, "A", 1, 3); fmt.Sprint(got) != "[m7 m9]" {
		t.Fatalf("queue 1 from 3 = %v", got)
	}
	if mn, mx := s.QueueOffsets("A", 1); mn != 0 || mx != 5 {
		t.Fatalf("offsets = %d, %d", mn, mx)
	}
	if mn, mx := s.QueueOffsets("none", 0); mn != 0 || mx != 0 {
		t.Fatalf("missing queue offsets = %d, %d", mn, mx)
	}
	if _, err := s.ReadRecordAt(last + 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ReadRecordAt(bad) err = %v", err)
	}
}

func testBatch(t *testing.T, cfg Config) {
	s := Open(t, cfg.Options(t))
	defer s.Close()
	appendOne(t, s, Msg("B", 0, "first"))
	batch := []*message.Message{Msg("B", 0, "b1"), Msg("B", 0, "b2"), Msg("B", 0, "b3")}
	if err := s.Append(batch); err != nil {
		t.Fatal(err)
	}
	for i, m := range batch {
		if m.QueueOffset != int64(i+1) {
			t.Fatalf("batch message %d at queue offset %d", i, m.QueueOffset)
		}
		if i > 0 && m.CommitLogOffset != batch[i-1].CommitLogOffset+int64(batch[i-1].RecordLen())+4 {
			t.Fatal("batch is not contiguous in the log")
		}
	}
	if got := ReadQueue(t, s, "B", 0, 0); fmt.Sprint(got) != "[first b1 b2 b3]" {
		t.Fatalf("queue = %v", got)
	}
}

func testManyBlocks(t *testing.T, cfg Config) {
	s := Open(t, cfg.Options(t))
	defer s.Close()
	const n = 300
	var want []string
	for i := 0; i < n; i += 10 {
		var batch []*message.Message
		for j := i; j < i+10; j++ {
			batch = append(batch, Msg("C", 0, fmt.Sprintf("c%03d", j)))
			want = append(want, fmt.Sprintf("c%03d", j))
		}
		if err := s.Append(batch); err != nil {
			t.Fatal(err)
		}
	}
	if got := ReadQueue(t, s, "C", 0, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("queue has %d messages, want %d", len(got), len(want))
	}
	// Reads starting inside a block and across block boundaries.
	it := s.NewQueueIter("C", 0, store.IterOptions{UnitsOnly: true, MaxUnits: 70})
	defer it.Close()
	for _, from := range []int64{63, 64, 65, 127, 200, 299} {
		var units []store.Unit
		for ok := it.SeekGE(from); ok; ok = it.Next() {
			units = append(units, it.Unit())
		}
		if err := it.Error(); err != nil {
			t.Fatal(err)
		}
		if wantN := min(70, n-int(from)); len(units) != wantN || units[0].QueueOffset != from {
			t.Fatalf("units from %d: %d units starting %d", from, len(units), units[0].QueueOffset)
		}
	}
}

func testReopen(t *testing.T, cfg Config) {
	o := cfg.Options(t)
	s := Open(t, o)
	var want []string
	for i := 0; i < 150; i++ {
		body := fmt.Sprintf("r%d", i)
		appendOne(t, s, Msg("R", 0, body))
		want = append(want, body)
	}
	s.CommitOffset("g", "R", 0, 42)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = Open(t, o)
	if got := ReadQueue(t, s, "R", 0, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after reopen: %d messages, want %d", len(got), len(want))
	}
	if off, ok := s.ConsumerOffset("g", "R", 0); !ok || off != 42 {
		t.Fatalf("consumer offset = %d, %v", off, ok)
	}
	m := Msg("R", 0, "after")
	appendOne(t, s, m)
	if m.QueueOffset != 150 {
		t.Fatalf("queue offset after reopen = %d", m.QueueOffset)
	}
	s.Close()
	s = Open(t, o)
	defer s.Close()
	if got := ReadQueue(t, s, "R", 0, 149); fmt.Sprint(got) != "[r149 after]" {
		t.Fatalf("tail after second reopen = %v", got)
	}
}

func testSegmentRoll(t *testing.T, cfg Config) {
	o := cfg.Options(t)
	o.SegmentSize = 8 << 10
	s := Open(t, o)
	body := string(bytes.Repeat([]byte("x"), 1000))
	var want []string
	for i := 0; i < 40; i++ {
		b := fmt.Sprintf("%02d%s", i, body)
		appendOne(t, s, Msg("S", int32(i%3), b))
		if i%3 == 0 {
			want = append(want, b)
		}
	}
	if got := ReadQueue(t, s, "S", 0, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("before reopen: %d messages, want %d", len(got), len(want))
	}
	s.Close()
	s = Open(t, o)
	defer s.Close()
	if got := ReadQueue(t, s, "S", 0, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after reopen: %d messages, want %d", len(got), len(want))
	}
	if mn, mx := s.CommitLogOffsets(); mn != 0 || mx < 5*o.SegmentSize {
		t.Fatalf("commit log spans [%d, %d)", mn, mx)
	}
}

func testConcurrent(t *testing.T, cfg Config) {
	s := Open(t, cfg.Options(t))
	defer s.Close()
	const writers, each = 8, 100
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := s.Append([]*message.Message{Msg("W", int32(w%2), fmt.Sprintf("w%d-%d", w, i))}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for q := int32(0); q < 2; q++ {
		got := ReadQueue(t, s, "W", q, 0)
		if len(got) != writers/2*each {
			t.Fatalf("queue %d has %d messages", q, len(got))
		}
		last := map[string]int{}
		for _, b := range got {
			var w, i int
			fmt.Sscanf(b, "w%d-%d", &w, &i)
			if prev, ok := last[fmt.Sprint(w)]; ok && i <= prev {
				t.Fatalf("writer %d: %d after %d", w, i, prev)
			}
			last[fmt.Sprint(w)] = i
			seen[b] = true
		}
	}
	if len(seen) != writers*each {
		t.Fatalf("%d distinct messages, want %d", len(seen), writers*each)
	}
}

func testOffsetForTimestamp(t *testing.T, cfg Config) {
	o := cfg.Options(t)
	var now time.Time
	base := time.UnixMilli(1_700_000_000_000)
	now = base
	var mu sync.Mutex
	o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := Open(t, o)
	defer s.Close()
	if off, err := s.OffsetForTimestamp("T", 0, base.UnixMilli()); err != nil || off != 0 {
		t.Fatalf("empty queue: %d, %v", off, err)
	}
	for i := 0; i < 100; i++ {
		mu.Lock()
		now = base.Add(time.Duration(i) * time.Second)
		mu.Unlock()
		appendOne(t, s, Msg("T", 0, fmt.Sprint(i)))
	}
	for _, c := range []struct {
		ts   time.Time
		want int64
	}{{base.Add(-time.Hour), 0}, {base, 0}, {base.Add(1500 * time.Millisecond), 2}, {base.Add(99 * time.Second), 99}, {base.Add(time.Hour), 100}} {
		if off, err := s.OffsetForTimestamp("T", 0, c.ts.UnixMilli()); err != nil || off != c.want {
			t.Fatalf("OffsetForTimestamp(%v) = %d, %v; want %d", c.ts.Sub(base), off, err, c.want)
		}
	}
}

func testProgressAndMeta(t *testing.T, cfg Config) {
	o := cfg.Options(t)
	s := Open(t, o)
	s.CommitOffset("g1", "T", 0, 5)
	s.CommitOffset("g1", "T", 1, 6)
	s.CommitOffset("g2", "T", 0, 7)
	// Names holding the key separator would share a key with others
	// ("a\x00b"/"c" and "a"/"b\x00c"): they are refused.
	for _, bad := range [][2]string{{"a\x00b", "c"}, {"a", "b\x00c"}, {"", "T"}, {"g", ""}} {
		if err := s.CommitOffset(bad[0], bad[1], 0, 1); !errors.Is(err, store.ErrBadName) {
			t.Fatalf("CommitOffset(%q, %q) = %v, want ErrBadName", bad[0], bad[1], err)
		}
	}
	if _, ok := s.ConsumerOffset("a", "b\x00c", 0); ok {
		t.Fatal("a refused offset was stored")
	}
	s.SetProgress("delay/1", 99)
	if err := s.PutMeta("topic/T", []byte(`{"q":4}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMeta("topic/U", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMeta("group/x", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = Open(t, o)
	defer s.Close()
	if got := s.ConsumerOffsets("g1"); len(got) != 2 {
		t.Fatalf("g1 offsets = %+v", got)
	}
	if v, ok := s.Progress("delay/1"); !ok || v != 99 {
		t.Fatalf("progress = %d, %v", v, ok)
	}
	var names []string
	if err := s.EachMeta("topic/", func(name string, v []byte) error { names = append(names, name); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(names) != "[topic/T topic/U]" {
		t.Fatalf("topics = %v", names)
	}
	if v, err := s.Meta("topic/T"); err != nil || string(v) != `{"q":4}` {
		t.Fatalf("Meta = %q, %v", v, err)
	}
	if err := s.DeleteMeta("topic/T"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Meta("topic/T"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted meta: %v", err)
	}
	s.DeleteConsumerOffsets("g1", "")
	if got := s.ConsumerOffsets("g1"); len(got) != 0 {
		t.Fatalf("g1 offsets after delete = %+v", got)
	}
	if got := s.ConsumerOffsets(""); len(got) != 1 || got[0].Offset != 7 {
		t.Fatalf("all offsets = %+v", got)
	}
}

func testArrivals(t *testing.T, cfg Config) {
	o := cfg.Options(t)
	type arrival struct {
		topic string
		q     int32
		max   int64
	}
	ch := make(chan arrival, 16)
	o.OnArrive = func(topic string, q int32, max int64) { ch <- arrival{topic, q, max} }
	s := Open(t, o)
	defer s.Close()
	appendOne(t, s, Msg("N", 2, "x"))
	select {
	case a := <-ch:
		if a != (arrival{"N", 2, 1}) {
			t.Fatalf("arrival %+v", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no arrival reported")
	}
}

func testLimits(t *testing.T, cfg Config) {
	o := cfg.Options(t)
	o.SegmentSize = 8 << 10
	s := Open(t, o)
	m := Msg("L", 0, string(bytes.Repeat([]byte("x"), 9000)))
	if err := s.Append([]*message.Message{m}); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("oversize append: %v", err)
	}
	m = Msg(string(bytes.Repeat([]byte("t"), 200)), 0, "x")
	if err := s.Append([]*message.Message{m}); !errors.Is(err, message.ErrTopicTooLong) {
		t.Fatalf("long topic: %v", err)
	}
	appendOne(t, s, Msg("L", 0, "ok"))
	s.Close()
	if err := s.Append([]*message.Message{Msg("L", 0, "late")}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}

func testRetention(t *testing.T, cfg Config) {
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
	body := string(bytes.Repeat([]byte("y"), 1000))
	for i := 0; i < 30; i++ {
		appendOne(t, s, Msg("X", 0, fmt.Sprintf("%02d%s", i, body)))
	}
	if n, err := s.RunRetention(); err != nil || n != 0 {
		t.Fatalf("retention with fresh segments deleted %d, %v", n, err)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	n, err := s.RunRetention()
	if err != nil || n == 0 {
		t.Fatalf("retention deleted %d, %v", n, err)
	}
	mn, mx := s.QueueOffsets("X", 0)
	if mn == 0 || mx != 30 {
		t.Fatalf("after retention queue spans [%d, %d)", mn, mx)
	}
	if gf, gt := seekGap(s, "X", 0, 0); gf != 0 || gt != mn {
		t.Fatalf("read below min: gap [%d, %d), want [0, %d)", gf, gt, mn)
	}
	if got := ReadQueue(t, s, "X", 0, mn); len(got) != int(mx-mn) {
		t.Fatalf("read %d retained messages, want %d", len(got), mx-mn)
	}
	if lmin, _ := s.CommitLogOffsets(); lmin == 0 {
		t.Fatal("commit-log min offset did not move")
	}
}

// testSegmentExactlyFull fills a segment up to the last bytes that still
// leave room for its end marker, then rolls.
func testSegmentExactlyFull(t *testing.T, cfg Config) {
	o := cfg.Options(t)
	o.SegmentSize = 8 << 10
	const frameOverhead = 24 + 4 // a round marker before each record, CRC after it
	for _, slack := range []int{8, 9, 12, 40} {
		o := o
		if o.FS == nil {
			o.Dir = t.TempDir()
		} else {
			o.Dir = fmt.Sprintf("%s-%d", o.Dir, slack)
		}
		s := Open(t, o)
		first := Msg("F", 0, "first")
		appendOne(t, s, first)
		used := int(first.CommitLogOffset) + first.RecordLen() + 4
		probe := Msg("F", 0, "")
		probe.Properties = nil
		fill := int(o.SegmentSize) - slack - used - frameOverhead - probe.RecordLen()
		m := Msg("F", 0, string(bytes.Repeat([]byte("f"), fill)))
		m.Properties = nil
		appendOne(t, s, m)
		if end := m.CommitLogOffset + int64(m.RecordLen()) + 4; end != o.SegmentSize-int64(slack) {
			t.Fatalf("slack %d: first segment ends at %d", slack, end)
		}
		next := Msg("F", 0, "next")
		appendOne(t, s, next)
		if next.CommitLogOffset < o.SegmentSize {
			t.Fatalf("slack %d: record at %d did not roll", slack, next.CommitLogOffset)
		}
		want := fmt.Sprint([]string{"first", string(m.Body), "next"})
		if got := ReadQueue(t, s, "F", 0, 0); fmt.Sprint(got) != want {
			t.Fatalf("slack %d: read %d messages", slack, len(got))
		}
		s.Close()
		s = Open(t, o)
		if got := ReadQueue(t, s, "F", 0, 0); fmt.Sprint(got) != want {
			t.Fatalf("slack %d: after reopen read %d messages", slack, len(got))
		}
		s.Close()
	}
}

func testTrimQueue(t *testing.T, cfg Config) {
	o := cfg.Options(t)
	s := Open(t, o)
	for i := 0; i < 200; i++ {
		appendOne(t, s, Msg("Trim", 0, fmt.Sprint("m", i)))
	}
	if err := s.TrimQueue("Trim", 0, 150); err != nil {
		t.Fatal(err)
	}
	if mn, mx := s.QueueOffsets("Trim", 0); mn != 150 || mx != 200 {
		t.Fatalf("after trim the queue spans [%d, %d)", mn, mx)
	}
	if gf, gt := seekGap(s, "Trim", 0, 10); gf != 10 || gt != 150 {
		t.Fatalf("read below the trimmed min: gap [%d, %d), want [10, 150)", gf, gt)
	}
	if err := s.TrimQueue("Trim", 0, 100); err != nil {
		t.Fatal(err)
	}
	if mn, _ := s.QueueOffsets("Trim", 0); mn != 150 {
		t.Fatalf("trim moved the min down to %d", mn)
	}
	s.Close()
	s = Open(t, o)
	defer s.Close()
	if mn, mx := s.QueueOffsets("Trim", 0); mn != 150 || mx != 200 {
		t.Fatalf("after reopen the queue spans [%d, %d)", mn, mx)
	}
	if got := ReadQueue(t, s, "Trim", 0, 150); len(got) != 50 || got[0] != "m150" {
		t.Fatalf("read %d after trim, first %q", len(got), got[0])
	}
}

// seekGap returns the gap a read of a queue from offset from passes over.
func seekGap(s *store.Store, topic string, queueID int32, from int64) (gapFrom, gapTo int64) {
	it := s.NewQueueIter(topic, queueID, store.IterOptions{MaxRecords: 1})
	defer it.Close()
	it.SeekGE(from)
	return it.Gap()
}

// testAppendAsync checks AppendAsync: offsets assigned at once, callbacks
// called once each, in append order, after the messages are readable, and
// errors found before queueing returned instead.
func testAppendAsync(t *testing.T, cfg Config) {
	s := Open(t, cfg.Options(t))
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	const n = 200
	type result struct {
		i       int
		err     error
		visible bool
	}
	results := make(chan result, n)
	msgs := make([]*message.Message, n)
	for i := range n {
		m := Msg("Async", 0, fmt.Sprintf("a%d", i))
		msgs[i] = m
		err := s.AppendAsync([]*message.Message{m}, func(err error) {
			_, maxOff := s.QueueOffsets("Async", 0)
			results <- result{i, err, maxOff > m.QueueOffset}
		})
		if err != nil {
			t.Fatalf("AppendAsync %d: %v", i, err)
		}
		if m.QueueOffset != int64(i) {
			t.Fatalf("message %d got queue offset %d at once, want %d", i, m.QueueOffset, i)
		}
	}
	for want := range n {
		select {
		case r := <-results:
			if r.i != want || r.err != nil || !r.visible {
				t.Fatalf("callback %d: got message %d, err %v, visible %v", want, r.i, r.err, r.visible)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("callback %d never came", want)
		}
	}
	if got := ReadQueue(t, s, "Async", 0, n-2); fmt.Sprint(got) != fmt.Sprintf("[a%d a%d]", n-2, n-1) {
		t.Fatalf("tail of the queue = %v", got)
	}
	called := false
	if err := s.AppendAsync(nil, func(error) { called = true }); err != nil || !called {
		t.Fatalf("empty AppendAsync: err %v, called %v", err, called)
	}
	big := Msg("Async", 0, "")
	big.Topic = strings.Repeat("t", message.MaxTopicLen+1)
	if err := s.AppendAsync([]*message.Message{big}, func(error) { t.Error("callback of a refused append") }); err == nil {
		t.Fatal("a topic over the limit was queued")
	}
	closed = true
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAsync([]*message.Message{Msg("Async", 0, "late")}, func(error) { t.Error("callback after Close") }); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("AppendAsync after Close: %v", err)
	}
}

// testDeleteTopic deletes a topic with messages in two queues and
// consumer offsets of two groups: its queues and offsets are gone, other
// topics keep theirs, and the topic written again starts at offset 0,
// before and after a reopen.
func testDeleteTopic(t *testing.T, cfg Config) {
	o := cfg.Options(t)
	s := Open(t, o)
	for i := 0; i < 150; i++ {
		appendOne(t, s, Msg("Gone", int32(i%2), fmt.Sprint("old", i)))
		appendOne(t, s, Msg("Kept", 0, fmt.Sprint("k", i)))
	}
	for _, g := range []string{"g1", "g2"} {
		if err := s.CommitOffset(g, "Gone", 0, 40); err != nil {
			t.Fatal(err)
		}
		if err := s.CommitOffset(g, "Kept", 0, 30); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTopic("Gone"); err != nil {
		t.Fatal(err)
	}
	check := func(s *store.Store, fresh []string) {
		t.Helper()
		for q := int32(0); q < 2; q++ {
			want := 0
			if q == 0 {
				want = len(fresh)
			}
			if mn, mx := s.QueueOffsets("Gone", q); mn != 0 || mx != int64(want) {
				t.Fatalf("deleted queue %d spans [%d, %d), want [0, %d)", q, mn, mx, want)
			}
		}
		if got := ReadQueue(t, s, "Gone", 0, 0); strings.Join(got, ",") != strings.Join(fresh, ",") {
			t.Fatalf("deleted topic's queue 0 holds %v, want %v", got, fresh)
		}
		for _, g := range []string{"g1", "g2"} {
			if off, ok := s.ConsumerOffset(g, "Gone", 0); ok {
				t.Fatalf("group %s keeps offset %d on the deleted topic", g, off)
			}
			if off, _ := s.ConsumerOffset(g, "Kept", 0); off != 30 {
				t.Fatalf("group %s's offset on another topic is %d, want 30", g, off)
			}
		}
		if got := ReadQueue(t, s, "Kept", 0, 0); len(got) != 150 {
			t.Fatalf("the other topic holds %d messages, want 150", len(got))
		}
		for _, qi := range s.Queues() {
			if qi.Topic == "Gone" && qi.QueueID != 0 {
				t.Fatalf("deleted queue listed: %+v", qi)
			}
		}
	}
	check(s, nil)
	appendOne(t, s, Msg("Gone", 0, "new0"))
	appendOne(t, s, Msg("Gone", 0, "new1"))
	check(s, []string{"new0", "new1"})
	s.Close()
	s = Open(t, o)
	defer s.Close()
	check(s, []string{"new0", "new1"})
}
