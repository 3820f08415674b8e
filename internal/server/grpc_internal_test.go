package server

import (
	"errors"
	"net"
	"testing"
)

// TestGRPCAdvertise: a gRPC listener on every address advertises the
// broker's advertised host, or without one the host's first non-loopback
// address, never the unspecified one.
func TestGRPCAdvertise(t *testing.T) {
	all := &net.TCPAddr{IP: net.IPv6unspecified, Port: 8081}
	if got := grpcAdvertise(all, "10.1.2.3:10911"); got != "10.1.2.3:8081" {
		t.Fatalf("with an advertised broker: %s", got)
	}
	got := grpcAdvertise(all, "")
	host, port, err := net.SplitHostPort(got)
	if err != nil || port != "8081" || net.ParseIP(host) == nil || net.ParseIP(host).IsUnspecified() {
		t.Fatalf("without one: %s", got)
	}
	if got := grpcAdvertise(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}, ""); got != "127.0.0.1:9" {
		t.Fatalf("a listener on one address: %s", got)
	}
}

// TestGRPCHandoff: one listener serves a member's endpoints one after
// another. A connection accepted between two endpoints waits for the
// next; an endpoint's Close leaves the listener open; the handoff's Close
// ends the endpoint's Accept and the listener.
func TestGRPCHandoff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := newGRPCHandoff(ln)
	ran := make(chan error, 1)
	go func() { ran <- h.run() }()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	accept := func(l net.Listener, from net.Conn) {
		t.Helper()
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if c.RemoteAddr().String() != from.LocalAddr().String() {
			t.Fatalf("accepted %s, dialed from %s", c.RemoteAddr(), from.LocalAddr())
		}
	}

	first := h.listener()
	if first.Addr().String() != ln.Addr().String() {
		t.Fatalf("endpoint's address %s, listener's %s", first.Addr(), ln.Addr())
	}
	accept(first, dial())
	first.Close()
	if _, err := first.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a closed endpoint accepted: %v", err)
	}
	waiting := dial() // between endpoints
	second := h.listener()
	accept(second, waiting)

	done := make(chan error, 1)
	go func() { _, err := second.Accept(); done <- err }()
	h.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after the handoff closed: %v", err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("run: %v", err)
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("the listener still accepts")
	}
}
