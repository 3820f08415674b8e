package store_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// spaceFS is an in-memory filesystem with a disk that fills: it reports
// the free space the test sets, and while full is set, a write into a
// file whose path holds one of the full paths fails with ENOSPC, as a
// full disk's would. Removing the reserve file gives its space back.
type spaceFS struct {
	*errorfs.FS
	free    atomic.Int64
	full    atomic.Bool
	paths   atomic.Pointer[[]string] // the files a full disk refuses
	reserve int64
	removed atomic.Int32 // reserve files removed
}

func newSpaceFS(reserve int64) *spaceFS {
	d := &spaceFS{reserve: reserve}
	d.free.Store(1 << 40)
	d.refuse("/d/")
	d.FS = errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !d.full.Load() || (op.Kind != errorfs.OpFileWrite && op.Kind != errorfs.OpFileWriteAt) {
			return nil
		}
		for _, p := range *d.paths.Load() {
			if strings.Contains(op.Path, p) {
				return fmt.Errorf("write %s: %w", op.Path, syscall.ENOSPC)
			}
		}
		return nil
	}))
	return d
}

// refuse sets the paths a full disk refuses writes to.
func (d *spaceFS) refuse(paths ...string) { d.paths.Store(&paths) }

// fill makes the disk full: no space left, writes refused.
func (d *spaceFS) fill() {
	d.free.Store(0)
	d.full.Store(true)
}

// empty frees the disk.
func (d *spaceFS) empty() {
	d.full.Store(false)
	d.free.Store(1 << 40)
}

func (d *spaceFS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	free := uint64(d.free.Load())
	return vfs.DiskUsage{AvailBytes: free, TotalBytes: 2 << 40, UsedBytes: 2<<40 - free}, nil
}

func (d *spaceFS) Remove(name string) error {
	err := d.FS.Remove(name)
	if err == nil && strings.HasSuffix(name, "/RESERVE") {
		d.removed.Add(1)
		d.full.Store(false)
		d.free.Add(d.reserve)
	}
	return err
}

func (d *spaceFS) hasReserve() bool {
	_, err := d.Stat("/d/RESERVE")
	return err == nil
}

const testReserve = 1 << 20

func diskOptions(fs *spaceFS) store.Options {
	return store.Options{Dir: "/d", FS: fs, Logger: quietLogger(), DiskReserve: testReserve, CheckpointInterval: 10 * time.Millisecond}
}

