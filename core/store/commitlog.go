package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rmq-go/rmq/core/message"
)

// Frame constants.
const (
	// trailerLen is the CRC-32C after each record.
	trailerLen = 4
	// BlankMagic follows a zero TOTALSIZE to mark the end of a segment whose
	// remaining space could not hold the next record.
	BlankMagic uint32 = 0xCBD43194
	// blankLen is the end-of-segment marker's length; every segment keeps
	// room for one.
	blankLen = 8
	// segmentNameLen is the number of digits in a segment file name.
	segmentNameLen = 20

	// RoundMagic marks the round marker that begins each group of frames
	// written and synced together.
	RoundMagic uint32 = 0x524D5144
	// markerLen is the marker's TOTALSIZE: size, magic, start, flags.
	markerLen      = 4 + 4 + 8 + 4
	markerFrameLen = markerLen + trailerLen
	// markerSync says the round was written under FlushSync: it was written
	// only after every earlier round's fsync returned.
	markerSync uint32 = 1
)

// appendMarker appends a round marker for a round starting at off.
func appendMarker(dst []byte, off int64, flags uint32) []byte {
	at := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, markerLen)
	dst = binary.BigEndian.AppendUint32(dst, RoundMagic)
	dst = binary.BigEndian.AppendUint64(dst, uint64(off))
	dst = binary.BigEndian.AppendUint32(dst, flags)
	return binary.BigEndian.AppendUint32(dst, frameCRC(dst[at:]))
}

// checkMarker reports whether frame is a valid round marker written at off,
// and its flags.
func checkMarker(frame []byte, off int64) (uint32, bool) {
	if len(frame) != markerFrameLen || binary.BigEndian.Uint32(frame) != markerLen ||
		binary.BigEndian.Uint32(frame[4:]) != RoundMagic ||
		int64(binary.BigEndian.Uint64(frame[8:])) != off ||
		binary.BigEndian.Uint32(frame[markerLen:]) != frameCRC(frame[:markerLen]) {
		return 0, false
	}
	return binary.BigEndian.Uint32(frame[16:]), true
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func frameCRC(rec []byte) uint32 { return crc32.Checksum(rec, castagnoli) }

// segment is one commit-log file.
type segment struct {
	base int64
	name string
	f    vfs.File
}

// commitLog is the set of segment files. Reads take mu shared; adding and
// deleting segments take it exclusively.
type commitLog struct {
	fs      vfs.FS
	dir     string
	segSize int64

	mu   sync.RWMutex
	segs []*segment // sorted by base
}

func segmentName(base int64) string { return fmt.Sprintf("%020d", base) }

// openCommitLog opens every segment in dir.
func openCommitLog(fs vfs.FS, dir string, segSize int64) (*commitLog, error) {
	if err := mkdirSynced(fs, dir); err != nil {
		return nil, err
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("store: list %s: %w", dir, err)
	}
	cl := &commitLog{fs: fs, dir: dir, segSize: segSize}
	for _, name := range names {
		if len(name) != segmentNameLen {
			continue // not ours (editor backups and the like)
		}
		base, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			continue
		}
		if base%segSize != 0 {
			cl.close()
			return nil, fmt.Errorf("%w: segment %s is not aligned to the segment size %d (was the data directory created with another size?)",
				ErrCorruption, name, segSize)
		}
		f, err := fs.OpenReadWrite(fs.PathJoin(dir, name), vfs.WriteCategoryUnspecified)
		if err != nil {
			cl.close()
			return nil, fmt.Errorf("store: open segment %s: %w", name, err)
		}
		cl.segs = append(cl.segs, &segment{base: base, name: name, f: f})
	}
	slices.SortFunc(cl.segs, func(a, b *segment) int { return int(a.base/segSize - b.base/segSize) })
	return cl, nil
}

func (cl *commitLog) close() error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var errs []error
	for _, s := range cl.segs {
		errs = append(errs, s.f.Close())
	}
	cl.segs = nil
	return errors.Join(errs...)
}

// minOffset returns the base of the oldest segment, or 0.
func (cl *commitLog) minOffset() int64 {
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	if len(cl.segs) == 0 {
		return 0
	}
	return cl.segs[0].base
}

// segmentLocked returns the segment holding off, or nil. mu must be held.
func (cl *commitLog) segmentLocked(off int64) *segment {
	base := off - off%cl.segSize
	i, ok := slices.BinarySearchFunc(cl.segs, base, func(s *segment, b int64) int {
		switch {
		case s.base < b:
			return -1
		case s.base > b:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return cl.segs[i]
}

// segment returns the segment with base, creating it (and syncing the
// directory) if it does not exist. Only the flusher creates segments.
func (cl *commitLog) segment(base int64) (*segment, bool, error) {
	cl.mu.RLock()
	s := cl.segmentLocked(base)
	cl.mu.RUnlock()
	if s != nil {
		return s, false, nil
	}
	name := segmentName(base)
	f, err := cl.fs.Create(cl.fs.PathJoin(cl.dir, name), vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, false, fmt.Errorf("store: create segment %s: %w", name, err)
	}
	if err := cl.syncDir(); err != nil {
		f.Close()
		return nil, false, err
	}
	s = &segment{base: base, name: name, f: f}
	cl.mu.Lock()
	cl.segs = append(cl.segs, s)
	slices.SortFunc(cl.segs, func(a, b *segment) int { return int(a.base/cl.segSize - b.base/cl.segSize) })
	cl.mu.Unlock()
	return s, true, nil
}

func (cl *commitLog) syncDir() error { return syncDir(cl.fs, cl.dir) }

// syncDir syncs dir, so entries created or removed in it survive a crash.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("store: open %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("store: sync %s: %w", dir, err)
	}
	return nil
}

// readAt fills p from the log at off. The range must lie in one segment.
func (cl *commitLog) readAt(p []byte, off int64) error {
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	s := cl.segmentLocked(off)
	if s == nil {
		if len(cl.segs) > 0 && off < cl.segs[0].base {
			return fmt.Errorf("%w: commit-log offset %d", ErrOffsetGone, off)
		}
		return fmt.Errorf("%w: no segment holds commit-log offset %d", ErrNotFound, off)
	}
	n, err := s.f.ReadAt(p, off-s.base)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		return fmt.Errorf("%w: commit-log offset %d: %d bytes past the end of segment %s", ErrNotFound, off, len(p)-n, s.name)
	}
	return fmt.Errorf("store: read segment %s at %d: %w", s.name, off-s.base, err)
}

// checkFrame verifies that frame holds one record followed by its CRC-32C
// trailer and that the record sits at off. It returns the record.
func checkFrame(frame []byte, off int64) (message.Record, error) {
	if len(frame) < message.MinRecordLen+trailerLen {
		return nil, fmt.Errorf("%w: commit-log offset %d: frame of %d bytes", ErrCorruption, off, len(frame))
	}
	rec := message.Record(frame[:len(frame)-trailerLen])
	want := binary.BigEndian.Uint32(frame[len(frame)-trailerLen:])
	if got := frameCRC(rec); got != want {
		return nil, fmt.Errorf("%w: commit-log offset %d: record checksum %08x, stored %08x", ErrCorruption, off, got, want)
	}
	if err := rec.Validate(); err != nil {
		return nil, fmt.Errorf("%w: commit-log offset %d: %v", ErrCorruption, off, err)
	}
	if rec.CommitLogOffset() != off {
		return nil, fmt.Errorf("%w: commit-log offset %d: record says it belongs at %d", ErrCorruption, off, rec.CommitLogOffset())
	}
	return rec, nil
}

// mkdirSynced creates dir and its parents and syncs each of them, so the
// new directory entries survive a crash.
func mkdirSynced(fs vfs.FS, dir string) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("store: create %s: %w", dir, err)
	}
	for d := dir; ; d = fs.PathDir(d) {
		f, err := fs.OpenDir(d)
		if err != nil {
			return fmt.Errorf("store: open %s: %w", d, err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("store: sync %s: %w", d, err)
		}
		if parent := fs.PathDir(d); parent == d || parent == "" {
			return nil
		}
	}
}
