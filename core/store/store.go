package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"maps"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/internal/histogram"
)

// Store is an open data directory. Its methods are safe for concurrent use.
//
// Lock order (see LOCKING.md): indexMu → mu → cq; commitLog.mu and progress.mu are
// leaves.
type Store struct {
	opts Options
	log  *slog.Logger
	db   *pebble.DB
	lock io.Closer
	cl   *commitLog

	// mu guards the append side: offsets being handed out and the round
	// being filled.
	mu struct {
		sync.Mutex
		next         int64 // where the next frame goes
		pending      *round
		pendingBytes int
		queues       map[queueKey]*queue
		failed       error
		closed       bool
		spares       []*round // drained rounds kept for their buffers
		// deleted maps a deleted topic to the commit-log offset of its
		// deletion (see DeleteTopic); an entry leaves once the checkpoint
		// passes it.
		deleted map[string]int64
		// deleting counts the replicated deletions of each topic in
		// flight; appends to such a topic wait for them (replica.go).
		deleting map[string]int
	}
	space *sync.Cond // on mu: signalled when pendingBytes drops

	// indexMu serialises the index writes built from queue state read
	// earlier (checkpoints, min-offset moves, topic deletion), so that no
	// batch built before a deletion lands after it. Blocks, which
	// dispatchRound writes too, are written under cq instead.
	indexMu sync.Mutex
	// checkpointUnlocked, set only by tests, runs in a checkpoint once it
	// has written the blocks and let go of cq.
	checkpointUnlocked func()

	// cq guards the dispatched side: consume-queue state readers see.
	cq struct {
		sync.RWMutex
		queues        map[queueKey]*queue
		dispatched    int64 // every record before this offset is in a queue
		lastStoreTime int64 // store time of the last record dispatched
	}
	ahead readAheadTable // complete index blocks read ahead (readahead.go)
	keys  *keyIndex      // the key index (keyfile.go); nil when disabled

	written atomic.Int64 // end of the data written to segment files
	durable atomic.Int64 // end of the data covered by an fsync

	progress struct {
		sync.Mutex
		values map[string]int64
		dirty  map[string]struct{}
		// committed are the values the set committed (a replicated
		// store's, as applied); a member that stops leading goes back
		// to them (revertProgress).
		committed map[string]int64
	}

	flushMu     sync.Mutex // guards active against the async sync loop
	active      *segment   // segment being written; set by the flusher
	dirtyEnd    int64      // end of bytes a rolled-back round may have left; owned by the flusher
	reserved    int64      // offset in active up to which disk blocks are reserved; owned by the flusher
	markerFlags uint32     // flags of this run's round markers
	kick        chan struct{}
	completions chan completion // rounds' AppendAsync callbacks, for completeLoop
	quit        chan struct{}
	closing     sync.Once
	wg          sync.WaitGroup
	stats       Stats
	prealloc    *preallocator // nil when disabled
	trim        *trimmer      // nil when CacheWindow is negative
	hooks       atomic.Pointer[RetentionHooks]
	ret         retentionState
	disk        diskState // free space and the reserve file (disk.go)
	indexErrors indexErrorLog
	arrive      atomic.Pointer[func(topic string, queueID int32, maxOffset int64)]
	lastCkpt    atomic.Int64 // the checkpoint last persisted

	// applyMu serialises what a replicated store applies (replica.go)
	// with Promote, Demote and the proposals of rounds; the writer of
	// segment files holds it. It comes before mu.
	applyMu sync.Mutex
	// proposeMu orders a replicated store's proposals of rounds and
	// topic deletions: each reaches the Replicator in the order of the
	// log offsets it stands for. It comes before applyMu.
	proposeMu sync.Mutex
	repl      replState
}

