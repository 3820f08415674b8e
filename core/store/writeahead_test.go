package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// aheadLeader opens a write-ahead store leading a log that writes every
// round ahead of its apply, and appends n batches of per messages to
// topic, bodies prefixed by tag. It returns the store, its log's entries
// and the bodies in order.
func aheadLeader(t *testing.T, fs vfs.FS, dir, topic, tag string, n, per int, apply ...[]byte) (*store.Store, [][]byte, []string) {
	t.Helper()
	l := newMemberLog()
	l.ahead = true
	t.Cleanup(l.stop)
	s := storetest.Open(t, store.Options{Dir: dir, FS: fs, SegmentSize: 64 << 10, Replicator: l, WriteAhead: true,
		Logger: quietLogger(), CheckpointInterval: time.Hour, FlushInterval: time.Hour})
	t.Cleanup(func() { s.Close() })
	for _, e := range apply {
		if err := s.WriteRound(e); err != nil {
			t.Fatal(err)
		}
		if err := s.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	l.join(s)
	s.Promote()
	var bodies []string
	for i := 0; i < n; i++ {
		var batch []*message.Message
		for j := 0; j < per; j++ {
			body := fmt.Sprintf("%s%d-%s", tag, len(bodies), strings.Repeat("x", 700))
			bodies = append(bodies, body)
			batch = append(batch, storetest.Msg(topic, 0, body))
		}
		if err := s.Append(batch); err != nil {
			t.Fatal(err)
		}
	}
	var rounds [][]byte
	for _, e := range l.entries() {
		if _, _, ok, _ := store.ParseRound(e); ok {
			rounds = append(rounds, e)
		}
	}
	return s, rounds, bodies
}

func roundSpan(t *testing.T, e []byte) (uint64, []store.RoundSpan, int64, int64) {
	t.Helper()
	id, spans, ok, err := store.ParseRound(e)
	if !ok || err != nil {
		t.Fatalf("not a round entry: %v", err)
	}
	last := spans[len(spans)-1]
	return id, spans, spans[0].Off, last.Off + int64(last.Len)
}

// TestWriteAheadReadableOnlyOnceApplied stores a leader's rounds in a
// follower ahead of their apply: nothing of a stored round is readable
// (by queue, by commit-log offset, as the log's end) until it is applied,
// ReadRound gives back the exact entry, and applying writes nothing more
// to the commit log. The leader wrote each round once too.
func TestWriteAheadReadableOnlyOnceApplied(t *testing.T) {
	leader, rounds, want := aheadLeader(t, vfs.NewMem(), "/l", "W", "a", 12, 5)
	if got := readOffsets(t, leader, "W"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("leader reads %d records, want %d", len(got), len(want))
	}
	if len(rounds) < 2 {
		t.Fatalf("%d rounds, want several", len(rounds))
	}

	var writes, counting atomic.Int64
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileWriteAt && strings.Contains(op.Path, "commitlog") && counting.Load() == 1 {
			writes.Add(1)
		}
		return nil
	})
	f := storetest.Open(t, store.Options{Dir: "/f", FS: errorfs.Wrap(vfs.NewMem(), inj), SegmentSize: 64 << 10,
		Replicator: refuseAll{}, WriteAhead: true, Logger: quietLogger()})
	defer f.Close()
	for i, e := range rounds {
		id, spans, start, end := roundSpan(t, e)
		if err := f.WriteRound(e); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if err := f.SyncRounds(); err != nil {
			t.Fatal(err)
		}
		if got := f.StoredEnd(); got != end {
			t.Fatalf("round %d: stored end %d, want %d", i, got, end)
		}
		if _, max := f.CommitLogOffsets(); max != start {
			t.Fatalf("round %d stored, not applied: the log's end is %d, want %d", i, max, start)
		}
		if _, err := f.ReadRecordAt(start); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("round %d stored, not applied: a record at %d is read (err %v)", i, start, err)
		}
		n := f.MaxOffset("W", 0)
		got, err := f.ReadRound(id, spans)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, e) {
			t.Fatalf("round %d: ReadRound differs from the entry stored", i)
		}
		counting.Store(1)
		err = f.Apply(e)
		counting.Store(0)
		if err != nil {
			t.Fatalf("applying round %d: %v", i, err)
		}
		if f.MaxOffset("W", 0) <= n {
			t.Fatalf("round %d applied: max offset still %d", i, n)
		}
	}
	if n := writes.Load(); n != 0 {
		t.Fatalf("applying rounds stored ahead wrote the commit log %d times, want none", n)
	}
	if got := readOffsets(t, f, "W"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("follower reads %d records, want %d", len(got), len(want))
	}
	// A round that does not follow the stored ones is refused.
	if err := f.WriteRound(rounds[len(rounds)-1]); err != nil {
		t.Fatalf("a replay of an applied round: %v", err)
	}
}

