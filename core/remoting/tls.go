package remoting

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"

	"github.com/rmq-go/rmq/internal/sniff"
)

// tlsRecordHandshake is the first byte of a TLS connection: the content
// type of the record that carries the ClientHello. A RocketMQ frame that
// started with it would announce at least 0x16000000 bytes (369 MB), far
// over any frame limit, so the byte tells the two apart.
const tlsRecordHandshake = 0x16

// errTLSOnPlainPort is why a plain server closes a connection whose first
// byte starts a TLS handshake.
var errTLSOnPlainPort = errors.New("remoting: TLS client on a plain port")

// tlsAlertProtocolVersion is the fatal TLS alert record (protocol_version)
// a plain port writes to a TLS client before closing, so the client
// reports a TLS error rather than a reset connection.
var tlsAlertProtocolVersion = []byte{0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x46}

// rejectLinger bounds how long a refused connection is drained before it is
// closed, so that the peer sees an orderly close rather than a reset.
const rejectLinger = time.Second

// accept turns a newly accepted connection into the one to serve: itself
// on a plain server; on a TLS server, the TLS connection after a completed
// handshake, or in permissive mode the plain connection when its first
// byte does not start a handshake. ok is false when the connection was
// refused and closed. Reading the first byte and the handshake are bounded
// by FrameReadTimeout and end at Shutdown.
func (s *Server) accept(nc net.Conn) (_ net.Conn, ok bool) {
	if s.opts.TLS == nil {
		return nc, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.FrameReadTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	go func() {
		select {
		case <-s.quit:
			cancel()
		case <-ctx.Done():
		}
	}()

	// Peek at the first byte where the platform allows, so a plain
	// connection in permissive mode is served unwrapped; else read it and
	// put it back in front.
	first, peeked, err := sniff.FirstByte(nc)
	conn := nc
	if err == nil && !peeked {
		var b [1]byte
		_, err = io.ReadFull(nc, b[:])
		first, conn = b[0], &prefixConn{Conn: nc, prefix: b[:]}
	}
	if err != nil {
		s.ep.limits.Info("tlsFirstByte", "remoting: connection closed or silent before its TLS handshake",
			"peer", nc.RemoteAddr().String(), "err", err)
		_ = nc.Close()
		return nil, false
	}
	if first != tlsRecordHandshake {
		if s.opts.TLSPermissive {
			if !stop() {
				_ = nc.Close()
				return nil, false
			}
			_ = nc.SetDeadline(time.Time{})
			return conn, true
		}
		s.ep.limits.Warn("plainOnTLS", "remoting: plain client on a TLS-only port; closing (connect with TLS, or set tls mode permissive)",
			"peer", nc.RemoteAddr().String())
		stop() // lingerClose sets its own deadline
		lingerClose(nc)
		return nil, false
	}
	tc := tls.Server(conn, s.opts.TLS)
	if err := tc.HandshakeContext(ctx); err != nil {
		s.ep.limits.Warn("tlsHandshake", "remoting: TLS handshake failed; closing",
			"peer", nc.RemoteAddr().String(), "err", err)
		_ = nc.Close()
		return nil, false
	}
	if !stop() {
		_ = nc.Close()
		return nil, false
	}
	_ = nc.SetDeadline(time.Time{})
	return tc, true
}

// lingerClose closes nc after the peer has had a moment to stop sending:
// closing with unread bytes would reset the connection instead of ending
// it in order.
func lingerClose(nc net.Conn) {
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		_ = nc.SetReadDeadline(time.Now().Add(rejectLinger))
		_, _ = io.Copy(io.Discard, io.LimitReader(nc, 64<<10))
	}
	_ = nc.Close()
}

// prefixConn is a connection whose first bytes were already read.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
