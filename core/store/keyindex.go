package store

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rmq-go/rmq/core/message"
)

// The key index: for each dispatched record, one index key per key of its
// KEYS property (space-separated) and one for its UNIQ_KEY, laid out as in
// doc.go (kind 'k'). The segment number leads the key so that retention
// drops a deleted segment's entries with one DeleteRange; a query seeks
// once per live segment, newest first.

// Bounds of the key index.
const (
	// MaxIndexKeysPerMessage is how many KEYS of one message are indexed;
	// the rest are not. The UNIQ_KEY is indexed besides these.
	MaxIndexKeysPerMessage = 16
	// MaxIndexKeyLen is the longest key indexed; longer keys are skipped.
	MaxIndexKeyLen = 128
	// MaxQueryResults caps what one QueryByKey returns.
	MaxQueryResults = 1024
)

// Key kinds inside the key index.
const (
	keyKindKeys = 'K' // a key of the KEYS property
	keyKindUniq = 'U' // the UNIQ_KEY property
)

// keyIndexSegPrefix appends the prefix of segment seg's entries.
func keyIndexSegPrefix(dst []byte, seg int64) []byte {
	dst = append(dst, kindKeyIndex)
	return binary.BigEndian.AppendUint64(dst, uint64(seg))
}

// keyIndexPrefix appends the prefix of one key's entries in segment seg.
// Topic and key are length-prefixed, so no pair of them can share a
// prefix with another pair.
func keyIndexPrefix(dst []byte, seg int64, kind byte, topic, key []byte) []byte {
	dst = keyIndexSegPrefix(dst, seg)
	dst = append(dst, kind, byte(len(topic)))
	dst = append(dst, topic...)
	dst = append(dst, byte(len(key)))
	return append(dst, key...)
}

// indexRecord adds the key-index entries of rec, stored at off, to b
// (creating it), using s.keyBuf as scratch. Only the flusher (or recovery,
// before it starts) calls it.
func (s *Store) indexRecord(b **pebble.Batch, rec message.Record, off int64) {
	if s.opts.DisableKeyIndex {
		return
	}
	props := rec.Properties()
	keys, hasKeys := props.Lookup(message.PropertyKeys)
	uniq, hasUniq := props.Lookup(message.PropertyUniqKey)
	if !hasKeys && !hasUniq {
		return
	}
	topic := rec.Topic()
	seg := off / s.opts.SegmentSize
	ts := rec.StoreTimestamp()
	put := func(kind byte, key []byte) {
		if len(key) == 0 || len(key) > MaxIndexKeyLen {
			return
		}
		if *b == nil {
			*b = s.db.NewBatch()
		}
		k := keyIndexPrefix(s.keyBuf[:0], seg, kind, topic, key)
		k = binary.BigEndian.AppendUint64(k, uint64(ts))
		k = binary.BigEndian.AppendUint64(k, uint64(off))
		s.keyBuf = k
		(*b).Set(k, nil, nil)
	}
	if hasUniq {
		put(keyKindUniq, uniq)
	}
	for n := 0; len(keys) > 0 && n < MaxIndexKeysPerMessage; {
		i := 0
		for i < len(keys) && keys[i] != ' ' {
			i++
		}
		if i > 0 {
			put(keyKindKeys, keys[:i])
			n++
		}
		if i == len(keys) {
			break
		}
		keys = keys[i+1:]
	}
}

// QueryByKey returns the commit-log offsets of records of topic whose KEYS
// hold key, stored between begin and end (milliseconds, both included),
// newest first (as RocketMQ answers), at most limit of them (capped at
// MaxQueryResults; zero or negative means the cap). With unique set it
// matches the UNIQ_KEY property instead.
//
// The index is advisory: an offset may name a record that no longer
// holds the key (one rewritten after a torn tail under FlushAsync) or
// that retention deleted since. Callers read the record and check it.
func (s *Store) QueryByKey(topic, key string, unique bool, begin, end int64, limit int) ([]int64, error) {
	if limit <= 0 || limit > MaxQueryResults {
		limit = MaxQueryResults
	}
	if len(topic) > message.MaxTopicLen || len(key) == 0 || len(key) > MaxIndexKeyLen || end < begin || end < 0 {
		return nil, nil
	}
	begin = max(begin, 0)
	kind := byte(keyKindKeys)
	if unique {
		kind = keyKindUniq
	}
	s.cl.mu.RLock()
	segs := make([]int64, len(s.cl.segs))
	for i, seg := range s.cl.segs {
		segs[i] = seg.base / s.opts.SegmentSize
	}
	s.cl.mu.RUnlock()

	var out []int64
	var lo, hi []byte
	for _, seg := range slices.Backward(segs) {
		p := keyIndexPrefix(lo[:0], seg, kind, []byte(topic), []byte(key))
		hi = append(hi[:0], p...)
		lo = binary.BigEndian.AppendUint64(p, uint64(begin))
		if end == math.MaxInt64 {
			hi = prefixEnd(hi)
		} else {
			hi = binary.BigEndian.AppendUint64(hi, uint64(end+1))
		}
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return out, fmt.Errorf("store: query key index: %w", err)
		}
		for it.Last(); it.Valid() && len(out) < limit; it.Prev() {
			k := it.Key()
			out = append(out, int64(binary.BigEndian.Uint64(k[len(k)-8:])))
		}
		err = it.Close()
		if err != nil {
			return out, fmt.Errorf("store: query key index: %w", err)
		}
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// dropKeyIndexBelow deletes, in b, the key-index entries of every segment
// before the one holding logMin.
func (s *Store) dropKeyIndexBelow(b *pebble.Batch, logMin int64) {
	if seg := logMin / s.opts.SegmentSize; seg > 0 {
		b.DeleteRange(keyIndexSegPrefix(nil, 0), keyIndexSegPrefix(nil, seg), nil)
	}
}

// IndexLastUpdate returns the store time of the last record dispatched
// (so indexed) and the commit-log offset where dispatched data ends, as
// QUERY_MESSAGE reports them.
func (s *Store) IndexLastUpdate() (timestamp, offset int64) {
	s.cq.RLock()
	defer s.cq.RUnlock()
	return s.cq.lastStoreTime, s.cq.dispatched
}
