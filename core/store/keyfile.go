package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The key index's files (see doc.go, "Key index"): a chain of hash-slot
// files in Dir/keyindex, each a header, a slot table and a run of entries.
//
//	header (64 bytes)  magic "RMQKIDX1", slots(4) capacity(4) count(4)
//	                   flags(4) end(8) minTime(8) maxTime(8), 12 spare
//	                   bytes, CRC-32C of the 60 bytes before it (4)
//	slots              slots × entry number(4), 0 for none
//	entries            capacity × hash(8) offset(8) storeTime(8) prev(4)
//
// An entry is numbered from 1; prev is the number of the entry before it
// in the same slot, so a slot's entries form a chain from newest to
// oldest. Only the newest file, the active one, takes entries; its slot
// table lives in memory and is built again from its entries at startup,
// so the file is only ever appended to until it fills. Then the slot table
// is written, the file is synced and marked sealed, and a new file starts.
//
// No file is synced on the append path. The flusher only writes entries; a
// full file waits, its slot table in memory, for the next sync (every
// checkpoint) to seal it. A file's header is written by that sync or by its
// sealing, and only after every older file is sealed: a newest file without
// a header is one whose older files may not be complete on disk, so startup
// drops it and goes on from the file before it.

const (
	keyFileDir       = "keyindex"
	keyFileExt       = ".kidx"
	keyFileMagic     = "RMQKIDX1"
	keyFileHeaderLen = 64
	keyEntryLen      = 28
	keyFileSealed    = 1 // header flag: the slot table is written

	// keySlotsPerEntry is the ratio of entries to slots: chains average
	// this long in a full file.
	keySlotsPerEntry = 8
	// keyQueryReads bounds the entries one query reads, so that a key
	// shared by millions of records or a narrow time range cannot make a
	// query walk a whole chain.
	keyQueryReads = 1 << 16
)

// keyFile is one file of the key index. Its fields are guarded by
// keyIndex.mu, except where noted.
type keyFile struct {
	seq   int64
	name  string
	f     vfs.File
	slots uint32 // slot count
	cap   uint32 // entry capacity

	table  []uint32 // the active file's slot table; nil until its first entry
	count  uint32   // entries written to the file
	end    int64    // commit-log offset below which every record is indexed
	minTs  int64    // store-time range of the entries
	maxTs  int64
	sealed bool // guarded by keyIndex.hmu as well
	headed bool // a header of it has been synced (under keyIndex.hmu)
	refs   int  // queries reading the file
	doomed bool // removed from the index; closed when refs drops to 0
}

func (f *keyFile) entriesAt() int64 { return keyFileHeaderLen + 4*int64(f.slots) }

// keyIndex is the set of key-index files.
type keyIndex struct {
	fs       vfs.FS
	dir      string
	entries  uint32 // capacity of a new file
	log      *slog.Logger
	failures *atomic.Int64 // counts fail; may be nil

	mu    sync.Mutex
	files []*keyFile // oldest first; the last one takes entries unless full
	full  []*keyFile // files filled, for the next sync to seal
	end   int64      // commit-log offset below which every record is indexed
	buf   []byte     // entries added to the active file after its count, not yet written
	// broken is set by a failed write: no more entries are taken until a
	// restart, which indexes again from the last durable end.
	broken bool

	hmu     sync.Mutex // serialises syncs
	durable int64      // the end last written to a synced header; under hmu
}

