package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Membership changes. Each is raft's own (a configuration entry committed
// by a majority of the old membership), asked of the leader; a member
// that does not lead answers ErrNotLeader naming the one that does.

// Errors of membership changes.
var (
	// ErrNotLeader is returned by a membership change asked of a member
	// that does not lead; the error names the leader when one is known.
	ErrNotLeader = errors.New("cluster: not the leader")
	// ErrMembership is returned, wrapped with the reason, for a change
	// that would leave the set unable to work or names no member.
	ErrMembership = errors.New("cluster: membership change refused")
)

// membershipTimeout bounds how long a change waits to enter raft's log.
const membershipTimeout = 10 * time.Second

// notLeader is ErrNotLeader with the leader's id and address, when known.
func (n *Node) notLeader() error {
	addr, id := n.raft.LeaderWithID()
	if id == "" {
		return fmt.Errorf("%w: no leader is known now; try again after the election", ErrNotLeader)
	}
	return fmt.Errorf("%w: ask %s (raft %s)", ErrNotLeader, id, addr)
}

// configuration is the set's current membership.
func (n *Node) configuration() (raft.Configuration, uint64, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, 0, err
	}
	return f.Configuration(), f.Index(), nil
}

// AddMember adds p to the set as a voter. p starts with an empty data
// directory and Options.Join, so that it waits to be added instead of
// bootstrapping a set of its own; once added it receives the leader's
// state (a snapshot, then the log) and votes. Adding a member that is
// already one with the same address does nothing.
func (n *Node) AddMember(p Peer) error {
	if p.ID == "" || p.Addr == "" {
		return fmt.Errorf("%w: a member needs an id and a raft address", ErrMembership)
	}
	if n.state() != raft.Leader {
		return n.notLeader()
	}
	cfg, index, err := n.configuration()
	if err != nil {
		return err
	}
	for _, s := range cfg.Servers {
		switch {
		case string(s.ID) == p.ID && string(s.Address) == p.Addr:
			return nil
		case string(s.ID) == p.ID:
			return fmt.Errorf("%w: %s is a member already, at %s; remove it first to move it", ErrMembership, p.ID, s.Address)
		case string(s.Address) == p.Addr:
			return fmt.Errorf("%w: %s is %s's address", ErrMembership, p.Addr, s.ID)
		}
	}
	if err := n.raft.AddVoter(raft.ServerID(p.ID), raft.ServerAddress(p.Addr), index, membershipTimeout).Error(); err != nil {
		return fmt.Errorf("cluster: add %s: %w", p.ID, err)
	}
	n.log.Info("member added", "member", p.ID, "addr", p.Addr)
	return nil
}

// RemoveMember removes the member id from the set. Removing the leader
// itself hands leadership to another member first. A set is never made
// smaller than one member.
func (n *Node) RemoveMember(id string) error {
	if n.state() != raft.Leader {
		return n.notLeader()
	}
	cfg, index, err := n.configuration()
	if err != nil {
		return err
	}
	found := false
	for _, s := range cfg.Servers {
		found = found || string(s.ID) == id
	}
	switch {
	case !found:
		return fmt.Errorf("%w: %q is not a member", ErrMembership, id)
	case len(cfg.Servers) == 1:
		return fmt.Errorf("%w: %s is the set's only member", ErrMembership, id)
	}
	if err := n.raft.RemoveServer(raft.ServerID(id), index, membershipTimeout).Error(); err != nil {
		return fmt.Errorf("cluster: remove %s: %w", id, err)
	}
	n.log.Info("member removed", "member", id)
	return nil
}

// TransferLeadership hands leadership to the member id, or to the most
// up-to-date other member when id is empty, and returns once the
// transfer ended (raft gives the target an election timeout to win).
func (n *Node) TransferLeadership(id string) error {
	if n.state() != raft.Leader {
		return n.notLeader()
	}
	if id == "" {
		return n.raft.LeadershipTransfer().Error()
	}
	if id == n.opts.NodeID {
		return nil
	}
	cfg, _, err := n.configuration()
	if err != nil {
		return err
	}
	for _, s := range cfg.Servers {
		if string(s.ID) == id {
			if s.Suffrage != raft.Voter {
				return fmt.Errorf("%w: %s does not vote", ErrMembership, id)
			}
			return n.raft.LeadershipTransferToServer(s.ID, s.Address).Error()
		}
	}
	return fmt.Errorf("%w: %q is not a member", ErrMembership, id)
}
