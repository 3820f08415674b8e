package cluster_test

import (
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rmq-go/rmq/core/cluster"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestTLSListenerDropsSilentStrangers: a connection that never completes
// its handshake is closed after handshakeTimeout, one over maxHandshakes
// at once, and a member's connection still gets through.
func TestTLSListenerDropsSilentStrangers(t *testing.T) {
	defer cluster.SetHandshakeBounds(300*time.Millisecond, 2)()

	certFile, keyFile, pool := brokertest.WriteCert(t, t.TempDir(), "member")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	server := &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	client := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}
	layer, err := cluster.ListenTCP("127.0.0.1:0", cluster.TCPLayer{Set: "s", Server: server, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	defer layer.Close()
	addr := layer.Addr().String()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := layer.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()

	closedWithin := func(c net.Conn, d time.Duration) bool {
		c.SetReadDeadline(time.Now().Add(d))
		_, err := c.Read(make([]byte, 1))
		ne, ok := err.(net.Error)
		return err != nil && !(ok && ne.Timeout())
	}
	var silent []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent = append(silent, c)
	}
	time.Sleep(50 * time.Millisecond) // both taken by the accept loop: no event to wait for from outside
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if !closedWithin(extra, 200*time.Millisecond) {
		t.Fatal("a third stranger was kept while two handshakes waited")
	}
	for _, c := range silent {
		if !closedWithin(c, 2*time.Second) {
			t.Fatal("a silent stranger was kept past the handshake timeout")
		}
	}
	member, err := layer.Dial(raft.ServerAddress(addr), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a member's connection was not accepted")
	}
	select {
	case <-accepted:
		t.Fatal("a stranger's connection reached raft")
	default:
	}
}

// setLayer is a listening layer and the connections it hands raft.
type setLayer struct {
	raft.StreamLayer
	accepted chan net.Conn
}

// acceptOne returns the next connection the layer hands raft, or nil when
// none comes within wait.
func (l setLayer) acceptOne(wait time.Duration) net.Conn {
	select {
	case c := <-l.accepted:
		return c
	case <-time.After(wait):
		return nil
	}
}

func listenSet(t *testing.T, set string) setLayer {
	t.Helper()
	layer, err := cluster.ListenTCP("127.0.0.1:0", cluster.TCPLayer{Set: set, Logger: brokertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	l := setLayer{layer, make(chan net.Conn, 8)}
	go func() {
		for {
			c, err := layer.Accept()
			if err != nil {
				return
			}
			l.accepted <- c
		}
	}()
	t.Cleanup(func() { layer.Close() })
	return l
}

// TestSetCheck: a member serves raft connections from its own set, with
// every byte after the check passed through both ways, and refuses a
// member of another set with an error that names both sets.
func TestSetCheck(t *testing.T) {
	a, b := listenSet(t, "set-a"), listenSet(t, "set-b")
	addrA := raft.ServerAddress(a.Addr().String())

	if _, err := b.Dial(addrA, 2*time.Second); err == nil || !strings.Contains(err.Error(), `belongs to set "set-a", not "set-b"`) {
		t.Fatalf("a member of set-b dialed set-a: %v", err)
	}
	if c := a.acceptOne(300 * time.Millisecond); c != nil {
		c.Close()
		t.Fatal("a connection from another set reached raft")
	}

	peer := listenSet(t, "set-a")
	c, err := peer.Dial(addrA, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	in := a.acceptOne(5 * time.Second)
	if in == nil {
		t.Fatal("a member's connection was not served")
	}
	defer in.Close()
	roundTrip(t, c, in)
}

// roundTrip checks that bytes go both ways between two connection ends.
func roundTrip(t *testing.T, out, in net.Conn) {
	t.Helper()
	if _, err := out.Write([]byte{0, 'r', 'p', 'c'}); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(in, got); err != nil || string(got) != "\x00rpc" {
		t.Fatalf("read %q, %v", got, err)
	}
	if _, err := in.Write([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(out, got[:2]); err != nil || string(got[:2]) != "ok" {
		t.Fatalf("read %q, %v", got[:2], err)
	}
}

// TestSetCheckOlderMembers: a connection without the check (a member of
// an earlier version, whose first byte is raft's RPC type) is served with
// that byte intact; a listener that closes at the hello (such a member's
// port) fails the dial with an error saying so; garbage is refused.
func TestSetCheckOlderMembers(t *testing.T) {
	a := listenSet(t, "set-a")
	old, err := net.Dial("tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	go old.Write([]byte{0, 'r', 'p', 'c'})
	in := a.acceptOne(5 * time.Second)
	if in == nil {
		t.Fatal("an older member's connection was not served")
	}
	defer in.Close()
	got := make([]byte, 4)
	if _, err := io.ReadFull(in, got); err != nil || string(got) != "\x00rpc" {
		t.Fatalf("read %q, %v", got, err)
	}

	junk, err := net.Dial("tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer junk.Close()
	junk.Write([]byte("RUBBISH\n"))
	reply, _ := io.ReadAll(junk)
	if !strings.Contains(string(reply), "not a raft connection") {
		t.Fatalf("garbage got %q", reply)
	}
	if c := a.acceptOne(300 * time.Millisecond); c != nil {
		c.Close()
		t.Fatal("garbage reached raft")
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Read(make([]byte, 1)) // an unknown RPC type to an older member
		c.Close()
	}()
	if _, err := a.Dial(raft.ServerAddress(ln.Addr().String()), 2*time.Second); err == nil || !strings.Contains(err.Error(), "version before") {
		t.Fatalf("dialing an older member: %v", err)
	}
}