// openKeyIndex opens the key index in dir, creating it if needed. A
// damaged newest file is dropped and the index ends where the file before
// it does; damage anywhere else drops every file, and the caller indexes
// the whole log again from end (then 0).
func openKeyIndex(fs vfs.FS, dir string, entries int, log *slog.Logger) (*keyIndex, error) {
	ki := &keyIndex{fs: fs, dir: dir, entries: uint32(entries), log: log}
	if err := mkdirSynced(fs, dir); err != nil {
		return nil, err
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("store: list key index: %w", err)
	}
	var seqs []int64
	for _, n := range names {
		seq, ok := strings.CutSuffix(n, keyFileExt)
		if !ok {
			continue
		}
		v, err := strconv.ParseInt(seq, 10, 64)
		if err != nil || v < 0 {
			continue
		}
		seqs = append(seqs, v)
	}
	slices.Sort(seqs)
	// The newest file first: without a header it is dropped, and the
	// file before it is the newest.
	var newest *keyFile
	for len(seqs) > 0 && newest == nil {
		seq := seqs[len(seqs)-1]
		kf, err := ki.openFile(seq, true)
		if err == nil {
			newest = kf
			break
		}
		log.Warn("key index: newest file unreadable; its records are indexed again", "file", keyFileName(seq), "err", err)
		if err := fs.Remove(fs.PathJoin(dir, keyFileName(seq))); err != nil {
			return nil, fmt.Errorf("store: key index: remove %s: %w", keyFileName(seq), err)
		}
		if err := syncDir(fs, dir); err != nil {
			return nil, err
		}
		seqs = seqs[:len(seqs)-1]
	}
	if newest == nil {
		return ki, nil
	}
	for i, seq := range seqs {
		if i > 0 && seqs[i-1] != seq-1 {
			newest.f.Close()
			return ki.rebuildAll(seqs, fmt.Errorf("%w: key index file %s missing", ErrCorruption, keyFileName(seq-1)))
		}
		if i == len(seqs)-1 {
			break
		}
		kf, err := ki.openFile(seq, false)
		if err != nil {
			newest.f.Close()
			return ki.rebuildAll(seqs, fmt.Errorf("key index file %s: %w", keyFileName(seq), err))
		}
		ki.files = append(ki.files, kf)
	}
	ki.files = append(ki.files, newest)
	if !newest.sealed && newest.count == newest.cap {
		ki.full = append(ki.full, newest)
	}
	if n := len(ki.files); n > 0 {
		ki.end = ki.files[n-1].end
	}
	ki.durable = ki.end
	return ki, nil
}

// rebuildAll removes every file of an index found damaged by cause; the
// caller then indexes the whole log again.
func (ki *keyIndex) rebuildAll(seqs []int64, cause error) (*keyIndex, error) {
	ki.log.Error("key index damaged; it is built again from the commit log", "err", cause)
	ki.close()
	for _, seq := range seqs {
		if err := ki.fs.Remove(ki.fs.PathJoin(ki.dir, keyFileName(seq))); err != nil {
			return nil, fmt.Errorf("store: key index: remove %s: %w", keyFileName(seq), err)
		}
	}
	if err := syncDir(ki.fs, ki.dir); err != nil {
		return nil, err
	}
	return ki, nil
}

func keyFileName(seq int64) string { return fmt.Sprintf("%020d%s", seq, keyFileExt) }

