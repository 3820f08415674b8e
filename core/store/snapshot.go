package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A snapshot is the state a replicated store needs to start from when the
// set's log no longer holds what it lacks: every index value that is not
// derived from the log (metadata, progress values, the keys components
// keep, queue registrations and topic deletions) and the commit log's
// bytes up to an end. It is a
// stream of items
//
//	kind(1) keyLen(4) key valueLen(8) value
//
// in two forms. A manifest, which is what a member keeps for each
// snapshot it takes, holds the index values and the end ('L'), not the
// log: taking one costs an fsync and the index values, whatever the size
// of the log. The full stream, which a member far behind installs
// (RestoreDir), holds the index values and the segments' bytes up to the
// end, read from the log when it is sent (SnapshotStream).
//
//	'V' "manifest" or "full"   the form, first
//	'K' index key              its value
//	'L' ""                     the end (8), manifest only
//	'S' segment name           the segment's bytes up to the end, full only
//	'E' ""                     the end of the stream
const (
	snapVersion = 'V'
	snapIndex   = 'K'
	snapLogEnd  = 'L'
	snapSegment = 'S'
	snapEnd     = 'E'

	snapManifest = "manifest"
	snapFull     = "full"

	// maxSnapIndexValue bounds one index value of a snapshot (metadata
	// values are topic and group configs, far smaller).
	maxSnapIndexValue = 16 << 20
)

// Snapshot is a point-in-time view of a replicated store, taken by
// TakeSnapshot and written out, as a manifest, by WriteTo.
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
	// A replicated store's snapshot carries the values the set
	// committed, not a leader's that are still on their way to raft.
	s.progress.Lock()
	values := s.progress.values
	if s.Replicated() {
		values = s.progress.committed
	}
	for name, v := range values {
		snap.index[string(progressKey(name))] = int64Value(v)
	}
	s.progress.Unlock()
	// The keys components keep (PutKeys, PutValues) are state of their
	// own: a timer index, say, whose progress value above says how far
	// it reaches; restored without them, nothing would index again.
	if err := s.snapshotKeys(snap.index); err != nil {
		return nil, err
	}
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

// snapshotKeys adds the keys components keep to index.
func (s *Store) snapshotKeys(index map[string][]byte) error {
	lo := []byte{kindKeys}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return fmt.Errorf("store: snapshot of the components' keys: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if len(it.Value()) > maxSnapIndexValue {
			return fmt.Errorf("store: snapshot: the value of key %q holds %d bytes, more than %d", it.Key(), len(it.Value()), maxSnapIndexValue)
		}
		index[string(it.Key())] = bytes.Clone(it.Value())
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("store: snapshot of the components' keys: %w", err)
	}
	return nil
}

// End is the commit-log offset the snapshot covers up to.
func (snap *Snapshot) End() int64 { return snap.end }

// itemHeader appends an item's header.
func itemHeader(dst []byte, kind byte, key string, vlen int64) []byte {
	dst = append(dst, kind)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(key)))
	dst = binary.BigEndian.AppendUint64(dst, uint64(vlen))
	return append(dst, key...)
}

// WriteTo writes the snapshot's manifest to w.
func (snap *Snapshot) WriteTo(w io.Writer) (int64, error) {
	var total int64
	b := itemHeader(nil, snapVersion, snapManifest, 0)
	for _, k := range slices.Sorted(maps.Keys(snap.index)) {
		v := snap.index[k]
		b = append(itemHeader(b, snapIndex, k, int64(len(v))), v...)
		if len(b) >= 1<<20 {
			n, err := w.Write(b)
			total += int64(n)
			if err != nil {
				return total, err
			}
			b = b[:0]
		}
	}
	b = binary.BigEndian.AppendUint64(itemHeader(b, snapLogEnd, "", 8), uint64(snap.end))
	b = itemHeader(b, snapEnd, "", 0)
	n, err := w.Write(b)
	return total + int64(n), err
}

// IsManifest reports whether the snapshot stream r begins as a manifest
// (rather than a full stream), without consuming it.
func IsManifest(r *bufio.Reader) (bool, error) {
	h, err := r.Peek(13 + len(snapManifest))
	if err != nil {
		return false, fmt.Errorf("%w: snapshot cut short: %v", ErrCorruption, err)
	}
	return h[0] == snapVersion && string(h[13:]) == snapManifest, nil
}