// Stats are running counters, read with Store.Stats.
type Stats struct {
	Appends       atomic.Int64 // records appended
	Rounds        atomic.Int64 // flush rounds (writes + fsync)
	Fsyncs        atomic.Int64
	Corruptions   atomic.Int64 // invalid records found on read or startup
	SegmentsFreed atomic.Int64 // segments deleted by retention
	// SegmentsHeld counts retention passes that a Floor hold stopped
	// short of a segment they wanted to delete.
	SegmentsHeld atomic.Int64
	// HighWaterHeld counts retention passes above DiskHighWater that kept
	// a segment because it held unconsumed messages.
	HighWaterHeld atomic.Int64
	// UnconsumedDropped counts unconsumed messages deleted above
	// DiskHighWater (only with DiskHighWaterDropsUnconsumed).
	UnconsumedDropped atomic.Int64
	// AppendedBytes counts the bytes of the records appended.
	AppendedBytes atomic.Int64
	// KeyIndexFailures counts writes of the key index that failed (a full
	// disk, say). The index then takes no entries until a restart, which
	// indexes the log again from where the index's files end.
	KeyIndexFailures atomic.Int64
	// ProgressEntries counts the entries of progress values (offsets,
	// positions) a replicated store's leader proposed.
	ProgressEntries atomic.Int64
	// CacheDropped is the log offset below which the synced log was last
	// dropped from the page cache (see Options.CacheWindow).
	CacheDropped atomic.Int64

	// RoundMessages is the distribution of records per flush round (the
	// group commit's size); FsyncDuration that of commit-log fsyncs, in
	// nanoseconds; FsyncBytes that of the bytes each fsync made durable.
	// They are set by Open and read at scrape time.
	RoundMessages *histogram.Histogram
	FsyncDuration *histogram.Histogram
	FsyncBytes    *histogram.Histogram
}

// Bounds of the store's histograms.
var (
	roundMessagesBounds = histogram.Powers(2, 4096)
	fsyncBytesBounds    = histogram.Powers(4, 1<<30)
)

// Round buffer reuse: a few drained rounds are kept so steady appends do
// not allocate their buffers again.
const (
	maxSpareRounds  = 4
	initialChunkCap = 256 << 10
)

// round is a group of appends written and synced together.
type round struct {
	id      uint64 // a replicated store's proposal (replica.go)
	term    uint64 // a replicated store's term when the round began (replState.term)
	segSize int64
	start   int64 // log offset of the round's marker
	chunks  []chunk
	units   []pendingUnit
	end     int64 // log offset after the last frame
	bytes   int
	done    chan struct{}
	err     error
	// then holds the callbacks of AppendAsync, run by the flusher once
	// the round is stored (or failed), in the order of their appends.
	then []func(error)
	// deletes are the topic deletions a replicated store proposes right
	// after the round (replica.go); a round failed before its proposal
	// fails them.
	deletes []pendingDelete
}

// chunk is a run of frames contiguous in one segment.
type chunk struct {
	off int64
	buf []byte
}

type pendingUnit struct {
	q     *queue
	qoff  int64
	off   int64
	size  int32
	chunk int // index in round.chunks
	at    int // position of the record in the chunk's buf
}

