package store_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// TestSyncedLogLeavesPageCache checks that synced log bytes older than
// CacheWindow leave the page cache while the window's stay, that a negative
// window leaves them all, and that what was dropped still reads back by
// queue offset.
func TestSyncedLogLeavesPageCache(t *testing.T) {
	const window = 2 << 20
	for _, c := range []struct {
		name   string
		window int64
	}{{"window", window}, {"off", -1}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var st syscall.Statfs_t
			if err := syscall.Statfs(dir, &st); err == nil && st.Type == unix.TMPFS_MAGIC {
				t.Skip("tmpfs keeps its pages in memory whatever the advice")
			}
			s := storetest.Open(t, store.Options{Dir: dir, CacheWindow: c.window, Logger: quietLogger()})
			defer s.Close()
			body := strings.Repeat("x", 1000)
			const batches, batch = 120, 200 // about 24 MiB: two steps past the window at least
			for i := range batches {
				msgs := make([]*message.Message, batch)
				for j := range msgs {
					msgs[j] = storetest.Msg("T", 0, body)
				}
				if err := s.Append(msgs); err != nil {
					t.Fatalf("append %d: %v", i, err)
				}
			}
			end := s.StoredEnd()
			if c.window > 0 {
				// The trimmer runs behind the fsyncs, on its own goroutine.
				deadline := time.Now().Add(10 * time.Second)
				for s.Stats().CacheDropped.Load()+store.TrimStep <= end-window {
					if time.Now().After(deadline) {
						t.Fatalf("dropped below %d of %d after 10s", s.Stats().CacheDropped.Load(), end)
					}
					time.Sleep(time.Millisecond)
				}
			}
			dropped := s.Stats().CacheDropped.Load()
			old, recent := residency(t, dir, 0, end-window-store.TrimStep), residency(t, dir, end-window/2, end)
			t.Logf("end %d, dropped below %d: %.0f%% of the old pages and %.0f%% of the window's in memory", end, dropped, 100*old, 100*recent)
			if recent < 0.9 {
				t.Errorf("%.0f%% of the window's pages in memory, want them all", 100*recent)
			}
			if c.window > 0 && old > 0.05 {
				t.Errorf("%.0f%% of the pages behind the window still in memory", 100*old)
			}
			if c.window < 0 && (dropped != 0 || old < 0.9) {
				t.Errorf("with no window: dropped below %d, %.0f%% of the old pages in memory", dropped, 100*old)
			}
			got := storetest.ReadQueue(t, s, "T", 0, 0)
			if len(got) != batches*batch || got[0] != body || got[len(got)-1] != body {
				t.Fatalf("read back %d messages, want %d", len(got), batches*batch)
			}
		})
	}
}

// residency returns the fraction of the commit log's pages in [from, to)
// that are in the page cache. The store's log fits one segment here.
func residency(t *testing.T, dir string, from, to int64) float64 {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, "commitlog", "*"))
	if len(segs) != 1 {
		t.Fatalf("segments: %v", segs)
	}
	f, err := os.Open(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := int64(os.Getpagesize())
	from, to = from/page*page, to/page*page
	m, err := unix.Mmap(int(f.Fd()), from, int(to-from), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (to-from)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	in := 0
	for _, v := range vec {
		in += int(v & 1)
	}
	return float64(in) / float64(len(vec))
}
