// Package cluster makes a broker set of several members replicate one
// store over raft (github.com/hashicorp/raft): the leader is the set's
// master, the others its replicas.
//
// # Data path
//
//	leader: Append ─▶ store round ─▶ Propose ─▶ StoreLogs on a majority ─▶ commit
//	                                            │ round's bytes → commit log (fsync)
//	                                            │ pointer → raft-wal (fsync)
//	every member:                               ▼
//	                             store.Apply ◀── FSM.Apply ◀── GetLog (rebuilt)
//	                             index the round, move the applied end
//
// A group-commit round of the store is one raft entry holding the round's
// bytes exactly as the commit log stores them, so every member's commit
// log is byte for byte the same, and commit-log offsets, queue offsets and
// message ids survive a failover. raft's log is a pointer log (pointer.go,
// logstore.go): when a member stores an entry, a round's bytes go into its
// commit log at their offsets (store.WriteRound, one fsync per batch) and
// raft-wal keeps a pointer to them; every other entry stays in raft-wal
// whole. GetLog rebuilds the entry and checks its CRC. A round is thus
// written once per member, and readers see it only once it is applied
// (store.Options.WriteAhead). An append is acknowledged once the round's
// entry is committed (stored by a majority) and applied on the leader.
// The leader sends a batch to its followers while it stores the batch
// itself (raft.LogStager: GetLog serves the staged entries meanwhile), and
// counts its own copy only once StoreLogs returned; the raft module is
// hashicorp/raft with that one change (third_party/raft). A
// conflicting tail raft cuts is cut from the commit log too (CutRounds);
// at start the commit log is cut back to the WAL's last round, whose
// bytes a crash may have outrun (reconcile.go).
//
// Consumer offsets and scheduler positions (progress values) are proposed
// by the leader as they change, many in one entry at most every 10 ms; an
// offset commit a client waits for (UPDATE_CONSUMER_OFFSET) is answered
// once its entry is committed, and a member that does not lead refuses
// it. A snapshot first writes the progress values to disk, since raft
// replays nothing before it after a restart. Metadata (topic and group
// configs) goes with each write, which returns once committed; the keys components keep in the index (the timer index, POP
// state) with each batch; topic deletions at the log offset where they
// happened.
//
// # Leadership
//
// raft elects the leader. A new leader first applies every entry
// committed before it (a barrier), then its store takes writes
// (store.Promote) and OnLeader runs: the broker process serves as the
// set's master, brokerId 0; followers serve reads as replicas (the broker
// process, internal/server). A leader that loses its majority stops
// within raft's leader lease: its store stops taking writes
// (store.Demote) and fails every append not yet committed, and OnFollower
// runs. Such an append may still be committed by the next leader: a
// client that retries may then store a message twice (at least once).
//
// # A failing store
//
// A member whose store fails to apply a committed entry, or fails on its
// own (an fsync in the background), leaves the set (Failed, OnFail): the
// FSM applies and snapshots nothing more, the store takes no writes, a
// leader hands leadership over, and raft shuts down, so the member
// neither votes nor can be elected. A round that StoreLogs cannot write,
// sync or cut fails the member the same way. Reopening it is the way
// back: the store recovers to its applied end and raft replays the log
// from the last snapshot, or installs a newer one. A snapshot that fails to
// install leaves the member out the same way (its store directory then
// holds part of a snapshot, and Restore never closes a store twice).
//
// # Snapshots
//
// raft takes a snapshot every SnapshotThreshold entries and then truncates
// its log, leaving TrailingLogs entries; the log store leaves more (its
// DeleteRange stops short): every entry appended in the last
// TrailingDuration (6 h) and every older one whose round the commit log
// still holds, as far back as they take at most TrailingBytes (16 GiB)
// on disk (of the WAL, which holds pointers in the rounds' place). A
// member restarted, or cut off, catches up from the leader's log as long
// as the leader's commit log holds what it missed, receiving that and no
// more; only one away longer, or one whose disk was lost, needs a
// snapshot. Status.RaftReceived, the bytes a member read from its
// raft port, tells the two apart. A conflicting tail raft cuts goes in full, and so
// does the whole log once a member installed a snapshot (the store says
// it is monotonic), so entries the leader replaced are never kept.
//
// A member keeps a snapshot as a manifest: the store's index
// state the log does not derive (metadata, progress values, the keys
// components keep such as the timer index, queue registrations, topic
// deletions) and the offset it ends at, after an fsync covering it
// (store.Snapshot). When raft sends a snapshot to a member too far behind
// for the log, the manifest becomes the full stream, the log's bytes up
// to that offset read from the store as they go (snapshotStore); the
// member installs it in place of its store, atomically (store.RestoreDir):
// a failed install leaves it serving its old store.
//
// # Invariants
//
//  1. A member's store takes writes only while it is raft's leader and
//     has applied every entry committed before its term.
//  2. An append is acknowledged only after its round is committed by a
//     majority and applied on the leader; nothing acknowledged is lost
//     while a majority of members keeps its disk.
//  3. Every member applies the same entries in the same order; a round
//     that does not continue a member's log where it ends is an error
//     that stops that member's store, never silently skipped.
//  4. A member restarted after a crash never serves a round it has not
//     applied: the store indexes up to its recorded applied end and keeps
//     the rounds past it unapplied, cut back to the end of the WAL's last
//     round, until raft's replay applies them.
//  5. A member whose store failed applies, snapshots, votes and leads
//     no more until reopened: no snapshot of it claims more than its
//     store holds, and the raft log keeps what it missed.
//  6. Every round raft-wal points to is in the commit log, synced, before
//     the pointer is stored; retention deletes no segment ending past the
//     first round after the newest snapshot, which a restart replays.
//
// # Security
//
// raft's port carries the set's data and takes entries from its leader.
// With Options.TLS and DialTLS (ListenTCP), every connection is TLS and
// members prove themselves with client certificates. A connection has 5 s
// to complete its handshake and at most 64 may be at it; raft serves only
// those that completed, so strangers cost a bounded number of sockets for
// a bounded time. The broker process sets them from its tls: section
// when it names a caFile, and otherwise refuses peers off loopback unless
// told the network is private.
//
// Every connection ListenTCP serves, TLS or not, first passes the set
// check: the dialing member names its set, and a member of another set is
// refused with a line saying so, which the dialer returns as its error.
// A stale peer list, or an address reused for a new set, so never has a
// member follow another set's leader and cut its log to match. The check
// keeps out mistakes, not attackers. A connection without it, from a
// member of an earlier version, is served, so a set restarted one member
// at a time onto this version keeps its quorum.
package cluster
