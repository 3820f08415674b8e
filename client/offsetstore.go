package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// errOffsetNotFound is what an offsetBroker returns when the broker has no
// offset for the group and queue.
var errOffsetNotFound = errors.New("client: consumer offset not found")

// readType says where offsetStore.read looks.
type readType uint8

const (
	// readMemory returns the offset held in memory, -1 if none.
	readMemory readType = iota
	// readStore asks the backing store (broker or file) and caches the
	// answer in memory.
	readStore
	// readMemoryThenStore reads memory, and the store when memory has none.
	readMemoryThenStore
)

// offsetStore keeps a consumer group's consumed offsets: in memory as
// consumption advances, persisted when the consumer asks (every few seconds,
// when a queue is dropped, at shutdown). An offset is the next one to
// consume. The remote store keeps them on the broker (clustering), the local
// one in a file (broadcasting).
type offsetStore interface {
	// load reads what was persisted before the consumer starts.
	load() error
	// update sets q's offset in memory; with increaseOnly it never moves
	// back (consume progress), without it may (seek, reset).
	update(q MessageQueue, offset int64, increaseOnly bool)
	// read returns q's offset, or -1 when there is none.
	read(ctx context.Context, q MessageQueue, from readType) (int64, error)
	// persist saves the offsets of qs: the remote store sends every one,
	// the local store writes when one changed since it was last saved.
	// The errors of the queues that failed are joined, and those queues
	// are tried again by the next call.
	persist(ctx context.Context, qs []MessageQueue) error
	// persistAll is persist of every queue held in memory.
	persistAll(ctx context.Context) error
	// remove forgets q, which is no longer assigned.
	remove(q MessageQueue)
}

// offsetBroker is how the remote store reaches the brokers; the client
// instance implements it.
type offsetBroker interface {
	// queryConsumerOffset returns the group's offset of q, or
	// errOffsetNotFound when the broker has none.
	queryConsumerOffset(ctx context.Context, group string, q MessageQueue) (int64, error)
	updateConsumerOffset(ctx context.Context, group string, q MessageQueue, offset int64) error
}

// storedOffset is one queue's offset in memory.
type storedOffset struct {
	offset int64
	// saved is the offset last known to be in the backing store, -1 if
	// none; the local store skips a write while offset == saved.
	saved int64
}

// offsetTable is the in-memory part both stores share.
//
// Lock order: a store's persistMu, then offsetTable.mu; mu is never held
// across a broker call or file I/O.
type offsetTable struct {
	mu struct {
		sync.Mutex
		m map[MessageQueue]*storedOffset
		// removals counts queues removed, so a store that saves the
		// whole table knows it changed.
		removals uint64
	}
}

func (t *offsetTable) init() { t.mu.m = make(map[MessageQueue]*storedOffset) }

func (t *offsetTable) update(q MessageQueue, offset int64, increaseOnly bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o, ok := t.mu.m[q]
	if !ok {
		t.mu.m[q] = &storedOffset{offset: offset, saved: -1}
		return
	}
	if !increaseOnly || offset > o.offset {
		o.offset = offset
	}
}

// loaded records offset as both the current and the stored offset of q.
func (t *offsetTable) loaded(q MessageQueue, offset int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.m[q] = &storedOffset{offset: offset, saved: offset}
}

func (t *offsetTable) get(q MessageQueue) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o, ok := t.mu.m[q]; ok {
		return o.offset, true
	}
	return -1, false
}

func (t *offsetTable) remove(q MessageQueue) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.mu.m[q]; ok {
		delete(t.mu.m, q)
		t.mu.removals++
	}
}

// saved marks offset as stored for q, unless q was removed meanwhile.
func (t *offsetTable) saved(q MessageQueue, offset int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o, ok := t.mu.m[q]; ok {
		o.saved = offset
	}
}

// queues returns the queues held, in order.
func (t *offsetTable) queues() []MessageQueue {
	t.mu.Lock()
	defer t.mu.Unlock()
	qs := make([]MessageQueue, 0, len(t.mu.m))
	for q := range t.mu.m {
		qs = append(qs, q)
	}
	slices.SortFunc(qs, offsetQueueOrder)
	return qs
}

func offsetQueueOrder(a, b MessageQueue) int {
	switch {
	case a.less(b):
		return -1
	case b.less(a):
		return 1
	}
	return 0
}

