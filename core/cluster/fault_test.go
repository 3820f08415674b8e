package cluster_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/cluster"
	"github.com/rmq-go/rmq/core/message"
)

// sameCommitLog fails the test unless m's commit log holds, byte for
// byte, what ref's holds, segment by segment up to the log's end.
func sameCommitLog(t *testing.T, ref, m *member) {
	t.Helper()
	lo, end := ref.node.Store().CommitLogOffsets()
	mlo, mend := m.node.Store().CommitLogOffsets()
	if lo != mlo || end != mend {
		t.Fatalf("%s's commit log spans [%d, %d), %s's [%d, %d)", m.opts.NodeID, mlo, mend, ref.opts.NodeID, lo, end)
	}
	size := ref.node.Store().SegmentSize()
	for base := lo - lo%size; base < end; base += size {
		n := min(size, end-base)
		read := func(x *member) []byte {
			b, err := os.ReadFile(filepath.Join(x.opts.Store.Dir, "commitlog", fmt.Sprintf("%020d", base)))
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(b)) < n {
				t.Fatalf("%s: segment %d holds %d bytes, the log %d", x.opts.NodeID, base, len(b), n)
			}
			return b[:n]
		}
		if !bytes.Equal(read(ref), read(m)) {
			t.Fatalf("%s's segment %d differs from %s's", m.opts.NodeID, base, ref.opts.NodeID)
		}
	}
}

// catchUp restarts m once its fault is cleared and checks it ends up
// with the leader's log, byte for byte.
func (s *set) catchUp(t *testing.T, m, l *member) {
	t.Helper()
	m.fault.Store(false)
	s.stop(m)
	s.restart(m)
	if err := m.node.Failed(); err != nil {
		t.Fatalf("restarted member failed again: %v", err)
	}
	if _, errs := appendN(l.node.Store(), "after-restart", 40); errs != 0 {
		t.Fatal("appends after the restart failed")
	}
	s.waitSame(l.node.Store())
	commit := l.node.Status().CommitIndex
	waitFor(t, "the restarted member applies the log", func() bool { return m.node.Status().AppliedIndex >= commit })
	sameCommitLog(t, l, m)
}

