package store

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rmq-go/rmq/core/message"
)

// FlushMode says when an append counts as done.
type FlushMode int

const (
	// FlushSync acknowledges an append after the fsync that covers it
	// (group commit). The default.
	FlushSync FlushMode = iota
	// FlushAsync acknowledges an append once it is written to the file and
	// fsyncs every FlushInterval; a crash may lose that much.
	FlushAsync
)

// String returns "sync" or "async".
func (m FlushMode) String() string {
	switch m {
	case FlushSync:
		return "sync"
	case FlushAsync:
		return "async"
	}
	return fmt.Sprintf("FlushMode(%d)", int(m))
}

// UnmarshalText parses "sync" or "async", as in a config file or a flag.
func (m *FlushMode) UnmarshalText(b []byte) error {
	v, err := ParseFlushMode(string(b))
	*m = v
	return err
}

// ParseFlushMode parses "sync" or "async".
func ParseFlushMode(s string) (FlushMode, error) {
	switch s {
	case "sync", "":
		return FlushSync, nil
	case "async":
		return FlushAsync, nil
	}
	return 0, fmt.Errorf("store: unknown flush mode %q (want sync or async)", s)
}

// Defaults for Options fields left zero.
const (
	DefaultSegmentSize         = 1 << 30
	DefaultFlushInterval       = 500 * time.Millisecond
	DefaultCheckpointInterval  = time.Second
	DefaultRetention           = 72 * time.Hour
	DefaultRetentionInterval   = time.Minute
	DefaultDiskHighWater       = 0.90
	DefaultDiskReserve         = 64 << 20
	DefaultMaxPendingBytes     = 64 << 20
	DefaultIndexCacheSize      = 64 << 20
	DefaultIndexMemTableSize   = 32 << 20
	DefaultKeyIndexFileEntries = 4 << 20
	DefaultCacheWindow         = 1 << 30

	// minSegmentSize keeps room for at least one small record.
	minSegmentSize = 4 << 10

	// Bounds of KeyIndexFileEntries: a file's entries are numbered in
	// 32 bits, and a file past 1.75 GiB only makes sealing slower.
	minKeyIndexFileEntries = 64
	maxKeyIndexFileEntries = 64 << 20
)