// remoteOffsetStore keeps a group's offsets on the brokers (clustering).
type remoteOffsetStore struct {
	group  string
	broker offsetBroker
	// persistMu serializes persists, so an older offset sent by one can
	// never reach a broker after a newer one sent by another.
	persistMu sync.Mutex
	table     offsetTable
}

func newRemoteOffsetStore(group string, broker offsetBroker) *remoteOffsetStore {
	s := &remoteOffsetStore{group: group, broker: broker}
	s.table.init()
	return s
}

// load does nothing: offsets are read from the broker queue by queue.
func (s *remoteOffsetStore) load() error { return nil }

func (s *remoteOffsetStore) update(q MessageQueue, offset int64, increaseOnly bool) {
	s.table.update(q, offset, increaseOnly)
}

// read returns q's offset. From the broker, a missing offset is -1 with no
// error; a failed query is -1 with the error, and memory is left alone.
func (s *remoteOffsetStore) read(ctx context.Context, q MessageQueue, from readType) (int64, error) {
	if from != readStore {
		if o, ok := s.table.get(q); ok || from == readMemory {
			return o, nil
		}
	}
	o, err := s.broker.queryConsumerOffset(ctx, s.group, q)
	if errors.Is(err, errOffsetNotFound) {
		return -1, nil
	}
	if err != nil {
		return -1, fmt.Errorf("client: query offset of %s: %w", q, err)
	}
	s.table.loaded(q, o)
	return o, nil
}

// persist sends the offset of each of qs held in memory, changed or not,
// as the official clients do: the broker's copy may have moved back since
// it was last sent, by a crash that lost its last checkpoint or an older
// commit it served late, and it heals at the next round.
func (s *remoteOffsetStore) persist(ctx context.Context, qs []MessageQueue) error {
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	var errs []error
	for _, q := range qs {
		s.table.mu.Lock()
		o, ok := s.table.mu.m[q]
		var offset int64
		if ok {
			offset = o.offset
		}
		s.table.mu.Unlock()
		if !ok || offset < 0 {
			continue
		}
		if err := s.broker.updateConsumerOffset(ctx, s.group, q, offset); err != nil {
			errs = append(errs, fmt.Errorf("client: persist offset %d of %s: %w", offset, q, err))
			continue
		}
		s.table.saved(q, offset)
	}
	return errors.Join(errs...)
}

func (s *remoteOffsetStore) persistAll(ctx context.Context) error {
	return s.persist(ctx, s.table.queues())
}

func (s *remoteOffsetStore) remove(q MessageQueue) { s.table.remove(q) }

// offsetsFileName is the local store's file; the previous good version is
// kept beside it with offsetsBackupSuffix, and a new version is written to
// offsetsTempSuffix first.
const (
	offsetsFileName     = "offsets.json"
	offsetsBackupSuffix = ".bak"
	offsetsTempSuffix   = ".tmp"
)

// offsetsFile is the local store's file format, JSON:
//
//	{"offsets": [
//	  {"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": 123},
//	  ...
//	]}
//
// Entries are sorted by topic, broker name and queue id. A list rather
// than a map keyed by a joined string, so no name needs escaping.
type offsetsFile struct {
	Offsets []offsetsFileEntry `json:"offsets"`
}

type offsetsFileEntry struct {
	MessageQueue       // topic, brokerName, queueId
	Offset       int64 `json:"offset"` // the next offset to consume
}

// localOffsetStore keeps a group's offsets in a file on this machine
// (broadcasting, where every consumer has its own progress), at
// <dir>/<clientID>/<group>/offsets.json.
//
// A persist writes the whole table: to offsets.json.tmp, synced, then the
// current offsets.json is renamed to offsets.json.bak and the temporary file
// renamed to offsets.json, and the directory synced. A crash at any point
// leaves either offsets.json or offsets.json.bak holding a complete
// version, and load falls back to the backup when the main file is missing
// or unreadable.
type localOffsetStore struct {
	dir string // <dir>/<clientID>/<group>
	// persistMu serializes writes of the file and guards mainGood and
	// savedRemovals.
	persistMu sync.Mutex
	// mainGood is whether offsets.json is known to be complete: it was
	// loaded or written by us. A file that is not is replaced rather than
	// kept as the backup, so it cannot push out a good backup.
	mainGood bool
	// savedRemovals is table.mu.removals as of the last write.
	savedRemovals uint64
	table         offsetTable
}