// SnapshotStream turns a manifest into the full stream a member far
// behind installs: the manifest's index values and this store's commit
// log up to the manifest's end, read as the stream is. It returns the
// stream's exact size. A segment retention deletes meanwhile fails the
// read.
func (s *Store) SnapshotStream(manifest io.Reader) (int64, io.ReadCloser, error) {
	var head bytes.Buffer
	head.Write(itemHeader(nil, snapVersion, snapFull, 0))
	end := int64(-1)
	err := readSnapshot(manifest, func(kind byte, key string, v io.Reader, vlen int64) error {
		switch kind {
		case snapVersion:
			return nil
		case snapIndex:
			head.Write(itemHeader(nil, snapIndex, key, vlen))
			_, err := io.CopyN(&head, v, vlen)
			return err
		case snapLogEnd:
			var b [8]byte
			if vlen != 8 {
				return fmt.Errorf("%w: snapshot end of %d bytes", ErrCorruption, vlen)
			}
			if _, err := io.ReadFull(v, b[:]); err != nil {
				return err
			}
			end = int64(binary.BigEndian.Uint64(b[:]))
			return nil
		}
		return fmt.Errorf("%w: a manifest holds an item of kind %q", ErrCorruption, kind)
	})
	if err != nil {
		return 0, nil, err
	}
	if end < 0 {
		return 0, nil, fmt.Errorf("%w: a manifest without its end", ErrCorruption)
	}
	s.cl.mu.RLock()
	segs := append([]*segment(nil), s.cl.segs...)
	s.cl.mu.RUnlock()
	size := int64(head.Len())
	parts := []io.Reader{&head}
	for _, seg := range segs {
		if seg.base >= end {
			break
		}
		fi, err := seg.f.Stat()
		if err != nil {
			return 0, nil, fmt.Errorf("store: snapshot of segment %s: %w", seg.name, err)
		}
		n := min(fi.Size(), s.opts.SegmentSize, end-seg.base)
		h := itemHeader(nil, snapSegment, seg.name, n)
		parts = append(parts, bytes.NewReader(h), &exactReader{r: io.NewSectionReader(seg.f, 0, n), n: n, name: seg.name})
		size += int64(len(h)) + n
	}
	tail := itemHeader(nil, snapEnd, "", 0)
	parts = append(parts, bytes.NewReader(tail))
	size += int64(len(tail))
	return size, io.NopCloser(io.MultiReader(parts...)), nil
}

// exactReader reads a segment's n bytes, failing if the file ends first.
type exactReader struct {
	r    io.Reader
	n    int64
	name string
}

func (e *exactReader) Read(p []byte) (int, error) {
	k, err := e.r.Read(p)
	e.n -= int64(k)
	if err == io.EOF && e.n > 0 {
		return k, fmt.Errorf("store: snapshot of segment %s: %d bytes missing", e.name, e.n)
	}
	return k, err
}

// A restore is staged beside the store it replaces, in
// <dir>/restore/, and swapped in once complete:
//
//	<dir>/restore/commitlog/  the snapshot's segments, each synced
//	<dir>/restore/index.snap  its index values, as items 'K' and an 'E'
//	<dir>/restore/COMPLETE    created and synced last: the commit point
//
// RestoreDir stages; until COMPLETE exists the old store is untouched,
// and a start discards the staging directory (a discarded one loses its
// COMPLETE first). Once it exists, Open (or a later RestoreDir, before
// anything else) rolls the restore forward: the staged commit log
// replaces the store's own (removed, then the staged one renamed into
// its place, the directories synced), the index and the key index are
// removed, and, the index created again, index.snap is loaded into it
// with a synced commit. Then the staging directory is renamed to
// <dir>/restore.done, the end of the restore, and removed. Every step
// may be redone after a crash. No index is opened before the commit
// point, so a failing disk there is an error of RestoreDir, never a
// fatal one of the index.
const (
	restoreStage  = "restore"
	restoreEnded  = "restore.done"
	restoreValues = "index.snap"
	restoreDone   = "COMPLETE"

	// restoreBatchBytes bounds the index values a restore holds in
	// memory before it commits them to the index.
	restoreBatchBytes = 4 << 20
)

