package cluster

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// tcpLayer is raft's stream layer over TCP, with TLS when dial is set.
type tcpLayer struct {
	net.Listener
	dial *tls.Config
}

// ListenTCP returns a raft stream layer listening on addr. With server
// and client set, every connection is TLS: members present client
// certificates the server config verifies, so only holders of the set's
// certificates reach raft.
func ListenTCP(addr string, server, client *tls.Config) (raft.StreamLayer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if server != nil {
		ln = tls.NewListener(ln, server)
	}
	return tcpLayer{ln, client}, nil
}

func (l tcpLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if l.dial == nil {
		return d.Dial("tcp", string(addr))
	}
	c, err := tls.DialWithDialer(d, "tcp", string(addr), l.dial)
	if err != nil {
		return nil, err
	}
	return c, nil
}
