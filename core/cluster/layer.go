package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rmq-go/rmq/internal/ratelog"
)

// Bounds of raft's port: a connection has handshakeTimeout to prove
// itself (its TLS handshake, then the set check), and at most
// maxHandshakes wait to; more are closed at once. raft serves only
// connections that passed, so strangers that connect and stay silent
// cost a bounded number of sockets for a bounded time, and never a raft
// handler.
var (
	handshakeTimeout = 5 * time.Second
	maxHandshakes    = 64
)

// The set check. Before raft's first byte on a connection, the dialing
// member sends setHello and its set's name on one line; the listening
// member answers "OK" on a line when the name is its own set's, and
// otherwise a line saying why, and closes. A peer address that names a
// member of another set (a stale peer list, an address reused for a new
// set) so never joins two sets' logs: raft would have the stranger follow
// the wrong leader and cut its own log to match. It keeps out mistakes,
// not attackers: that is TLS's work.
//
// A connection whose first byte is not setHello's comes from a member
// from before the check (raft's RPC type comes first there); it is
// served, so that a set restarted one member at a time onto this version
// keeps its quorum. Such a member cannot take the connections of those
// restarted before it (it reads the hello as an unknown RPC and closes);
// they can still reach one another, and it, once it is restarted too.
const (
	setHello    = "RMQ-SET/1 "
	maxSetName  = 256
	maxSetReply = 512
)

// TCPLayer configures ListenTCP.
type TCPLayer struct {
	// Set is the set's name, checked on every connection.
	Set string
	// Server is the raft port's TLS config (requiring and verifying
	// client certificates), Client the one members dial with; both nil
	// for plain TCP.
	Server, Client *tls.Config
	// Logger gets connections refused (rate-limited); nil discards.
	Logger *slog.Logger
}

// tcpLayer is raft's stream layer over TCP, with TLS when dial is set.
type tcpLayer struct {
	*vetListener
	set  string
	dial *tls.Config
}