// Open opens or creates the data directory, recovers the commit log and
// the index, and starts the background goroutines.
func Open(opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Store{opts: opts, log: opts.Logger.With("component", "store"), kick: make(chan struct{}, 1), quit: make(chan struct{}),
		completions: make(chan completion, completionBacklog)}
	s.stats.RoundMessages = histogram.New(roundMessagesBounds...)
	s.stats.FsyncDuration = histogram.New(histogram.Durations...)
	s.stats.FsyncBytes = histogram.New(fsyncBytesBounds...)
	if opts.Replicator != nil {
		// The replicated log is the durable copy: a round is acknowledged
		// once a majority of the set stored it, and the commit log is
		// synced in the background (replica.go).
		opts.Flush = FlushAsync
		s.opts.Flush = FlushAsync
		s.repl.dirty = make(map[string]struct{})
		s.repl.progressKick = make(chan struct{}, 1)
		s.repl.slots = make(chan struct{}, maxInflightRounds)
		s.repl.nextID = newReplID()
	}
	if opts.Flush == FlushSync {
		s.markerFlags = markerSync
	}
	if opts.OnArrive != nil {
		s.arrive.Store(&opts.OnArrive)
	}
	s.space = sync.NewCond(&s.mu)
	s.mu.queues = make(map[queueKey]*queue)
	s.mu.deleted = make(map[string]int64)
	s.mu.deleting = make(map[string]int)
	s.cq.queues = make(map[queueKey]*queue)
	s.ahead.seed = maphash.MakeSeed()
	s.progress.values = make(map[string]int64)
	s.progress.dirty = make(map[string]struct{})

	fs := opts.FS
	if err := mkdirSynced(fs, opts.Dir); err != nil {
		return nil, err
	}
	s.lock, err = fs.Lock(fs.PathJoin(opts.Dir, "LOCK"))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrLocked, opts.Dir, err)
	}
	ok := false
	defer func() {
		if !ok {
			s.closeFiles()
		}
	}()
	// A snapshot restore that a crash or an error interrupted is
	// completed, or discarded if it had not got all of the snapshot.
	restored, discarded, err := swapRestore(fs, opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("store: finish the snapshot restore in %s: %w", opts.Dir, err)
	}
	if discarded {
		s.log.Warn("a snapshot restore that did not complete was discarded; the store is as it was before it", "dir", opts.Dir)
	}
	s.openDisk()
	indexFS := fs
	if s.disk.on {
		// A write of the index or the key index that meets a full disk
		// deletes the reserve file and is tried again (disk.go).
		indexFS = vfs.OnDiskFull(fs, s.indexDiskFull)
	}
	cache := pebble.NewCache(opts.IndexCacheSize)
	defer cache.Unref() // the DB holds its own reference
	s.db, err = pebble.Open(fs.PathJoin(opts.Dir, "index"), &pebble.Options{
		FS:           indexFS,
		Logger:       pebbleLogger{s},
		Cache:        cache,
		MemTableSize: uint64(opts.IndexMemTableSize),
	})
	if err != nil {
		return nil, fmt.Errorf("store: open index: %w", err)
	}
	if restored != "" {
		n, err := loadValues(s.db, fs, restored)
		if err == nil {
			err = endRestore(fs, opts.Dir)
		}
		if err != nil {
			return nil, fmt.Errorf("store: load the restored index: %w", err)
		}
		s.log.Info("snapshot restore completed", "dir", opts.Dir, "index_values", n)
	}
	s.cl, err = openCommitLog(fs, fs.PathJoin(opts.Dir, "commitlog"), opts.SegmentSize)
	if err != nil {
		return nil, err
	}
	if !opts.DisableKeyIndex {
		s.keys, err = openKeyIndex(indexFS, fs.PathJoin(opts.Dir, keyFileDir), opts.KeyIndexFileEntries, s.log)
		if err != nil {
			return nil, err
		}
		s.keys.failures = &s.stats.KeyIndexFailures
	}
	if err := s.recover(); err != nil {
		return nil, err
	}
	if opts.Replicator != nil {
		if err := s.db.Set(replEndKey, int64Value(s.written.Load()), pebble.Sync); err != nil {
			return nil, fmt.Errorf("store: record the synced end: %w", err)
		}
		s.repl.recorded = s.written.Load()
		s.repl.openEnd = s.written.Load()
		// What a member recovers is what the set committed: values are
		// changed only while leading, and reverted when demoted.
		s.progress.committed = maps.Clone(s.progress.values)
	}
	ok = true
	if s.disk.on {
		s.checkDisk(true)
		s.goTracked(func() { s.every(diskCheckInterval, func() { s.checkDisk(true) }) })
	}
	if opts.Prealloc > 0 {
		s.prealloc = newPreallocator(s, opts.Prealloc)
		s.goTracked(s.prealloc.loop)
	}
	if opts.CacheWindow > 0 {
		s.trim = newTrimmer(s, opts.CacheWindow)
		s.goTracked(s.trim.loop)
	}
	s.goTracked(s.flushLoop)
	s.goTracked(s.completeLoop)
	s.goTracked(s.checkpointLoop)
	if s.Replicated() {
		s.goTracked(s.progressLoop)
	}
	if opts.Flush == FlushAsync {
		s.goTracked(s.syncLoop)
	}
	if opts.Retention > 0 || opts.DiskHighWater > 0 {
		s.goTracked(s.retentionLoop)
	}
	return s, nil
}

func (s *Store) goTracked(fn func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
}

// Close flushes everything appended, persists the index and closes the
// files. Appends that race with Close fail with ErrClosed. Calling Close
// twice panics.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		panic("store: Close called twice")
	}
	s.mu.closed = true
	s.space.Broadcast()
	s.mu.Unlock()
	close(s.quit)
	s.wg.Wait()
	var errs []error
	if s.Replicated() {
		errs = append(errs, s.syncReplicated())
	} else if s.opts.Flush == FlushAsync {
		errs = append(errs, s.syncActive())
	}
	errs = append(errs, s.checkpoint(true))
	errs = append(errs, s.closeFiles())
	return errors.Join(errs...)
}

func (s *Store) closeFiles() error {
	var errs []error
	if s.cl != nil {
		errs = append(errs, s.cl.close())
	}
	if s.keys != nil {
		errs = append(errs, s.keys.close())
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Close())
	}
	return errors.Join(errs...)
}

// SetArrivalHook replaces Options.OnArrive; nil removes it.
func (s *Store) SetArrivalHook(fn func(topic string, queueID int32, maxOffset int64)) {
	if fn == nil {
		s.arrive.Store(nil)
		return
	}
	s.arrive.Store(&fn)
}

