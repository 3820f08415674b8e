package cluster

import (
	"fmt"
	"io"

	"github.com/hashicorp/raft"
)

// recoverMembership rewrites this member's raft state so that Peers alone
// form the set (Options.Recover): raft.RecoverCluster applies the log past
// the newest snapshot, writes a snapshot of the store with the new
// membership, and empties the log. It is for a set that lost its majority
// for good, and is run on each surviving member, stopped, with the same
// Peers. Entries that only the lost members held are gone; the surviving
// member with the longest log should lead, which is why the procedure in
// docs/replication.md starts it first.
//
// The store on disk is already at or past the newest snapshot (raft is
// told not to restore snapshots at start for the same reason), so the
// snapshot the recovery would restore is read and dropped, and entries it
// applies again are replays the store recognises.
func (n *Node) recoverMembership(conf *raft.Config, files *raft.FileSnapshotStore) error {
	var cfg raft.Configuration
	for _, p := range n.opts.Peers {
		cfg.Servers = append(cfg.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
	}
	n.log.Warn("rewriting the set's membership: the members not listed are dropped, with whatever only they held",
		"members", len(cfg.Servers))
	if err := raft.RecoverCluster(conf, recoveryFSM{(*fsm)(n)}, n.logs, n.logs, files, n.trans, cfg); err != nil {
		return fmt.Errorf("cluster: recover the membership: %w", err)
	}
	return nil
}

// recoveryFSM is the member's state machine during recoverMembership: its
// store is what it is on disk, so a snapshot is not installed over it.
type recoveryFSM struct{ *fsm }

func (recoveryFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	_, err := io.Copy(io.Discard, rc)
	return err
}
