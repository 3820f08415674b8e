package scalesim

// RaftModel is one broker set replicating its commit log with raft under
// a steady send rate. A group-commit round (the appends one fsync covers)
// becomes one raft entry; followers take each entry from the leader and
// nothing crosses from one set to another.
type RaftModel struct {
	MsgsPerSec   float64 // messages the set's leader appends per second
	MsgBytes     float64 // stored bytes per message
	Replicas     int     // members of the set, the leader included
	RoundsPerSec float64 // group-commit rounds per second, one raft entry each
	// HeartbeatInterval is the mean time between two heartbeats from the
	// leader to one follower, in seconds. hashicorp/raft sends one after a
	// random wait between HeartbeatTimeout/10 and HeartbeatTimeout/5
	// (100–200 ms at its 1 s default), whatever the traffic: 0.15 s.
	HeartbeatInterval float64
}

// DefaultHeartbeatInterval is hashicorp/raft's mean heartbeat interval at
// its default HeartbeatTimeout of 1 s.
const DefaultHeartbeatInterval = 0.15

// RaftLoad is the replication traffic of one set, or of several summed.
type RaftLoad struct {
	EntriesPerSec    float64 // raft entries appended (= group-commit rounds)
	MsgsPerEntry     float64
	LeaderOutBytes   float64 // payload bytes per second the leader sends: rate × size × (replicas−1)
	FollowerInBytes  float64 // payload bytes per second each follower receives: rate × size
	AppendRPCsPerSec float64 // AppendEntries carrying entries: rounds × (replicas−1)
	HeartbeatsPerSec float64 // (replicas−1) / HeartbeatInterval
}

// PerSet is the load of one set.
func (m RaftModel) PerSet() RaftLoad {
	followers := float64(m.Replicas - 1)
	hb := m.HeartbeatInterval
	if hb == 0 {
		hb = DefaultHeartbeatInterval
	}
	l := RaftLoad{
		EntriesPerSec:    m.RoundsPerSec,
		LeaderOutBytes:   m.MsgsPerSec * m.MsgBytes * followers,
		FollowerInBytes:  m.MsgsPerSec * m.MsgBytes,
		AppendRPCsPerSec: m.RoundsPerSec * followers,
		HeartbeatsPerSec: followers / hb,
	}
	if m.RoundsPerSec > 0 {
		l.MsgsPerEntry = m.MsgsPerSec / m.RoundsPerSec
	}
	return l
}

// Sets is the load of n sets that each carry l: the sum, since sets
// replicate independently. MsgsPerEntry and FollowerInBytes stay per
// set.
func (l RaftLoad) Sets(n int) RaftLoad {
	f := float64(n)
	return RaftLoad{
		EntriesPerSec:    l.EntriesPerSec * f,
		MsgsPerEntry:     l.MsgsPerEntry,
		LeaderOutBytes:   l.LeaderOutBytes * f,
		FollowerInBytes:  l.FollowerInBytes,
		AppendRPCsPerSec: l.AppendRPCsPerSec * f,
		HeartbeatsPerSec: l.HeartbeatsPerSec * f,
	}
}