// Stats returns the store's counters.
func (s *Store) Stats() *Stats { return &s.stats }

// SegmentSize returns the commit-log segment size: the records of one
// Append must fit in one segment.
func (s *Store) SegmentSize() int64 { return s.opts.SegmentSize }

// Append stores msgs as one atomic, contiguous run and returns once they
// are durable (FlushSync) or written (FlushAsync). Each message's Topic and
// QueueID say where it goes; Append sets its QueueOffset, CommitLogOffset
// and StoreTimestamp. Nothing of a failed Append is stored.
func (s *Store) Append(msgs []*message.Message) error {
	r, err := s.enqueue(msgs, nil)
	if r == nil {
		return err
	}
	<-r.done
	return r.err
}

// AppendAsync is Append without the wait: it assigns the messages' offsets
// and queues them as Append does, then returns, and the flusher calls done
// once the round holding them is stored as Append would return (after the
// fsync under FlushSync), with Append's error. done runs on the store's
// completion goroutine, after the messages are visible to readers, in
// append order with every other callback: it must be quick and must not
// block (the next rounds' callbacks wait for it, and then the flusher). Empty msgs call done at once. An error found
// before queueing (a message too
// large, a closed or failed store) is returned, and done is not called.
// AppendAsync still waits, as Append does, while MaxPendingBytes are
// queued: that is the store's back-pressure.
func (s *Store) AppendAsync(msgs []*message.Message, done func(error)) error {
	_, err := s.enqueue(msgs, done)
	return err
}

// enqueue adds msgs to the pending round and returns it; with then set,
// then joins the round's callbacks. A nil round comes with the error that
// kept the messages out, or with none for an empty msgs.
func (s *Store) enqueue(msgs []*message.Message, then func(error)) (*round, error) {
	total := 0
	for _, m := range msgs {
		if len(m.Topic) > message.MaxTopicLen {
			return nil, message.ErrTopicTooLong
		}
		if len(m.Properties) > message.MaxPropertiesLen {
			return nil, message.ErrPropertiesTooLong
		}
		total += m.RecordLen() + trailerLen
	}
	if len(msgs) == 0 {
		if then != nil {
			then(nil)
		}
		return nil, nil
	}
	if int64(total)+blankLen > s.opts.SegmentSize {
		return nil, fmt.Errorf("%w: %d bytes in a segment of %d", ErrTooLarge, total, s.opts.SegmentSize)
	}

	s.mu.Lock()
	for (s.mu.pendingBytes > s.opts.MaxPendingBytes || s.deletingLocked(msgs)) && !s.mu.closed && s.mu.failed == nil {
		s.space.Wait()
	}
	if s.mu.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if err := s.mu.failed; err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if s.opts.Replicator != nil && !s.repl.writable {
		s.mu.Unlock()
		return nil, ErrNotLeader
	}
	if s.disk.full.Load() {
		s.mu.Unlock()
		return nil, s.diskFullError()
	}
	r := s.mu.pending
	if r == nil {
		r = s.newRoundLocked()
		s.mu.pending = r
		// Every round begins with a marker (see doc.go).
		s.rollLocked(r, markerFrameLen)
		at := s.mu.next
		r.setLast(appendMarker(r.chunkFor(at), at, s.markerFlags))
		r.start = at
		r.bytes += markerFrameLen
		s.mu.next += markerFrameLen
	}
	s.rollLocked(r, total)
	now := s.opts.Now().UnixMilli()
	for _, m := range msgs {
		q := s.queueLocked(queueKey{m.Topic, m.QueueID})
		m.QueueOffset = q.assigned
		m.CommitLogOffset = s.mu.next
		m.StoreTimestamp = now
		buf := r.chunkFor(s.mu.next)
		at := len(buf)
		buf, _ = message.AppendRecord(buf, m) // sizes were checked above
		size := len(buf) - at
		buf = binary.BigEndian.AppendUint32(buf, frameCRC(buf[at:]))
		r.setLast(buf)
		r.units = append(r.units, pendingUnit{q: q, qoff: q.assigned, off: s.mu.next, size: int32(size), chunk: len(r.chunks) - 1, at: at})
		q.assigned++
		s.mu.next += int64(size + trailerLen)
	}
	r.end = s.mu.next
	r.bytes += total
	s.mu.pendingBytes += total
	if then != nil {
		r.then = append(r.then, then)
	}
	s.mu.Unlock()
	s.stats.Appends.Add(int64(len(msgs)))
	s.stats.AppendedBytes.Add(int64(total))

	select {
	case s.kick <- struct{}{}:
	default:
	}
	return r, nil
}