// RestoreDir replaces the data directory dir, which no Store may hold
// open, with the snapshot read from r. Opening a Store on dir afterwards
// swaps the snapshot in and rebuilds the consume queues from the
// restored log. The replacement is atomic: after an error or a crash,
// dir opens as the store it was or as the complete snapshot, never as a
// mix of the two or a part of one.
func RestoreDir(fs vfs.FS, dir string, r io.Reader) error {
	if fs == nil {
		fs = vfs.Default
	}
	if err := mkdirSynced(fs, dir); err != nil {
		return err
	}
	lock, err := fs.Lock(fs.PathJoin(dir, "LOCK"))
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrLocked, dir, err)
	}
	defer lock.Close()
	// A complete restore not yet swapped in (a crash came before the
	// start that would) is the store this one replaces: it is swapped
	// in first. An incomplete one is superseded.
	if err := finishStagedRestore(fs, dir); err != nil {
		return fmt.Errorf("store: restore: finish the restore before: %w", err)
	}
	if err := discardStage(fs, dir); err != nil {
		return fmt.Errorf("store: restore: %w", err)
	}
	if err := stageSnapshot(fs, fs.PathJoin(dir, restoreStage), r); err != nil {
		// The old store was not touched. A start discards what is left
		// of the staging directory if this fails too.
		return errors.Join(fmt.Errorf("store: restore: %w", err), discardStage(fs, dir))
	}
	return nil
}

// discardStage removes a restore staged in dir: its COMPLETE first, so
// that no part of it is ever taken for a whole one.
func discardStage(fs vfs.FS, dir string) error {
	if err := removeSynced(fs, fs.PathJoin(dir, restoreStage), restoreDone); err != nil {
		return err
	}
	return removeSynced(fs, dir, restoreStage)
}

// finishStagedRestore swaps in a complete restore staged in dir, as a
// start would, opening the index itself.
func finishStagedRestore(fs vfs.FS, dir string) error {
	stage := fs.PathJoin(dir, restoreStage)
	if _, err := fs.Stat(fs.PathJoin(stage, restoreDone)); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	values, _, err := swapRestore(fs, dir)
	if err != nil || values == "" {
		return err
	}
	db, err := pebble.Open(fs.PathJoin(dir, "index"), &pebble.Options{FS: fs, Logger: quietPebble{}})
	if err != nil {
		return err
	}
	_, err = loadValues(db, fs, values)
	if err = errors.Join(err, db.Close()); err != nil {
		return err
	}
	return endRestore(fs, dir)
}

