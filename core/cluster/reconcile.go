package cluster

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/hashicorp/raft"
	"github.com/rmq-go/rmq/core/store"
)

// reconcile makes the store's commit log end where the raft log's last
// round does, before raft starts, and sets the floor of the store's
// retention.
//
// StoreLogs writes and syncs rounds before the WAL stores their pointers,
// so a crash between the two leaves rounds past the WAL's last: they are
// cut. A round the WAL holds whole (written by a member before the
// pointer log, which wrote rounds only when applying them, without
// fsync) is written into the commit log unless the log already holds
// exactly its bytes, so every round raft may apply is in the commit log,
// as a pointer's is. The rounds at or below the store's applied end are
// applied: raft replays them from the last snapshot, and the store skips
// them. A pointer past the commit log's end is possible only after a
// snapshot install that a crash kept raft from following with the
// removal of the log it replaced; one the snapshot covers has the whole
// log removed, as raft would have, and any other is corruption.
//
// A restart replays every entry after the newest snapshot, reading its
// round from the commit log, so retention keeps the segments from the
// first round after that snapshot (HoldRoundsFrom); a snapshot persisted
// later moves the floor on.
func (n *Node) reconcile(files *raft.FileSnapshotStore) error {
	var snapIndex uint64
	snaps, err := files.List()
	if err != nil {
		return fmt.Errorf("cluster: list snapshots: %w", err)
	}
	if len(snaps) > 0 {
		snapIndex = snaps[0].Index
	}
	return reconcileRounds(n.logs, n.Store(), snapIndex)
}

// reconcileRounds is reconcile with the newest snapshot's index.
func reconcileRounds(logs *logStore, st *store.Store, snapIndex uint64) error {
	first, err := logs.FirstIndex()
	if err != nil {
		return err
	}
	last, err := logs.LastIndex()
	if err != nil {
		return err
	}
	_, applied := st.CommitLogOffsets()
	// The rounds past the applied end, newest first.
	var tail []raft.Log
	for i := last; i >= first && i > 0; i-- {
		var l raft.Log
		if err := logs.WAL.GetLog(i, &l); err != nil {
			return fmt.Errorf("cluster: raft log entry %d: %w", i, err)
		}
		_, end, ok, err := roundSpan(&l)
		if err != nil {
			return fmt.Errorf("cluster: raft log entry %d: %w", i, err)
		}
		if !ok {
			continue
		}
		if end <= applied {
			break
		}
		tail = append(tail, l)
	}
	slices.Reverse(tail)
	end, wrote := applied, false
	for _, l := range tail {
		start, e, _, _ := roundSpan(&l)
		if isPointer(&l) {
			if e <= st.StoredEnd() {
				end = e
				continue
			}
			if l.Index <= snapIndex {
				// The store is a snapshot installed from the leader, and
				// raft stopped before removing the log it replaced: do it
				// now, as raft would have (the snapshot covers the entry).
				logs.log.Warn("removing the raft log an installed snapshot replaced", "first", first, "last", last)
				if err := logs.WAL.DeleteRange(first, last); err != nil {
					return err
				}
				return reconcileRounds(logs, st, snapIndex)
			}
			return fmt.Errorf("%w: raft log entry %d points at %d..%d, past the commit log's end %d",
				store.ErrCorruption, l.Index, start, e, st.StoredEnd())
		}
		if e <= st.StoredEnd() {
			id, spans, _, _ := store.ParseRound(l.Data)
			if got, err := st.ReadRound(id, spans); err == nil && bytes.Equal(got, l.Data) {
				end = e
				continue
			}
		}
		if err := st.CutRounds(max(start, applied)); err != nil {
			return err
		}
		if err := st.WriteRound(l.Data); err != nil {
			return fmt.Errorf("cluster: raft log entry %d: %w", l.Index, err)
		}
		end, wrote = e, true
	}
	if wrote {
		if err := st.SyncRounds(); err != nil {
			return err
		}
	}
	if stored := st.StoredEnd(); stored > end {
		logs.log.Info("cutting rounds past the raft log's last", "from", stored, "to", end)
		if err := st.CutRounds(end); err != nil {
			return err
		}
	}
	return holdFromSnapshot(logs, st, snapIndex, first, last)
}

// holdFromSnapshot sets the store's retention floor at the first round
// after the snapshot at snapIndex (or where the stored rounds end, with
// none).
func holdFromSnapshot(logs *logStore, st *store.Store, snapIndex, first, last uint64) error {
	floor := st.StoredEnd()
	for i := max(first, snapIndex+1); i <= last && i > 0; i++ {
		var l raft.Log
		if err := logs.WAL.GetLog(i, &l); err != nil {
			return fmt.Errorf("cluster: raft log entry %d: %w", i, err)
		}
		if start, ok, err := roundStart(&l); err != nil {
			return fmt.Errorf("cluster: raft log entry %d: %w", i, err)
		} else if ok {
			floor = start
			break
		}
	}
	st.HoldRoundsFrom(floor)
	return nil
}
