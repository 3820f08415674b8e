package grpcserver

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/rmq-go/rmq/internal/sniff"
)

// tlsRecordHandshake is the first byte of a TLS connection (the record
// type of its ClientHello). An h2c connection starts with the HTTP/2
// preface, "PRI * HTTP/2.0", so the byte tells the two apart.
const tlsRecordHandshake = 0x16

// permissiveCreds serves TLS and plain h2c on one port: each connection's
// first byte says which, and a TLS one is handed to the TLS credentials.
// The byte is peeked (internal/sniff), so a plain connection reaches gRPC
// as the *net.TCPConn it is: wrapped to put the byte back, the official
// Node client's connections stalled at startup when the machine was
// loaded (TestNodeProducerAndSimpleConsumer under four busy loops, one
// run in four).
// gRPC runs ServerHandshake on a goroutine of the connection's own, under
// the ConnectionTimeout deadline it sets on the raw connection, so a
// silent client holds nothing but itself and for no longer than that.
type permissiveCreds struct {
	tls credentials.TransportCredentials
}

func newPermissiveCreds(cfg *tls.Config) credentials.TransportCredentials {
	return permissiveCreds{tls: credentials.NewTLS(cfg)}
}

// plainInfo is the AuthInfo of a plain connection.
type plainInfo struct{ credentials.CommonAuthInfo }

func (plainInfo) AuthType() string { return "insecure" }

func (c permissiveCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	// Peek where the platform allows, so a plain connection is served as
	// the connection it is; else read the byte and put it back in front.
	first, peeked, err := sniff.FirstByte(raw)
	conn := raw
	if err == nil && !peeked {
		var b [1]byte
		_, err = io.ReadFull(raw, b[:])
		first, conn = b[0], &prefixConn{Conn: raw, prefix: b[:]}
	}
	if err != nil {
		return nil, nil, err
	}
	if first == tlsRecordHandshake {
		return c.tls.ServerHandshake(conn)
	}
	return conn, plainInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
}

func (c permissiveCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("grpcserver: permissive credentials serve only")
}

func (c permissiveCreds) Info() credentials.ProtocolInfo { return c.tls.Info() }

func (c permissiveCreds) Clone() credentials.TransportCredentials {
	return permissiveCreds{tls: c.tls.Clone()}
}

func (c permissiveCreds) OverrideServerName(string) error { return nil }

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
