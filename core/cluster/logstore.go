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
type logStore struct{ db *pebble.DB }

var errKeyNotFound = errors.New("not found") // the text raft looks for

func openLogStore(dir string) (*logStore, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		return nil, fmt.Errorf("cluster: open raft log: %w", err)
	}
	return &logStore{db: db}, nil
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
	l.AppendedAt = time.Unix(0, int64(binary.BigEndian.Uint64(v[9:])))
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
		v = binary.BigEndian.AppendUint64(v, uint64(l.AppendedAt.UnixNano()))
		v = binary.BigEndian.AppendUint32(v, uint32(len(l.Data)))
		v = append(v, l.Data...)
		v = append(v, l.Extensions...)
		if err := b.Set(logKey(l.Index), v, nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

func (s *logStore) DeleteRange(min, max uint64) error {
	return s.db.DeleteRange(logKey(min), logKey(max+1), pebble.Sync)
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
	_ raft.LogStore    = (*logStore)(nil)
	_ raft.StableStore = (*logStore)(nil)
)

// quietPebble drops pebble's informational lines; errors still surface
// through the calls that fail.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any) {}
func (quietPebble) Errorf(format string, a ...any) {
	slog.Error(fmt.Sprintf(format, a...), "component", "raft-log")
}
func (quietPebble) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
