package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// logStore keeps raft's log and its stable values in a pebble database
// of their own, written with fsync: an entry a member reports stored is
// on its disk.
//
//	'l' index(8)  → term(8) type(1) appendedAt(8) dataLen(4) data extensions
//	's' key       → value
//
// Raft compacts its log after each snapshot down to TrailingLogs entries;
// the store keeps more than raft would (keep): every entry appended within
// keep.age, as long as those from there to the end take at most
// keep.bytes on disk. A member that was away that long thus catches up
// from the log instead of by a snapshot.
type logStore struct {
	db   *pebble.DB
	keep retention
	now  func() time.Time
}

// retention is how much of the log's tail compaction leaves: the entries
// appended within age, bounded by bytes on disk. A zero retention keeps
// only what raft asks for.
type retention struct {
	age   time.Duration
	bytes int64
}

var errKeyNotFound = errors.New("not found") // the text raft looks for

func openLogStore(dir string, keep retention) (*logStore, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		return nil, fmt.Errorf("cluster: open raft log: %w", err)
	}
	return &logStore{db: db, keep: keep, now: time.Now}, nil
}

func (s *logStore) Close() error { return s.db.Close() }

func logKey(i uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'l'}, i) }

var (
	logLo = []byte{'l'}
	logHi = []byte{'l' + 1}
)

func (s *logStore) edge(last bool) (uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logLo, UpperBound: logHi})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	ok := it.First()
	if last {
		ok = it.Last()
	}
	if !ok {
		return 0, it.Error()
	}
	return binary.BigEndian.Uint64(it.Key()[1:]), nil
}

func (s *logStore) FirstIndex() (uint64, error) { return s.edge(false) }
func (s *logStore) LastIndex() (uint64, error)  { return s.edge(true) }

func (s *logStore) GetLog(index uint64, l *raft.Log) error {
	v, closer, err := s.db.Get(logKey(index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	if len(v) < 21 {
		return fmt.Errorf("cluster: raft log entry %d is %d bytes", index, len(v))
	}
	l.Index = index
	l.Term = binary.BigEndian.Uint64(v)
	l.Type = raft.LogType(v[8])
	l.AppendedAt = time.Time{}
	if at := int64(binary.BigEndian.Uint64(v[9:])); at > 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	dl := int(binary.BigEndian.Uint32(v[17:]))
	if len(v) < 21+dl {
		return fmt.Errorf("cluster: raft log entry %d is cut short", index)
	}
	l.Data = append([]byte(nil), v[21:21+dl]...)
	l.Extensions = nil
	if ext := v[21+dl:]; len(ext) > 0 {
		l.Extensions = append([]byte(nil), ext...)
	}
	return nil
}

func (s *logStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *logStore) StoreLogs(logs []*raft.Log) error {
	b := s.db.NewBatch()
	defer b.Close()
	for _, l := range logs {
		v := make([]byte, 0, 21+len(l.Data)+len(l.Extensions))
		v = binary.BigEndian.AppendUint64(v, l.Term)
		v = append(v, byte(l.Type))
		var at int64 // 0 for none: the zero time's UnixNano is undefined
		if !l.AppendedAt.IsZero() {
			at = l.AppendedAt.UnixNano()
		}
		v = binary.BigEndian.AppendUint64(v, uint64(at))
		v = binary.BigEndian.AppendUint32(v, uint32(len(l.Data)))
		v = append(v, l.Data...)
		v = append(v, l.Extensions...)
		if err := b.Set(logKey(l.Index), v, nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

// DeleteRange removes the entries min to max. Raft calls it for two
// things: to cut a conflicting tail (max is the last entry), which is
// done in full, and to compact the log after a snapshot (min is the
// first entry, max short of the last), which stops where the retention
// begins. Keeping more than raft asked for is what a larger TrailingLogs
// would do: raft never relies on a compacted entry being gone, and an
// installed snapshot removes the whole log (IsMonotonic).
func (s *logStore) DeleteRange(min, max uint64) error {
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
	return s.db.DeleteRange(logKey(min), logKey(max+1), pebble.Sync)
}

// IsMonotonic tells raft to remove the whole log after installing a
// snapshot rather than keep its tail: entries kept past a snapshot
// installed over them could be ones the leader's log replaced.
func (s *logStore) IsMonotonic() bool { return true }

// keptFrom returns the first entry of first..last the retention keeps
// (last+1 for none): the first appended within keep.age, or a later one
// where the entries from it to the end take keep.bytes on disk. Entries
// are in the order they were appended, so both are found by bisection.
func (s *logStore) keptFrom(first, last uint64) (uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logLo, UpperBound: logHi})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	horizon := s.now().Add(-s.keep.age).UnixNano()
	var ferr error
	// young reports whether the entry at i, or the next one stored, was
	// appended within the retention's age. An entry without a time (the
	// configuration BootstrapCluster writes; stored as 0, or negative by
	// older versions) is as old as the next one with a time, so a member
	// stopped right after bootstrapping finds its entry still there.
	young := func(i uint64) bool {
		for ok := it.SeekGE(logKey(i)); ok; ok = it.Next() {
			v, err := it.ValueAndErr()
			if err == nil && len(v) < 17 {
				err = fmt.Errorf("cluster: raft log entry %d is %d bytes", binary.BigEndian.Uint64(it.Key()[1:]), len(v))
			}
			if err != nil {
				ferr = errors.Join(ferr, err)
				return true
			}
			if at := int64(binary.BigEndian.Uint64(v[9:])); at > 0 {
				return at >= horizon
			}
		}
		return true
	}
	lo, hi := first, last+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if young(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if ferr != nil {
		return 0, ferr
	}
	// The on-disk size from i to the end shrinks as i grows.
	small := func(i uint64) bool {
		n, err := s.db.EstimateDiskUsage(logKey(i), logHi)
		if err != nil {
			ferr = errors.Join(ferr, err)
			return true
		}
		return n <= uint64(s.keep.bytes)
	}
	hi = last + 1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if small(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, ferr
}

func stableKey(k []byte) []byte { return append([]byte{'s'}, k...) }

func (s *logStore) Set(k, v []byte) error { return s.db.Set(stableKey(k), v, pebble.Sync) }

func (s *logStore) Get(k []byte) ([]byte, error) {
	v, closer, err := s.db.Get(stableKey(k))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, errKeyNotFound
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

func (s *logStore) SetUint64(k []byte, v uint64) error {
	return s.Set(k, binary.BigEndian.AppendUint64(nil, v))
}

func (s *logStore) GetUint64(k []byte) (uint64, error) {
	v, err := s.Get(k)
	if errors.Is(err, errKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("cluster: stable value %q is %d bytes", k, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

var (
	_ raft.LogStore          = (*logStore)(nil)
	_ raft.StableStore       = (*logStore)(nil)
	_ raft.MonotonicLogStore = (*logStore)(nil)
)

// quietPebble drops pebble's informational lines; errors still surface
// through the calls that fail.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any) {}
func (quietPebble) Errorf(format string, a ...any) {
	slog.Error(fmt.Sprintf(format, a...), "component", "raft-log")
}
func (quietPebble) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