// Options configures a Store. Zero values mean the documented default.
// The yaml tags name each field in the broker's config file (section
// store); cfg:"size" marks sizes written with a unit ("64MiB").
type Options struct {
	// Dir holds the commit log and the index. Required.
	Dir string `yaml:"-"`
	// FS is the filesystem every file goes through. Default vfs.Default.
	// Tests pass a crashable in-memory filesystem or an error-injecting one.
	FS vfs.FS `yaml:"-"`
	// SegmentSize is the size of a commit-log segment. Default 1 GiB. It is
	// fixed for the life of a data directory: opening with another size is
	// an error.
	SegmentSize int64 `yaml:"segmentSize" cfg:"size"`
	// Flush is FlushSync (default) or FlushAsync.
	Flush FlushMode `yaml:"flush"`
	// FlushInterval is the fsync interval under FlushAsync. Default 500 ms.
	FlushInterval time.Duration `yaml:"flushInterval"`
	// CheckpointInterval is how often partial consume-queue blocks, the
	// dispatch checkpoint and progress values are persisted. Default 1 s.
	CheckpointInterval time.Duration `yaml:"checkpointInterval"`
	// Retention is how long a segment is kept after its last write.
	// Default 72 h. Negative keeps segments forever.
	Retention time.Duration `yaml:"retention"`
	// RetentionInterval is how often retention runs. Default 1 min.
	RetentionInterval time.Duration `yaml:"retentionInterval"`
	// DiskHighWater is the fraction of the disk in use above which the
	// oldest segments are deleted before their retention ends. Default 0.90.
	// Negative disables it. A segment holding a message some consumer has
	// not consumed (as the store's owner reports it, RetentionHooks) is
	// kept, with a loud log every few minutes, unless
	// DiskHighWaterDropsUnconsumed is set.
	DiskHighWater float64 `yaml:"diskHighWater"`
	// DiskHighWaterDropsUnconsumed lets high-water deletion delete
	// segments that hold unconsumed messages; each pass that does logs an
	// error naming the queues and counts in Stats.UnconsumedDropped.
	// Default false: above high water the disk may fill, and appends then
	// fail with ErrDiskFull (see DiskReserve), rather than messages be
	// lost.
	DiskHighWaterDropsUnconsumed bool `yaml:"diskHighWaterDropsUnconsumed"`
	// DiskReserve is the disk space kept for the index and for a start on
	// a full disk. A reserve file of DiskReserve bytes (<Dir>/RESERVE) is
	// kept, made whenever twice DiskReserve is free, and deleted when a
	// write of the index or the key index meets a full disk (another
	// process filled it), so that they can open and keep working. Appends fail with
	// ErrDiskFull while the filesystem has less than DiskReserve bytes
	// free, twice that while the reserve file is missing (measured every
	// second and after each quarter of DiskReserve written), and succeed
	// again once it has them, without a restart; reads and consumer
	// offsets go on meanwhile. Default 64 MiB, about twice what
	// the index needs with its default memtable. Negative (in code; the
	// config file takes sizes only) disables both: appends then fail with
	// the filesystem's error, and the index, meeting a full disk, may stop
	// the process or keep it from starting.
	DiskReserve int64 `yaml:"diskReserve" cfg:"size"`
	// MaxPendingBytes bounds the bytes appended but not yet written; an
	// append waits while it is exceeded. Default 64 MiB.
	MaxPendingBytes int `yaml:"maxPendingBytes" cfg:"size"`
	// Prealloc is how far ahead of the data the active segment is kept
	// written with zeros (and synced), so that fsyncs cover data only and
	// not a growing file size. Zero or negative disables it (the default):
	// on the disks measured so far, the zeroing cost more CPU and p99
	// latency than the cheaper fsyncs saved.
	Prealloc int64 `yaml:"prealloc" cfg:"size"`
	// CacheWindow is how much of the log, counted back from the last
	// synced byte, is left in the operating system's page cache; older
	// synced bytes are dropped from it (posix_fadvise DONTNEED), so each
	// write lands in pages the kernel has just freed rather than in pages
	// it must find afresh, and the log does not push the index's files out
	// of memory. Consumers within the window read from memory; those
	// further behind read from disk. Default 1 GiB. Negative (in code; in
	// the config file, a window larger than the log) leaves every page to
	// the kernel. Only on Linux; elsewhere nothing is dropped.
	CacheWindow int64 `yaml:"cacheWindow" cfg:"size"`
	// IndexCacheSize is the index's block cache. Default 64 MiB.
	IndexCacheSize int64 `yaml:"indexCacheSize" cfg:"size"`
	// IndexMemTableSize is the size of the index's memtable, where its
	// writes gather before they are flushed to a sorted file. Default
	// 32 MiB, the consume-queue blocks of over a million messages, so that
	// reads of the recent log find its blocks in memory. Up to two
	// memtables may be resident at once.
	IndexMemTableSize int64 `yaml:"indexMemTableSize" cfg:"size"`
	// DisableKeyIndex turns off the key index (QueryByKey finds nothing).
	// Default false: the KEYS and UNIQ_KEY of every record are indexed.
	DisableKeyIndex bool `yaml:"messageIndexEnable" cfg:"not"`
	// KeyIndexFileEntries is how many entries one key-index file holds
	// (an entry is 28 bytes, a record has one per key and one for its
	// UNIQ_KEY); a full file is sealed and a new one started. The newest
	// file's slot table, 4 bytes per 8 entries, stays in memory. Default
	// 4 Mi entries: 112 MiB files and a 2 MiB table.
	KeyIndexFileEntries int `yaml:"keyIndexFileEntries"`
	// TagCode computes the tag code kept in a record's consume-queue unit.
	// It must depend on the record alone, since recovery calls it again.
	// Default: message.TagHash of the TAGS property.
	TagCode func(r message.Record) int64 `yaml:"-"`
	// OnArrive is called after records become visible, once per queue that
	// received records, with the queue's new max offset. It runs on the
	// flusher goroutine and must not block.
	OnArrive func(topic string, queueID int32, maxOffset int64) `yaml:"-"`
	// Logger receives the store's logs. Default slog.Default().
	Logger *slog.Logger `yaml:"-"`
	// Replicator, if set, makes the store one member of a replicated
	// broker set (replica.go): it takes writes only between Promote and
	// Demote, and applies what the set commits through Apply. Flush is
	// then FlushAsync for the commit log: a round is durable once the
	// replicated log holds it on a majority.
	Replicator Replicator `yaml:"-"`
	// WriteAhead says the replicated log is served from the commit log
	// (writeahead.go): rounds are written by WriteRound when the
	// replicated log stores them, before they are committed, and Apply
	// only indexes them. Recovery then keeps the log past the applied end
	// as unapplied rounds, for the owner to cut (CutRounds) to where its
	// replicated log ends. Only with Replicator.
	WriteAhead bool `yaml:"-"`
	// Now is the clock. Default time.Now.
	Now func() time.Time `yaml:"-"`
}