// openFile opens file seq and checks its header; for the newest file
// (active) it also builds the slot table from the entries.
func (ki *keyIndex) openFile(seq int64, active bool) (*keyFile, error) {
	name := keyFileName(seq)
	f, err := ki.fs.OpenReadWrite(ki.fs.PathJoin(ki.dir, name), vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	kf := &keyFile{seq: seq, name: name, f: f, headed: true}
	if err := kf.readHeader(); err != nil {
		f.Close()
		return nil, err
	}
	if !active && !kf.sealed {
		f.Close()
		return nil, fmt.Errorf("%w: key index file before the newest is not sealed", ErrCorruption)
	}
	if active && !kf.sealed {
		if err := kf.rebuild(); err != nil {
			f.Close()
			return nil, err
		}
	}
	return kf, nil
}

func (kf *keyFile) readHeader() error {
	var h [keyFileHeaderLen]byte
	if _, err := kf.f.ReadAt(h[:], 0); err != nil {
		return fmt.Errorf("%w: key index header: %v", ErrCorruption, err)
	}
	if string(h[:8]) != keyFileMagic || crc32.Checksum(h[:60], castagnoli) != binary.BigEndian.Uint32(h[60:]) {
		return fmt.Errorf("%w: key index header", ErrCorruption)
	}
	kf.slots = binary.BigEndian.Uint32(h[8:])
	kf.cap = binary.BigEndian.Uint32(h[12:])
	kf.count = binary.BigEndian.Uint32(h[16:])
	kf.sealed = binary.BigEndian.Uint32(h[20:])&keyFileSealed != 0
	kf.end = int64(binary.BigEndian.Uint64(h[24:]))
	kf.minTs = int64(binary.BigEndian.Uint64(h[32:]))
	kf.maxTs = int64(binary.BigEndian.Uint64(h[40:]))
	if kf.cap == 0 || kf.cap > maxKeyIndexFileEntries || kf.slots == 0 || kf.slots > kf.cap || kf.count > kf.cap || kf.end < 0 {
		return fmt.Errorf("%w: key index header fields", ErrCorruption)
	}
	return nil
}

func (kf *keyFile) header() []byte {
	h := make([]byte, keyFileHeaderLen)
	copy(h, keyFileMagic)
	binary.BigEndian.PutUint32(h[8:], kf.slots)
	binary.BigEndian.PutUint32(h[12:], kf.cap)
	binary.BigEndian.PutUint32(h[16:], kf.count)
	if kf.sealed {
		binary.BigEndian.PutUint32(h[20:], keyFileSealed)
	}
	binary.BigEndian.PutUint64(h[24:], uint64(kf.end))
	binary.BigEndian.PutUint64(h[32:], uint64(kf.minTs))
	binary.BigEndian.PutUint64(h[40:], uint64(kf.maxTs))
	binary.BigEndian.PutUint32(h[60:], crc32.Checksum(h[:60], castagnoli))
	return h
}

// rebuild reads the active file's entries and builds its slot table. An
// entry the header counts that is missing, or whose chain link is not the
// slot's newest entry before it, makes the file damaged: its end no longer
// says what it holds.
func (kf *keyFile) rebuild() error {
	if kf.count == 0 {
		return nil
	}
	kf.table = make([]uint32, kf.slots)
	kf.minTs, kf.maxTs = math.MaxInt64, math.MinInt64
	buf := make([]byte, 1<<20/keyEntryLen*keyEntryLen)
	for no := uint32(0); no < kf.count; {
		n := min(int(kf.count-no)*keyEntryLen, len(buf))
		if _, err := kf.f.ReadAt(buf[:n], kf.entriesAt()+int64(no)*keyEntryLen); err != nil {
			return fmt.Errorf("%w: key index %s: entries: %v", ErrCorruption, kf.name, err)
		}
		for p := 0; p < n; p += keyEntryLen {
			e := buf[p : p+keyEntryLen]
			slot := binary.BigEndian.Uint64(e) % uint64(kf.slots)
			if binary.BigEndian.Uint32(e[24:]) != kf.table[slot] {
				return fmt.Errorf("%w: key index %s: entry %d", ErrCorruption, kf.name, no+1)
			}
			no++
			kf.table[slot] = no
			ts := int64(binary.BigEndian.Uint64(e[16:]))
			kf.minTs, kf.maxTs = min(kf.minTs, ts), max(kf.maxTs, ts)
		}
	}
	return nil
}

// keyHash is the FNV-1a hash of kind, topic and key; the topic's length
// goes in too, so no topic/key pair hashes as another by construction.
// It is written out because hash/fnv's, used through its interface,
// allocates twice per key on the flusher's path.
func keyHash(kind byte, topic, key []byte) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	h = (h ^ uint64(kind)) * prime
	h = (h ^ uint64(len(topic))) * prime
	for _, c := range topic {
		h = (h ^ uint64(c)) * prime
	}
	for _, c := range key {
		h = (h ^ uint64(c)) * prime
	}
	return h
}