func newLocalOffsetStore(dir, clientID, group string) *localOffsetStore {
	s := &localOffsetStore{dir: filepath.Join(dir, clientID, group)}
	s.table.init()
	return s
}

func (s *localOffsetStore) path() string { return filepath.Join(s.dir, offsetsFileName) }

// load reads the file, or its backup when the file is missing or corrupt,
// into memory. Neither existing is an empty table; both unreadable is an
// error.
func (s *localOffsetStore) load() error {
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	offsets, mainOK, err := s.readFile()
	if err != nil {
		return err
	}
	s.mainGood = mainOK
	for _, e := range offsets {
		s.table.loaded(e.MessageQueue, e.Offset)
	}
	return nil
}

// readFile returns the file's entries and whether they came from the main
// file (rather than the backup or nothing).
func (s *localOffsetStore) readFile() ([]offsetsFileEntry, bool, error) {
	main := s.path()
	offsets, mainErr := readOffsetsFile(main)
	if mainErr == nil {
		return offsets, true, nil
	}
	offsets, bakErr := readOffsetsFile(main + offsetsBackupSuffix)
	switch {
	case bakErr == nil:
		return offsets, false, nil
	case errors.Is(mainErr, os.ErrNotExist) && errors.Is(bakErr, os.ErrNotExist):
		return nil, false, nil
	}
	return nil, false, fmt.Errorf("client: load offsets: %w", errors.Join(mainErr, bakErr))
}

func readOffsetsFile(path string) ([]offsetsFileEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f offsetsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f.Offsets, nil
}

func (s *localOffsetStore) update(q MessageQueue, offset int64, increaseOnly bool) {
	s.table.update(q, offset, increaseOnly)
}

// read returns q's offset; from the store it reads the file (or backup).
func (s *localOffsetStore) read(_ context.Context, q MessageQueue, from readType) (int64, error) {
	if from != readStore {
		if o, ok := s.table.get(q); ok || from == readMemory {
			return o, nil
		}
	}
	offsets, _, err := s.readFile()
	if err != nil {
		return -1, err
	}
	for _, e := range offsets {
		if e.MessageQueue == q {
			s.table.loaded(q, e.Offset)
			return e.Offset, nil
		}
	}
	return -1, nil
}

// persist writes the whole table if any offset changed since the last
// write: the file holds every queue, so saving one saves all.
func (s *localOffsetStore) persist(ctx context.Context, _ []MessageQueue) error {
	return s.persistAll(ctx)
}

func (s *localOffsetStore) persistAll(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.persistMu.Lock()
	defer s.persistMu.Unlock()

	s.table.mu.Lock()
	var f offsetsFile
	changed := false
	for q, o := range s.table.mu.m {
		f.Offsets = append(f.Offsets, offsetsFileEntry{MessageQueue: q, Offset: o.offset})
		changed = changed || o.offset != o.saved
	}
	// A removed queue changes the file too.
	removals := s.table.mu.removals
	changed = changed || removals != s.savedRemovals
	s.table.mu.Unlock()
	if !changed {
		return nil
	}
	slices.SortFunc(f.Offsets, func(a, b offsetsFileEntry) int { return offsetQueueOrder(a.MessageQueue, b.MessageQueue) })
	b, err := json.MarshalIndent(&f, "", "  ")
	if err != nil {
		return fmt.Errorf("client: persist offsets: %w", err)
	}
	if err := s.writeFile(b); err != nil {
		return fmt.Errorf("client: persist offsets: %w", err)
	}
	s.savedRemovals = removals
	for _, e := range f.Offsets {
		s.table.saved(e.MessageQueue, e.Offset)
	}
	return nil
}

// writeFile replaces the file with b as described on localOffsetStore.
func (s *localOffsetStore) writeFile(b []byte) error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	main := s.path()
	tmp := main + offsetsTempSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if s.mainGood {
		if err := os.Rename(main, main+offsetsBackupSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := os.Rename(tmp, main); err != nil {
		return err
	}
	s.mainGood = true
	return syncOffsetsDir(s.dir)
}

// syncOffsetsDir makes renames in dir durable.
func syncOffsetsDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *localOffsetStore) remove(q MessageQueue) { s.table.remove(q) }
