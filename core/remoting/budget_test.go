package remoting

import (
	"bufio"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"
)

// waitFor polls cond until it holds or the test's patience runs out: the
// server's counters change on its own goroutines, with no event a test
// can wait on.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPartialFrameBudget stalls several connections mid-frame against a
// server whose partial-frame budget holds two of them: the bytes held
// never pass the budget, a frame that needs room gets it by dropping a
// stalled one once it has stalled for a second, and small requests on
// other connections are served throughout.
func TestPartialFrameBudget(t *testing.T) {
	const (
		maxFrame = 256 << 10
		budget   = 512 << 10
		sent     = 200 << 10 // of each stalled frame
		stallers = 4
	)
	s := NewServer(ServerOptions{MaxFrameSize: maxFrame, MaxPartialFrameBytes: budget, Logger: discardLogger()})
	s.Handle(codeEcho, echo)
	addr := startServer(t, s)

	var peak int64
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() {
		for {
			peak = max(peak, s.Stats().PartialFrameBytes)
			select {
			case <-stopSampling:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	payload := make([]byte, 4+sent)
	binary.BigEndian.PutUint32(payload, maxFrame)
	var conns []net.Conn
	for range stallers {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		conns = append(conns, nc)
		go func() {
			nc.SetWriteDeadline(time.Now().Add(20 * time.Second))
			_, _ = nc.Write(payload) // fails once the server drops the connection
		}()
	}
	waitFor(t, "a stalled frame dropped", func() bool { return s.Stats().FramesDropped > 0 })
	cl := newTestClient(t, ClientOptions{})
	if _, err := cl.Invoke(testCtx(t), addr, NewRequest(codeEcho, nil, []byte("still served"))); err != nil {
		t.Fatalf("a small request during the attack: %v", err)
	}
	close(stopSampling)
	sampling.Wait()
	if peak > budget {
		t.Errorf("partial frames held %d bytes, over the budget of %d", peak, budget)
	}
	for _, nc := range conns {
		nc.Close()
	}
	waitFor(t, "the budget released", func() bool { return s.Stats().PartialFrameBytes == 0 })
}

// TestReserveResponse sends requests for large answers on a connection
// that does not read them: what the server holds unwritten stays within
// the connection's budget (what the socket's buffers took is written),
// later handlers are granted nothing, and once the peer reads everything
// and leaves, the server counts nothing queued.
func TestReserveResponse(t *testing.T) {
	const (
		perConn  = 1 << 20
		want     = 256 << 10
		requests = 64 // 16 MiB asked for, more than loopback's socket buffers take
	)
	var (
		mu      sync.Mutex
		granted []int
	)
	s := NewServer(ServerOptions{MaxQueuedBytesPerConn: perConn, Logger: discardLogger()})
	s.Handle(codeEcho, func(c *Conn, req *Command) *Command {
		r := c.ReserveResponse(want)
		mu.Lock()
		granted = append(granted, r.Bytes())
		mu.Unlock()
		resp := NewResponse(req, Success, "")
		resp.Body = make([]byte, r.Bytes())
		resp.Reservation = r
		return resp
	})
	addr := startServer(t, s)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for i := range requests {
		req := NewRequest(codeEcho, nil, nil)
		req.Opaque = int32(i + 1)
		frame, err := AppendFrame(nil, req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(frame); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every request handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(granted) == requests
	})
	if q := s.Stats().QueuedBytes; q > perConn+requests*smallResponse {
		t.Errorf("the server holds %d unwritten bytes, over the connection's budget of %d (and the small answers)", q, perConn)
	}
	zero := 0
	for _, g := range granted {
		if g == 0 {
			zero++
		}
	}
	if zero == 0 {
		t.Errorf("every handler was granted room (%v): the budget did not bind", granted)
	}
	br := bufio.NewReader(nc)
	for range requests {
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := ReadFrame(br, 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	nc.Close()
	waitFor(t, "nothing counted as queued", func() bool { return s.Stats().QueuedBytes == 0 })
}
