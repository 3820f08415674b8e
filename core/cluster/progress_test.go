package cluster_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rmq-go/rmq/core/cluster"
	"github.com/rmq-go/rmq/core/store"
)

// TestCommittedOffsetsSurviveLeaderLoss commits offsets on the leader
// and stops it at once, before any checkpoint could propose them: the
// new leader has every one. A follower refuses offset commits.
func TestCommittedOffsetsSurviveLeaderLoss(t *testing.T) {
	s := newSet(t, 3, func(o *cluster.Options) { o.Store.CheckpointInterval = time.Hour })
	l := s.leader(nil)
	st := l.node.Store()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if err := st.CommitOffsetSync(fmt.Sprint("g", g), "T", int32(i%4), int64(i+1)); err != nil {
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
	for _, m := range s.members {
		if m == l {
			continue
		}
		if err := m.node.Store().CommitOffset("g0", "T", 0, 1000); !errors.Is(err, store.ErrNotLeader) {
			t.Fatalf("an offset commit on follower %s: %v", m.opts.NodeID, err)
		}
	}
	s.stop(l)
	nl := s.leader(l)
	for g := range 8 {
		for q := range int32(4) {
			want := int64(49-(49-q)%4) + 1 // the last i with i%4 == q, plus one
			if off, ok := nl.node.Store().ConsumerOffset(fmt.Sprint("g", g), "T", q); !ok || off != want {
				t.Fatalf("group g%d queue %d on the new leader: %d %v, want %d", g, q, off, ok, want)
			}
		}
	}
}

// TestSnapshotKeepsProgress has a follower take a snapshot and then crash
// before any checkpoint: raft replays nothing before the snapshot, so the
// offsets it applied before must have reached its disk with it.
func TestSnapshotKeepsProgress(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := newSet(t, 3, func(o *cluster.Options) {
		o.Store.CheckpointInterval = time.Hour
		if o.NodeID == "n2" {
			o.Store.FS, o.Store.Dir = mem, "/store"
		}
	})
	l := s.leader(nil)
	f := s.members[2]
	if f == l {
		l.node.StepDown()
		l = s.leader(f)
	}
	if _, errs := appendN(l.node.Store(), "m", 40); errs != 0 {
		t.Fatal("appends failed")
	}
	if err := l.node.Store().CommitOffsetSync("g", "T", 1, 7); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the follower applies the offset", func() bool {
		off, ok := f.node.Store().ConsumerOffset("g", "T", 1)
		return ok && off == 7
	})
	if err := f.node.Snapshot(); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	s.stop(f)
	f.opts.Store.FS = crashed
	s.restart(f)
	commit := l.node.Status().CommitIndex
	waitFor(t, "the restarted member applies the log", func() bool { return f.node.Status().AppliedIndex >= commit })
	if off, ok := f.node.Store().ConsumerOffset("g", "T", 1); !ok || off != 7 {
		t.Fatalf("the offset after a crash past a snapshot: %d %v", off, ok)
	}
}

// TestDemotedLeaderDropsUncommittedProgress cuts the leader off and has
// it take an offset commit before its lease runs out: the set never
// commits it, so once demoted the member holds the set's offset again,
// not its own.
func TestDemotedLeaderDropsUncommittedProgress(t *testing.T) {
	s := newSet(t, 3, func(o *cluster.Options) { o.Store.CheckpointInterval = time.Hour })
	old := s.leader(nil)
	if err := old.node.Store().CommitOffsetSync("g", "T", 0, 5); err != nil {
		t.Fatal(err)
	}
	old.layer.partition(true)
	if err := old.node.Store().CommitOffset("g", "T", 0, 9); err != nil {
		t.Skipf("the cut-off leader was demoted before the commit: %v", err)
	}
	waitFor(t, "the cut-off leader is demoted", func() bool { return !old.node.Store().Writable() })
	if off, ok := old.node.Store().ConsumerOffset("g", "T", 0); !ok || off != 5 {
		t.Fatalf("the demoted member's offset: %d %v, the set's is 5", off, ok)
	}
	nl := s.leader(old)
	old.layer.partition(false)
	if off, ok := nl.node.Store().ConsumerOffset("g", "T", 0); !ok || off != 5 {
		t.Fatalf("the new leader's offset: %d %v, want 5", off, ok)
	}
}
