package cluster

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/rmq-go/rmq/core/store"
)

// logStore keeps raft's log and its stable values in raft-wal
// (github.com/hashicorp/raft-wal): append-only segment files, one write
// and one fsync per StoreLogs, and whole segments deleted as the log is
// compacted, so an entry is written to disk once and never rewritten.
// The stable values live in the WAL's bolt metadata file. An entry a
// member reports stored is on its disk.
//
// Raft compacts its log after each snapshot down to TrailingLogs entries;
// the store keeps more than raft would (keep): every entry appended within
// keep.age and, in a pointer log, every entry whose round the commit log
// still holds, as long as those from there to the end take at most
// keep.bytes on disk. A member that was away that long thus catches up
// from the log instead of by a snapshot.
//
// A data directory from before raft-wal holds the log in pebble under
// log/; openLogStore moves it into the WAL once (migrateLog).
type logStore struct {
	*wal.WAL
	dir  string
	keep retention
	now  func() time.Time
	// rounds, when set, makes the log a pointer log (pointer.go): a
	// round entry's bytes go to the store it returns, and the WAL keeps
	// where they lie.
	rounds func() *store.Store
	// failed is told of a failed write, sync or cut of the commit log:
	// what the store holds is then unknown, and the member leaves its
	// set (Node.failWith).
	failed func(error)
	log    hclog.Logger

	// staged holds the entries the leader is storing, from stagedFrom:
	// its replicators send them meanwhile (raft.LogStager).
	stageMu    sync.Mutex
	staged     []*raft.Log
	stagedFrom uint64
}

// StageLogs makes logs readable before StoreLogs stores them.
func (s *logStore) StageLogs(logs []*raft.Log) {
	if len(logs) == 0 {
		return
	}
	s.stageMu.Lock()
	s.staged = logs
	s.stagedFrom = logs[0].Index
	s.stageMu.Unlock()
}

// UnstageLogs ends StageLogs once StoreLogs returned.
func (s *logStore) UnstageLogs([]*raft.Log) {
	s.stageMu.Lock()
	s.staged = nil
	s.stageMu.Unlock()
}

// stagedLog reads a staged entry into l.
func (s *logStore) stagedLog(index uint64, l *raft.Log) bool {
	s.stageMu.Lock()
	defer s.stageMu.Unlock()
	if s.staged == nil || index < s.stagedFrom || index-s.stagedFrom >= uint64(len(s.staged)) {
		return false
	}
	*l = *s.staged[index-s.stagedFrom]
	return true
}

// fail reports err, unless the store was closed, to s.failed and returns
// it.
func (s *logStore) fail(err error) error {
	if s.failed != nil && !errors.Is(err, store.ErrClosed) {
		s.failed(err)
	}
	return err
}

// span returns the log's first index and how long ago its entry was
// appended (appendedFrom), rounded to the second; "" when no entry has a
// time.
func (s *logStore) span() (uint64, string) {
	first, err := s.FirstIndex()
	if err != nil || first == 0 {
		return 0, ""
	}
	last, err := s.LastIndex()
	if err != nil {
		return first, ""
	}
	at, ok, err := s.appendedFrom(first, last)
	if err != nil || !ok {
		return first, ""
	}
	return first, s.now().Sub(at).Round(time.Second).String()
}

// appendedFrom returns when the entry at i was appended. An entry
// without a time (the configuration BootstrapCluster writes) is as old
// as the next one up to last with a time; ok is false when none has one.
func (s *logStore) appendedFrom(i, last uint64) (at time.Time, ok bool, err error) {
	var l raft.Log
	for ; i <= last; i++ {
		// The WAL's own entry: a pointer's time is the round's.
		if err := s.WAL.GetLog(i, &l); err != nil {
			return time.Time{}, false, err
		}
		if !l.AppendedAt.IsZero() && l.AppendedAt.UnixNano() > 0 {
			return l.AppendedAt, true, nil
		}
	}
	return time.Time{}, false, nil
}

// retention is how much of the log's tail compaction leaves: the entries
// appended within age, bounded by bytes on disk. A zero retention keeps
// only what raft asks for.
type retention struct {
	age   time.Duration
	bytes int64
}

// openLogStore opens the log in dir/wal, first moving a pebble log in
// dir/log into it. segment is the WAL's segment size; 0 means raft-wal's
// default (64 MiB).
func openLogStore(dir string, keep retention, segment int, hlog hclog.Logger) (*logStore, error) {
	walDir := filepath.Join(dir, "wal")
	if err := migrateLog(filepath.Join(dir, "log"), walDir, hlog); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(walDir, 0o755); err != nil {
		return nil, err
	}
	if segment <= 0 {
		segment = wal.DefaultSegmentSize
	}
	w, err := wal.Open(walDir, wal.WithLogger(hlog.Named("wal")), wal.WithSegmentSize(segment))
	if err != nil {
		return nil, fmt.Errorf("cluster: open raft log: %w", err)
	}
	return &logStore{WAL: w, dir: walDir, keep: keep, now: time.Now, log: hlog}, nil
}