// withDefaults returns a copy of o with defaults filled in, or every problem
// found.
func (o Options) withDefaults() (Options, error) {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = DefaultCheckpointInterval
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.RetentionInterval == 0 {
		o.RetentionInterval = DefaultRetentionInterval
	}
	if o.DiskHighWater == 0 {
		o.DiskHighWater = DefaultDiskHighWater
	}
	if o.MaxPendingBytes == 0 {
		o.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if o.DiskReserve == 0 {
		o.DiskReserve = DefaultDiskReserve
	}
	if o.KeyIndexFileEntries == 0 {
		o.KeyIndexFileEntries = DefaultKeyIndexFileEntries
	}
	if o.IndexMemTableSize == 0 {
		o.IndexMemTableSize = DefaultIndexMemTableSize
	}
	if o.IndexCacheSize == 0 {
		o.IndexCacheSize = DefaultIndexCacheSize
	}
	if o.CacheWindow == 0 {
		o.CacheWindow = DefaultCacheWindow
	}
	if o.TagCode == nil {
		o.TagCode = DefaultTagCode
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("store: Options.Dir is required"))
	}
	if o.SegmentSize < minSegmentSize {
		errs = append(errs, fmt.Errorf("store: SegmentSize %d is below the minimum %d", o.SegmentSize, minSegmentSize))
	}
	if o.Flush != FlushSync && o.Flush != FlushAsync {
		errs = append(errs, fmt.Errorf("store: unknown flush mode %d", int(o.Flush)))
	}
	if o.FlushInterval < 0 || o.CheckpointInterval < 0 || o.RetentionInterval < 0 {
		errs = append(errs, errors.New("store: intervals must not be negative"))
	}
	if o.DiskHighWater > 1 {
		errs = append(errs, fmt.Errorf("store: DiskHighWater %v is above 1", o.DiskHighWater))
	}
	if o.IndexMemTableSize < 1<<20 || o.IndexMemTableSize > 1<<30 {
		errs = append(errs, fmt.Errorf("store: IndexMemTableSize %d is outside 1 MiB..1 GiB", o.IndexMemTableSize))
	}
	if o.KeyIndexFileEntries < minKeyIndexFileEntries || o.KeyIndexFileEntries > maxKeyIndexFileEntries {
		errs = append(errs, fmt.Errorf("store: KeyIndexFileEntries %d is outside %d..%d", o.KeyIndexFileEntries, minKeyIndexFileEntries, maxKeyIndexFileEntries))
	}
	if o.MaxPendingBytes < 0 {
		errs = append(errs, errors.New("store: MaxPendingBytes must not be negative"))
	}
	return o, errors.Join(errs...)
}

// DefaultTagCode is the default Options.TagCode: the tag hash of the TAGS
// property, 0 without one.
func DefaultTagCode(r message.Record) int64 {
	tag, ok := r.Properties().Lookup(message.PropertyTags)
	if !ok {
		return 0
	}
	return message.TagHashBytes(tag)
}