// queueLocked returns the queue for k, creating it. s.mu must be held.
func (s *Store) queueLocked(k queueKey) *queue {
	if q := s.mu.queues[k]; q != nil {
		return q
	}
	q := newQueue(k)
	s.cq.Lock()
	s.cq.queues[k] = q
	s.cq.Unlock()
	s.mu.queues[k] = q
	return q
}

// rollLocked moves s.mu.next to the next segment, ending the current one
// with a blank marker, when n more bytes would not fit. s.mu must be held.
func (s *Store) rollLocked(r *round, n int) {
	segSize := s.opts.SegmentSize
	pos := s.mu.next % segSize
	if pos+int64(n)+blankLen <= segSize {
		return
	}
	at := s.mu.next
	buf := r.chunkFor(at)
	buf = binary.BigEndian.AppendUint32(buf, 0)
	buf = binary.BigEndian.AppendUint32(buf, BlankMagic)
	r.setLast(buf)
	r.bytes += blankLen
	s.mu.next = at - pos + segSize
}

func (s *Store) newRoundLocked() *round {
	var r *round
	if n := len(s.mu.spares); n > 0 {
		r, s.mu.spares = s.mu.spares[n-1], s.mu.spares[:n-1]
	} else {
		r = &round{}
	}
	r.segSize = s.opts.SegmentSize
	r.term = s.repl.term
	r.done = make(chan struct{})
	return r
}

// chunkFor returns the buffer to append a frame at off to, starting a new
// chunk when off does not continue the last one or begins a segment.
func (r *round) chunkFor(off int64) []byte {
	if n := len(r.chunks); n > 0 {
		c := &r.chunks[n-1]
		if c.off+int64(len(c.buf)) == off && off%r.segSize != 0 {
			return c.buf
		}
	}
	if cap(r.chunks) > len(r.chunks) {
		r.chunks = r.chunks[:len(r.chunks)+1]
		c := &r.chunks[len(r.chunks)-1]
		c.off, c.buf = off, c.buf[:0]
		return c.buf
	}
	r.chunks = append(r.chunks, chunk{off: off, buf: make([]byte, 0, initialChunkCap)})
	return r.chunks[len(r.chunks)-1].buf
}

func (r *round) setLast(buf []byte) { r.chunks[len(r.chunks)-1].buf = buf }

// flushLoop writes rounds, syncs them under FlushSync, and dispatches them
// to the consume queues. It is the only writer of segment files.
func (s *Store) flushLoop() {
	defer close(s.completions)
	for {
		select {
		case <-s.kick:
		case <-s.quit:
			if s.Replicated() {
				// Nothing uncommitted can be acknowledged any more.
				s.applyMu.Lock()
				s.repl.closed = true
				s.demoteLocked(ErrClosed)
				s.applyMu.Unlock()
				return
			}
			// Drain what is pending so Close loses nothing appended.
			for s.flushOnce() {
			}
			return
		}
		for s.flushOnce() {
		}
	}
}

// flushOnce handles the pending round, if any, and reports whether there
// was one.
func (s *Store) flushOnce() bool {
	if s.Replicated() {
		s.mu.Lock()
		idle := s.mu.pending == nil
		s.mu.Unlock()
		if idle || !s.takeSlot() {
			return false
		}
	}
	s.gather()
	if s.Replicated() {
		// The round is taken and proposed under proposeMu, so a topic
		// deletion (replicateDelete) either follows it as one of its
		// deletes or goes into the log after it.
		s.proposeMu.Lock()
		defer s.proposeMu.Unlock()
	}
	s.mu.Lock()
	r := s.mu.pending
	s.mu.pending = nil
	if r != nil {
		s.mu.pendingBytes -= r.bytes
		s.space.Broadcast()
	}
	s.mu.Unlock()
	if s.Replicated() {
		if r == nil {
			s.releaseSlots(1) // a Demote took the round meanwhile
			return false
		}
		s.proposeRound(r)
		return true
	}
	if r == nil {
		return false
	}
	s.stats.Rounds.Add(1)
	s.stats.RoundMessages.Observe(int64(len(r.units)))
	err := s.writeRound(r)
	if err == nil && s.opts.Flush == FlushSync {
		err = s.syncActive()
		s.stats.FsyncBytes.Observe(r.end - r.start)
	}
	if err != nil {
		if isNoSpace(err) {
			s.disk.full.Store(true)
			err = fmt.Errorf("%w: %w", ErrDiskFull, err)
		}
		s.rollback(r, err)
		return true
	}
	s.wrote(r.bytes)
	s.written.Store(r.end)
	s.dirtyEnd = 0
	if s.opts.Flush == FlushSync {
		s.setDurable(r.end)
	}
	s.dispatchRound(r)
	s.finish(r)
	s.recycle(r)
	return true
}

