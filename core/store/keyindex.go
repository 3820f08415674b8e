package store

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/internal/properties"
)

// The key index: for each dispatched record, one entry per key of its
// KEYS property (space-separated) and one for its UNIQ_KEY, in the
// hash-slot files of keyfile.go. The store's end of the work is here:
// which keys a record has, and which records a query may see.

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

// indexRecord adds the key-index entries of rec, stored at off. s.keys.mu
// must be held; only the flusher (or recovery, before it starts) calls it.
func (s *Store) indexRecord(rec message.Record, off int64) {
	// One pass for both properties; the last value of each counts, as in
	// Properties.Lookup.
	var keys, uniq []byte
	var hasKeys, hasUniq bool
	for rest := []byte(rec.Properties()); len(rest) > 0; {
		k, v, tail, ok := properties.Next(rest)
		rest = tail
		switch {
		case !ok:
		case string(k) == message.PropertyKeys:
			keys, hasKeys = v, true
		case string(k) == message.PropertyUniqKey:
			uniq, hasUniq = v, true
		}
	}
	if !hasKeys && !hasUniq {
		return
	}
	topic := rec.Topic()
	ts := rec.StoreTimestamp()
	put := func(kind byte, key []byte) {
		if len(key) == 0 || len(key) > MaxIndexKeyLen {
			return
		}
		s.keys.addLocked(keyHash(kind, topic, key), off, ts)
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

// indexRound adds the key-index entries of r's records and writes them.
// It runs before the dispatch offset moves past r.
func (s *Store) indexRound(r *round) {
	if s.keys == nil {
		return
	}
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	for i := range r.units {
		u := &r.units[i]
		s.indexRecord(message.Record(r.chunks[u.chunk].buf[u.at:u.at+int(u.size)]), u.off)
	}
	s.keys.writeLocked(r.end)
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
	if s.keys == nil {
		return nil, nil
	}
	return s.keys.query(keyQuery{
		hash:   keyHash(kind, []byte(topic), []byte(key)),
		begin:  begin,
		end:    end,
		logMin: s.cl.minOffset(),
		logEnd: s.written.Load(),
		limit:  limit,
	})
}

// IndexLastUpdate returns the store time of the last record dispatched
// (so indexed) and the commit-log offset where dispatched data ends, as
// QUERY_MESSAGE reports them.
func (s *Store) IndexLastUpdate() (timestamp, offset int64) {
	s.cq.RLock()
	defer s.cq.RUnlock()
	return s.cq.lastStoreTime, s.cq.dispatched
}

// reindexKeys adds the key-index entries of the records in [from, to),
// a stretch of the log recovery has checked before (it lies below the
// checkpoint), for a key index that ends before the checkpoint: after a
// restore, a crash that lost its newest file, or a run with the index
// turned off. A frame it cannot read ends its pass over that segment.
// s.keys.mu must be held.
func (s *Store) reindexKeys(from, to int64) (records int, err error) {
	s.cl.mu.RLock()
	segs := append([]*segment(nil), s.cl.segs...)
	s.cl.mu.RUnlock()
	frame := make([]byte, 0, 64<<10)
	for _, seg := range segs {
		segEnd := seg.base + s.opts.SegmentSize
		if segEnd <= from || seg.base >= to {
			continue
		}
		off := max(from, seg.base)
		fi, err := seg.f.Stat()
		if err != nil {
			return records, fmt.Errorf("store: stat segment %s: %w", seg.name, err)
		}
		stop := min(to, seg.base+min(fi.Size(), s.opts.SegmentSize))
		r := bufio.NewReaderSize(io.NewSectionReader(seg.f, off-seg.base, stop-off), 1<<20)
		for off+blankLen <= stop {
			head, err := r.Peek(8)
			if err != nil {
				return records, fmt.Errorf("store: read segment %s: %w", seg.name, err)
			}
			size := int64(int32(binary.BigEndian.Uint32(head)))
			magic := binary.BigEndian.Uint32(head[4:])
			if size == 0 && magic == BlankMagic {
				break
			}
			n := size + trailerLen
			if size < markerLen || off+n > stop || (magic != message.MagicCode && magic != RoundMagic) {
				s.log.Warn("key index: unreadable frame; the rest of the segment is not indexed", "segment", seg.name, "offset", off)
				break
			}
			if int64(cap(frame)) < n {
				frame = make([]byte, n)
			}
			frame = frame[:n]
			if _, err := io.ReadFull(r, frame); err != nil {
				return records, fmt.Errorf("store: read segment %s: %w", seg.name, err)
			}
			if magic == message.MagicCode {
				rec, err := checkFrame(frame, off)
				if err != nil {
					s.log.Warn("key index: unreadable frame; the rest of the segment is not indexed", "segment", seg.name, "offset", off, "err", err)
					break
				}
				if at, ok := s.mu.deleted[string(rec.Topic())]; !ok || off >= at {
					s.indexRecord(rec, off)
					records++
				}
			}
			off += n
		}
		s.keys.writeLocked(min(to, segEnd))
	}
	s.keys.writeLocked(to)
	return records, nil
}

// dropOldKeyEntries deletes, in b, key-index entries kept in the index
// (kind 'k'), where versions before the key-index files kept them.
func (s *Store) dropOldKeyEntries(b *pebble.Batch) error {
	lo := []byte{kindOldKeyIndex}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return fmt.Errorf("store: read index: %w", err)
	}
	found := it.First()
	if err := it.Close(); err != nil {
		return fmt.Errorf("store: read index: %w", err)
	}
	if found {
		b.DeleteRange(lo, prefixEnd(lo), nil)
		s.log.Info("key-index entries of the index's old layout dropped; the key index now lives in " + keyFileDir)
	}
	return nil
}