// GetLog reads an entry, answering raft's ErrLogNotFound for one before
// the first index. The WAL removes whole segment files, so a compacted
// entry may still be in one; served, it would let a replica catch up on
// entries raft compacted, which the retention's bounds and a snapshot's
// install decide instead.
func (s *logStore) GetLog(index uint64, l *raft.Log) error {
	if s.stagedLog(index, l) {
		return nil
	}
	first, err := s.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrLogNotFound
	}
	if err := s.WAL.GetLog(index, l); err != nil {
		return err
	}
	if s.rounds == nil || !isPointer(l) {
		return nil
	}
	data, err := readPointer(s.rounds(), l.Data)
	if errors.Is(err, store.ErrOffsetGone) {
		// Retention deleted the round's bytes: raft sends a snapshot.
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("cluster: raft log entry %d: %w", index, err)
	}
	l.Data = data
	return nil
}

// StoreLogs stores entries in order. In a pointer log, every round's
// bytes are written into the commit log first, synced once for the
// batch, and the WAL then stores a pointer to them in the round's place:
// its own write and fsync carry only the small entries. A round that
// does not begin where the stored rounds end is refused
// (store.ErrRoundConflict): raft cuts a conflicting tail before storing
// the entries that replace it. A round that cannot be written or synced
// fails the member (failed); when the WAL's own write fails, the rounds
// the batch wrote are cut again.
func (s *logStore) StoreLogs(logs []*raft.Log) error {
	if s.rounds == nil {
		return s.WAL.StoreLogs(logs)
	}
	st := s.rounds()
	var out []*raft.Log
	from := int64(-1)
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		p, start, ok, err := makePointer(l.Data)
		if err != nil {
			return fmt.Errorf("cluster: raft log entry %d: %w", l.Index, err)
		}
		if !ok {
			continue
		}
		if err := st.WriteRound(l.Data); err != nil {
			return s.fail(fmt.Errorf("cluster: raft log entry %d: %w", l.Index, err))
		}
		if from < 0 {
			from = start
		}
		if out == nil {
			out = slices.Clone(logs)
		}
		c := *l
		c.Data = p
		out[i] = &c
	}
	if out == nil {
		return s.WAL.StoreLogs(logs)
	}
	if err := st.SyncRounds(); err != nil {
		return s.fail(err)
	}
	if err := s.WAL.StoreLogs(out); err != nil {
		s.cutBack(st, from)
		return err
	}
	return nil
}

// cutBack cuts the rounds a failed StoreLogs wrote, from offset from (none
// when negative): the WAL holds no entry for them.
func (s *logStore) cutBack(st *store.Store, from int64) {
	if from < 0 {
		return
	}
	if _, applied := st.CommitLogOffsets(); from < applied {
		return
	}
	if err := st.CutRounds(from); err != nil {
		s.fail(fmt.Errorf("cluster: cutting the rounds of a raft log write that failed: %w", err))
	}
}

// DeleteRange removes the entries min to max. Raft calls it for two
// things: to cut a conflicting tail (max is the last entry), which is
// done in full, and to compact the log after a snapshot (min is the
// first entry, max short of the last), which stops where the retention
// begins. Keeping more than raft asked for is what a larger TrailingLogs
// would do: raft never relies on a compacted entry being gone, and an
// installed snapshot removes the whole log (IsMonotonic).
func (s *logStore) DeleteRange(min, max uint64) error {
	if s.rounds != nil {
		if last, err := s.LastIndex(); err != nil {
			return err
		} else if max >= last && min <= last {
			return s.deleteTail(min, max)
		}
	}
	if s.keep.age > 0 && s.keep.bytes > 0 {
		first, err := s.FirstIndex()
		if err != nil {
			return err
		}
		last, err := s.LastIndex()
		if err != nil {
			return err
		}
		if min <= first && max < last {
			from, err := s.keptFrom(first, last)
			if err != nil {
				return err
			}
			if max >= from {
				max = from - 1
			}
			if max < min {
				return nil
			}
		}
	}
	return s.WAL.DeleteRange(min, max)
}

// deleteTail removes the entries min to the last, and in a pointer log
// the rounds they stored from the commit log, which the set never
// applied: the next rounds take their offsets. The WAL goes first: a
// crash between the two leaves rounds past the WAL's last, which the
// next start cuts (reconcile). Rounds the store applied already (the
// whole log goes after a snapshot install) are not cut.
func (s *logStore) deleteTail(lo, hi uint64) error {
	first, err := s.FirstIndex()
	if err != nil {
		return err
	}
	cut := int64(-1)
	var l raft.Log
	for i := max(lo, first); i <= hi && first > 0; i++ {
		if err := s.WAL.GetLog(i, &l); err != nil {
			return err
		}
		if start, ok, err := roundStart(&l); err != nil {
			return fmt.Errorf("cluster: raft log entry %d: %w", i, err)
		} else if ok {
			cut = start
			break
		}
	}
	if err := s.WAL.DeleteRange(lo, hi); err != nil {
		return err
	}
	if cut < 0 {
		return nil
	}
	st := s.rounds()
	if _, applied := st.CommitLogOffsets(); cut < applied {
		cut = applied
	}
	if err := st.CutRounds(cut); err != nil {
		return s.fail(err)
	}
	return nil
}