// addLocked adds an entry for the record at off, stored at ts, under
// hash h. mu must be held; only the flusher (or recovery) adds.
func (ki *keyIndex) addLocked(h uint64, off, ts int64) {
	if ki.broken {
		return
	}
	kf := ki.activeLocked()
	if kf == nil {
		return
	}
	if kf.table == nil {
		kf.table = make([]uint32, kf.slots)
	}
	no := kf.count + uint32(len(ki.buf)/keyEntryLen) + 1
	slot := h % uint64(kf.slots)
	ki.buf = binary.BigEndian.AppendUint64(ki.buf, h)
	ki.buf = binary.BigEndian.AppendUint64(ki.buf, uint64(off))
	ki.buf = binary.BigEndian.AppendUint64(ki.buf, uint64(ts))
	ki.buf = binary.BigEndian.AppendUint32(ki.buf, kf.table[slot])
	kf.table[slot] = no
	if kf.count == 0 && len(ki.buf) == keyEntryLen {
		kf.minTs, kf.maxTs = ts, ts
	} else {
		kf.minTs, kf.maxTs = min(kf.minTs, ts), max(kf.maxTs, ts)
	}
	if no == kf.cap {
		// Full: records before off are indexed here; off's other
		// entries go to the next file, and a restart from this file's
		// end adds this one again (QueryByKey drops the duplicate).
		ki.writeLocked(off)
		kf.end = ki.end
		ki.full = append(ki.full, kf)
	}
}

// takes reports whether kf takes entries. mu must be held.
func (kf *keyFile) takes() bool { return !kf.sealed && kf.count < kf.cap }

// activeLocked returns the file taking entries, creating it when there is
// none or the newest is full. It returns nil once the index is broken. A
// new file has no header until a sync writes one.
func (ki *keyIndex) activeLocked() *keyFile {
	if n := len(ki.files); n > 0 && ki.files[n-1].takes() {
		return ki.files[n-1]
	}
	var seq int64
	if n := len(ki.files); n > 0 {
		seq = ki.files[n-1].seq + 1
	}
	name := keyFileName(seq)
	f, err := ki.fs.Create(ki.fs.PathJoin(ki.dir, name), vfs.WriteCategoryUnspecified)
	if err != nil {
		ki.fail(fmt.Errorf("create %s: %w", name, err))
		return nil
	}
	slots := max(ki.entries/keySlotsPerEntry, 1)
	kf := &keyFile{seq: seq, name: name, f: f, slots: slots, cap: ki.entries, end: ki.end}
	ki.files = append(ki.files, kf)
	return kf
}

// writeLocked writes the buffered entries to the active file and moves
// the index's end to end. mu must be held.
func (ki *keyIndex) writeLocked(end int64) {
	if ki.broken {
		return
	}
	if len(ki.buf) > 0 {
		kf := ki.files[len(ki.files)-1]
		if _, err := kf.f.WriteAt(ki.buf, kf.entriesAt()+int64(kf.count)*keyEntryLen); err != nil {
			ki.fail(fmt.Errorf("write %s: %w", kf.name, err))
			return
		}
		kf.count += uint32(len(ki.buf) / keyEntryLen)
		ki.buf = ki.buf[:0]
	}
	ki.end = max(ki.end, end)
	if n := len(ki.files); n > 0 && ki.files[n-1].takes() {
		ki.files[n-1].end = ki.end
	}
}

// seal writes full file kf's slot table and then its sealed header (from
// head, kf as it was under mu), each synced. hmu must be held; the flusher
// no longer touches kf's entries or table.
func (ki *keyIndex) seal(kf *keyFile, head keyFile) error {
	table := make([]byte, 4*len(kf.table))
	for i, v := range kf.table {
		binary.BigEndian.PutUint32(table[4*i:], v)
	}
	head.sealed = true
	_, err := kf.f.WriteAt(table, keyFileHeaderLen)
	if err == nil {
		err = kf.f.Sync()
	}
	if err == nil && !kf.headed {
		err = syncDir(ki.fs, ki.dir)
	}
	if err == nil {
		_, err = kf.f.WriteAt(head.header(), 0)
	}
	if err == nil {
		err = kf.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("seal %s: %w", kf.name, err)
	}
	ki.mu.Lock()
	kf.sealed, kf.headed, kf.table = true, true, nil
	ki.full = slices.DeleteFunc(ki.full, func(f *keyFile) bool { return f == kf })
	ki.mu.Unlock()
	ki.durable = head.end
	return nil
}

