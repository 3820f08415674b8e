package cluster

import (
	"net"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// receivedLayer counts the bytes a member reads from the connections
// other members open to its raft port: the entries, heartbeats and
// snapshots a leader sends it (Status.RaftReceived). What a member
// catching up after a restart received, against what it missed, tells a
// catch-up from the log from a full copy.
type receivedLayer struct {
	raft.StreamLayer
	n *atomic.Int64
}

func (l receivedLayer) Accept() (net.Conn, error) {
	c, err := l.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	return countedConn{c, l.n}, nil
}

// countedConn adds the bytes read from a connection to n.
type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countedConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.Add(int64(k))
	return k, err
}
