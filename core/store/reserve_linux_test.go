package store_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// TestSegmentBlocksReservedAhead checks that the active segment has disk
// blocks reserved past its data while its size stays the data's end, and
// that a reopened store appends after the data, not after the reservation.
func TestSegmentBlocksReservedAhead(t *testing.T) {
	dir := t.TempDir()
	o := store.Options{Dir: dir, Logger: quietLogger()}
	s := storetest.Open(t, o)
	if err := s.Append([]*message.Message{storetest.Msg("T", 0, "one")}); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "commitlog", "*"))
	if len(segs) != 1 {
		t.Fatalf("segments: %v", segs)
	}
	fi, err := os.Stat(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	size, reserved := fi.Size(), fi.Sys().(*syscall.Stat_t).Blocks*512
	if size == 0 || size > 4096 {
		t.Fatalf("segment size %d after one small record", size)
	}
	if reserved < 1<<20 {
		var st syscall.Statfs_t
		_ = syscall.Statfs(dir, &st)
		t.Fatalf("segment holds %d bytes of blocks for %d bytes of data (filesystem type %#x)", reserved, size, st.Type)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = storetest.Open(t, o)
	defer s.Close()
	if err := s.Append([]*message.Message{storetest.Msg("T", 0, "two")}); err != nil {
		t.Fatal(err)
	}
	if got := storetest.ReadQueue(t, s, "T", 0, 0); len(got) != 2 || got[0] != "one" || got[1] != "two" {
		t.Fatalf("after reopen: %q", got)
	}
}
