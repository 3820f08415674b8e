package remoting

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testCert is a self-signed ECDSA certificate for 127.0.0.1, usable by
// servers and clients, and a pool that trusts it.
func testCert(t testing.TB, name string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

func tlsServer(t *testing.T, cfg *tls.Config, permissive bool, logs *logBuffer) string {
	t.Helper()
	s := NewServer(ServerOptions{TLS: cfg, TLSPermissive: permissive, Logger: logs.logger(), FrameReadTimeout: 2 * time.Second})
	s.Handle(codeEcho, echo)
	return startServer(t, s)
}

func invokeEcho(t *testing.T, cl *Client, addr string) error {
	t.Helper()
	req := NewRequest(codeEcho, map[string]string{"k": "v"}, []byte("hello"))
	resp, err := cl.Invoke(testCtx(t), addr, req)
	if err != nil {
		return err
	}
	if resp.Code != Success || string(resp.Body) != "hello" {
		t.Fatalf("echo answered %d %q", resp.Code, resp.Body)
	}
	return nil
}

func TestTLSRoundTrip(t *testing.T) {
	cert, pool := testCert(t, "server")
	var logs logBuffer
	addr := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{cert}}, false, &logs)
	cl := newTestClient(t, ClientOptions{TLS: &tls.Config{RootCAs: pool}})
	for range 3 {
		if err := invokeEcho(t, cl, addr); err != nil {
			t.Fatal(err)
		}
	}
	// A client that does not trust the certificate fails its dial.
	untrusting := newTestClient(t, ClientOptions{TLS: &tls.Config{}})
	if err := invokeEcho(t, untrusting, addr); err == nil {
		t.Fatal("a client that does not trust the certificate got an answer")
	}
	if err := invokeEcho(t, cl, addr); err != nil {
		t.Fatalf("after a failed handshake: %v", err)
	}
}

func TestPlainClientOnTLSPortClosedCleanly(t *testing.T) {
	cert, pool := testCert(t, "server")
	var logs logBuffer
	addr := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{cert}}, false, &logs)

	for i := range 3 {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(rawRequest(t, codeEcho, int32(i))); err != nil {
			t.Fatal(err)
		}
		// An orderly close: EOF, no bytes and no reset.
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := io.Copy(io.Discard, nc)
		if err != nil || n != 0 {
			t.Fatalf("plain client on a TLS port: read %d bytes, err %v; want a clean close", n, err)
		}
		nc.Close()
	}
	// A plain Client gets an error, not a hang.
	plain := newTestClient(t, ClientOptions{})
	if err := invokeEcho(t, plain, addr); err == nil {
		t.Fatal("a plain client got an answer from a TLS-only port")
	}
	// The server is unaffected.
	cl := newTestClient(t, ClientOptions{TLS: &tls.Config{RootCAs: pool}})
	if err := invokeEcho(t, cl, addr); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(logs.String(), "plain client on a TLS-only port"); got != 1 {
		t.Errorf("logged %d lines about plain clients, want 1 (rate-limited):\n%s", got, logs.String())
	}
}

func TestTLSClientOnPlainPortClosedCleanly(t *testing.T) {
	var logs logBuffer
	closed := make(chan struct{}, 4)
	s := NewServer(ServerOptions{Logger: logs.logger(), OnClose: func(*Conn) { closed <- struct{}{} }})
	s.Handle(codeEcho, echo)
	addr := startServer(t, s)

	cl := newTestClient(t, ClientOptions{TLS: &tls.Config{InsecureSkipVerify: true}})
	err := invokeEcho(t, cl, addr)
	if err == nil {
		t.Fatal("a TLS client got an answer from a plain port")
	}
	if !strings.Contains(err.Error(), "tls") {
		t.Errorf("TLS client's error %q does not say TLS", err)
	}
	// The server logs why after the client has its error; OnClose comes
	// after that line.
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not close the TLS client's connection")
	}
	if !strings.Contains(logs.String(), "TLS client on a plain port") {
		t.Errorf("no log line says why:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "too large") {
		t.Errorf("the handshake was read as a frame:\n%s", logs.String())
	}
	plain := newTestClient(t, ClientOptions{})
	if err := invokeEcho(t, plain, addr); err != nil {
		t.Fatal(err)
	}
}