// TestLeaderDiskErrorStepsDown fails every commit-log write on the
// leader: it stops leading within 2 s, another member takes over and
// acknowledges appends, and once the fault is gone the old leader,
// restarted, catches up to the new one's log byte for byte.
func TestLeaderDiskErrorStepsDown(t *testing.T) {
	s := newSet(t, 3, nil)
	l := s.leader(nil)
	if _, errs := appendN(l.node.Store(), "before", 100); errs != 0 {
		t.Fatal("appends failed before the fault")
	}
	l.fault.Store(true)
	start := time.Now()
	if err := l.node.Store().Append([]*message.Message{msg("T", 0, "failing")}); err == nil {
		t.Fatal("an append was acknowledged while the leader's commit log fails")
	}
	var nl *member
	for nl == nil {
		if time.Since(start) > 2*time.Second {
			t.Fatalf("2 s after its disk failed, the leader still leads (%v) or no other member does", l.node.Leading())
		}
		for _, m := range s.members {
			if m != l && m.node.Leading() && m.node.Store().Writable() && !l.node.Leading() {
				nl = m
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%s leads %v after the fault", nl.opts.NodeID, time.Since(start).Round(time.Millisecond))
	if l.node.Failed() == nil || l.node.Store().Writable() {
		t.Fatalf("the failed member: failure %v, writable %v", l.node.Failed(), l.node.Store().Writable())
	}
	if _, errs := appendN(nl.node.Store(), "after", 200); errs != 0 {
		t.Fatalf("the two healthy members failed %d appends", errs)
	}
	s.catchUp(t, l, nl)
}

// TestFollowerDiskErrorStopsIt fails every commit-log write on a
// follower: it stops applying and leaves raft (it can no longer vote or
// be elected), the other two go on acknowledging, and once the fault is
// gone it is restarted and catches up to the leader's log byte for byte.
func TestFollowerDiskErrorStopsIt(t *testing.T) {
	s := newSet(t, 3, nil)
	l := s.leader(nil)
	var f *member
	for _, m := range s.members {
		if m != l {
			f = m
			break
		}
	}
	if _, errs := appendN(l.node.Store(), "before", 100); errs != 0 {
		t.Fatal("appends failed before the fault")
	}
	f.fault.Store(true)
	if _, errs := appendN(l.node.Store(), "during", 200); errs != 0 {
		t.Fatalf("%d appends failed with one follower's disk failing", errs)
	}
	waitFor(t, "the follower leaves raft", func() bool { return f.node.Status().State == "Shutdown" })
	if f.node.Failed() == nil {
		t.Fatal("the follower left raft without reporting its failure")
	}
	applied := f.node.Status().AppliedIndex
	if _, errs := appendN(l.node.Store(), "later", 100); errs != 0 {
		t.Fatalf("%d appends failed with the follower out", errs)
	}
	if st := f.node.Status(); st.AppliedIndex != applied || st.State != "Shutdown" {
		t.Fatalf("the failed follower went on: applied %d then %d, state %s", applied, st.AppliedIndex, st.State)
	}
	s.catchUp(t, f, l)
}

// TestFailedRestoreLeavesTheSet has a member far behind fail to write the
// snapshot it installs: it leaves the set instead of serving or applying
// from a partial store, raft's retries do not close its store twice, and
// the other two go on. Restarted with the disk mended, as after a crash
// in the middle of an install, it finishes the install from the snapshot
// raft kept before it opens its store.
func TestFailedRestoreLeavesTheSet(t *testing.T) {
	s := newSet(t, 3, func(o *cluster.Options) {
		o.SnapshotThreshold = 64
		o.TrailingLogs = 16
		o.TrailingDuration = -1 // raft's TrailingLogs alone, so the member needs a snapshot
	})
	l := s.leader(nil)
	var behind *member
	for _, m := range s.members {
		if m != l {
			behind = m
			break
		}
	}
	s.stop(behind)
	for i := range 3 {
		if _, errs := appendN(l.node.Store(), fmt.Sprint("late", i), 200); errs != 0 {
			t.Fatal("appends failed")
		}
	}
	if err := l.node.Snapshot(); err != nil {
		t.Fatal(err)
	}
	_, snapEnd := l.node.Store().CommitLogOffsets()
	behind.restoreFault.Store(true)
	s.restart(behind)
	waitFor(t, "the member whose restore failed leaves the set", func() bool { return behind.node.Failed() != nil })
	if _, errs := appendN(l.node.Store(), "after", 100); errs != 0 {
		t.Fatal("appends failed with one member out")
	}
	s.stop(behind) // closes nothing twice
	// Restarted with the disk mended, it installs the snapshot it had
	// received (raft's own store kept it, and counts it applied) and
	// catches up: as after a crash in the middle of an install.
	behind.restoreFault.Store(false)
	s.restart(behind)
	if _, end := behind.node.Store().CommitLogOffsets(); end < snapEnd {
		t.Fatalf("restarted, the member's commit log ends at %d, before the snapshot raft counts applied (%d)", end, snapEnd)
	}
	if err := behind.node.Failed(); err != nil {
		t.Fatalf("restarted member failed again: %v", err)
	}
	if _, errs := appendN(l.node.Store(), "after-restart", 40); errs != 0 {
		t.Fatal("appends after the restart failed")
	}
	s.waitSame(l.node.Store())
	commit := l.node.Status().CommitIndex
	waitFor(t, "the restarted member applies the log", func() bool {
		return behind.node.Failed() == nil && behind.node.Status().AppliedIndex >= commit
	})
	sameCommitLog(t, l, behind)
}
