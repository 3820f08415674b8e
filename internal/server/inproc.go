package server

import (
	"context"
	"errors"
	"net"
	"sync"
)

// The broker reaches the embedded name server of its own process through
// an in-process listener rather than over the name server's socket. A
// connection accepted from it cannot come from anywhere else, so the name
// server trusts it without a signature: RocketMQ's name server checks no
// ACL, and an operator's plain_acl.yml should not need an account for the
// broker to find itself. Loopback proves nothing here: every local
// process shares 127.0.0.1.

// errInProcClosed is a dial of the in-process listener after it closed.
var errInProcClosed = errors.New("server: the embedded name server has stopped")

// inProcAddr is the address of both ends of an in-process connection.
type inProcAddr struct{}

func (inProcAddr) Network() string { return "inproc" }
func (inProcAddr) String() string  { return "inproc" }

// inProcConn is the name server's end of an in-process connection.
type inProcConn struct{ net.Conn }

func (inProcConn) RemoteAddr() net.Addr { return inProcAddr{} }
func (inProcConn) LocalAddr() net.Addr  { return inProcAddr{} }

// inProcListener hands the name server the connections dial opens.
type inProcListener struct {
	conns chan net.Conn
	done  chan struct{}
	close sync.Once
}

func newInProcListener() *inProcListener {
	return &inProcListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept returns the next connection dial opened.
func (l *inProcListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close ends Accept and refuses later dials; it is safe to call more than
// once.
func (l *inProcListener) Close() error {
	l.close.Do(func() { close(l.done) })
	return nil
}

func (l *inProcListener) Addr() net.Addr { return inProcAddr{} }

// dial opens a connection to the listener's server, once Accept takes it.
func (l *inProcListener) dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- inProcConn{server}:
		return client, nil
	case <-l.done:
		_, _ = client.Close(), server.Close()
		return nil, errInProcClosed
	case <-ctx.Done():
		_, _ = client.Close(), server.Close()
		return nil, ctx.Err()
	}
}

// inProc reports whether c came through an in-process listener.
func inProc(a net.Addr) bool {
	_, ok := a.(inProcAddr)
	return ok
}