// gatherBytes is the round size below which the flusher lets appenders
// that are ready to run add to the round before it takes it.
const gatherBytes = 64 << 10

// gather yields the flusher's processor while the pending round is small
// and still growing: appenders that are runnable (their requests read and
// being decoded) add to it first. Nothing waits on a timer: when no
// appender is ready, Gosched returns at once and the round goes as it is.
// A write costs ~10 µs of fixed kernel work besides its bytes (measured on
// ext4 here, which runs without a journal; the cause is not pinned down),
// so under load a round of 1–2 records paid more for that than for its
// data.
func (s *Store) gather() {
	prev := -1
	for range 8 {
		s.mu.Lock()
		n := s.mu.pendingBytes
		s.mu.Unlock()
		if n == 0 || n >= gatherBytes || n == prev {
			return
		}
		prev = n
		runtime.Gosched()
	}
}

// finish wakes r's Append callers and hands its AppendAsync callbacks to
// the completer, so the flusher goes on to the next round while they run.
func (s *Store) finish(r *round) {
	close(r.done)
	if len(r.then) > 0 {
		s.completions <- completion{r.then, r.err}
		r.then = nil
	}
	for _, d := range r.deletes {
		cause := r.err
		if cause == nil {
			cause = ErrNotLeader
		}
		d.done(fmt.Errorf("store: topic %s not deleted: the round before it failed: %w", d.topic, cause))
	}
	r.deletes = nil
}

// completionBacklog is how many rounds' callbacks may wait for the
// completer before the flusher waits for it.
const completionBacklog = 64

// completion is a stored round's AppendAsync callbacks and its outcome.
type completion struct {
	then []func(error)
	err  error
}

// completeLoop runs the AppendAsync callbacks of each round in order,
// until the flusher has stopped.
func (s *Store) completeLoop() {
	for c := range s.completions {
		for _, fn := range c.then {
			fn(c.err)
		}
	}
}

// recycle keeps r's buffers for the next round. Appenders may still read
// r.err, so the round itself is not reused.
func (s *Store) recycle(r *round) {
	spare := &round{chunks: r.chunks[:0], units: r.units[:0]}
	for i := range r.chunks {
		spare.chunks = append(spare.chunks, chunk{buf: r.chunks[i].buf[:0]})
	}
	spare.chunks = spare.chunks[:0]
	r.chunks, r.units, r.then = nil, nil, nil
	s.mu.Lock()
	if len(s.mu.spares) < maxSpareRounds {
		s.mu.spares = append(s.mu.spares, spare)
	}
	s.mu.Unlock()
}

// writeRound writes r's chunks to their segments.
func (s *Store) writeRound(r *round) error {
	if s.dirtyEnd > r.chunks[0].off {
		// A rolled-back round may have left bytes past where this one
		// starts; they go in the same fsync as this round's data.
		if err := s.zeroTail(r.chunks[0].off, s.dirtyEnd); err != nil {
			return err
		}
	}
	for _, c := range r.chunks {
		seg, err := s.activeFor(c.off)
		if err != nil {
			return err
		}
		if s.prealloc != nil {
			s.prealloc.reserve(seg, c.off-seg.base, c.off-seg.base+int64(len(c.buf)))
		} else {
			s.reserve(seg, c.off-seg.base, c.off-seg.base+int64(len(c.buf)))
		}
		if _, err := seg.f.WriteAt(c.buf, c.off-seg.base); err != nil {
			return fmt.Errorf("store: write segment %s: %w", seg.name, err)
		}
	}
	return nil
}

// activeFor returns the segment for off, making it the active one. The
// previous active segment is synced before data goes to a new one, so a
// segment is complete on disk before its successor holds anything.
func (s *Store) activeFor(off int64) (*segment, error) {
	base := off - off%s.opts.SegmentSize
	if s.active != nil && s.active.base == base {
		return s.active, nil
	}
	if s.active != nil {
		if err := s.syncActive(); err != nil {
			return nil, err
		}
	}
	seg, _, err := s.cl.segment(base)
	if err != nil {
		return nil, err
	}
	s.flushMu.Lock()
	s.active = seg
	s.flushMu.Unlock()
	s.reserved = 0
	return seg, nil
}