// TestWriteAheadConflictCut stores three rounds of one leader in a
// follower, applies the first, cuts the other two (the set's log dropped
// them), and stores a second leader's rounds at the same offsets. After a
// crash the follower recovers the second leader's rounds, unapplied, and
// applies them; nothing of the cut rounds is ever read.
func TestWriteAheadConflictCut(t *testing.T) {
	_, first, firstBodies := aheadLeader(t, vfs.NewMem(), "/l1", "C", "one", 4, 3)
	_, _, _, end0 := roundSpan(t, first[0])
	_, second, secondBodies := aheadLeader(t, vfs.NewMem(), "/l2", "C", "two", 3, 2, first[0])
	_, _, start, _ := roundSpan(t, second[0])
	if start != end0 {
		t.Fatalf("the second leader's first round begins at %d, want %d", start, end0)
	}

	mem := vfs.NewCrashableMem()
	o := store.Options{Dir: "/f", FS: mem, SegmentSize: 64 << 10, Replicator: refuseAll{}, WriteAhead: true,
		Logger: quietLogger(), FlushInterval: time.Hour, CheckpointInterval: time.Hour}
	f := storetest.Open(t, o)
	for _, e := range first {
		if err := f.WriteRound(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.SyncRounds(); err != nil {
		t.Fatal(err)
	}
	if err := f.Apply(first[0]); err != nil {
		t.Fatal(err)
	}
	if err := f.SyncReplicated(); err != nil {
		t.Fatal(err)
	}
	if err := f.CutRounds(end0 - 1); err == nil {
		t.Fatal("a cut below the applied end succeeded")
	}
	// A round past the stored ones conflicts.
	if err := f.WriteRound(second[0]); !errors.Is(err, store.ErrRoundConflict) {
		t.Fatalf("a round at %d over stored rounds: %v, want ErrRoundConflict", end0, err)
	}
	if err := f.CutRounds(end0); err != nil {
		t.Fatal(err)
	}
	if got := f.StoredEnd(); got != end0 {
		t.Fatalf("stored end %d after the cut, want %d", got, end0)
	}
	// A crash right after the cut keeps none of the cut rounds.
	cutCrash := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	for _, e := range second {
		if err := f.WriteRound(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.SyncRounds(); err != nil {
		t.Fatal(err)
	}
	_, _, _, stored := roundSpan(t, second[len(second)-1])
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	f.Close()

	o.FS = cutCrash
	g := storetest.Open(t, o)
	if got := g.StoredEnd(); got != end0 {
		t.Fatalf("after a crash at the cut: stored end %d, want %d", got, end0)
	}
	g.Close()

	o.FS = crashed
	h := storetest.Open(t, o)
	defer h.Close()
	if got := h.StoredEnd(); got != stored {
		t.Fatalf("after the crash: stored end %d, want %d", got, stored)
	}
	if _, max := h.CommitLogOffsets(); max != end0 {
		t.Fatalf("after the crash: applied end %d, want %d", max, end0)
	}
	if got := readOffsets(t, h, "C"); fmt.Sprint(got) != fmt.Sprint(firstBodies[:3]) {
		t.Fatalf("after the crash: %d records, want the first round's 3", len(got))
	}
	// The replay: the applied round is skipped, the others indexed.
	for i, e := range append([][]byte{first[0]}, second...) {
		if err := h.Apply(e); err != nil {
			t.Fatalf("replaying entry %d: %v", i, err)
		}
	}
	want := append(append([]string(nil), firstBodies[:3]...), secondBodies...)
	if got := readOffsets(t, h, "C"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the replay: %d records, want %d", len(got), len(want))
	}
}

// TestWriteAheadTornBatch crashes a follower while a round it wrote is
// not yet synced: it recovers the synced rounds unapplied, the owner cuts
// the torn one (its replicated log never stored it), and the rounds are
// applied and written again as the set's log supplies them.
func TestWriteAheadTornBatch(t *testing.T) {
	_, rounds, want := aheadLeader(t, vfs.NewMem(), "/l", "T", "t", 6, 4)
	for _, pct := range []int{0, 50, 100} {
		t.Run(fmt.Sprint("unsynced kept=", pct), func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			o := store.Options{Dir: "/f", FS: mem, SegmentSize: 64 << 10, Replicator: refuseAll{}, WriteAhead: true,
				Logger: quietLogger(), FlushInterval: time.Hour, CheckpointInterval: time.Hour}
			f := storetest.Open(t, o)
			last := len(rounds) - 1
			for _, e := range rounds[:last] {
				if err := f.WriteRound(e); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.SyncRounds(); err != nil {
				t.Fatal(err)
			}
			if err := f.Apply(rounds[0]); err != nil {
				t.Fatal(err)
			}
			if err := f.SyncReplicated(); err != nil {
				t.Fatal(err)
			}
			if err := f.WriteRound(rounds[last]); err != nil {
				t.Fatal(err)
			}
			crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(uint64(pct), 1))})
			f.Close()

			o.FS = crashed
			g := storetest.Open(t, o)
			defer g.Close()
			_, _, _, synced := roundSpan(t, rounds[last-1])
			_, _, _, end := roundSpan(t, rounds[last])
			if got := g.StoredEnd(); got < synced || got > end {
				t.Fatalf("stored end %d, want %d to %d", got, synced, end)
			}
			if err := g.CutRounds(synced); err != nil {
				t.Fatal(err)
			}
			if got := g.StoredEnd(); got != synced {
				t.Fatalf("stored end %d after the cut, want %d", got, synced)
			}
			for i, e := range rounds {
				if i == last {
					if err := g.WriteRound(e); err != nil {
						t.Fatal(err)
					}
				}
				if err := g.Apply(e); err != nil {
					t.Fatalf("applying round %d: %v", i, err)
				}
			}
			if got := readOffsets(t, g, "T"); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%d records, want %d", len(got), len(want))
			}
		})
	}
}

