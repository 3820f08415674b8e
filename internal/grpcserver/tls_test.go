package grpcserver_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rmq-go/rmq/internal/brokertest"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
	"github.com/rmq-go/rmq/internal/server"
)

// TestTLS serves gRPC over TLS when the broker's port has it, with the
// broker's certificate; a plaintext client gets no answer.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key, pool := brokertest.WriteCert(t, dir, "broker")
	e := brokertest.Start(t, func(c *server.Config) {
		c.GRPCListen = "127.0.0.1:0"
		c.TLS = server.TLSOptions{Mode: server.TLSOn, CertFile: cert, KeyFile: key}
	})
	conn, err := grpc.NewClient(e.GRPCAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	topic := brokertest.Name("Tls")
	r, err := pb.NewMessagingServiceClient(conn).QueryRoute(ctx(t), &pb.QueryRouteRequest{Topic: res(topic)})
	if err != nil || r.Status.GetCode() != pb.Code_OK {
		t.Fatalf("route over TLS: %v %v", r, err)
	}

	plain, err := grpc.NewClient(e.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := pb.NewMessagingServiceClient(plain).QueryRoute(ctx(t), &pb.QueryRouteRequest{Topic: res(topic)}, grpc.WaitForReady(false)); err == nil {
		t.Fatal("a plaintext client was served on the TLS port")
	}
}

// TestTLSPermissiveByDefault serves TLS and plain h2c on one gRPC port
// when the broker is given no TLS settings: the TLS client trusts the
// self-signed certificate the broker generated in its data directory.
func TestTLSPermissiveByDefault(t *testing.T) {
	e := brokertest.Start(t, func(c *server.Config) { c.GRPCListen = "127.0.0.1:0" })
	pem, err := os.ReadFile(filepath.Join(e.Config.DataDir, "tls", "selfsigned.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in the generated file")
	}
	topic := brokertest.Name("Permissive")
	for _, creds := range []credentials.TransportCredentials{
		credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}),
		insecure.NewCredentials(),
	} {
		conn, err := grpc.NewClient(e.GRPCAddr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		r, err := pb.NewMessagingServiceClient(conn).QueryRoute(ctx(t), &pb.QueryRouteRequest{Topic: res(topic)})
		conn.Close()
		if err != nil || r.Status.GetCode() != pb.Code_OK {
			t.Fatalf("route over %s: %v %v", creds.Info().SecurityProtocol, r, err)
		}
	}
}

// TestSilentConnectionBounded holds a connection to the permissive gRPC
// port open without sending its first byte, and one that sends the byte
// of a TLS handshake and stops: each is closed once remoting's
// frameReadTimeout has passed, as on the broker's own port.
func TestSilentConnectionBounded(t *testing.T) {
	e := brokertest.Start(t, func(c *server.Config) {
		c.GRPCListen = "127.0.0.1:0"
		c.Remoting.FrameReadTimeout = 300 * time.Millisecond
	})
	for _, first := range [][]byte{nil, {0x16}} {
		nc, err := net.Dial("tcp", e.GRPCAddr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(first); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err = io.Copy(io.Discard, nc)
		nc.Close()
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("first bytes %x: still open after 20 s", first)
		}
		t.Logf("first bytes %x: closed after %v", first, time.Since(start).Round(time.Millisecond))
	}
}