func appendNumbered(t *testing.T, s *store.Store, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := s.Append([]*message.Message{storetest.Msg("T", 0, fmt.Sprintf("m%03d", i))}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
}

func checkBodies(t *testing.T, s *store.Store, n int) {
	t.Helper()
	got := storetest.ReadQueue(t, s, "T", 0, 0)
	if len(got) != n {
		t.Fatalf("read %d records, want %d", len(got), n)
	}
	for i, b := range got {
		if b != fmt.Sprintf("m%03d", i) {
			t.Fatalf("record %d is %q", i, b)
		}
	}
}

// eventually polls cond every 10 ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openWithin opens the store, failing the test if Open does not return
// within d (a full disk made the index retry its flush forever).
func openWithin(t *testing.T, o store.Options, d time.Duration) *store.Store {
	t.Helper()
	type opened struct {
		s   *store.Store
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		s, err := store.Open(o)
		ch <- opened{s, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("open: %v", r.err)
		}
		return r.s
	case <-time.After(d):
		t.Fatalf("Open did not return within %v on a full disk", d)
	}
	return nil
}

// TestOpenOnFullDisk reopens a store whose disk filled while it was
// closed: the index, which must write its log's contents out at Open,
// finds no space, the reserve file is deleted to make room, and the store
// opens, serves what it holds and its consumer offsets, and refuses
// appends with ErrDiskFull until space is freed; then it takes them
// without a reopen and makes its reserve file again.
func TestOpenOnFullDisk(t *testing.T) {
	fs := newSpaceFS(testReserve)
	o := diskOptions(fs)
	s := storetest.Open(t, o)
	appendNumbered(t, s, 0, 20)
	if err := s.CommitOffset("G", "T", 0, 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !fs.hasReserve() {
		t.Fatal("no reserve file after a run with room")
	}

	fs.fill()
	s = openWithin(t, o, 30*time.Second)
	if fs.removed.Load() != 1 || fs.hasReserve() {
		t.Fatalf("reserve files removed %d, one left: %v", fs.removed.Load(), fs.hasReserve())
	}
	checkBodies(t, s, 20)
	if off, ok := s.ConsumerOffset("G", "T", 0); !ok || off != 7 {
		t.Fatalf("consumer offset %d, %v after the reopen", off, ok)
	}
	err := s.Append([]*message.Message{storetest.Msg("T", 0, "refused")})
	if !errors.Is(err, store.ErrDiskFull) || !s.DiskFull() {
		t.Fatalf("append on a full disk: %v (DiskFull %v)", err, s.DiskFull())
	}
	// Offsets go on: in memory, and to the index in the room the reserve
	// file gave back.
	if err := s.CommitOffset("G", "T", 0, 9); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatalf("checkpoint on a full disk: %v", err)
	}

	fs.empty()
	eventually(t, 10*time.Second, "appends taken again", func() bool { return !s.DiskFull() })
	appendNumbered(t, s, 20, 21)
	checkBodies(t, s, 21)
	if !fs.hasReserve() {
		t.Fatal("reserve file not made again once space was freed")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = storetest.Open(t, o)
	defer s.Close()
	checkBodies(t, s, 21)
	if off, _ := s.ConsumerOffset("G", "T", 0); off != 9 {
		t.Fatalf("consumer offset %d after a reopen, want 9", off)
	}
}

// TestDiskFillsWhileRunning fills the disk under a running store: a
// commit-log write that meets it fails its appends with ErrDiskFull, the
// next appends are refused before they are written, an index write that
// meets it deletes the reserve file instead of stopping the process, and
// once space is freed appends are taken again without a reopen.
func TestDiskFillsWhileRunning(t *testing.T) {
	fs := newSpaceFS(testReserve)
	o := diskOptions(fs)
	s := storetest.Open(t, o)
	defer s.Close()
	appendNumbered(t, s, 0, 10)

	// The commit log meets the full disk first, before any measure says so.
	fs.refuse("/d/commitlog/")
	fs.full.Store(true)
	err := s.Append([]*message.Message{storetest.Msg("T", 0, "lost")})
	if !errors.Is(err, store.ErrDiskFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append meeting ENOSPC: %v", err)
	}
	fs.free.Store(0)
	err = s.Append([]*message.Message{storetest.Msg("T", 0, "refused")})
	if !errors.Is(err, store.ErrDiskFull) || errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a disk known full: %v", err)
	}
	checkBodies(t, s, 10)

	// The index meets it too: a checkpoint writes offsets to its log,
	// which pebble cannot survive failing.
	fs.refuse("/d/index/")
	if err := s.CommitOffset("G", "T", 0, 5); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the reserve file deleted", func() bool { return fs.removed.Load() == 1 })
	if err := s.Checkpoint(); err != nil {
		t.Fatalf("checkpoint after the reserve was deleted: %v", err)
	}
	if err := s.Append([]*message.Message{storetest.Msg("T", 0, "refused")}); !errors.Is(err, store.ErrDiskFull) {
		t.Fatalf("append with the reserve file given to the index: %v", err)
	}

	fs.empty()
	eventually(t, 10*time.Second, "appends taken again", func() bool { return !s.DiskFull() })
	appendNumbered(t, s, 10, 12)
	checkBodies(t, s, 12)
	if off, _ := s.ConsumerOffset("G", "T", 0); off != 5 {
		t.Fatalf("consumer offset %d", off)
	}
}

// TestOpenOnFullDiskWithoutReserve opens a store on a full disk with no
// reserve file to delete (a directory from before the reserve): the
// index's writes wait for space, without failing, and Open returns once
// space is freed.
func TestOpenOnFullDiskWithoutReserve(t *testing.T) {
	fs := newSpaceFS(testReserve)
	o := diskOptions(fs)
	s := storetest.Open(t, o)
	appendNumbered(t, s, 0, 5)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Remove("/d/RESERVE"); err != nil {
		t.Fatal(err)
	}
	fs.fill()
	opened := make(chan *store.Store, 1)
	go func() {
		s, err := store.Open(o)
		if err != nil {
			t.Errorf("open: %v", err)
		}
		opened <- s
	}()
	select {
	case <-opened:
		t.Fatal("Open returned on a full disk whose index could not write")
	case <-time.After(2 * time.Second):
	}
	fs.empty()
	select {
	case s = <-opened:
	case <-time.After(30 * time.Second):
		t.Fatal("Open did not return once space was freed")
	}
	defer s.Close()
	checkBodies(t, s, 5)
	appendNumbered(t, s, 5, 6)
}

// TestKeyIndexMeetsFullDisk fills the disk under the key index alone: its
// write gets the reserve file's space, as the index's do, instead of
// stopping the key index until a restart.
func TestKeyIndexMeetsFullDisk(t *testing.T) {
	fs := newSpaceFS(testReserve)
	s := storetest.Open(t, diskOptions(fs))
	defer s.Close()
	if err := s.Append([]*message.Message{keyed("T", "before", "k1", "")}); err != nil {
		t.Fatal(err)
	}
	fs.refuse("/d/keyindex/")
	fs.full.Store(true)
	// The key index's next write (an append's entries, or its header at
	// a checkpoint) meets the full disk.
	err := s.Append([]*message.Message{keyed("T", "during", "k2", "")})
	if err != nil && !errors.Is(err, store.ErrDiskFull) {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the reserve file deleted", func() bool { return fs.removed.Load() == 1 })
	if n := s.Stats().KeyIndexFailures.Load(); n != 0 {
		t.Fatalf("key-index failures %d", n)
	}
	fs.empty()
	eventually(t, 10*time.Second, "appends taken again", func() bool { return !s.DiskFull() })
	if err := s.Append([]*message.Message{keyed("T", "after", "k3", "")}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"k1": "before", "k3": "after"}
	if err == nil {
		want["k2"] = "during"
	}
	for key, body := range want {
		if got := bodiesAt(t, s, query(t, s, "T", key, false, 0, math.MaxInt64, 10)); len(got) != 1 || got[0] != body {
			t.Fatalf("query of %s: %q", key, got)
		}
	}
}
