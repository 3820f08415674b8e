package store_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// memberLog is an in-process replicated log: it orders the entries
// proposed to it and applies each, in that order and from one goroutine,
// to every member store, as raft does on commit. The first member's Apply
// error is the proposal's outcome.
type memberLog struct {
	props chan proposal
	quit  chan struct{}
	done  chan struct{}
	// hold, when set, is called with each entry before it is ordered;
	// the entries proposed meanwhile are ordered first. applied, when
	// set, is called with each entry and the first member's outcome.
	hold    func(entry []byte)
	applied func(entry []byte, err error)
	// proposed is signalled by every Propose call.
	proposed chan struct{}
	// ahead makes the log write each round into every member's commit
	// log (WriteRound, SyncRounds) before applying it, as a raft log
	// served from the commit log stores it.
	ahead bool

	mu      sync.Mutex
	log     [][]byte
	members []*store.Store
}

type proposal struct {
	entry []byte
	done  func(error)
}

var errLogStopped = errors.New("replicated log stopped")

// refuseAll is the Replicator of a member that never leads.
type refuseAll struct{}

func (refuseAll) Propose(_ []byte, done func(error)) { done(errors.New("not the leader")) }

func newMemberLog() *memberLog {
	l := &memberLog{props: make(chan proposal, 64), quit: make(chan struct{}), done: make(chan struct{}),
		proposed: make(chan struct{}, 1)}
	go l.run()
	return l
}

// Propose implements store.Replicator.
func (l *memberLog) Propose(entry []byte, done func(error)) {
	e := append([]byte(nil), entry...)
	select {
	case l.proposed <- struct{}{}:
	default:
	}
	if l.hold != nil {
		l.hold(e)
	}
	select {
	case l.props <- proposal{e, done}:
	case <-l.quit:
		done(errLogStopped)
	}
}

func (l *memberLog) run() {
	defer close(l.done)
	for {
		select {
		case p := <-l.props:
			l.mu.Lock()
			l.log = append(l.log, p.entry)
			members := l.members
			l.mu.Unlock()
			var err error
			for i, m := range members {
				if l.ahead {
					if _, _, ok, _ := store.ParseRound(p.entry); ok {
						e := m.WriteRound(p.entry)
						if e == nil {
							e = m.SyncRounds()
						}
						if e != nil {
							if i == 0 {
								err = e
							}
							continue
						}
					}
				}
				if e := m.Apply(p.entry); i == 0 {
					err = e
				}
			}
			if l.applied != nil {
				l.applied(p.entry, err)
			}
			p.done(err)
		case <-l.quit:
			return
		}
	}
}

// join makes s a member: it applies every entry ordered from now on.
func (l *memberLog) join(s *store.Store) {
	l.mu.Lock()
	l.members = append(l.members, s)
	l.mu.Unlock()
}

// entries returns the entries ordered so far.
func (l *memberLog) entries() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]byte(nil), l.log...)
}

// stop stops applying; proposals from then on fail.
func (l *memberLog) stop() {
	close(l.quit)
	<-l.done
}

// readOffsets reads queue 0 of topic by queue offset from 0 and returns
// the bodies; a hole, a gap or a record at another offset fails the test.
func readOffsets(t *testing.T, s *store.Store, topic string) []string {
	t.Helper()
	bodies := storetest.ReadQueue(t, s, topic, 0, 0)
	if n := s.MaxOffset(topic, 0); int64(len(bodies)) != n {
		t.Fatalf("%s: %d records read by queue offset, max offset %d", topic, len(bodies), n)
	}
	return bodies
}

