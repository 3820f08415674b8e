package store

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// kindKeys prefixes keys that components above the store keep in the
// index (a time-ordered timer index, for example).
const kindKeys = 'x'

// PutKeys adds keys (with empty values) to the index. They are written
// without fsync, for state that can be rebuilt from the commit log: a
// progress value set after the put is durable only with the keys before it.
func (s *Store) PutKeys(keys ...[]byte) error { return s.keyBatch(keys, false) }

// DeleteKeys removes keys added with PutKeys, without fsync.
func (s *Store) DeleteKeys(keys ...[]byte) error { return s.keyBatch(keys, true) }

func (s *Store) keyBatch(keys [][]byte, del bool) error {
	if len(keys) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, k := range keys {
		full := append([]byte{kindKeys}, k...)
		if del {
			b.Delete(full, nil)
		} else {
			b.Set(full, nil, nil)
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("store: write keys: %w", err)
	}
	s.replicateKeys(b)
	return nil
}

// DeleteKeyRange removes every key added with PutKeys or PutValues that
// starts with prefix, without fsync.
func (s *Store) DeleteKeyRange(prefix []byte) error {
	lo := append([]byte{kindKeys}, prefix...)
	b := s.db.NewBatch()
	defer b.Close()
	b.DeleteRange(lo, prefixEnd(lo), nil)
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("store: delete keys: %w", err)
	}
	s.replicateKeys(b)
	return nil
}

// KV is a key and value kept with PutValues.
type KV struct{ Key, Value []byte }

// PutValues sets keys to values in the index, without fsync, like PutKeys.
func (s *Store) PutValues(kvs ...KV) error {
	if len(kvs) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, kv := range kvs {
		b.Set(append([]byte{kindKeys}, kv.Key...), kv.Value, nil)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("store: write keys: %w", err)
	}
	s.replicateKeys(b)
	return nil
}

// Value appends the value of a key set with PutValues to dst; ok is false
// when the key does not exist.
func (s *Store) Value(key, dst []byte) ([]byte, bool, error) {
	v, closer, err := s.db.Get(append([]byte{kindKeys}, key...))
	if errors.Is(err, pebble.ErrNotFound) {
		return dst, false, nil
	}
	if err != nil {
		return dst, false, fmt.Errorf("store: read key: %w", err)
	}
	defer closer.Close()
	return append(dst, v...), true, nil
}

// ScanKeys calls fn, in key order, for each key added with PutKeys that
// starts with prefix and is not below from, until fn returns false. The
// key passed to fn is only valid during the call.
func (s *Store) ScanKeys(prefix, from []byte, fn func(key []byte) bool) error {
	lo := append([]byte{kindKeys}, prefix...)
	start := append([]byte{kindKeys}, from...)
	if bytes.Compare(start, lo) < 0 {
		start = lo
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return fmt.Errorf("store: read keys: %w", err)
	}
	defer it.Close()
	for it.SeekGE(start); it.Valid(); it.Next() {
		if !fn(it.Key()[1:]) {
			break
		}
	}
	return it.Error()
}