func TestTLSPermissiveServesBoth(t *testing.T) {
	cert, pool := testCert(t, "server")
	var logs logBuffer
	addr := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{cert}}, true, &logs)
	tc := newTestClient(t, ClientOptions{TLS: &tls.Config{RootCAs: pool}})
	plain := newTestClient(t, ClientOptions{})
	for range 3 {
		if err := invokeEcho(t, tc, addr); err != nil {
			t.Fatalf("TLS: %v", err)
		}
		if err := invokeEcho(t, plain, addr); err != nil {
			t.Fatalf("plain: %v", err)
		}
	}
}

func TestTLSClientCertificateRequired(t *testing.T) {
	cert, pool := testCert(t, "server")
	clientCert, clientPool := testCert(t, "client")
	var logs logBuffer
	addr := tlsServer(t, &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientPool,
	}, false, &logs)
	anon := newTestClient(t, ClientOptions{TLS: &tls.Config{RootCAs: pool}})
	if err := invokeEcho(t, anon, addr); err == nil {
		t.Fatal("a client without a certificate got an answer")
	}
	stranger, _ := testCert(t, "stranger")
	other := newTestClient(t, ClientOptions{TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{stranger}}})
	if err := invokeEcho(t, other, addr); err == nil {
		t.Fatal("a client with an untrusted certificate got an answer")
	}
	ok := newTestClient(t, ClientOptions{TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}})
	if err := invokeEcho(t, ok, addr); err != nil {
		t.Fatal(err)
	}
}

func TestTLSHandshakeStallBounded(t *testing.T) {
	cert, _ := testCert(t, "server")
	var logs logBuffer
	addr := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{cert}}, false, &logs)

	// Silent: connects and sends nothing.
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// Stalled: sends the start of a handshake record and stops.
	stalled, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if _, err := stalled.Write([]byte{0x16, 0x03, 0x01, 0x01, 0x00, 0x01}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	expectClosed(t, silent, 5*time.Second, "silent connection")
	expectClosed(t, stalled, 5*time.Second, "stalled handshake")
	if d := time.Since(start); d < time.Second {
		t.Errorf("closed after %v, before the 2 s frame read timeout", d)
	}
}

// A TLS connection still in its handshake does not hold Shutdown up.
func TestTLSShutdownDuringHandshake(t *testing.T) {
	cert, _ := testCert(t, "server")
	s := NewServer(ServerOptions{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}, Logger: discardLogger()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte{0x16}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := s.Shutdown(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shutdown took %v with a handshake under way", d)
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve returned %v", err)
	}
}

// TestClientDialHook opens the client's connections with its Dial option,
// here to an address that is only a name, and runs TLS over what Dial
// returns, verifying the server's certificate as for a TCP dial.
func TestClientDialHook(t *testing.T) {
	cert, pool := testCert(t, "server")
	var logs logBuffer
	addr := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{cert}}, true, &logs)
	var dials atomic.Int32
	dial := func(ctx context.Context, a string) (net.Conn, error) {
		if a != "127.0.0.1:1" {
			return nil, fmt.Errorf("dialled %s", a)
		}
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	for _, opts := range []ClientOptions{
		{Dial: dial},
		{Dial: dial, TLS: &tls.Config{RootCAs: pool}}, // ServerName 127.0.0.1, from the address dialled
	} {
		if err := invokeEcho(t, newTestClient(t, opts), "127.0.0.1:1"); err != nil {
			t.Fatalf("tls %v: %v", opts.TLS != nil, err)
		}
	}
	if err := invokeEcho(t, newTestClient(t, ClientOptions{Dial: dial, TLS: &tls.Config{}}), "127.0.0.1:1"); err == nil {
		t.Fatal("a client that does not trust the certificate got an answer over its Dial")
	}
	if n := dials.Load(); n != 3 {
		t.Fatalf("Dial called %d times, want 3", n)
	}
}
