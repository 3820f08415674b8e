package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// loopback is a one-member replicated log for the pointer log's tests:
// it gives each proposal the next index, stores it in logs (as raft's
// leader stores its own entries) and applies it to st, one at a time and
// in the order proposed.
type loopback struct {
	logs    *logStore
	st      *store.Store
	next    uint64
	entries map[uint64][]byte
	props   chan loopProposal
	done    chan struct{}
}

type loopProposal struct {
	entry []byte
	done  func(error)
}

func newLoopback() *loopback {
	lb := &loopback{entries: map[uint64][]byte{}, props: make(chan loopProposal, 16), done: make(chan struct{})}
	go lb.run()
	return lb
}

func (lb *loopback) Propose(entry []byte, done func(error)) {
	lb.props <- loopProposal{bytes.Clone(entry), done}
}

func (lb *loopback) run() {
	defer close(lb.done)
	for p := range lb.props {
		lb.next++
		lb.entries[lb.next] = p.entry
		l := &raft.Log{Index: lb.next, Term: 1, Type: raft.LogCommand, Data: p.entry, AppendedAt: time.Now()}
		if err := lb.logs.StoreLogs([]*raft.Log{l}); err != nil {
			p.done(err)
			continue
		}
		p.done(lb.st.Apply(p.entry))
	}
}

// stop ends the log; the entries are read only after it.
func (lb *loopback) stop() {
	close(lb.props)
	<-lb.done
}

// member is a store and its pointer log in dir.
type member struct {
	dir  string
	lb   *loopback
	st   *store.Store
	logs *logStore
}

func storeOptions(dir string, r store.Replicator, ahead bool) store.Options {
	return store.Options{Dir: filepath.Join(dir, "store"), SegmentSize: 64 << 10, Replicator: r, WriteAhead: ahead,
		FlushInterval: time.Hour, CheckpointInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)}
}

// openMember opens a member whose store writes rounds ahead (pointers
// true) or at their apply, as members did before the pointer log.
// A member with pointers reconciles its store with its log as Node.Open
// does, taking snapIndex for its newest snapshot's; tune changes the
// store's options.
func openMember(t *testing.T, dir string, pointers bool, tune ...func(*store.Options)) *member {
	t.Helper()
	return openMemberAt(t, dir, pointers, 0, tune...)
}

func openMemberAt(t *testing.T, dir string, pointers bool, snapIndex uint64, tune ...func(*store.Options)) *member {
	t.Helper()
	m := &member{dir: dir, lb: newLoopback()}
	logs, err := openLogStore(dir, retention{}, 0, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	o := storeOptions(dir, m.lb, pointers)
	for _, fn := range tune {
		fn(&o)
	}
	st, err := store.Open(o)
	if err != nil {
		logs.Close()
		t.Fatal(err)
	}
	m.st, m.logs = st, logs
	m.lb.st, m.lb.logs = st, logs
	if pointers {
		logs.rounds = func() *store.Store { return st }
		if err := reconcileRounds(logs, st, snapIndex); err != nil {
			m.close(t)
			t.Fatal(err)
		}
	}
	if last, err := logs.LastIndex(); err == nil {
		m.lb.next = last
	}
	return m
}

func (m *member) close(t *testing.T) {
	t.Helper()
	m.lb.stop()
	if err := m.st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.logs.Close(); err != nil {
		t.Fatal(err)
	}
}

// appendN appends n batches of per messages of tag and returns the bodies.
func (m *member) appendN(t *testing.T, tag string, n, per int) []string {
	t.Helper()
	var bodies []string
	for i := 0; i < n; i++ {
		var batch []*message.Message
		for j := 0; j < per; j++ {
			body := fmt.Sprintf("%s%d-%s", tag, len(bodies), strings.Repeat("p", 900))
			bodies = append(bodies, body)
			batch = append(batch, storetest.Msg("P", 0, body))
		}
		if err := m.st.Append(batch); err != nil {
			t.Fatal(err)
		}
	}
	return bodies
}

func readBodies(t *testing.T, st *store.Store) []string {
	t.Helper()
	return storetest.ReadQueue(t, st, "P", 0, 0)
}

// checkEntries reads every entry of the log back through GetLog and
// compares it with what was proposed.
func checkEntries(t *testing.T, logs *logStore, want map[uint64][]byte) {
	t.Helper()
	for i, e := range want {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if !bytes.Equal(l.Data, e) {
			t.Fatalf("entry %d: read back %d bytes differing from the %d proposed", i, len(l.Data), len(e))
		}
	}
}

// TestPointerLogRoundTrip: every entry a member proposes reads back from
// its pointer log exactly as proposed, before and after reopening; the
// WAL holds pointers, not the rounds' bytes.
func TestPointerLogRoundTrip(t *testing.T) {
	dir := t.TempDir()
	m := openMember(t, dir, true)
	m.st.Promote()
	want := m.appendN(t, "a", 30, 4)
	if err := m.st.PutMeta("topic/P", []byte("cfg")); err != nil {
		t.Fatal(err)
	}
	want = append(want, m.appendN(t, "b", 10, 1)...)
	entries := m.lb.entries
	rounds := 0
	for i := range entries {
		var l raft.Log
		if err := m.logs.WAL.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if isPointer(&l) {
			rounds++
			if len(l.Data) > 100 {
				t.Fatalf("entry %d: a pointer of %d bytes", i, len(l.Data))
			}
		}
	}
	if rounds < 20 {
		t.Fatalf("%d pointers among %d entries, want most", rounds, len(entries))
	}
	checkEntries(t, m.logs, entries)
	if got := readBodies(t, m.st); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	m.close(t)

	m = openMember(t, dir, true)
	defer m.close(t)
	checkEntries(t, m.logs, entries)
	if got := readBodies(t, m.st); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after reopening: read %d records, want %d", len(got), len(want))
	}
}