// reserveStep is how far ahead of the data the active segment's disk blocks
// are reserved.
const reserveStep = 32 << 20

// reserve keeps disk blocks reserved past [start, end), the next write to
// seg, reserveStep at a time, without changing the file's size (fallocate
// with KEEP_SIZE). A write into reserved blocks skips the filesystem's block
// allocation: on ext4 here, 1 KiB-message rounds cost 0.2 µs of CPU per KiB
// written instead of 0.3–0.7. The size still grows with the data, so
// recovery and readers see exactly what they did before. A failure (a full
// disk, a filesystem without fallocate) only stops the reservation for this
// segment; the write itself reports a full disk. Reservations end at the
// segment size, so a sealed segment keeps at most the space after its
// blank marker, less than one record, reserved until it is deleted.
func (s *Store) reserve(seg *segment, start, end int64) {
	if end <= s.reserved {
		return
	}
	if s.reserved < 0 {
		return // failed for this segment
	}
	from := max(s.reserved, start-start%4096)
	to := min(s.opts.SegmentSize, max(end, from+reserveStep))
	if to <= from {
		return
	}
	if err := seg.f.Preallocate(from, to-from); err != nil {
		s.reserved = -1
		return
	}
	s.reserved = to
}

// syncActive fsyncs the active segment.
func (s *Store) syncActive() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if s.active == nil {
		return nil
	}
	s.stats.Fsyncs.Add(1)
	defer s.stats.FsyncDuration.Since(time.Now())
	if err := s.active.f.SyncData(); err != nil {
		return fmt.Errorf("store: fsync segment %s: %w", s.active.name, err)
	}
	return nil
}

// setDurable records that the log is synced up to end, which must not be
// below what was recorded before.
func (s *Store) setDurable(end int64) {
	s.durable.Store(end)
	s.trim.wake()
}

// syncLoop fsyncs every FlushInterval under FlushAsync.
func (s *Store) syncLoop() {
	s.every(s.opts.FlushInterval, func() {
		if s.Replicated() {
			if err := s.syncReplicated(); err != nil {
				s.fail(fmt.Errorf("%w: %v", ErrFailed, err))
			}
			return
		}
		end := s.written.Load()
		if end == s.durable.Load() {
			return
		}
		s.stats.FsyncBytes.Observe(end - s.durable.Load())
		if err := s.syncActive(); err != nil {
			// What an fsync failure leaves on disk is unknown, and records
			// it covered were acknowledged already: stop taking writes.
			s.fail(fmt.Errorf("%w: %v", ErrFailed, err))
			return
		}
		s.setDurable(end)
	})
}

// every calls fn every d until the store closes.
func (s *Store) every(d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			fn()
		}
	}
}

// Failed returns the error that stopped the store taking writes for good
// (a write or fsync failure, a replicated entry it could not apply), or
// nil. Only reopening the store clears it.
func (s *Store) Failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.failed
}

func (s *Store) fail(err error) {
	s.log.Error("store stopped taking writes", "err", err)
	s.mu.Lock()
	if s.mu.failed == nil {
		s.mu.failed = err
	}
	s.space.Broadcast()
	s.mu.Unlock()
}

// rollback undoes a round whose write or fsync failed: it fails r and every
// round appended after it and hands their offsets out again. What may have
// reached the file is zeroed by the next round's write, in the same fsync
// as that round's data, so no later recovery can find it.
func (s *Store) rollback(r *round, cause error) {
	s.log.Error("commit-log write failed; unacknowledged appends rolled back", "err", cause, "at", s.written.Load())
	s.mu.Lock()
	later := s.mu.pending
	s.mu.pending = nil
	if later != nil {
		s.mu.pendingBytes -= later.bytes
	}
	s.mu.next = s.written.Load()
	s.cq.RLock()
	for _, q := range s.mu.queues {
		q.assigned = q.next
	}
	s.cq.RUnlock()
	s.lowerDeletionsLocked()
	s.dirtyEnd = max(s.dirtyEnd, r.end)
	s.space.Broadcast()
	s.mu.Unlock()
	for _, x := range []*round{r, later} {
		if x == nil {
			continue
		}
		x.err = fmt.Errorf("store: append not stored: %w", cause)
		s.finish(x)
	}
}

