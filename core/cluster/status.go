package cluster

import (
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// Status is one member's view of its set, as `broker admin cluster
// status` prints it.
type Status struct {
	Set    string   `json:"set"`
	Node   string   `json:"node"`
	Addr   string   `json:"addr"`
	State  string   `json:"state"` // Leader, Follower, Candidate, Shutdown
	Leader string   `json:"leader"`
	Term   uint64   `json:"term"`
	Member []Member `json:"members"`
	// FirstIndex and LastIndex are the raft log's first and last entries
	// here, CommitIndex the last this member knows committed,
	// AppliedIndex the last its store applied; Lag is CommitIndex -
	// AppliedIndex.
	FirstIndex   uint64 `json:"firstIndex"`
	LastIndex    uint64 `json:"lastIndex"`
	CommitIndex  uint64 `json:"commitIndex"`
	AppliedIndex uint64 `json:"appliedIndex"`
	Lag          uint64 `json:"lag"`
	// LastContact is how long ago a follower last heard from the
	// leader ("" on the leader).
	LastContact string `json:"lastContact,omitempty"`
	// LogSpan is how long ago the raft log's first entry here was
	// appended ("" when it has none with a time): on the leader, how long
	// a member may be away and still catch up from the log rather than
	// by a snapshot, as long as the log goes on keeping it.
	LogSpan string `json:"logSpan,omitempty"`
	// Writable says the store takes writes (the leader, caught up).
	Writable bool `json:"writable"`
	// CommitLogEnd is the end of the member's commit log.
	CommitLogEnd int64 `json:"commitLogEnd"`
	// SnapshotsInstalled counts snapshots this member installed from the
	// leader since it started.
	SnapshotsInstalled int64 `json:"snapshotsInstalled"`
	// RaftReceived counts the bytes this member read since it started
	// from connections other members opened to its raft port: the log
	// entries, heartbeats and snapshots leaders sent it.
	RaftReceived int64 `json:"raftReceived"`
	// Failed says why this member left the set (its store failed); it
	// takes part again once restarted.
	Failed string `json:"failed,omitempty"`
}

// Member is one entry of the set's membership.
type Member struct {
	ID    string `json:"id"`
	Addr  string `json:"addr"`
	Voter bool   `json:"voter"`
}

// Status returns this member's view of the set.
func (n *Node) Status() Status {
	st := Status{Set: n.opts.SetName, Node: n.opts.NodeID, Addr: n.self.Addr,
		State: n.state().String(), Leader: n.LeaderID(),
		LastIndex: n.raft.LastIndex(), CommitIndex: n.raft.CommitIndex(), AppliedIndex: n.raft.AppliedIndex(),
		Writable: n.Store().Writable(), SnapshotsInstalled: n.restores.Load(),
		RaftReceived: n.received.Load()}
	if err := n.Failed(); err != nil {
		st.Failed = err.Error()
	}
	if st.CommitIndex > st.AppliedIndex {
		st.Lag = st.CommitIndex - st.AppliedIndex
	}
	stats := n.raft.Stats()
	st.Term, _ = strconv.ParseUint(stats["term"], 10, 64)
	if n.state() != raft.Leader {
		if t := n.raft.LastContact(); !t.IsZero() {
			st.LastContact = time.Since(t).Round(time.Millisecond).String()
		}
	}
	_, st.CommitLogEnd = n.Store().CommitLogOffsets()
	st.FirstIndex, st.LogSpan = n.logs.span()
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			st.Member = append(st.Member, Member{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
		}
	}
	return st
}

// Snapshot takes a raft snapshot now, so the raft log can be truncated.
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }
