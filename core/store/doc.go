// Package store keeps messages on disk: an append-only commit log of
// segment files holding records in the stored-message layout, a pebble
// index holding consume queues, consumer offsets, progress checkpoints and
// metadata, and a key index of hash-slot files.
//
// # Directory layout
//
//	<dir>/LOCK                       held while a Store is open
//	<dir>/RESERVE                    DiskReserve bytes kept for the index (see Full disk)
//	<dir>/commitlog/<20-digit base>  segment files, named by base offset
//	<dir>/index/                     the pebble database
//	<dir>/keyindex/<20-digit seq>.kidx  key-index files, numbered in order
//	<dir>/restore/                   a snapshot being restored (RestoreDir):
//	                                 swapped in by the next start once it
//	                                 holds COMPLETE, discarded before
//
// # Commit log
//
// The commit log is one logical byte space. Segment i covers
// [i*SegmentSize, (i+1)*SegmentSize); a record never spans two segments. A
// record's commit-log offset is its byte position in that space, so it is
// unique, grows with time and names its segment by division. Each record is
// framed as
//
//	+----------------------+-----------------------------------------------+
//	| stored-message layout| exactly as served to clients (see message)    |
//	| TOTALSIZE bytes      | PHYSICALOFFSET equals the frame's position     |
//	+----------------------+-----------------------------------------------+
//	| CRC-32C (4 bytes)    | over the whole record, big-endian              |
//	+----------------------+-----------------------------------------------+
//
// The layout's own BODYCRC covers only the body; the trailing CRC-32C covers
// every header and property bit as well. It sits outside the record so the
// served bytes stay exactly the RocketMQ layout; a pull copies each record
// without its trailer.
//
// Each group of frames written and synced together (a round) begins with a
// round marker:
//
//	+----------------+----------------+-------------------+-----------+----------+
//	| 20 (4 bytes)   | RoundMagic (4) | round start (8)   | flags (4) | CRC-32C  |
//	+----------------+----------------+-------------------+-----------+----------+
//
// Flag 1 says the round was written under FlushSync, that is, only after
// the fsync of every earlier round returned. Recovery relies on it: an
// invalid frame followed somewhere by a valid FlushSync marker lies in a
// round that was durable, so it is corruption to skip, not a torn tail.
// Startup fsyncs the last segment before a round is written, so the first
// markers of a run speak the truth about the rounds of the run before,
// which a crashed process may have left in the page cache only.
//
// A segment ends where its data ends: at a frame whose TOTALSIZE is 0 (zeros
// never written, or a torn tail zeroed by recovery), at the end-of-segment
// marker written when the next record does not fit
//
//	+-----------------+---------------------------+
//	| 0 (4 bytes)     | BlankMagic (4 bytes)      |
//	+-----------------+---------------------------+
//
// or at end of file.
//
// # Index keys
//
// All keys start with a one-byte kind. Topics never contain 0x00.
//
//	'q' topic 0x00 queueID(4) block(8)  → up to 64 consume-queue units of 20 bytes:
//	                                       commit-log offset(8) size(4) tag code(8);
//	                                       a unit of size 0 is a hole (a record lost
//	                                       to corruption) and is skipped
//	'Q' topic 0x00 queueID(4)           → queue registry: min offset(8)
//	'c'                                 → dispatch checkpoint: commit-log offset(8)
//	'p' name                            → progress value(8): consumer offsets and
//	                                       scheduler positions (see SetProgress)
//	'M' name                            → durable metadata (topic and group config)
//	'D' topic                           → topic deletion: commit-log offset(8) of
//	                                       the log's end when the topic was deleted
//	'k' …                               → key-index entries of an older layout,
//	                                       deleted at startup
//	'F' name                            → a note that a one-time step of the
//	                                       index's upgrade is done: "refilled"
//	                                       (see Recovery of short blocks)
//
// # Key index
//
// Each dispatched record's KEYS (split at spaces, at most
// MaxIndexKeysPerMessage of them) and UNIQ_KEY are indexed, each key up to
// MaxIndexKeyLen bytes (longer ones are skipped), in files of their own:
//
//	header (64 bytes)  "RMQKIDX1", slot count(4), capacity(4), entry
//	                   count(4), flags(4): 1 = sealed, end(8), min and max
//	                   store time(8+8), 12 spare bytes, CRC-32C(4) of the rest
//	slot table         slot count × newest entry number(4) of the slot, 0 none
//	entries            capacity × hash(8) commit-log offset(8) store time(8)
//	                   number of the slot's entry before it(4)
//
// The hash is a 64-bit FNV-1a of kind ('K' for a key of KEYS, 'U' for the
// UNIQ_KEY), the topic's length, the topic and the key; the slot is the
// hash modulo the slot count (capacity / 8). A slot's entries chain from
// the newest back, so a query walks one chain per file, newest file first,
// and keeps the entries whose hash and time match, at most 65,536 entry
// reads per query. Two keys with one hash are told apart by the caller,
// who reads each record and checks it, as it must anyway: the index is
// advisory (below).
//
// Only the newest file takes entries. Its slot table is in memory; each
// flush round appends the round's entries with one write, before the
// round's units become visible, so a record a reader can see is one a
// query finds. Nothing on the append path is synced. Every
// CheckpointInterval a sync seals the files that filled (slot table
// written and synced, then a sealed header, synced), then syncs the newest
// file and writes its header, whose end says that every record below it
// is indexed; a file gets its first header only there, after every older
// file is sealed. At startup the newest file's slot table is built again
// from its entries, and the records from its end on are indexed again, the
// part below the dispatch checkpoint read from the log first. A newest
// file without a readable header, or whose entries do not chain as its
// header says, is dropped, and the index ends where the file before it
// does; a damaged, unsealed or missing older file drops every file, and
// the whole log is indexed again. So are logs restored from a snapshot, or
// written with the index turned off.
//
// Retention removes an older file once its end lies below the log's first
// offset; queries drop entries below that offset and past the log's end.
// An entry may name an offset whose record no longer holds the key (a
// torn tail cut under FlushAsync, written again) or the middle of one (a
// damaged file): QueryByKey's callers read the record and check it.
//
// On the append path an entry costs a hash and 28 bytes of a buffer, about
// 0.3 µs of the flusher's CPU for a message with two keys and an id (a
// profile of BenchmarkKeyIndexAppend), with nothing in pebble and no
// compaction.
//
// # Durability
//
// Consume-queue units are derived from the commit log. They are written
// without fsync, full blocks as they fill and partial blocks every
// CheckpointInterval together with the checkpoint, in one batch; startup
// re-dispatches every record past the checkpoint. Progress values are
// buffered and written with fsync every CheckpointInterval, so a crash
// replays at most that much of them. Metadata is written with fsync before
// PutMeta returns.
//
// With FlushSync (the default) Append returns only after an fsync covers its
// records; the flusher starts the next fsync as soon as the previous one
// returns, so concurrent appends share fsyncs (group commit). With
// FlushAsync, Append returns once its records are written to the file, and
// fsync runs every FlushInterval. Before it takes a round smaller than
// 64 KiB, the flusher yields its processor while the round still grows, so
// appenders that are ready to run join it; it waits on no timer. Under
// FlushAsync without that, a busy flusher wrote rounds of one or two
// records, and each write has a fixed cost in the kernel of ~10 µs.
//
// # Invariants
//
//  1. A record is visible to readers (in a consume queue) only after it is
//     durable under FlushSync, or written to the file under FlushAsync.
//  2. Recovery removes nothing before the first invalid frame past the
//     checkpoint, and removes it only when it is a torn tail (no later
//     FlushSync round); the tail is zeroed, never truncated into valid data.
//     An invalid frame in a durable round is reported with its offset and
//     skipped, and the records after it stay readable; its queue position
//     becomes a hole.
//  3. A record is returned to a reader only after its CRC-32C verified.
//  4. Queue offsets of one queue are assigned in commit-log order without
//     gaps, except for holes left by records lost to corruption. A
//     consume-queue block in the index is only ever replaced by a later
//     state of itself: the dispatch that completes a block and the
//     checkpoint that writes it partial both commit it under cq.
//  5. A failed write or fsync fails every append not yet acknowledged and
//     hands its offsets out again; the bytes it may have left are zeroed by
//     the next round's write, inside that round's fsync. Acknowledged
//     records are never rolled back. Under FlushAsync an fsync failure,
//     which may have lost acknowledged records, stops the store taking
//     writes (ErrFailed).
//
// # Recovery of short blocks
//
// Versions before invariant 4's second sentence could leave a
// consume-queue block short: a checkpoint's partial copy, written over the
// whole block a dispatch had just completed. The units it dropped read as
// holes, though their records are in the commit log. Once in a store's
// life, the first start of this version reads every block of the index;
// each short block below its queue's last one is filled again from the
// stretch of the log between its last unit and the next block's first,
// with the records of its queue found there (refill.go). The blocks and
// the 'F' "refilled" note are committed together, so the check never
// runs again once it is done, and a store this version creates skips it.
// A block that ends early for another reason (records lost to
// corruption) finds nothing there and stays as it is.
//
// # Retention
//
// Retention deletes whole segments, oldest first (retention.go). The
// store's owner takes part through RetentionHooks: Floor lists queue
// positions every deletion must keep, Unconsumed the first record of each
// queue that consumers have not consumed, and Held is told which segment
// a Floor hold kept, so the owner can move what it holds forward.
//
//  6. The segment being written is never deleted. A segment is deleted
//     when it is older than Retention or the disk is above DiskHighWater,
//     and never while a Floor hold's first record lies in it or before
//     it, whatever the reason.
//  7. Above DiskHighWater, a segment holding or preceded by an
//     Unconsumed hold's first record is kept unless
//     DiskHighWaterDropsUnconsumed is set; age retention deletes by age
//     alone. Unconsumed is asked only when a high-water deletion is about
//     to happen, once a pass.
//  8. A wanted deletion that a hold stops is logged, naming the holder, at
//     most every five minutes per kind (a warning for Floor holds, an
//     error for unconsumed messages above high water) and counted in
//     Stats (SegmentsHeld, HighWaterHeld). Unconsumed messages deleted
//     above high water are logged as an error naming the queues and
//     counted (UnconsumedDropped).
//
// # Full disk
//
// The index must always find space: pebble replays its log at Open and
// writes it out before returning, retrying a failed flush at once and
// forever, and a failed write of its log or manifest is fatal. The store
// keeps it that space (disk.go):
//
//	free ≥ need ──────────────▶ appends taken
//	free < need ──────────────▶ appends fail with ErrDiskFull; reads,
//	                            progress and metadata go on
//	index or key-index write  ▶ RESERVE deleted, the write retried once
//	meets ENOSPC                (no RESERVE: the write waits for space)
//	free ≥ 2 × DiskReserve ───▶ RESERVE made again
//
// where need is DiskReserve with the reserve file present and twice it
// without. Free space is measured every second, after each quarter of
// DiskReserve written, and at Open before the index opens; a commit-log
// write that meets ENOSPC marks the disk full at once and fails its
// round as any failed write does (invariant 5), with ErrDiskFull. A
// filesystem that does not report its space (an in-memory one) turns all
// of this off, as does a negative DiskReserve.
//
// # Deleting a topic
//
// DeleteTopic removes a topic's queue registrations, index blocks and
// consumer offsets in one synced batch, together with a 'D' key holding
// the commit-log offset X where the log ended at that moment. The
// topic's records stay in the log until retention deletes them.
//
//  9. No record of a deleted topic written before its deletion is ever in
//     a consume queue again: dispatch drops the units of deleted queues
//     still in flight, and recovery re-dispatches a record of topic T at
//     offset off only when T has no 'D' key or off >= X. Records of T at
//     or after X belong to its new queues, which start at offset 0.
//  10. A 'D' key lives until the checkpoint reaches X, removed in the
//     checkpoint's own batch; recovery starts at the checkpoint and never
//     reads a record before X again. A rollback that hands out offsets
//     before X again first lowers X to the new end of the log, durably.
//
// # Replication
//
// With Options.Replicator the store is one member of a replicated broker
// set (replica.go; core/cluster runs it on raft). It takes appends only
// between Promote and Demote; the flusher does not write a round but
// proposes it, as one entry holding the round's bytes exactly as they go
// to the log, and every member, the proposer included, writes and
// dispatches it when Apply is called with the committed entry. Progress
// values (offsets, positions) are proposed by the leader as they change,
// one entry in flight and at most one per progressWindow, the values
// changed meanwhile gathered in the next (progressrepl.go);
// CommitOffsetSync waits for its entry, and a store that does not lead
// refuses offset commits (ErrNotLeader) and ignores SetProgress. Metadata
// writes, the keys
// components keep (PutKeys, PutValues, DeleteKeys, DeleteKeyRange) and
// topic deletions are entries too. Without WriteAhead, the commit log is
// then synced in the background, and after each sync the offset it
// covers, a round boundary, is written to the index ('r'): recovery cuts
// the log there, and the replicated log supplies the rest again. With
// Options.WriteAhead (what core/cluster runs: its raft log points into the
// commit log) the replicated log's owner writes and syncs each round when
// it stores the entry (WriteRound, SyncRounds), so Apply only indexes
// it; 'r' then records the applied end, recovery indexes up to it and
// keeps the rounds past it unapplied (StoredEnd), for the owner to cut
// back to where its own log ends (CutRounds), and retention keeps every
// segment ending past the floor the owner sets (HoldRoundsFrom): the
// rounds its log may apply again after a restart. Every unit below the cut stays
// in its queue, whether its block came from the index or only from the
// recovery scan (whose blocks trimming reads back from the recovery's
// own batch), so the rounds written again continue each queue without a
// hole.
//
//  11. A replicated store acknowledges an append only when its round's
//     entry is applied: after the set committed it. A round that was
//     proposed and then failed by Demote (or by a failed proposal) may
//     still be applied later, as another member's round. A round is
//     proposed only in the term (Promote to Demote) that gave it its
//     offsets; one the flusher took before a Demote fails instead, since
//     the next Promote hands its offsets out again.
//  12. Every member writes a round at the offsets its proposer gave it; a
//     round that does not begin where the member's log ends, and is not
//     wholly before it (a replay after a restart), stops the member's
//     store taking writes.
//  13. At most maxInflightRounds rounds are proposed and not yet applied;
//     appends meanwhile gather in the pending round.
//  14. A topic deletion at offset X is proposed after every round below X
//     and before any round past X: with a round pending it is proposed
//     right after that round, X being the round's end, and otherwise at
//     once, at the log's end, under the lock the flusher proposes rounds
//     under. Appends to the topic wait while it is in flight, so the
//     records past X are in the topic's new queues on every member.
//     Applied fresh, a deletion finds the log ending at or before X; one
//     that finds it past X is a replay if the log already reached past X
//     when the store opened, and is otherwise skipped by every member,
//     its DeleteTopic failing with ErrDeletionSkipped.
//  15. A snapshot restore (RestoreDir) replaces the store whole or not at
//     all: it is staged in <dir>/restore and marked COMPLETE once every
//     byte of it is synced; a start discards a staging directory without
//     the mark and rolls one with it forward, in steps it can redo after
//     a crash (snapshot.go). A snapshot carries the keys components keep
//     with the progress values that count on them.
//  16. A progress value is changed only on the leader, and an offset
//     commit that waits is answered only once the entry carrying it is
//     committed and applied. A member keeps the committed values beside
//     its own, writes only those to its index, and goes back to them
//     when it stops leading: no member holds a value the set does not.
//  17. With Options.WriteAhead (writeahead.go) the replicated log's owner
//     writes a round's bytes when it stores the entry, before the set
//     commits it (WriteRound, one SyncRounds per batch), and Apply only
//     indexes it. A round must begin where the stored rounds end
//     (StoredEnd); CutRounds drops stored rounds past an offset at or
//     after the applied end, zeroed and synced before it returns. No
//     reader (queue, key or offset lookup, snapshot, the log's end) sees
//     past the applied end; recovery keeps the rounds past it, unapplied,
//     for the owner to cut to the end of its own log, and applying a
//     round again that lies below the applied end does nothing.
//
// # Reading a queue
//
// Readers outside the store walk a consume queue only through a QueueIter
// (pebble's shape: SeekGE, Next, Record, Error, Close). It loads the units
// of one index block at a time, judges them with IterOptions.Filter before
// any record is read, and reads the kept records that follow each other in
// one segment with one read into a buffer it reuses (and pools on Close).
// A queue's open and last completed blocks are in memory; an older block
// comes from the index, read with the complete blocks after it into a
// bounded read-ahead table (readahead.go), so a consumer catching up costs
// one index lookup per eight blocks.
//
//	SeekGE(off) ─▶ load units ─▶ Filter: keep / skip / stop ─▶ read span ─▶ verify ─▶ Record
//	                   │ ErrOffsetGone                           │ segment gone   │ CRC fails
//	                   ▼                                         ▼                ▼
//	             jump to the min offset, Gap()        Gap() over the unit   OnCorrupt, skip
//
// Iterator invariants:
//
//	I1. Records come in increasing queue offset order, each at most once
//	    between two SeekGE calls, and each verified (invariant 3).
//	I2. A record the Filter skips or stops at is never read; holes never
//	    reach the Filter. The Filter sees each loaded unit once, in order.
//	I3. Holes and records that fail their checksum are never returned: each
//	    is counted in Stats.Corruptions (holes only when records are read)
//	    and told to OnCorrupt once per pass, then skipped, or, under
//	    StopOnCorruption, ends the walk with Error wrapping ErrCorruption
//	    and NextOffset at the bad offset.
//	I4. Offsets retention removed are never an error: a position below the
//	    min offset (at SeekGE, or at a later load after retention moved the
//	    min) moves to the min offset, and a unit whose segment was deleted
//	    after it was loaded is passed over; both are reported by Gap for the
//	    move that crossed them. Units loaded before a TrimQueue may still be
//	    returned while their records remain in the log.
//	I5. NextOffset never passes an offset the caller has not seen returned,
//	    filtered out, or reported as a hole, a corrupt record or a gap: a
//	    new iterator sought there misses nothing. MaxUnits, MaxRecords and
//	    MaxBytes count from the last SeekGE; at a limit the walk ends
//	    without error, as at the end of the queue or at a UnitStop.
//	I6. Record aliases the iterator's buffer and is valid until the next
//	    move or Close. Once a move fails, Next fails until SeekGE; use after
//	    Close panics.
package store