// TestReplicaCutKeepsRebuiltBlocks crashes a replicated store whose last
// synced end lies well before the end of its log, in an index block that
// only the recovery scan rebuilds (its own write was never synced), with
// more blocks rebuilt after it: recovery cuts the log at the synced end,
// and every record below the cut must stay readable by queue offset.
// The rounds past the cut, applied again from the replicated log, then
// continue the queue without a hole.
func TestReplicaCutKeepsRebuiltBlocks(t *testing.T) {
	mem := vfs.NewCrashableMem()
	l := newMemberLog()
	o := store.Options{Dir: "/d", FS: mem, SegmentSize: 1 << 20, Replicator: l, Logger: quietLogger(),
		CheckpointInterval: time.Hour, FlushInterval: time.Hour}
	s := storetest.Open(t, o)
	l.join(s)
	s.Promote()
	var want []string
	appendN := func(n, per int) {
		t.Helper()
		for i := 0; i < n; i += per {
			var batch []*message.Message
			for j := i; j < min(n, i+per); j++ {
				body := fmt.Sprint("m", len(want))
				want = append(want, body)
				batch = append(batch, storetest.Msg("R", 0, body))
			}
			if err := s.Append(batch); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Block 0 complete and block 1 begun; all of it synced, index and
	// synced end included.
	appendN(70, 10)
	if err := s.SyncReplicated(); err != nil {
		t.Fatal(err)
	}
	// Blocks 1 to 3 complete and block 4 begun; the log is synced but the
	// synced end is not recorded, and the index writes are lost.
	appendN(200, 10)
	if err := s.SyncLogOnly(); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	l.stop()
	s.Close()
	entries := l.entries()

	o.FS = crashed
	l2 := newMemberLog()
	o.Replicator = l2
	s2 := storetest.Open(t, o)
	if got := readOffsets(t, s2, "R"); len(got) != 70 {
		t.Fatalf("%d records readable by queue offset below the cut, want 70", len(got))
	}
	// The set's log replays every entry; those past the cut are written
	// again at their offsets.
	for i, e := range entries {
		if err := s2.Apply(e); err != nil {
			t.Fatalf("replaying entry %d: %v", i, err)
		}
	}
	if got := readOffsets(t, s2, "R"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the replay: %d records read by queue offset, want %d", len(got), len(want))
	}
	l2.stop()
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	s3 := storetest.Open(t, o)
	defer s3.Close()
	if got := readOffsets(t, s3, "R"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after reopening: %d records, want %d", len(got), len(want))
	}
}

// TestReplicatedDeleteUnderAppends deletes a topic again and again while
// appends to it and to another topic go on, with a replicated log that
// orders each deletion after the next entry proposed while it is being
// proposed (waiting up to 20 ms for one), as raft may order two
// proposals that race. Every deletion
// DeleteTopic reports done must have been applied at the offset it was
// proposed at, and the leader and a follower must end with the same
// queues, every record readable by queue offset.
func TestReplicatedDeleteUnderAppends(t *testing.T) {
	l := newMemberLog()
	o := store.Options{SegmentSize: 1 << 20, Logger: quietLogger(), CheckpointInterval: time.Hour, MaxPendingBytes: 8 << 10}
	lo, fo := o, o
	lo.Dir, lo.Replicator = t.TempDir(), l
	fo.Dir, fo.Replicator = t.TempDir(), refuseAll{}
	leader := storetest.Open(t, lo)
	defer leader.Close()
	follower := storetest.Open(t, fo)
	defer follower.Close()
	l.join(leader)
	l.join(follower)
	var (
		mu      sync.Mutex
		skipped []string
	)
	l.hold = func(e []byte) {
		if e[0] != 'T' { // a topic deletion: 'T' at(8) topic
			return
		}
		select {
		case <-l.proposed: // this deletion's own
		default:
		}
		select {
		case <-l.proposed:
		case <-time.After(20 * time.Millisecond):
		}
	}
	l.applied = func(e []byte, err error) {
		if e[0] != 'T' || err != nil {
			return
		}
		at, topic := int64(binary.BigEndian.Uint64(e[1:9])), string(e[9:])
		if got, ok := leader.DeletedAt(topic); !ok || got != at {
			mu.Lock()
			skipped = append(skipped, fmt.Sprintf("%s at %d (the store keeps %d, %v)", topic, at, got, ok))
			mu.Unlock()
		}
	}
	leader.Promote()

	var (
		stop atomic.Bool
		wg   sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			topic := []string{"D", "U"}[w%2]
			for i := 0; !stop.Load(); i++ {
				m := storetest.Msg(topic, int32(w/2), fmt.Sprintf("w%d-%d", w, i))
				if err := leader.Append([]*message.Message{m}); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		}()
	}
	deletions := 30
	for i := 0; i < deletions; i++ {
		for n := leader.Stats().Appends.Load() + 50; leader.Stats().Appends.Load() < n; {
			runtime.Gosched()
		}
		if err := leader.DeleteTopic("D"); err != nil {
			t.Errorf("deletion %d: %v", i, err)
		}
	}
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	if len(skipped) > 0 {
		t.Errorf("%d of %d deletions reported done were not applied: %v", len(skipped), deletions, skipped)
	}
	mu.Unlock()
	// The follower applied every entry the leader did.
	if err := leader.Append([]*message.Message{storetest.Msg("U", 9, "last")}); err != nil {
		t.Fatal(err)
	}
	l.stop()
	queues := func(s *store.Store) map[string][]string {
		out := map[string][]string{}
		for _, q := range s.Queues() {
			out[fmt.Sprintf("%s/%d", q.Topic, q.QueueID)] = storetest.ReadQueue(t, s, q.Topic, q.QueueID, q.MinOffset)
		}
		return out
	}
	lq, fq := queues(leader), queues(follower)
	if len(lq) != len(fq) {
		t.Fatalf("leader has %d queues, follower %d", len(lq), len(fq))
	}
	for k, want := range lq {
		if got := fq[k]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("queue %s: leader holds %d records, follower %d", k, len(want), len(got))
		}
	}
}

// leadingStore opens a replicated store, the only member of its log, and
// promotes it; both stop when the test ends.
func leadingStore(t *testing.T) (*memberLog, *store.Store) {
	t.Helper()
	l := newMemberLog()
	t.Cleanup(l.stop)
	s := storetest.Open(t, store.Options{Dir: t.TempDir(), SegmentSize: 1 << 20, Replicator: l, Logger: quietLogger(), CheckpointInterval: time.Hour})
	t.Cleanup(func() { s.Close() })
	l.join(s)
	s.Promote()
	return l, s
}

// TestRoundOfAnEarlierLeadershipIsNotProposed demotes and promotes a
// leader while the flusher holds a round it took before the demotion and
// has not proposed yet. Its offsets belong to the earlier leadership,
// and the first round of the new one takes them again: the old round
// must fail, not be proposed, and every acknowledged message must stay
// readable at its queue offset.
func TestRoundOfAnEarlierLeadershipIsNotProposed(t *testing.T) {
	_, s := leadingStore(t)

	release := s.HoldApply()
	old := make(chan error, 1)
	if err := s.AppendAsync([]*message.Message{storetest.Msg("L", 0, "before")}, func(err error) { old <- err }); err != nil {
		t.Fatal(err)
	}
	for !s.RoundTaken() {
		runtime.Gosched()
	}
	s.ReelectHeld(errors.New("leadership lost"))
	release()
	if err := s.Append([]*message.Message{storetest.Msg("L", 0, "after")}); err != nil {
		t.Fatal(err)
	}
	want := []string{"after"}
	if err := <-old; err == nil {
		want = []string{"before", "after"}
	} else if !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("the held round failed with %v, want ErrNotLeader", err)
	}
	if got := readOffsets(t, s, "L"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("queue holds %q, want %q", got, want)
	}
}