// keptFrom returns the first entry of first..last the retention keeps
// (last+1 for none): the first appended within keep.age or, in a pointer
// log, the first whose round the commit log still holds, whichever comes
// first; or a later one where the segments from it to the end take
// keep.bytes on disk. Entries are in the order they were appended, and
// their rounds in the order of their offsets, so each is found by
// bisection.
func (s *logStore) keptFrom(first, last uint64) (uint64, error) {
	horizon := s.now().Add(-s.keep.age)
	var ferr error
	// young reports whether the entry at i was appended within the
	// retention's age (appendedFrom), so a member stopped right after
	// bootstrapping finds its entry still there.
	young := func(i uint64) bool {
		at, ok, err := s.appendedFrom(i, last)
		if err != nil {
			ferr = errors.Join(ferr, err)
			return true
		}
		return !ok || !at.Before(horizon)
	}
	lo := firstTrue(first, last+1, young)
	if ferr != nil {
		return 0, ferr
	}
	if s.rounds != nil && lo > first {
		from, err := s.readableFrom(first, lo)
		if err != nil {
			return 0, err
		}
		lo = min(lo, from)
	}
	segs, err := s.segments()
	if err != nil {
		return 0, err
	}
	// The size on disk from i to the end, counting the segment that holds
	// i in full, shrinks as i grows.
	small := func(i uint64) bool {
		var n int64
		for _, sg := range segs {
			if sg.next > i {
				n += sg.size
			}
		}
		return n <= s.keep.bytes
	}
	return firstTrue(lo, last+1, small), nil
}

// firstTrue returns the first i of lo..hi-1 for which f is true, f being
// false up to some i and true from there on (hi when it is never true).
func firstTrue(lo, hi uint64, f func(uint64) bool) uint64 {
	for lo < hi {
		mid := lo + (hi-lo)/2
		if f(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// readAhead is how many entries readableFrom looks at, from the one it
// probes, for a round: entries between rounds (raft's own, the store's
// progress and metadata) have no offset of their own.
const readAhead = 16

// readableFrom returns the first entry of first..hi-1 whose round the
// commit log still holds (hi when none is found): an entry whose next
// round, within readAhead entries, begins at or after the commit log's
// first offset, or that has no round within them. Whatever it returns,
// every round before it lies before that offset: each probe that moves
// the bound up found such a round at or after it, and rounds are stored
// in the order of their offsets.
func (s *logStore) readableFrom(first, hi uint64) (uint64, error) {
	minOff, _ := s.rounds().CommitLogOffsets()
	var ferr error
	held := func(i uint64) bool {
		var l raft.Log
		for j := i; j < i+readAhead && j < hi; j++ {
			if err := s.WAL.GetLog(j, &l); err != nil {
				ferr = errors.Join(ferr, err)
				return true
			}
			start, ok, err := roundStart(&l)
			if err != nil {
				ferr = errors.Join(ferr, fmt.Errorf("cluster: raft log entry %d: %w", j, err))
				return true
			}
			if ok {
				return start >= minOff
			}
		}
		return true
	}
	return firstTrue(first, hi, held), ferr
}

// segmentSpan is a WAL segment file: its size and the base index of the
// next segment (max uint64 for the last), which bounds the entries it
// can hold.
type segmentSpan struct {
	size int64
	next uint64
}

// segments lists the WAL's segment files, named by raft-wal
// <base index, 20 digits>-<id, 16 hex>.wal, in index order.
func (s *logStore) segments() ([]segmentSpan, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	type seg struct {
		base uint64
		size int64
	}
	var found []seg
	for _, e := range ents {
		var base, id uint64
		if n, _ := fmt.Sscanf(e.Name(), "%020d-%016x.wal", &base, &id); n != 2 {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // deleted by a compaction meanwhile
		}
		found = append(found, seg{base, fi.Size()})
	}
	slices.SortFunc(found, func(a, b seg) int { return cmp.Compare(a.base, b.base) })
	spans := make([]segmentSpan, len(found))
	for i, f := range found {
		spans[i] = segmentSpan{size: f.size, next: math.MaxUint64}
		if i+1 < len(found) {
			spans[i].next = found[i+1].base
		}
	}
	return spans, nil
}

var (
	_ raft.LogStore          = (*logStore)(nil)
	_ raft.StableStore       = (*logStore)(nil)
	_ raft.MonotonicLogStore = (*logStore)(nil)
)