// TestPointerLogOldEntries: a member whose WAL holds whole round entries
// (stored before the pointer log) reads them back as they are once it
// keeps pointers, and stores its next rounds as pointers after them.
func TestPointerLogOldEntries(t *testing.T) {
	dir := t.TempDir()
	m := openMember(t, dir, false)
	m.st.Promote()
	want := m.appendN(t, "old", 10, 3)
	old := m.lb.entries
	m.close(t)

	m = openMember(t, dir, true)
	defer m.close(t)
	var l raft.Log
	for i := range old {
		if err := m.logs.WAL.GetLog(i, &l); err != nil || isPointer(&l) {
			t.Fatalf("entry %d of the old WAL: pointer %v, %v", i, isPointer(&l), err)
		}
	}
	checkEntries(t, m.logs, old)
	m.st.Promote()
	want = append(want, m.appendN(t, "new", 10, 3)...)
	checkEntries(t, m.logs, m.lb.entries)
	if err := m.logs.WAL.GetLog(m.lb.next, &l); err != nil || !isPointer(&l) {
		t.Fatalf("the last entry: pointer %v, %v", isPointer(&l), err)
	}
	if got := readBodies(t, m.st); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
}

// TestPointerLogConflict: a follower stores a leader's rounds, raft cuts
// the uncommitted tail, and the rounds of the next leader take the same
// offsets: GetLog returns the new leader's entries. A pointer whose
// bytes changed behind the WAL's back, or that points past the stored
// rounds, is an error, never other bytes.
func TestPointerLogConflict(t *testing.T) {
	one := openMember(t, t.TempDir(), true)
	defer one.close(t)
	one.st.Promote()
	one.appendN(t, "one", 4, 3)
	two := openMember(t, t.TempDir(), true)
	defer two.close(t)
	two.lb.entries[1] = one.lb.entries[1] // both start from one's first round
	if err := two.logs.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: one.lb.entries[1]}}); err != nil {
		t.Fatal(err)
	}
	if err := two.st.Apply(one.lb.entries[1]); err != nil {
		t.Fatal(err)
	}
	two.lb.next = 1
	two.st.Promote()
	two.appendN(t, "two", 3, 2)

	f := openMember(t, t.TempDir(), true)
	defer f.close(t)
	var logs []*raft.Log
	for i := uint64(1); i <= one.lb.next; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: one.lb.entries[i]})
	}
	if err := f.logs.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := f.st.Apply(one.lb.entries[1]); err != nil {
		t.Fatal(err)
	}
	start, _, _, _ := roundSpan(&raft.Log{Type: raft.LogCommand, Data: one.lb.entries[2]})
	// Rounds of term 2 over those of term 1 conflict until the tail is cut.
	if err := f.logs.StoreLogs([]*raft.Log{{Index: 2, Term: 2, Type: raft.LogCommand, Data: two.lb.entries[2]}}); !errors.Is(err, store.ErrRoundConflict) {
		t.Fatalf("storing over uncut rounds: %v, want ErrRoundConflict", err)
	}
	if err := f.logs.DeleteRange(2, one.lb.next); err != nil {
		t.Fatal(err)
	}
	if got := f.st.StoredEnd(); got != start {
		t.Fatalf("after the cut the stored rounds end at %d, want %d", got, start)
	}
	logs = logs[:0]
	for i := uint64(2); i <= two.lb.next; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: two.lb.entries[i]})
	}
	if err := f.logs.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, f.logs, two.lb.entries)

	// Bytes changed behind the WAL's back are not passed off as the
	// round it stored; nor is a pointer past the stored rounds read.
	var l raft.Log
	if err := f.logs.WAL.GetLog(two.lb.next, &l); err != nil {
		t.Fatal(err)
	}
	s3, e3, _, _ := roundSpan(&l)
	seg := filepath.Join(f.dir, "store", "commitlog", fmt.Sprintf("%020d", 0))
	file, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if _, err := file.ReadAt(b[:], e3-10); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := file.WriteAt(b[:], e3-10); err != nil {
		t.Fatal(err)
	}
	file.Close()
	if err := f.logs.GetLog(two.lb.next, &l); !errors.Is(err, store.ErrCorruption) {
		t.Fatalf("a round whose bytes changed: %v, want ErrCorruption", err)
	}
	if err := f.st.CutRounds(s3); err != nil {
		t.Fatal(err)
	}
	if err := f.logs.GetLog(two.lb.next, &l); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a pointer past the stored rounds: %v, want ErrNotFound", err)
	}
}

// FuzzPointer decodes arbitrary bytes as a pointer: an error, or a
// pointer that encodes back to the same bytes, its chunks in order.
func FuzzPointer(f *testing.F) {
	f.Add(encodePointer(7, 0xdeadbeef, []store.RoundSpan{{Off: 0, Len: 10}, {Off: 64 << 10, Len: 5}}))
	f.Add([]byte{pointerKind, 1, 2})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		id, crc, spans, err := decodePointer(p)
		if err != nil {
			return
		}
		if !bytes.Equal(encodePointer(id, crc, spans), p) {
			t.Fatalf("%x decodes to %d %x %v, which encodes otherwise", p, id, crc, spans)
		}
		for i := 1; i < len(spans); i++ {
			if spans[i].Off < spans[i-1].Off+int64(spans[i-1].Len) {
				t.Fatalf("chunks out of order: %v", spans)
			}
		}
	})
}
