package cluster

import (
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// tcpLayer is raft's stream layer over plain TCP.
type tcpLayer struct{ net.Listener }

// ListenTCP returns a raft stream layer listening on addr.
func ListenTCP(addr string) (raft.StreamLayer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return tcpLayer{ln}, nil
}

func (l tcpLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}
