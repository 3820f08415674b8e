package cluster_test

import (
	"crypto/tls"
	"net"
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
	layer, err := cluster.ListenTCP("127.0.0.1:0", server, client)
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
