package cluster

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TestLogStoreRetention: raft's compaction leaves the entries of the
// retention's age, then only as many as fit its bytes; a conflicting tail
// and the whole log (after a snapshot install) go in full.
func TestLogStoreRetention(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	// Segments of 4 KiB hold three or four of the 1 KiB entries, stored
	// one at a time as a follower stores a round.
	s, err := openLogStore(t.TempDir(), retention{age: time.Minute, bytes: 1 << 30}, 4<<10, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.now = func() time.Time { return now }
	for i := uint64(1); i <= 100; i++ {
		at := now.Add(-2 * time.Minute)
		if i > 60 {
			at = now.Add(-10 * time.Second)
		}
		data := make([]byte, 1024)
		rand.Read(data)
		if err := s.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: at}}); err != nil {
			t.Fatal(err)
		}
	}
	edges := func() (uint64, uint64) {
		t.Helper()
		first, err := s.FirstIndex()
		if err != nil {
			t.Fatal(err)
		}
		last, err := s.LastIndex()
		if err != nil {
			t.Fatal(err)
		}
		return first, last
	}
	// Compaction up to 90 stops at the first young entry; the WAL removes
	// whole segments, so it may keep up to a segment's entries before it.
	if err := s.DeleteRange(1, 90); err != nil {
		t.Fatal(err)
	}
	if first, last := edges(); first > 61 || first < 57 || last != 100 {
		t.Fatalf("after compaction to 90: entries %d..%d, want 57..61 to 100", first, last)
	}
	var l raft.Log
	if err := s.GetLog(61, &l); err != nil || l.Index != 61 || len(l.Data) != 1024 {
		t.Fatalf("entry 61 after compaction: %v, %+v", err, l)
	}
	// A conflicting tail goes in full, young as it is.
	if err := s.DeleteRange(95, 100); err != nil {
		t.Fatal(err)
	}
	first, last := edges()
	if last != 94 {
		t.Fatalf("after cutting the tail at 95: entries %d..%d, want to 94", first, last)
	}
	// A byte bound of 20 KiB keeps about 20 of the young entries, less
	// the segment that holds the first of them.
	s.keep.bytes = 20 << 10
	if err := s.DeleteRange(first, 90); err != nil {
		t.Fatal(err)
	}
	first, last = edges()
	if kept := last - first + 1; first <= 61 || kept < 10 || kept > 20 {
		t.Fatalf("with 20 KiB kept entries %d..%d", first, last)
	}
	// An entry without a time is as old as the next one with a time.
	t0, err := openLogStore(t.TempDir(), retention{age: time.Minute, bytes: 1 << 30}, 0, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer t0.Close()
	t0.now = func() time.Time { return now }
	boot := []*raft.Log{{Index: 1, Term: 1, Type: raft.LogConfiguration}}
	for i := uint64(2); i <= 5; i++ {
		boot = append(boot, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, AppendedAt: now.Add(-time.Second)})
	}
	if err := t0.StoreLogs(boot); err != nil {
		t.Fatal(err)
	}
	if err := t0.GetLog(1, &l); err != nil || !l.AppendedAt.IsZero() {
		t.Fatalf("entry without a time read back as %v (%v)", l.AppendedAt, err)
	}
	if err := t0.DeleteRange(1, 3); err != nil {
		t.Fatal(err)
	}
	if first, _ := t0.FirstIndex(); first != 1 {
		t.Fatalf("the bootstrap entry was compacted with young entries after it (first %d)", first)
	}
	// After a snapshot install raft removes everything, up to the last.
	if err := s.DeleteRange(first, last); err != nil {
		t.Fatal(err)
	}
	if first, last := edges(); first != 0 || last != 0 {
		t.Fatalf("after removing all: entries %d..%d", first, last)
	}
}
