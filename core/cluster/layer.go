package cluster

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Bounds of raft's port under TLS: a connection has handshakeTimeout to
// prove itself with a member's certificate, and at most maxHandshakes
// wait to; more are closed at once. raft serves only connections that
// completed the handshake, so strangers that connect and stay silent
// cost a bounded number of sockets for a bounded time, and never a raft
// handler.
var (
	handshakeTimeout = 5 * time.Second
	maxHandshakes    = 64
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
		ln = newTLSListener(ln, server)
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

// tlsListener hands raft only connections whose TLS handshake completed.
type tlsListener struct {
	net.Listener
	conf    *tls.Config
	ready   chan net.Conn
	slots   chan struct{}
	quit    chan struct{}
	closing sync.Once
	err     error // why the accept loop stopped; written before quit closes
}

func newTLSListener(ln net.Listener, conf *tls.Config) *tlsListener {
	l := &tlsListener{Listener: ln, conf: conf, ready: make(chan net.Conn), slots: make(chan struct{}, maxHandshakes), quit: make(chan struct{})}
	go l.acceptLoop()
	return l
}

func (l *tlsListener) acceptLoop() {
	for {
		raw, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.shut(err)
			return
		}
		select {
		case l.slots <- struct{}{}:
		default:
			raw.Close() // too many strangers waiting already
			continue
		}
		go l.handshake(raw)
	}
}

func (l *tlsListener) handshake(raw net.Conn) {
	defer func() { <-l.slots }()
	c := tls.Server(raw, l.conf)
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := c.Handshake(); err != nil {
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	select {
	case l.ready <- c:
	case <-l.quit:
		c.Close()
	}
}

func (l *tlsListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.quit:
		if l.err != nil {
			return nil, l.err
		}
		return nil, net.ErrClosed
	}
}

func (l *tlsListener) Close() error { return l.shut(nil) }

// shut stops the listener once, recording why (nil: Close).
func (l *tlsListener) shut(cause error) error {
	var err error
	l.closing.Do(func() {
		l.err = cause
		close(l.quit)
		err = l.Listener.Close()
	})
	return err
}
