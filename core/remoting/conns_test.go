package remoting

import (
	"testing"
	"time"
)

// TestServerConns counts the connections a server serves as clients come
// and go.
func TestServerConns(t *testing.T) {
	s := NewServer(ServerOptions{})
	s.Handle(codeEcho, echo)
	addr := startServer(t, s)
	if n := s.Conns(); n != 0 {
		t.Fatalf("%d connections before any client", n)
	}
	var clients []*Client
	for range 2 {
		cl := newTestClient(t, ClientOptions{})
		// A connection is counted before its first request is read.
		if resp, err := cl.Invoke(testCtx(t), addr, NewRequest(codeEcho, nil, nil)); err != nil || resp.Code != Success {
			t.Fatalf("echo: %v %v", resp, err)
		}
		clients = append(clients, cl)
	}
	if n := s.Conns(); n != 2 {
		t.Fatalf("%d connections with two clients, want 2", n)
	}
	clients[0].Close()
	// The server learns of the close when its read fails; nothing tells
	// the test, so poll.
	deadline := time.Now().Add(10 * time.Second)
	for s.Conns() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections after a client closed, want 1", s.Conns())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
