package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// source appends n batches of per messages to a member of its own and
// returns its entries, their number and the bodies.
func source(t *testing.T, tag string, n, per int) (map[uint64][]byte, uint64, []string) {
	t.Helper()
	src := openMember(t, t.TempDir(), true)
	src.st.Promote()
	want := src.appendN(t, tag, n, per)
	src.close(t)
	return src.lb.entries, src.lb.next, want
}

// storeRange stores entries from to to in logs, as a follower does.
func storeRange(t *testing.T, logs *logStore, entries map[uint64][]byte, from, to, term uint64) {
	t.Helper()
	var batch []*raft.Log
	for i := from; i <= to; i++ {
		batch = append(batch, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: entries[i], AppendedAt: time.Now()})
	}
	if err := logs.StoreLogs(batch); err != nil {
		t.Fatalf("storing entries %d to %d: %v", from, to, err)
	}
}

// applyRange applies entries from to to, as raft does once committed.
func applyRange(t *testing.T, st *store.Store, entries map[uint64][]byte, from, to uint64) {
	t.Helper()
	for i := from; i <= to; i++ {
		if err := st.Apply(entries[i]); err != nil {
			t.Fatalf("applying entry %d: %v", i, err)
		}
	}
}

func roundEnd(t *testing.T, e []byte) int64 {
	t.Helper()
	_, end, ok, err := roundSpan(&raft.Log{Type: raft.LogCommand, Data: e})
	if !ok || err != nil {
		t.Fatalf("not a round: %v", err)
	}
	return end
}

