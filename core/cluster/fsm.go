package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
	"github.com/rmq-go/rmq/core/store"
)

// fsm is the Node as raft's state machine: the store.
type fsm Node

// Apply hands a committed entry to the store.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	n := (*Node)(f)
	if err := n.Failed(); err != nil {
		// Not a word more: the store may hold a partial entry, and
		// restarting re-applies from its durable state.
		return fmt.Errorf("%w: %v", errMemberFailed, err)
	}
	if err := n.Store().Apply(l.Data); err != nil {
		n.log.Error("applying a committed entry failed", "index", l.Index, "err", err)
		n.failWith(err)
		return err
	}
	return nil
}

// errMemberFailed answers what a failed member is asked to apply or
// capture.
var errMemberFailed = errors.New("cluster: this member's store failed; restart it")

// Snapshot syncs the commit log and captures the store's state; raft then
// writes it out while entries go on being applied.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	n := (*Node)(f)
	if err := n.Failed(); err != nil {
		// A snapshot now would claim entries the store lacks, and raft
		// would truncate the log that could still supply them.
		return nil, fmt.Errorf("%w: %v", errMemberFailed, err)
	}
	if err := n.Store().Failed(); err != nil {
		n.failWith(err)
		return nil, fmt.Errorf("%w: %v", errMemberFailed, err)
	}
	// raft replays nothing before the snapshot after a restart: the
	// progress values applied from those entries must be on disk, not
	// only in memory until the next checkpoint.
	if err := n.Store().Checkpoint(); err != nil {
		return nil, err
	}
	st := n.Store()
	snap, err := st.TakeSnapshot()
	if err != nil {
		return nil, err
	}
	return fsmSnapshot{snap, st}, nil
}

// Restore replaces this member's store with a snapshot from the leader:
// the member was too far behind for the raft log to catch it up.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	n := (*Node)(f)
	if err := n.Failed(); err != nil {
		return fmt.Errorf("%w: %v", errMemberFailed, err)
	}
	old := n.Store()
	n.log.Warn("installing a snapshot from the leader: this member's store is replaced")
	n.storeClosed.Store(true)
	if err := old.Close(); err != nil {
		n.log.Warn("closing the store before a restore", "err", err)
	}
	so := n.opts.Store
	so.Replicator = n
	so.WriteAhead = true
	if err := store.RestoreDir(so.FS, so.Dir, rc); err != nil {
		// RestoreDir is atomic: the directory holds the old store still
		// (or, had it got past its commit point, the new one). It is
		// opened again, so nothing is left closed for a later Close,
		// and the member leaves the set: a write that failed here is
		// a disk that fails, and a restart installs a snapshot anew.
		if st, oerr := store.Open(so); oerr != nil {
			n.log.Error("reopening the store after a failed restore", "err", oerr)
		} else {
			n.store.Store(st)
			n.storeClosed.Store(false)
		}
		n.failWith(err)
		return err
	}
	st, err := store.Open(so)
	if err != nil {
		err = fmt.Errorf("cluster: open the restored store: %w", err)
		n.failWith(err)
		return err
	}
	n.store.Store(st)
	n.storeClosed.Store(false)
	if err := n.installDone(); err != nil {
		n.failWith(err)
		return err
	}
	n.restores.Add(1)
	if n.opts.OnRestore != nil {
		n.opts.OnRestore()
	}
	return nil
}

type fsmSnapshot struct {
	snap *store.Snapshot
	st   *store.Store
}

// Persist writes the snapshot's manifest. Once it is stored, a restart
// replays only the entries after it, so the store's retention may delete
// the rounds before its end (HoldRoundsFrom).
func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.snap.WriteTo(sink); err != nil {
		sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	s.st.HoldRoundsFrom(s.snap.End())
	return nil
}

func (fsmSnapshot) Release() {}

// snapshotStore keeps raft's snapshots as manifests (store.Snapshot) in
// files, and sends a member far behind the full stream: the manifest's
// index values and the log's bytes, read from the store when raft opens
// the snapshot to send it. Taking a snapshot thus never copies the log.
type snapshotStore struct {
	*raft.FileSnapshotStore
	n *Node
}

// Open returns a snapshot as raft sends it: a manifest becomes the full
// stream, with its size; a full stream (installed from a leader earlier)
// is returned as it is.
func (s snapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.FileSnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	br := bufio.NewReader(rc)
	manifest, err := store.IsManifest(br)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	if !manifest {
		return meta, readCloser{br, rc}, nil
	}
	size, stream, err := s.n.Store().SnapshotStream(br)
	rc.Close()
	if err != nil {
		return nil, nil, err
	}
	m := *meta
	m.Size = size
	return &m, stream, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}
