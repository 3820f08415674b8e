package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A snapshot is the state a replicated store needs to start from when the
// set's log no longer holds what it lacks: every index value that is not
// derived from the log (metadata, progress values, queue registrations
// and topic deletions) and the commit log's bytes up to an end. It is a
// stream of items
//
//	kind(1) keyLen(4) key valueLen(8) value
//
// kind 'K' an index key and value, 'S' a segment's name and bytes, 'E'
// (empty key and value) the end.
const (
	snapIndex   = 'K'
	snapSegment = 'S'
	snapEnd     = 'E'

	// maxSnapIndexValue bounds one index value of a snapshot (metadata
	// values are topic and group configs, far smaller).
	maxSnapIndexValue = 16 << 20
)

// Snapshot is a point-in-time view of a replicated store, taken by
// TakeSnapshot and written out by WriteTo. The commit log's bytes are read
// at WriteTo; a segment retention deletes meanwhile fails it.
type Snapshot struct {
	s     *Store
	end   int64
	index map[string][]byte
}

// TakeSnapshot syncs the log and captures the store's state as of the
// entries applied so far. The caller keeps Apply from running meanwhile.
func (s *Store) TakeSnapshot() (*Snapshot, error) {
	if err := s.syncReplicated(); err != nil {
		return nil, err
	}
	snap := &Snapshot{s: s, end: s.written.Load(), index: make(map[string][]byte)}
	err := s.EachMeta("", func(name string, v []byte) error {
		snap.index[string(metaKey(name))] = append([]byte(nil), v...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.progress.Lock()
	for name, v := range s.progress.values {
		snap.index[string(progressKey(name))] = int64Value(v)
	}
	s.progress.Unlock()
	s.cq.RLock()
	for k, q := range s.cq.queues {
		snap.index[string(queueRegKey(k))] = int64Value(q.min)
	}
	s.cq.RUnlock()
	s.mu.Lock()
	for topic, at := range s.mu.deleted {
		snap.index[string(deletedKey(topic))] = int64Value(at)
	}
	s.mu.Unlock()
	return snap, nil
}

// End is the commit-log offset the snapshot covers up to.
func (snap *Snapshot) End() int64 { return snap.end }

// WriteTo writes the snapshot to w.
func (snap *Snapshot) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	var n int64
	item := func(kind byte, key string, vlen int64) error {
		var h [13]byte
		h[0] = kind
		binary.BigEndian.PutUint32(h[1:], uint32(len(key)))
		binary.BigEndian.PutUint64(h[5:], uint64(vlen))
		if _, err := bw.Write(h[:]); err != nil {
			return err
		}
		_, err := bw.WriteString(key)
		n += int64(13 + len(key))
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(snap.index)) {
		v := snap.index[k]
		if err := item(snapIndex, k, int64(len(v))); err != nil {
			return n, err
		}
		if _, err := bw.Write(v); err != nil {
			return n, err
		}
		n += int64(len(v))
	}
	s := snap.s
	s.cl.mu.RLock()
	segs := append([]*segment(nil), s.cl.segs...)
	s.cl.mu.RUnlock()
	for _, seg := range segs {
		if seg.base >= snap.end {
			break
		}
		size := min(s.opts.SegmentSize, snap.end-seg.base)
		if err := item(snapSegment, seg.name, size); err != nil {
			return n, err
		}
		m, err := io.Copy(bw, io.NewSectionReader(seg.f, 0, size))
		n += m
		if err != nil {
			return n, fmt.Errorf("store: snapshot of segment %s: %w", seg.name, err)
		}
		if m != size {
			return n, fmt.Errorf("store: snapshot of segment %s: %d of %d bytes", seg.name, m, size)
		}
	}
	if err := item(snapEnd, "", 0); err != nil {
		return n, err
	}
	return n, bw.Flush()
}

// RestoreDir replaces the data directory dir, which no Store may hold
// open, with the snapshot read from r. Opening a Store on dir afterwards
// rebuilds the consume queues from the restored log.
func RestoreDir(fs vfs.FS, dir string, r io.Reader) error {
	if fs == nil {
		fs = vfs.Default
	}
	for _, sub := range []string{"commitlog", "index"} {
		if err := fs.RemoveAll(fs.PathJoin(dir, sub)); err != nil {
			return fmt.Errorf("store: restore: clear %s: %w", sub, err)
		}
	}
	if err := mkdirSynced(fs, dir); err != nil {
		return err
	}
	logDir := fs.PathJoin(dir, "commitlog")
	if err := mkdirSynced(fs, logDir); err != nil {
		return err
	}
	db, err := pebble.Open(fs.PathJoin(dir, "index"), &pebble.Options{FS: fs})
	if err != nil {
		return fmt.Errorf("store: restore: open index: %w", err)
	}
	b := db.NewBatch()
	err = readSnapshot(bufio.NewReaderSize(r, 1<<20), func(kind byte, key string, v io.Reader, vlen int64) error {
		switch kind {
		case snapIndex:
			buf := make([]byte, vlen) // at most maxSnapIndexValue: readSnapshot
			if _, err := io.ReadFull(v, buf); err != nil {
				return err
			}
			return b.Set([]byte(key), buf, nil)
		case snapSegment:
			if len(key) != segmentNameLen {
				return fmt.Errorf("%w: snapshot segment name %q", ErrCorruption, key)
			}
			f, err := fs.Create(fs.PathJoin(logDir, key), vfs.WriteCategoryUnspecified)
			if err != nil {
				return err
			}
			_, err = io.CopyN(f, v, vlen)
			if err == nil {
				err = f.Sync()
			}
			return errors.Join(err, f.Close())
		}
		return fmt.Errorf("%w: snapshot item of kind %q", ErrCorruption, kind)
	})
	if err == nil {
		err = b.Commit(pebble.Sync)
	}
	b.Close()
	err = errors.Join(err, db.Close())
	if err != nil {
		return fmt.Errorf("store: restore: %w", err)
	}
	d, err := fs.OpenDir(logDir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// readSnapshot calls fn for each item of a snapshot stream until its end.
func readSnapshot(r io.Reader, fn func(kind byte, key string, v io.Reader, vlen int64) error) error {
	var h [13]byte
	for {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return fmt.Errorf("%w: snapshot cut short: %v", ErrCorruption, err)
		}
		kind := h[0]
		klen := binary.BigEndian.Uint32(h[1:])
		vlen := int64(binary.BigEndian.Uint64(h[5:]))
		if kind == snapEnd {
			return nil
		}
		if klen > 1<<16 || vlen < 0 || vlen > 1<<40 || (kind == snapIndex && vlen > maxSnapIndexValue) {
			return fmt.Errorf("%w: snapshot item of %d+%d bytes", ErrCorruption, klen, vlen)
		}
		key := make([]byte, klen)
		if _, err := io.ReadFull(r, key); err != nil {
			return fmt.Errorf("%w: snapshot cut short: %v", ErrCorruption, err)
		}
		lr := &io.LimitedReader{R: r, N: vlen}
		if err := fn(kind, string(key), lr, vlen); err != nil {
			return err
		}
		if lr.N != 0 {
			if _, err := io.Copy(io.Discard, lr); err != nil {
				return err
			}
		}
	}
}
