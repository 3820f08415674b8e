package storetest

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rmq-go/rmq/core/store"
)

// DiskFS is a filesystem that reports its disk as filled to a fraction
// set with SetUsed, so tests can put the store above or below its
// high-water mark. Everything else goes to the wrapped filesystem.
type DiskFS struct {
	vfs.FS
	used atomic.Uint64 // math.Float64bits of the fraction
}

// NewDiskFS wraps fs (vfs.Default when nil), reporting used of the disk
// in use.
func NewDiskFS(fs vfs.FS, used float64) *DiskFS {
	if fs == nil {
		fs = vfs.Default
	}
	d := &DiskFS{FS: fs}
	d.SetUsed(used)
	return d
}

// SetUsed sets the fraction of the disk reported in use.
func (d *DiskFS) SetUsed(used float64) { d.used.Store(math.Float64bits(used)) }

// GetDiskUsage reports a 100 GiB disk filled to the fraction set.
func (d *DiskFS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	const total = 100 << 30
	used := uint64(total * math.Float64frombits(d.used.Load()))
	return vfs.DiskUsage{AvailBytes: total - used, TotalBytes: total, UsedBytes: used}, nil
}

// LogBuffer collects a logger's text output for tests to inspect.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String returns everything logged so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Logger returns a logger writing every level to l.
func (l *LogBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// retentionTests are the retention hooks' contract.
var retentionTests = []struct {
	name string
	fn   func(t *testing.T, cfg Config)
}{
	{"HighWaterKeepsUnconsumed", testHighWaterKeepsUnconsumed},
	{"HighWaterDropsUnconsumed", testHighWaterDropsUnconsumed},
	{"AgeIgnoresUnconsumed", testAgeIgnoresUnconsumed},
	{"FloorHeld", testFloorHeld},
}

// consumer is a fake owner's view of one queue's consumption.
type consumer struct {
	mu    sync.Mutex
	next  int64 // first offset not consumed
	asked int   // Unconsumed calls
}

func (c *consumer) commit(off int64) { c.mu.Lock(); c.next = off; c.mu.Unlock() }

func (c *consumer) calls() int { c.mu.Lock(); defer c.mu.Unlock(); return c.asked }

func (c *consumer) holds(topic string) func() []store.QueueHold {
	return func() []store.QueueHold {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.asked++
		return []store.QueueHold{{Topic: topic, QueueID: 0, Offset: c.next, Holder: "group G"}}
	}
}

// highWaterStore opens a store of small segments whose disk reports 99%
// full, with age retention off, and fills a few segments of queue H/0.
func highWaterStore(t *testing.T, cfg Config, drops bool, logs *LogBuffer) *store.Store {
	o := cfg.Options(t)
	o.SegmentSize = 8 << 10
	o.Retention = -1
	o.RetentionInterval = time.Hour // run by hand
	o.DiskHighWater = 0.9
	o.DiskHighWaterDropsUnconsumed = drops
	o.FS = NewDiskFS(o.FS, 0.99)
	o.Logger = logs.Logger()
	s := Open(t, o)
	t.Cleanup(func() { s.Close() })
	body := strings.Repeat("h", 1000)
	for i := 0; i < 30; i++ {
		appendOne(t, s, Msg("H", 0, fmt.Sprintf("%02d%s", i, body)))
	}
	return s
}

// testHighWaterKeepsUnconsumed: above high water, a segment holding a
// record the owner reports unconsumed stays, with a loud log and a count;
// once consumed it goes.
func testHighWaterKeepsUnconsumed(t *testing.T, cfg Config) {
	logs := &LogBuffer{}
	s := highWaterStore(t, cfg, false, logs)
	c := &consumer{}
	s.SetRetentionHooks(store.RetentionHooks{Unconsumed: c.holds("H")})
	for pass := 0; pass < 2; pass++ {
		if n, err := s.RunRetention(); err != nil || n != 0 {
			t.Fatalf("pass %d deleted %d segments holding unconsumed records, %v", pass, n, err)
		}
	}
	if got := ReadQueue(t, s, "H", 0, 0); len(got) != 30 {
		t.Fatalf("read %d of 30 messages", len(got))
	}
	if n := s.Stats().HighWaterHeld.Load(); n != 2 {
		t.Fatalf("HighWaterHeld = %d after two held passes", n)
	}
	if n := s.Stats().SegmentsFreed.Load(); n != 0 {
		t.Fatalf("SegmentsFreed = %d", n)
	}
	out := logs.String()
	if strings.Count(out, "DISK ABOVE HIGH WATER") != 1 || !strings.Contains(out, "level=ERROR") ||
		!strings.Contains(out, "H/0 from offset 0: group G") || !strings.Contains(out, "diskHighWaterDropsUnconsumed") {
		t.Fatalf("want one rate-limited error naming the queue and the option; log:\n%s", out)
	}

	c.commit(10) // consumed part of the first segments
	n, err := s.RunRetention()
	if err != nil || n == 0 {
		t.Fatalf("after a partial commit retention deleted %d, %v", n, err)
	}
	mn, _ := s.QueueOffsets("H", 0)
	if mn > 10 || mn == 0 {
		t.Fatalf("min offset %d: high water deleted past the committed offset 10, or nothing", mn)
	}
	c.commit(30)
	if _, err := s.RunRetention(); err != nil {
		t.Fatal(err)
	}
	if mn, _ := s.QueueOffsets("H", 0); mn <= 10 {
		t.Fatalf("min offset %d after everything was consumed", mn)
	}
	if n := s.Stats().UnconsumedDropped.Load(); n != 0 {
		t.Fatalf("UnconsumedDropped = %d without the option", n)
	}
}

// testHighWaterDropsUnconsumed: with DiskHighWaterDropsUnconsumed the
// segments go all the same, and the loss is counted and logged.
func testHighWaterDropsUnconsumed(t *testing.T, cfg Config) {
	logs := &LogBuffer{}
	s := highWaterStore(t, cfg, true, logs)
	c := &consumer{}
	s.SetRetentionHooks(store.RetentionHooks{Unconsumed: c.holds("H")})
	n, err := s.RunRetention()
	if err != nil || n == 0 {
		t.Fatalf("retention deleted %d, %v", n, err)
	}
	mn, _ := s.QueueOffsets("H", 0)
	if got := s.Stats().UnconsumedDropped.Load(); got != mn || mn == 0 {
		t.Fatalf("UnconsumedDropped = %d, min offset %d", got, mn)
	}
	if c.calls() != 1 {
		t.Fatalf("Unconsumed asked %d times in one pass", c.calls())
	}
	out := logs.String()
	if !strings.Contains(out, "deleted unconsumed messages") || !strings.Contains(out, fmt.Sprintf("H/0: %d messages from offset 0: group G", mn)) {
		t.Fatalf("want an error naming what was dropped; log:\n%s", out)
	}
}

// testAgeIgnoresUnconsumed: age retention deletes unconsumed records and
// never asks about them; neither is asked below high water.
func testAgeIgnoresUnconsumed(t *testing.T, cfg Config) {
	o := cfg.Options(t)
	o.SegmentSize = 8 << 10
	o.Retention = time.Hour
	o.RetentionInterval = time.Hour
	o.DiskHighWater = 0.9
	fs := NewDiskFS(o.FS, 0.5)
	o.FS = fs
	var mu sync.Mutex
	now := time.Now()
	o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := Open(t, o)
	defer s.Close()
	c := &consumer{}
	s.SetRetentionHooks(store.RetentionHooks{Unconsumed: c.holds("A")})
	body := strings.Repeat("a", 1000)
	for i := 0; i < 30; i++ {
		appendOne(t, s, Msg("A", 0, body))
	}
	if n, err := s.RunRetention(); err != nil || n != 0 {
		t.Fatalf("below high water with young segments: deleted %d, %v", n, err)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	if n, err := s.RunRetention(); err != nil || n == 0 {
		t.Fatalf("age retention deleted %d, %v", n, err)
	}
	if c.calls() != 0 {
		t.Fatalf("Unconsumed asked %d times without high water", c.calls())
	}
}

// testFloorHeld: a Floor hold stops any deletion, the owner is told which
// segment end was wanted, and once the hold moves the segment goes.
func testFloorHeld(t *testing.T, cfg Config) {
	o := cfg.Options(t)
	o.SegmentSize = 8 << 10
	o.Retention = time.Hour
	o.RetentionInterval = time.Hour
	o.DiskHighWater = -1
	var mu sync.Mutex
	now := time.Now().Add(-2 * time.Hour)
	o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	logs := &LogBuffer{}
	o.Logger = logs.Logger()
	s := Open(t, o)
	defer s.Close()
	body := strings.Repeat("f", 1000)
	for i := 0; i < 30; i++ {
		appendOne(t, s, Msg("F", 0, body))
	}
	mu.Lock()
	now = now.Add(4 * time.Hour)
	mu.Unlock()
	var (
		floor  atomic.Int64
		heldAt atomic.Int64
		holder atomic.Value
	)
	s.SetRetentionHooks(store.RetentionHooks{
		Floor: func() []store.QueueHold {
			return []store.QueueHold{{Topic: "F", QueueID: 0, Offset: floor.Load(), Holder: "parked messages"}}
		},
		Held: func(end int64, holds []store.QueueHold) {
			heldAt.Store(end)
			holder.Store(holds[0].Holder)
		},
	})
	if n, err := s.RunRetention(); err != nil || n != 0 {
		t.Fatalf("retention under a floor at 0 deleted %d, %v", n, err)
	}
	if heldAt.Load() != o.SegmentSize || holder.Load() != "parked messages" || s.Stats().SegmentsHeld.Load() != 1 {
		t.Fatalf("Held told end %d, holder %v; SegmentsHeld %d", heldAt.Load(), holder.Load(), s.Stats().SegmentsHeld.Load())
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "F/0 from offset 0: parked messages") {
		t.Fatalf("want a warning naming the holder; log:\n%s", out)
	}
	floor.Store(30)
	if n, err := s.RunRetention(); err != nil || n == 0 {
		t.Fatalf("retention with the floor gone deleted %d, %v", n, err)
	}
}