// stageSnapshot writes the snapshot read from r into the staging
// directory stage and, once every byte of it is synced, marks it
// complete.
func stageSnapshot(fs vfs.FS, stage string, r io.Reader) error {
	if err := mkdirSynced(fs, stage); err != nil {
		return err
	}
	logDir := fs.PathJoin(stage, "commitlog")
	if err := mkdirSynced(fs, logDir); err != nil {
		return err
	}
	vf, err := fs.Create(fs.PathJoin(stage, restoreValues), vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	vw := bufio.NewWriterSize(vf, 1<<20)
	err = readSnapshot(bufio.NewReaderSize(r, 1<<20), func(kind byte, key string, v io.Reader, vlen int64) error {
		switch kind {
		case snapVersion:
			if key != snapFull {
				return fmt.Errorf("%w: a %s snapshot holds no log to restore from", ErrCorruption, key)
			}
			return nil
		case snapIndex:
			if _, err := vw.Write(itemHeader(nil, snapIndex, key, vlen)); err != nil {
				return err
			}
			_, err := io.CopyN(vw, v, vlen)
			return err
		case snapSegment:
			if !isSegmentName(key) {
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
		_, err = vw.Write(itemHeader(nil, snapEnd, "", 0))
	}
	if err == nil {
		err = vw.Flush()
	}
	if err == nil {
		err = vf.Sync()
	}
	if err := errors.Join(err, vf.Close()); err != nil {
		return err
	}
	if err := syncDir(fs, logDir); err != nil {
		return err
	}
	f, err := fs.Create(fs.PathJoin(stage, restoreDone), vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return err
	}
	return syncDir(fs, stage)
}

// isSegmentName reports whether name is a segment file's name: its base
// offset in segmentNameLen decimal digits.
func isSegmentName(name string) bool {
	if len(name) != segmentNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return false
		}
	}
	return true
}

// swapRestore rolls a restore staged in dir forward up to the loading
// of its index values, or discards it (see RestoreDir). For a complete
// one it swaps the commit log in, removes the index and the key index,
// and returns the file of index values the new index must be loaded
// from; it reports whether it discarded an incomplete one. Without a
// staging directory it does nothing.
func swapRestore(fs vfs.FS, dir string) (values string, discarded bool, err error) {
	if err := removeSynced(fs, dir, restoreEnded); err != nil {
		return "", false, err
	}
	stage := fs.PathJoin(dir, restoreStage)
	if _, err := fs.Stat(stage); errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	} else if err != nil {
		return "", false, err
	}
	if _, err := fs.Stat(fs.PathJoin(stage, restoreDone)); errors.Is(err, os.ErrNotExist) {
		return "", true, discardStage(fs, dir)
	} else if err != nil {
		return "", false, err
	}
	staged := fs.PathJoin(stage, "commitlog")
	if _, err := fs.Stat(staged); err == nil {
		if err := removeSynced(fs, dir, "commitlog"); err != nil {
			return "", false, err
		}
		if err := fs.Rename(staged, fs.PathJoin(dir, "commitlog")); err != nil {
			return "", false, err
		}
		// The destination first: until it is synced, the staged entry
		// must stay where the next start finds it.
		if err := syncDir(fs, dir); err != nil {
			return "", false, err
		}
		if err := syncDir(fs, stage); err != nil {
			return "", false, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, err // else swapped in before a crash
	}
	for _, sub := range []string{"index", keyFileDir} {
		if err := removeSynced(fs, dir, sub); err != nil {
			return "", false, err
		}
	}
	return fs.PathJoin(stage, restoreValues), false, nil
}

// loadValues writes the index values staged in the file values into db,
// synced, and returns how many there were.
func loadValues(db *pebble.DB, fs vfs.FS, values string) (int, error) {
	f, err := fs.Open(values)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	b := db.NewBatch()
	defer func() { b.Close() }()
	n := 0
	err = readSnapshot(bufio.NewReaderSize(f, 1<<20), func(kind byte, key string, v io.Reader, vlen int64) error {
		if kind != snapIndex {
			return fmt.Errorf("%w: staged index item of kind %q", ErrCorruption, kind)
		}
		buf := make([]byte, vlen) // at most maxSnapIndexValue: readSnapshot
		if _, err := io.ReadFull(v, buf); err != nil {
			return err
		}
		if err := b.Set([]byte(key), buf, nil); err != nil {
			return err
		}
		n++
		if b.Len() < restoreBatchBytes {
			return nil
		}
		// Synced at the end; a crash before loads them all again.
		if err := b.Commit(pebble.NoSync); err != nil {
			return err
		}
		b.Close()
		b = db.NewBatch()
		return nil
	})
	if err != nil {
		return n, err
	}
	return n, b.Commit(pebble.Sync)
}

// endRestore ends a restore whose index values are loaded: the staging
// directory is renamed out of the way in one step, then removed.
func endRestore(fs vfs.FS, dir string) error {
	if err := fs.Rename(fs.PathJoin(dir, restoreStage), fs.PathJoin(dir, restoreEnded)); err != nil {
		return err
	}
	if err := syncDir(fs, dir); err != nil {
		return err
	}
	return removeSynced(fs, dir, restoreEnded)
}

// removeSynced removes dir/name and all it holds, if it exists, and
// syncs dir.
func removeSynced(fs vfs.FS, dir, name string) error {
	if _, err := fs.Stat(fs.PathJoin(dir, name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := fs.RemoveAll(fs.PathJoin(dir, name)); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return syncDir(fs, dir)
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

// quietPebble drops pebble's informational lines while a directory is
// restored; failures surface as the calls' errors.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, a ...any) {
	panic(fmt.Sprintf(format, a...))
}