// TestReconcileTornStoreLogs: a member crashed after StoreLogs synced a
// batch's rounds into the commit log and before the WAL stored their
// pointers. Reopened, its commit log ends at the WAL's last round, and
// the leader's sending the batch again is stored and applied.
func TestReconcileTornStoreLogs(t *testing.T) {
	entries, n, want := source(t, "torn", 12, 3)
	k := n - 4
	dir := t.TempDir()
	m := openMember(t, dir, true)
	storeRange(t, m.logs, entries, 1, k, 1)
	for i := k + 1; i <= n; i++ {
		if err := m.st.WriteRound(entries[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.st.SyncRounds(); err != nil {
		t.Fatal(err)
	}
	applyRange(t, m.st, entries, 1, 3)
	m.close(t)

	m = openMember(t, dir, true)
	defer m.close(t)
	if got, want := m.st.StoredEnd(), roundEnd(t, entries[k]); got != want {
		t.Fatalf("reopened, the stored rounds end at %d, want the WAL's last round's end %d", got, want)
	}
	storeRange(t, m.logs, entries, k+1, n, 1)
	applyRange(t, m.st, entries, 1, n)
	if got := readBodies(t, m.st); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
}

// TestReconcileAfterConflict: a follower stores one leader's rounds,
// raft cuts the uncommitted tail, the next leader's rounds take the same
// offsets, and the member stops before applying them. Reopened, it reads
// the new leader's entries and applies them.
func TestReconcileAfterConflict(t *testing.T) {
	one, oneN, oneBodies := source(t, "one", 4, 3)
	// The second leader applied one's first round, then took writes.
	two := openMember(t, t.TempDir(), true)
	storeRange(t, two.logs, one, 1, 1, 1)
	applyRange(t, two.st, one, 1, 1)
	two.lb.next = 1
	two.lb.entries[1] = one[1]
	two.st.Promote()
	twoBodies := two.appendN(t, "two", 3, 2)
	two.close(t)

	dir := t.TempDir()
	f := openMember(t, dir, true)
	storeRange(t, f.logs, one, 1, oneN, 1)
	applyRange(t, f.st, one, 1, 1)
	if err := f.logs.DeleteRange(2, oneN); err != nil {
		t.Fatal(err)
	}
	storeRange(t, f.logs, two.lb.entries, 2, two.lb.next, 2)
	f.close(t)

	f = openMember(t, dir, true)
	defer f.close(t)
	if got, want := f.st.StoredEnd(), roundEnd(t, two.lb.entries[two.lb.next]); got != want {
		t.Fatalf("reopened, the stored rounds end at %d, want %d", got, want)
	}
	checkEntries(t, f.logs, two.lb.entries)
	applyRange(t, f.st, two.lb.entries, 1, two.lb.next)
	want := append(oneBodies[:3:3], twoBodies...)
	if got := readBodies(t, f.st); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
}

// TestReconcileOldWholeEntries: a member whose WAL holds whole rounds it
// had not applied when it stopped (before the pointer log, rounds were
// written only at their apply, without fsync) writes them into its
// commit log when it opens with the pointer log, so the next rounds are
// stored after them, and everything applies.
func TestReconcileOldWholeEntries(t *testing.T) {
	entries, n, want := source(t, "w", 10, 3)
	dir := t.TempDir()
	old := openMember(t, dir, false)
	storeRange(t, old.logs, entries, 1, n-2, 1)
	applyRange(t, old.st, entries, 1, 4)
	old.close(t)

	m := openMember(t, dir, true)
	defer m.close(t)
	var l raft.Log
	if err := m.logs.WAL.GetLog(n-2, &l); err != nil || isPointer(&l) {
		t.Fatalf("entry %d: pointer %v, %v; want it whole", n-2, isPointer(&l), err)
	}
	storeRange(t, m.logs, entries, n-1, n, 1)
	if err := m.logs.WAL.GetLog(n, &l); err != nil || !isPointer(&l) {
		t.Fatalf("entry %d: pointer %v, %v; want a pointer", n, isPointer(&l), err)
	}
	checkEntries(t, m.logs, entries)
	applyRange(t, m.st, entries, 1, n)
	if got := readBodies(t, m.st); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
}

// retainAnHour tunes a store to small segments that retention, run by
// the test, deletes an hour after their last write by *now.
func retainAnHour(now *time.Time) func(*store.Options) {
	return func(o *store.Options) {
		o.SegmentSize = 16 << 10
		o.Retention = time.Hour
		o.RetentionInterval = time.Hour // run by the test
		o.DiskHighWater = -1
		o.Now = func() time.Time { return *now }
	}
}

// TestRetentionKeepsRoundsAfterSnapshot: a member's retention, told to
// delete every sealed segment, keeps those holding the rounds after its
// newest snapshot (a restart replays them from the commit log), and a
// pointer whose round it deleted answers raft.ErrLogNotFound.
func TestRetentionKeepsRoundsAfterSnapshot(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	retain := retainAnHour(&now)
	m := openMember(t, dir, true, retain)
	m.st.Promote()
	want := m.appendN(t, "r", 40, 2)
	entries, n := m.lb.entries, m.lb.next
	m.close(t)

	now = now.Add(2 * time.Hour)
	snap := n / 2
	m = openMemberAt(t, dir, true, snap, retain)
	defer m.close(t)
	deleted, err := m.st.RunRetention()
	if err != nil {
		t.Fatal(err)
	}
	if deleted == 0 {
		t.Fatal("retention deleted nothing before the snapshot")
	}
	for i := snap + 1; i <= n; i++ {
		var l raft.Log
		if err := m.logs.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d, after the snapshot at %d: %v", i, snap, err)
		}
	}
	var l raft.Log
	if err := m.logs.GetLog(1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("entry 1, its round deleted: %v, want raft.ErrLogNotFound", err)
	}
	applyRange(t, m.st, entries, snap+1, n)
	if got := storetest.ReadQueue(t, m.st, "P", 0, m.st.MinOffset("P", 0)); len(got) == 0 || fmt.Sprint(got) != fmt.Sprint(want[len(want)-len(got):]) {
		t.Fatalf("read %d records after retention, not the last of the %d appended", len(got), len(want))
	}
}

// TestReconcileAfterInstall: a member whose store was replaced by an
// installed snapshot, and that stopped before raft removed the log the
// snapshot replaced, opens with that log removed when the snapshot
// covers its entries; a pointer past the commit log that no snapshot
// covers keeps the member from opening.
func TestReconcileAfterInstall(t *testing.T) {
	entries, n, _ := source(t, "i", 6, 3)
	dir := t.TempDir()
	m := openMember(t, dir, true)
	storeRange(t, m.logs, entries, 1, n, 1)
	m.close(t)
	// The installed store: empty here, its snapshot covering entry n.
	if err := os.RemoveAll(filepath.Join(dir, "store")); err != nil {
		t.Fatal(err)
	}

	logs, err := openLogStore(dir, retention{}, 0, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(storeOptions(dir, refuseAll{}, true))
	if err != nil {
		t.Fatal(err)
	}
	logs.rounds = func() *store.Store { return st }
	if err := reconcileRounds(logs, st, 0); !errors.Is(err, store.ErrCorruption) {
		t.Fatalf("a pointer past the commit log, no snapshot covering it: %v, want ErrCorruption", err)
	}
	if err := reconcileRounds(logs, st, n); err != nil {
		t.Fatal(err)
	}
	if last, err := logs.LastIndex(); err != nil || last != 0 {
		t.Fatalf("the log the snapshot replaced ends at %d (%v), want it removed", last, err)
	}
	st.Close()
	logs.Close()
}

// refuseAll is the Replicator of a store that never leads.
type refuseAll struct{}

func (refuseAll) Propose(_ []byte, done func(error)) { done(errors.New("not the leader")) }

// TestReconcileTornStoreLogsCrash is TestReconcileTornStoreLogs with a
// crash of the store's filesystem, keeping only what was synced, at the
// point where StoreLogs has synced the batch's rounds and the WAL has not
// stored their pointers; some of the stored rounds were applied, and the
// applied end recorded for part of them only.
func TestReconcileTornStoreLogsCrash(t *testing.T) {
	entries, n, want := source(t, "crash", 12, 3)
	k := n - 4
	dir := t.TempDir()
	mem := vfs.NewCrashableMem()
	onMem := func(fs vfs.FS) func(*store.Options) { return func(o *store.Options) { o.FS = fs; o.Dir = "/store" } }
	m := openMember(t, dir, true, onMem(mem))
	storeRange(t, m.logs, entries, 1, k, 1)
	applyRange(t, m.st, entries, 1, 2)
	if err := m.st.SyncReplicated(); err != nil {
		t.Fatal(err)
	}
	applyRange(t, m.st, entries, 3, 5)
	for i := k + 1; i <= n; i++ {
		if err := m.st.WriteRound(entries[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.st.SyncRounds(); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	m.close(t)

	m = openMember(t, dir, true, onMem(crashed))
	defer m.close(t)
	if got, want := m.st.StoredEnd(), roundEnd(t, entries[k]); got != want {
		t.Fatalf("after the crash, the stored rounds end at %d, want the WAL's last round's end %d", got, want)
	}
	if _, applied := m.st.CommitLogOffsets(); applied != roundEnd(t, entries[2]) {
		t.Fatalf("after the crash, the applied end is %d, want the recorded %d", applied, roundEnd(t, entries[2]))
	}
	storeRange(t, m.logs, entries, k+1, n, 1)
	applyRange(t, m.st, entries, 1, n)
	if got := readBodies(t, m.st); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
}

// TestLogKeepsReadableRounds: raft's compaction of a pointer log leaves
// every entry whose round the commit log still holds, however old, so a
// member away longer than the retention's age catches up from the log
// for as long as the leader's commit log keeps what it missed; the
// entries before the first round retention deleted go.
func TestLogKeepsReadableRounds(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	retain := retainAnHour(&now)
	m := openMember(t, dir, true, retain)
	m.st.Promote()
	m.appendN(t, "k", 40, 2)
	n := m.lb.next
	m.close(t)

	now = now.Add(2 * time.Hour)
	m = openMemberAt(t, dir, true, n/2, retain)
	defer m.close(t)
	if deleted, err := m.st.RunRetention(); err != nil || deleted == 0 {
		t.Fatalf("retention deleted %d segments (%v), want some", deleted, err)
	}
	// The first entry whose round is still readable, and every one after.
	readable := n + 1
	for i := n; i >= 1; i-- {
		var l raft.Log
		if err := m.logs.GetLog(i, &l); errors.Is(err, raft.ErrLogNotFound) {
			break
		} else if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		readable = i
	}
	if readable <= 1 || readable > n/2+1 {
		t.Fatalf("entries readable from %d of 1..%d, want retention to have deleted some before the snapshot at %d", readable, n, n/2)
	}
	// Every entry is older than the retention's minute: only the rounds'
	// bytes keep them.
	m.logs.keep = retention{age: time.Minute, bytes: 1 << 30}
	m.logs.now = func() time.Time { return now }
	if err := m.logs.DeleteRange(1, n-1); err != nil {
		t.Fatal(err)
	}
	first, err := m.logs.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first > readable {
		t.Fatalf("compaction left entries %d..%d: it dropped readable ones from %d", first, n, readable)
	}
	var l raft.Log
	if err := m.logs.GetLog(first, &l); err != nil {
		t.Fatalf("the first entry kept, %d: %v", first, err)
	}
	if first < readable {
		t.Fatalf("compaction left entries %d..%d: more than the readable ones from %d", first, n, readable)
	}
}