// ListenTCP returns a raft stream layer listening on addr, serving
// members of set cfg.Set only. With cfg.Server and cfg.Client set,
// every connection is TLS: members present client certificates the
// server config verifies, so only holders of the set's certificates
// reach raft.
func ListenTCP(addr string, cfg TCPLayer) (raft.StreamLayer, error) {
	if cfg.Set == "" || len(cfg.Set) > maxSetName || strings.ContainsAny(cfg.Set, "\r\n") {
		return nil, fmt.Errorf("cluster: set name %q: want 1 to %d bytes on one line", cfg.Set, maxSetName)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	v := &vetter{set: cfg.Set, server: cfg.Server, log: ratelog.New(log, logGap)}
	return tcpLayer{newVetListener(ln, v.vet), cfg.Set, cfg.Client}, nil
}

// Dial connects to the member at addr and passes the set check, all
// within timeout.
func (l tcpLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	deadline := time.Now().Add(timeout)
	var c net.Conn
	var err error
	if l.dial == nil {
		c, err = d.Dial("tcp", string(addr))
	} else {
		c, err = tls.DialWithDialer(d, "tcp", string(addr), l.dial)
	}
	if err != nil {
		return nil, err
	}
	c.SetDeadline(deadline)
	if _, err := io.WriteString(c, setHello+l.set+"\n"); err != nil {
		c.Close()
		return nil, err
	}
	reply, err := readLine(c, maxSetReply)
	if err != nil {
		c.Close()
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			return nil, fmt.Errorf("cluster: %s closed the connection at the set check (a member of a version before it?)", addr)
		}
		return nil, fmt.Errorf("cluster: %s: set check: %w", addr, err)
	}
	if reply != "OK" {
		c.Close()
		return nil, fmt.Errorf("cluster: %s refused set %q: %s", addr, l.set, reply)
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// readLine reads a line of at most max bytes a byte at a time, so that
// nothing after it is taken from c.
func readLine(c net.Conn, max int) (string, error) {
	var b []byte
	var one [1]byte
	for len(b) <= max {
		if _, err := io.ReadFull(c, one[:]); err != nil {
			return "", err
		}
		if one[0] == '\n' {
			return string(b), nil
		}
		b = append(b, one[0])
	}
	return "", fmt.Errorf("line longer than %d bytes", max)
}

// vetter proves each accepted connection: its TLS handshake when server
// is set, then the set check.
type vetter struct {
	set    string
	server *tls.Config
	log    *ratelog.Log
}

func (v *vetter) vet(raw net.Conn) (net.Conn, error) {
	c := raw
	if v.server != nil {
		tc := tls.Server(raw, v.server)
		if err := tc.Handshake(); err != nil {
			return nil, err
		}
		c = tc
	}
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		return nil, err
	}
	if first[0] != setHello[0] {
		v.log.Info("older", "serving a raft connection without the set check (a member of a version before it)", "remote", raw.RemoteAddr().String())
		return &unreadConn{Conn: c, first: first[0], pending: true}, nil
	}
	rest, err := readLine(c, len(setHello)+maxSetName)
	if err != nil {
		return nil, err
	}
	line := string(first[0]) + rest
	var why string
	switch set, ok := strings.CutPrefix(line, setHello); {
	case !ok:
		why = "not a raft connection of rmq-go"
	case set != v.set:
		why = fmt.Sprintf("this member belongs to set %q, not %q", v.set, set)
	default:
		if _, err := io.WriteString(c, "OK\n"); err != nil {
			return nil, err
		}
		return c, nil
	}
	io.WriteString(c, why+"\n")
	v.log.Warn("refused", "refused a raft connection", "remote", raw.RemoteAddr().String(), "why", why)
	return nil, errors.New(why)
}

// unreadConn gives back the byte the set check read from a connection
// that had no hello.
type unreadConn struct {
	net.Conn
	mu      sync.Mutex
	first   byte
	pending bool
}

func (c *unreadConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.pending && len(p) > 0 {
		c.pending = false
		p[0] = c.first
		c.mu.Unlock()
		return 1, nil
	}
	c.mu.Unlock()
	return c.Conn.Read(p)
}

// logGap is the least time between two log lines of one kind, so a
// stranger that keeps connecting cannot flood the log.
const logGap = 10 * time.Second

// vetListener hands raft only connections that vet passed, vetting up to
// maxHandshakes at once, each within handshakeTimeout.
type vetListener struct {
	net.Listener
	vet     func(net.Conn) (net.Conn, error)
	ready   chan net.Conn
	slots   chan struct{}
	quit    chan struct{}
	closing sync.Once
	err     error // why the accept loop stopped; written before quit closes
}

func newVetListener(ln net.Listener, vet func(net.Conn) (net.Conn, error)) *vetListener {
	l := &vetListener{Listener: ln, vet: vet, ready: make(chan net.Conn), slots: make(chan struct{}, maxHandshakes), quit: make(chan struct{})}
	go l.acceptLoop()
	return l
}

func (l *vetListener) acceptLoop() {
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

func (l *vetListener) handshake(raw net.Conn) {
	defer func() { <-l.slots }()
	raw.SetDeadline(time.Now().Add(handshakeTimeout))
	c, err := l.vet(raw)
	if err != nil {
		raw.Close()
		return
	}
	c.SetDeadline(time.Time{})
	select {
	case l.ready <- c:
	case <-l.quit:
		c.Close()
	}
}

func (l *vetListener) Accept() (net.Conn, error) {
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

func (l *vetListener) Close() error { return l.shut(nil) }

// shut stops the listener once, recording why (nil: Close).
func (l *vetListener) shut(cause error) error {
	var err error
	l.closing.Do(func() {
		l.err = cause
		close(l.quit)
		err = l.Listener.Close()
	})
	return err
}