// zeroTail overwrites [from, to) of the log with zeros, as far as the
// files reach, so recovery never finds a frame there. The caller syncs.
func (s *Store) zeroTail(from, to int64) error {
	for off := from; off < to; {
		base := off - off%s.opts.SegmentSize
		end := min(to, base+s.opts.SegmentSize)
		s.cl.mu.RLock()
		seg := s.cl.segmentLocked(off)
		s.cl.mu.RUnlock()
		if seg != nil {
			fi, err := seg.f.Stat()
			if err != nil {
				return err
			}
			if size := base + fi.Size(); size > off {
				zeros := make([]byte, min(end, size)-off)
				if _, err := seg.f.WriteAt(zeros, off-base); err != nil {
					return fmt.Errorf("store: zero segment %s: %w", seg.name, err)
				}
			}
		}
		off = end
	}
	return nil
}

// dispatchRound adds r's units to their consume queues, making the records
// visible, and writes completed blocks to the index.
func (s *Store) dispatchRound(r *round) {
	// Key-index entries go in first, outside the lock readers wait on,
	// and before the dispatch offset moves: a record a reader can see is
	// one a query can find.
	s.indexRound(r)
	var b *pebble.Batch
	var k queueKey
	full := func(no int64, blk []byte) {
		if b == nil {
			b = s.db.NewBatch()
		}
		b.Set(blockKey(k, no), blk, nil)
	}
	s.cq.Lock()
	for i := range r.units {
		u := &r.units[i]
		if u.q.deleted {
			continue // appended before its topic was deleted
		}
		rec := message.Record(r.chunks[u.chunk].buf[u.at : u.at+int(u.size)])
		k = u.q.key
		s.putUnitLocked(u.q, Unit{QueueOffset: u.qoff, CommitLogOffset: u.off, Size: u.size, TagCode: s.opts.TagCode(rec)}, full)
	}
	if n := len(r.units); n > 0 {
		u := &r.units[n-1]
		s.cq.lastStoreTime = message.Record(r.chunks[u.chunk].buf[u.at : u.at+int(u.size)]).StoreTimestamp()
	}
	s.cq.dispatched = r.end
	if b != nil {
		if err := b.Commit(pebble.NoSync); err != nil {
			// The units stay in memory and the checkpoint will not move
			// past them until a checkpoint batch succeeds.
			s.log.Error("index write failed", "err", err)
		}
		b.Close()
	}
	s.cq.Unlock()
	arrive := s.arrive.Load()
	if arrive == nil {
		for i := range r.units {
			r.units[i].q.arrivals = false
		}
		return
	}
	for i := range r.units {
		q := r.units[i].q
		if q.arrivals {
			q.arrivals = false
			s.cq.RLock()
			next := q.next
			s.cq.RUnlock()
			(*arrive)(q.key.topic, q.key.id, next)
		}
	}
}

// putUnitLocked stores u in q's open block. Each block that completes
// (the open one, ended early when u lies past it, then u's own when u
// fills it) goes to full, block number and bytes, for the index; the
// bytes are valid only during the call. s.cq must be held for writing.
func (s *Store) putUnitLocked(q *queue, u Unit, full func(no int64, blk []byte)) {
	no := u.QueueOffset / blockUnits
	if no < q.openNo {
		return // an older block, already complete in the index
	}
	if no > q.openNo {
		// The open block ends early (holes at its end, or a block the
		// recovery scan started past); close it and move on.
		if done := q.rotate(no); done != nil {
			full(q.prevNo, done)
		}
	}
	at := int(u.QueueOffset%blockUnits) * unitLen
	if n := len(q.open); n < at+unitLen {
		q.open = q.open[:at+unitLen]
		clear(q.open[n:at]) // units skipped over are holes
	}
	putUnit(q.open[at:], u)
	q.dirty = true
	q.arrivals = true
	if u.QueueOffset >= q.next {
		q.next = u.QueueOffset + 1
	}
	if len(q.open) == blockLen {
		if done := q.rotate(q.openNo + 1); done != nil {
			full(q.prevNo, done)
		}
	}
}

// rotate completes the open block and opens block no, returning the
// completed block's bytes.
func (q *queue) rotate(no int64) []byte {
	done, spare := q.open, q.prev
	q.prev, q.prevNo = done, q.openNo
	if spare == nil {
		spare = make([]byte, 0, blockLen)
	}
	// Readers copy units out under the lock, so the old prev can be reused.
	q.open, q.openNo, q.dirty = spare[:0], no, false
	if len(done) == 0 {
		q.prevNo = -1
		return nil
	}
	return done
}