func (ki *keyIndex) fail(err error) {
	if ki.failures != nil {
		ki.failures.Add(1)
	}
	ki.broken = true
	ki.buf = ki.buf[:0]
	ki.log.Error("key index stopped: records from here on are found again after a restart", "err", err)
}

// setEnd moves the index's end to end, down as well as up: a log cut
// below the end leaves entries for offsets that will be written again,
// which QueryByKey's callers tell by reading the record.
func (ki *keyIndex) setEnd(end int64) {
	ki.mu.Lock()
	defer ki.mu.Unlock()
	ki.end = end
	if n := len(ki.files); n > 0 && ki.files[n-1].takes() {
		ki.files[n-1].end = end
	}
}

// sync seals the full files, then makes the newest file's entries durable
// and then its header, which records how far the log is indexed; a restart
// indexes again from there.
func (ki *keyIndex) sync() error {
	ki.hmu.Lock()
	defer ki.hmu.Unlock()
	ki.mu.Lock()
	if ki.broken {
		ki.mu.Unlock()
		return nil
	}
	if n := len(ki.files); n == 0 && ki.end > 0 || n > 0 && !ki.files[n-1].takes() && ki.end != ki.files[n-1].end {
		// Records without keys move the end too, and a cut moves it
		// down; a file records it.
		ki.activeLocked()
	}
	var files []*keyFile // those to seal, then perhaps the newest
	var heads []keyFile  // each as it is now
	for _, kf := range ki.full {
		files, heads = append(files, kf), append(heads, *kf)
	}
	if n := len(ki.files); n > 0 && ki.files[n-1].takes() {
		files, heads = append(files, ki.files[n-1]), append(heads, *ki.files[n-1])
	}
	for _, kf := range files {
		kf.refs++
	}
	ki.mu.Unlock()
	defer func() {
		for _, kf := range files {
			ki.release(kf)
		}
	}()

	for i, kf := range files {
		head := heads[i]
		if head.count == head.cap {
			if err := ki.seal(kf, head); err != nil {
				ki.mu.Lock()
				ki.fail(err)
				ki.mu.Unlock()
				return err
			}
			continue
		}
		if kf.headed && head.end == ki.durable {
			return nil
		}
		if err := kf.f.Sync(); err != nil {
			return fmt.Errorf("store: sync key index %s: %w", kf.name, err)
		}
		if !kf.headed {
			if err := syncDir(ki.fs, ki.dir); err != nil {
				return err
			}
		}
		if _, err := kf.f.WriteAt(head.header(), 0); err != nil {
			return fmt.Errorf("store: write key index %s: %w", kf.name, err)
		}
		if err := kf.f.Sync(); err != nil {
			return fmt.Errorf("store: sync key index %s: %w", kf.name, err)
		}
		kf.headed = true
		ki.durable = head.end
	}
	return nil
}

// release ends a reader's use of kf.
func (ki *keyIndex) release(kf *keyFile) {
	ki.mu.Lock()
	kf.refs--
	gone := kf.doomed && kf.refs == 0
	ki.mu.Unlock()
	if gone {
		ki.remove(kf)
	}
}

func (ki *keyIndex) remove(kf *keyFile) {
	kf.f.Close()
	if err := ki.fs.Remove(ki.fs.PathJoin(ki.dir, kf.name)); err != nil {
		ki.log.Warn("key index: remove file", "file", kf.name, "err", err)
	}
}

