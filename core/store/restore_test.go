package store_test

import (
	"bytes"
	"fmt"
	"io"
	"slices"
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

// replicatedWith opens a replicated store on fs at dir, leading a log of
// its own, appends n messages to topic (in rounds of 3) and sets the
// metadata value topic to "meta-"+topic.
func replicatedWith(t *testing.T, fs vfs.FS, dir, topic string, n int) (*store.Store, *memberLog, []string) {
	t.Helper()
	l := newMemberLog()
	s := storetest.Open(t, store.Options{Dir: dir, FS: fs, SegmentSize: 4 << 10, Replicator: l, Logger: quietLogger(),
		CheckpointInterval: time.Hour})
	l.join(s)
	s.Promote()
	var bodies []string
	for i := 0; i < n; i += 3 {
		var batch []*message.Message
		for j := i; j < min(n, i+3); j++ {
			body := fmt.Sprintf("%s-%d-%s", topic, j, bytes.Repeat([]byte("x"), 200))
			bodies = append(bodies, body)
			batch = append(batch, storetest.Msg(topic, 0, body))
		}
		if err := s.Append(batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutMeta(topic, []byte("meta-"+topic)); err != nil {
		t.Fatal(err)
	}
	return s, l, bodies
}

// TestRestoreDirAtomic restores a snapshot over a store, failing the
// restore's n-th filesystem operation and every one after it, for each n
// until the restore succeeds: the directory, opened with that failure
// behind it, and opened after a crash at that moment (only what was
// synced kept), holds either the complete old store or the complete
// snapshot.
func TestRestoreDirAtomic(t *testing.T) {
	// The snapshot: a store spanning several segments.
	src, srcLog, newBodies := replicatedWith(t, vfs.NewMem(), "/src", "New", 60)
	snap, err := src.TakeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var manifest bytes.Buffer
	if _, err := snap.WriteTo(&manifest); err != nil {
		t.Fatal(err)
	}
	_, stream, err := src.SnapshotStream(&manifest)
	if err != nil {
		t.Fatal(err)
	}
	full, err := io.ReadAll(stream)
	if err != nil {
		t.Fatal(err)
	}
	srcLog.stop()
	src.Close()

	// The store the snapshot replaces.
	base := vfs.NewCrashableMem()
	old, oldLog, oldBodies := replicatedWith(t, base, "/d", "Old", 25)
	oldLog.stop()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	// which opens the store on fs and reports which one it is.
	which := func(fs vfs.FS, n int, how string) string {
		t.Helper()
		s, err := store.Open(store.Options{Dir: "/d", FS: fs, SegmentSize: 4 << 10, Replicator: refuseAll{}, Logger: quietLogger()})
		if err != nil {
			t.Fatalf("op %d, %s: open: %v", n, how, err)
		}
		defer s.Close()
		oldQ, newQ := s.MaxOffset("Old", 0), s.MaxOffset("New", 0)
		oldM, _ := s.Meta("Old")
		newM, _ := s.Meta("New")
		switch {
		case oldQ > 0 && newQ == 0 && string(oldM) == "meta-Old" && newM == nil &&
			slices.Equal(storetest.ReadQueue(t, s, "Old", 0, 0), oldBodies):
			return "old"
		case newQ > 0 && oldQ == 0 && string(newM) == "meta-New" && oldM == nil &&
			slices.Equal(storetest.ReadQueue(t, s, "New", 0, 0), newBodies):
			return "new"
		}
		t.Fatalf("op %d, %s: the store holds %d old and %d new records, metadata %q and %q", n, how, oldQ, newQ, oldM, newM)
		return ""
	}

	seen := map[string]int{}
	for n := 1; ; n++ {
		mem := base.CrashClone(vfs.CrashCloneCfg{})
		var (
			ops     atomic.Int64
			once    sync.Once
			crashed *vfs.MemFS
		)
		inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
			k := ops.Add(1)
			if k < int64(n) {
				return nil
			}
			once.Do(func() { crashed = mem.CrashClone(vfs.CrashCloneCfg{}) })
			return errorfs.ErrInjected
		})
		err := store.RestoreDir(errorfs.Wrap(mem, inj), "/d", bytes.NewReader(full))
		if ops.Load() < int64(n) {
			// No operation failed: the restore is done.
			if err != nil {
				t.Fatalf("restore without a failure: %v", err)
			}
			if got := which(mem, n, "restored"); got != "new" {
				t.Fatalf("restored store is the %s one", got)
			}
			t.Logf("%d operations; after a failure the store opened as %v", n-1, seen)
			break
		}
		if err == nil {
			// A failure pebble absorbed in the background; the store
			// must still be one or the other.
			seen["no error"]++
		}
		seen[which(mem, n, "after the error")]++
		seen[which(crashed, n, "after a crash")]++
	}

	// The start after the restore swaps the snapshot in. It fails, or
	// crashes, at each of its operations in turn (the index's own files
	// fail no write: the index takes a failed write for a fatal error);
	// the next start opens the new store. So does one after a restore
	// that was cut short, begun on that crashed directory.
	restored := base.CrashClone(vfs.CrashCloneCfg{})
	if err := store.RestoreDir(restored, "/d", bytes.NewReader(full)); err != nil {
		t.Fatal(err)
	}
	for n := 1; ; n++ {
		mem := restored.CrashClone(vfs.CrashCloneCfg{})
		var (
			ops     atomic.Int64
			once    sync.Once
			crashed *vfs.MemFS
		)
		inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
			if ops.Add(1) < int64(n) {
				return nil
			}
			once.Do(func() { crashed = mem.CrashClone(vfs.CrashCloneCfg{}) })
			if op.Path == "/d/index" || strings.HasPrefix(op.Path, "/d/index/") {
				return nil
			}
			return errorfs.ErrInjected
		})
		s, err := store.Open(store.Options{Dir: "/d", FS: errorfs.Wrap(mem, inj), SegmentSize: 4 << 10,
			Replicator: refuseAll{}, Logger: quietLogger()})
		if err == nil {
			s.Close()
		}
		if crashed == nil {
			if err != nil {
				t.Fatalf("open without a failure: %v", err)
			}
			if got := which(mem, n, "swapped in"); got != "new" {
				t.Fatalf("the swapped-in store is the %s one", got)
			}
			t.Logf("the swap took %d operations", n-1)
			return
		}
		if got := which(mem, n, "after an error swapping in"); got != "new" {
			t.Fatalf("op %d: after an error swapping in, the store is the %s one", n, got)
		}
		cut := bytes.NewReader(full[:len(full)/2])
		if err := store.RestoreDir(crashed, "/d", cut); err == nil {
			t.Fatalf("op %d: a restore from half a snapshot succeeded", n)
		}
		if got := which(crashed, n, "after a crash swapping in"); got != "new" {
			t.Fatalf("op %d: after a crash swapping in, the store is the %s one", n, got)
		}
	}
}