// TestWriteAheadRetentionHeld: retention of a write-ahead store deletes
// no segment ending past the floor HoldRoundsFrom set (none before the
// first call), however old, and the floor never moves back.
func TestWriteAheadRetentionHeld(t *testing.T) {
	l := newMemberLog()
	l.ahead = true
	defer l.stop()
	var mu sync.Mutex
	now := time.Now()
	s := storetest.Open(t, store.Options{Dir: "/r", FS: vfs.NewMem(), SegmentSize: 8 << 10, Replicator: l, WriteAhead: true,
		Retention: time.Hour, RetentionInterval: time.Hour, DiskHighWater: -1, Logger: quietLogger(),
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	defer s.Close()
	l.join(s)
	s.Promote()
	var offs []int64
	for i := 0; i < 40; i++ {
		m := storetest.Msg("H", 0, fmt.Sprintf("%02d%s", i, strings.Repeat("y", 1000)))
		if err := s.Append([]*message.Message{m}); err != nil {
			t.Fatal(err)
		}
		offs = append(offs, m.CommitLogOffset)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	if n, err := s.RunRetention(); err != nil || n != 0 {
		t.Fatalf("retention without a floor deleted %d segments (%v), want none", n, err)
	}
	floor := offs[20]
	s.HoldRoundsFrom(floor)
	s.HoldRoundsFrom(offs[5]) // does not move it back
	n, err := s.RunRetention()
	if err != nil || n == 0 {
		t.Fatalf("retention under a floor at %d deleted %d segments (%v), want some", floor, n, err)
	}
	if lo, _ := s.CommitLogOffsets(); lo > floor || lo == 0 {
		t.Fatalf("the log begins at %d after retention, want above 0 and at most the floor %d", lo, floor)
	}
	if got := storetest.ReadQueue(t, s, "H", 0, 20); len(got) != 20 {
		t.Fatalf("%d records past the floor readable, want 20", len(got))
	}
}