// dropBelow removes the files, sealed or full, whose records all lie below
// logMin; never the newest.
func (ki *keyIndex) dropBelow(logMin int64) {
	ki.mu.Lock()
	var gone []*keyFile
	for len(ki.files) > 1 && ki.files[0].end < logMin {
		kf := ki.files[0]
		ki.files = ki.files[1:]
		ki.full = slices.DeleteFunc(ki.full, func(f *keyFile) bool { return f == kf })
		kf.doomed = true
		if kf.refs == 0 {
			gone = append(gone, kf)
		}
	}
	ki.mu.Unlock()
	for _, kf := range gone {
		ki.remove(kf)
	}
}

// keyQuery is what one QueryByKey looks for.
type keyQuery struct {
	hash       uint64
	begin, end int64 // store time, both included
	logMin     int64 // offsets below it are deleted records
	logEnd     int64 // offsets from it on are past the log (a damaged entry)
	limit      int
}

// query returns the offsets of q's entries, newest first, without
// duplicates.
func (ki *keyIndex) query(q keyQuery) ([]int64, error) {
	type view struct {
		kf     *keyFile
		sealed bool   // the slot table is on disk
		head   uint32 // the slot's entry, for the active file
		count  uint32
	}
	ki.mu.Lock()
	views := make([]view, 0, len(ki.files))
	for _, kf := range slices.Backward(ki.files) {
		if kf.count == 0 || kf.maxTs < q.begin || kf.minTs > q.end || kf.end < q.logMin {
			continue
		}
		v := view{kf: kf, sealed: kf.sealed, count: kf.count}
		if !kf.sealed {
			v.head = kf.table[q.hash%uint64(kf.slots)]
		}
		kf.refs++
		views = append(views, v)
	}
	ki.mu.Unlock()
	defer func() {
		for _, v := range views {
			ki.release(v.kf)
		}
	}()

	var out []int64
	seen := make(map[int64]struct{})
	reads := 0
	var e [keyEntryLen]byte
	for _, v := range views {
		kf := v.kf
		no := v.head
		if v.sealed {
			slot := int64(q.hash % uint64(kf.slots))
			if _, err := kf.f.ReadAt(e[:4], keyFileHeaderLen+4*slot); err != nil {
				return out, fmt.Errorf("store: read key index %s: %w", kf.name, err)
			}
			no = binary.BigEndian.Uint32(e[:4])
			reads++
		}
		for no != 0 && no <= v.count && len(out) < q.limit {
			if reads++; reads > keyQueryReads {
				return out, nil
			}
			if _, err := kf.f.ReadAt(e[:], kf.entriesAt()+int64(no-1)*keyEntryLen); err != nil {
				return out, fmt.Errorf("store: read key index %s: %w", kf.name, err)
			}
			off := int64(binary.BigEndian.Uint64(e[8:]))
			ts := int64(binary.BigEndian.Uint64(e[16:]))
			if binary.BigEndian.Uint64(e[:]) == q.hash && ts >= q.begin && ts <= q.end && off >= q.logMin && off < q.logEnd {
				if _, dup := seen[off]; !dup {
					seen[off] = struct{}{}
					out = append(out, off)
				}
			}
			prev := binary.BigEndian.Uint32(e[24:])
			if prev >= no {
				break // a damaged link; chains only run back
			}
			no = prev
		}
		if len(out) == q.limit {
			break
		}
	}
	return out, nil
}

// bytes is the size of the files' headers, slot tables and entries.
func (ki *keyIndex) bytes() int64 {
	ki.mu.Lock()
	defer ki.mu.Unlock()
	var n int64
	for _, kf := range ki.files {
		n += kf.entriesAt() + int64(kf.count)*keyEntryLen
	}
	return n
}

// close syncs nothing: Close calls sync first.
func (ki *keyIndex) close() error {
	ki.mu.Lock()
	defer ki.mu.Unlock()
	var errs []error
	for _, kf := range ki.files {
		errs = append(errs, kf.f.Close())
	}
	ki.files = nil
	return errors.Join(errs...)
}