// TestSnapshotCarriesComponentKeys installs a snapshot on a fresh store:
// the keys components keep (a timer index here, with its progress value
// saying how far it reaches) come across with the progress values, so a
// member that installs the snapshot finds the timers pending at it.
func TestSnapshotCarriesComponentKeys(t *testing.T) {
	src, l, _ := replicatedWith(t, vfs.NewMem(), "/src", "T", 10)
	timer := func(due, off int) []byte { return fmt.Appendf(nil, "t%08d-%08d", due, off) }
	for i := 0; i < 20; i++ {
		if err := src.PutKeys(timer(1000+i, i)); err != nil {
			t.Fatal(err)
		}
	}
	// Delivered timers' keys are gone.
	if err := src.DeleteKeys(timer(1000, 0), timer(1001, 1)); err != nil {
		t.Fatal(err)
	}
	if err := src.PutValues(store.KV{Key: []byte("f-block"), Value: []byte("filter")}); err != nil {
		t.Fatal(err)
	}
	src.SetProgress("sched/timer/indexed", 20)
	// A snapshot carries the values the set committed: wait for the
	// progress entry, which a commit that waits rides along with.
	if err := src.CommitOffsetSync("g", "T", 0, 1); err != nil {
		t.Fatal(err)
	}
	fs := snapshotInto(t, src, "/d")
	l.stop()
	src.Close()

	s := storetest.Open(t, store.Options{Dir: "/d", FS: fs, SegmentSize: 4 << 10, Replicator: refuseAll{}, Logger: quietLogger()})
	defer s.Close()
	if v, ok := s.Progress("sched/timer/indexed"); !ok || v != 20 {
		t.Fatalf("timer progress %d, %v", v, ok)
	}
	var pending []string
	if err := s.ScanKeys([]byte("t"), nil, func(k []byte) bool {
		pending = append(pending, string(k))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(pending) != 18 || pending[0] != string(timer(1002, 2)) || pending[17] != string(timer(1019, 19)) {
		t.Fatalf("after the install the timer index holds %d keys %q…, want the 18 pending", len(pending), pending[:min(3, len(pending))])
	}
	if v, ok, err := s.Value([]byte("f-block"), nil); err != nil || !ok || string(v) != "filter" {
		t.Fatalf("component value after the install: %q, %v, %v", v, ok, err)
	}
	if got := storetest.ReadQueue(t, s, "T", 0, 0); len(got) != 10 {
		t.Fatalf("%d records after the install, want 10", len(got))
	}
}

// TestSnapshotCarriesCommittedProgress takes a snapshot on a leader while
// an offset it took is still on its way to the log: the snapshot carries
// the offset the set committed, not the leader's newer one, so a member
// that installs it never holds a value the set does not.
func TestSnapshotCarriesCommittedProgress(t *testing.T) {
	l := newMemberLog()
	var holding atomic.Bool
	release, held := make(chan struct{}), make(chan struct{}, 1)
	l.hold = func([]byte) {
		if holding.Load() {
			select {
			case held <- struct{}{}:
			default:
			}
			<-release
		}
	}
	src := storetest.Open(t, store.Options{Dir: "/src", FS: vfs.NewMem(), SegmentSize: 4 << 10, Replicator: l, Logger: quietLogger(),
		CheckpointInterval: time.Hour})
	l.join(src)
	src.Promote()
	if err := src.CommitOffsetSync("g", "T", 0, 1); err != nil {
		t.Fatal(err)
	}
	holding.Store(true)
	if err := src.CommitOffset("g", "T", 0, 9); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the offset was never proposed")
	}
	if off, _ := src.ConsumerOffset("g", "T", 0); off != 9 {
		t.Fatalf("the leader reads %d, want its own 9", off)
	}
	fs := snapshotInto(t, src, "/d")
	close(release)
	l.stop()
	src.Close()
	s := storetest.Open(t, store.Options{Dir: "/d", FS: fs, SegmentSize: 4 << 10, Replicator: refuseAll{}, Logger: quietLogger()})
	defer s.Close()
	if off, ok := s.ConsumerOffset("g", "T", 0); !ok || off != 1 {
		t.Fatalf("the snapshot carries offset %d (%v), want the committed 1", off, ok)
	}
}

// snapshotInto takes a snapshot of src and restores it, as a member that
// installs it from the leader would, into dir of a new filesystem.
func snapshotInto(t *testing.T, src *store.Store, dir string) vfs.FS {
	t.Helper()
	snap, err := src.TakeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var manifest bytes.Buffer
	if _, err := snap.WriteTo(&manifest); err != nil {
		t.Fatal(err)
	}
	_, stream, err := src.SnapshotStream(&manifest)
	if err != nil {
		t.Fatal(err)
	}
	fs := vfs.NewMem()
	if err := store.RestoreDir(fs, dir, stream); err != nil {
		t.Fatal(err)
	}
	return fs
}
