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
	ops := make([]keyOp, 0, len(keys))
	for _, k := range keys {
		op := keyOp{kind: keySet, key: append([]byte{kindKeys}, k...)}
		if del {
			op.kind = keyDelete
		}
		ops = append(ops, op)
	}
	return s.writeKeys(ops)
}

// keyOp is one write of the keys components keep: set, delete, or delete
// the range [key, value).
type keyOp struct {
	kind       byte
	key, value []byte
}

const (
	keySet         = 'S'
	keyDelete      = 'D'
	keyDeleteRange = 'R'
)

// writeKeys writes ops in one batch without fsync and, on a replicated
// leader, proposes them to the set.
func (s *Store) writeKeys(ops []keyOp) error {
	if err := s.commitKeys(ops); err != nil {
		return err
	}
	s.replicateKeys(ops)
	return nil
}

// commitKeys writes ops in one batch without fsync.
func (s *Store) commitKeys(ops []keyOp) error {
	b := s.db.NewBatch()
	defer b.Close()
	for _, op := range ops {
		switch op.kind {
		case keySet:
			b.Set(op.key, op.value, nil)
		case keyDelete:
			b.Delete(op.key, nil)
		case keyDeleteRange:
			b.DeleteRange(op.key, op.value, nil)
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("store: write keys: %w", err)
	}
	return nil
}

// DeleteKeyRange removes every key added with PutKeys or PutValues that
// starts with prefix, without fsync.
func (s *Store) DeleteKeyRange(prefix []byte) error {
	lo := append([]byte{kindKeys}, prefix...)
	return s.writeKeys([]keyOp{{kind: keyDeleteRange, key: lo, value: prefixEnd(lo)}})
}

// KV is a key and value kept with PutValues.
type KV struct{ Key, Value []byte }

// PutValues sets keys to values in the index, without fsync, like PutKeys.
func (s *Store) PutValues(kvs ...KV) error {
	if len(kvs) == 0 {
		return nil
	}
	ops := make([]keyOp, 0, len(kvs))
	for _, kv := range kvs {
		ops = append(ops, keyOp{kind: keySet, key: append([]byte{kindKeys}, kv.Key...), value: kv.Value})
	}
	return s.writeKeys(ops)
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