// TestDeletionAfterATakenRound deletes a topic while the flusher holds a
// round of it, taken from pending and not yet proposed: the deletion
// must go into the log after that round (it was asked for after the
// round's appends), never before it.
func TestDeletionAfterATakenRound(t *testing.T) {
	l, s := leadingStore(t)
	proposed := make(chan byte, 4)
	l.hold = func(e []byte) { proposed <- e[0] }

	release := s.HoldApply()
	appended := make(chan error, 1)
	if err := s.AppendAsync([]*message.Message{storetest.Msg("D", 0, "m")}, func(err error) { appended <- err }); err != nil {
		release()
		t.Fatal(err)
	}
	for !s.RoundTaken() {
		runtime.Gosched()
	}
	deleted := make(chan error, 1)
	go func() { deleted <- s.DeleteTopic("D") }()
	// The round cannot be proposed while the lock is held; a deletion
	// proposed meanwhile would come before it.
	select {
	case kind := <-proposed:
		release()
		t.Fatalf("entry %q proposed before the round the flusher holds", kind)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	var kinds []byte
	for _, e := range l.entries() {
		kinds = append(kinds, e[0])
	}
	if string(kinds) != "RT" {
		t.Fatalf("log holds entries %q, want the round, then the deletion", kinds)
	}
}
