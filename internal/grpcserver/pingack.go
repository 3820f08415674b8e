package grpcserver

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
)

// Acknowledgements of the clients' pings ride with the next answer.
//
// A grpc-go client (the Go RocketMQ 5 client among them) estimates its
// connection's bandwidth-delay product by sending a PING whenever data
// reaches it and none is out, for as long as the connection lives: with
// one call in flight, that is a PING after every answer. The server's
// transport acknowledges each at once, and since the next answer waits
// for its round's fsync, the acknowledgement leaves alone: one write
// system call more per call. Measured on `broker bench produce --protocol
// grpc --conns 64`, 2.07 writes per message, of which one in every two
// was a lone 17-byte PING ACK.
//
// ackHoldConn holds a write that is nothing but PING ACK frames for up to
// ackHold and sends it in front of the next write. It only delays bytes:
// it never reorders, drops or alters them, so a write that merely looks
// like acknowledgements (the tail of a larger frame) is as safe as one
// that is. A client waits for an acknowledgement for as long as its
// keepalive timeout (seconds) and uses its timing only to size its
// receive window, which a longer round trip never shrinks.

// ackHold is how long a lone PING ACK may wait for company. It exceeds a
// round's fsync, so that under load the next answer nearly always comes
// first, and is short against any client's keepalive timeout.
const ackHold = 5 * time.Millisecond

// HTTP/2 frame layout (RFC 9113, 4.1 and 6.7).
const (
	frameHeaderLen = 9
	framePing      = 0x6
	flagAck        = 0x1
	pingLen        = 8
)

// onlyPingAcks reports whether p is one or more whole PING ACK frames.
func onlyPingAcks(p []byte) bool {
	if len(p) == 0 {
		return false
	}
	for len(p) > 0 {
		if len(p) < frameHeaderLen+pingLen {
			return false
		}
		n := int(p[0])<<16 | int(p[1])<<8 | int(p[2])
		if n != pingLen || p[3] != framePing || p[4]&flagAck == 0 {
			return false
		}
		p = p[frameHeaderLen+pingLen:]
	}
	return true
}

// maxHeld bounds the acknowledgements held on one connection: a client
// that pings faster than answers go out gets them written at once.
// keptBuf bounds the buffer a connection keeps for joining them to the
// next write: enough for a send's answer; a larger write joined to an
// acknowledgement (rare) allocates its own.
const (
	maxHeld = 16 * (frameHeaderLen + pingLen)
	keptBuf = 1 << 10
)

// ackHoldConn is a server connection whose lone PING ACKs wait (see
// above). Its Write is called by the transport's one writer goroutine;
// the timer's flush is the only other writer.
type ackHoldConn struct {
	net.Conn
	mu    sync.Mutex
	held  []byte // acknowledgements not yet written
	buf   []byte // held plus the next write, for one system call
	timer *time.Timer
	hold  time.Duration
	err   error // of a write the timer made; every later write returns it
}

func newAckHoldConn(c net.Conn, hold time.Duration) *ackHoldConn {
	a := &ackHoldConn{Conn: c, hold: hold}
	a.timer = time.AfterFunc(time.Hour, a.flushHeld)
	a.timer.Stop()
	return a
}

func (c *ackHoldConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if onlyPingAcks(p) && len(c.held)+len(p) <= maxHeld {
		if len(c.held) == 0 {
			c.timer.Reset(c.hold)
		}
		c.held = append(c.held, p...)
		return len(p), nil
	}
	if len(c.held) == 0 {
		return c.Conn.Write(p)
	}
	c.timer.Stop()
	c.buf = append(append(c.buf[:0], c.held...), p...)
	held := len(c.held)
	c.held = c.held[:0]
	n, err := c.Conn.Write(c.buf)
	if cap(c.buf) > keptBuf {
		c.buf = nil
	}
	if err != nil {
		c.err = err
	}
	return max(n-held, 0), err
}

// flushHeld writes what waited its hold out.
func (c *ackHoldConn) flushHeld() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.held) == 0 || c.err != nil {
		return
	}
	_, err := c.Conn.Write(c.held)
	c.held = c.held[:0]
	if err != nil {
		c.err = err
	}
}

// closeFlushTimeout bounds Close's write of what is held.
const closeFlushTimeout = 100 * time.Millisecond

// Close writes what is held, best effort, and closes. The transport
// closes a connection to end a write its peer does not read, so Close
// never waits for a write in progress: it then drops what is held (PING
// ACKs of a connection going away) and closes at once, which ends that
// write.
func (c *ackHoldConn) Close() error {
	c.timer.Stop()
	if c.mu.TryLock() {
		if len(c.held) > 0 && c.err == nil {
			_ = c.Conn.SetWriteDeadline(time.Now().Add(closeFlushTimeout))
			_, _ = c.Conn.Write(c.held)
		}
		c.held, c.err = nil, net.ErrClosed
		c.mu.Unlock()
	}
	return c.Conn.Close()
}

// ackHoldCreds wraps every connection its transport credentials hand the
// gRPC server in an ackHoldConn holding for hold, above TLS where there
// is TLS.
type ackHoldCreds struct {
	credentials.TransportCredentials
	hold time.Duration
}

func (c ackHoldCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	return newAckHoldConn(conn, c.hold), info, nil
}

func (c ackHoldCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.TransportCredentials.ClientHandshake(ctx, authority, raw)
}

func (c ackHoldCreds) Clone() credentials.TransportCredentials {
	return ackHoldCreds{c.TransportCredentials.Clone(), c.hold}
}
