package remoting

import (
	"bufio"
	"bytes"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const (
	codeBig  = 1010 // answers with bigBody
	codeHuge = 1011 // answers with a body over the test's frame limit
	codeWide = 1012 // answers with a header over MaxHeaderSize
)

var bigBody = bytes.Repeat([]byte{'b'}, 1<<20)

// peakQueued returns the most bytes c has had queued and not yet written.
func peakQueued(c *Conn) int {
	c.out.Lock()
	defer c.out.Unlock()
	return c.out.peak
}

// smallBufListener gives accepted connections a small socket send buffer,
// so what the kernel absorbs does not hide the server's own queue.
type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(64 << 10)
	}
	return nc, err
}

// serveOn serves s on ln, shutting it down when the test ends.
func serveOn(t *testing.T, s *Server, ln net.Listener) string {
	t.Helper()
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() {
		ctx := testCtx(t)
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return ln.Addr().String()
}

// rawRequest is the whole frame of a request with the given code and opaque.
func rawRequest(t testing.TB, code int16, opaque int32) []byte {
	t.Helper()
	req := NewRequest(code, nil, nil)
	req.Opaque = opaque
	req.Language = LanguageGo
	f, err := AppendFrame(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// readResponse reads and decodes one frame from br.
func readResponse(t testing.TB, br *bufio.Reader) *Command {
	t.Helper()
	frame, err := ReadFrame(br, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := new(Command)
	if err := DecodeFrame(frame, cmd); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// expectClosed fails unless the server closes nc within d.
func expectClosed(t testing.TB, nc net.Conn, d time.Duration, what string) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(d))
	if _, err := nc.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("%s: connection still open after %v (err %v)", what, d, err)
	}
}

// waitSteady polls n until it has not changed for 300 ms.
func waitSteady(n *atomic.Int64) int64 {
	last, since := n.Load(), time.Now()
	for time.Since(since) < 300*time.Millisecond {
		time.Sleep(20 * time.Millisecond)
		if v := n.Load(); v != last {
			last, since = v, time.Now()
		}
	}
	return last
}

func TestQueuedBytesBoundPausesReading(t *testing.T) {
	const bound = 4 << 20
	var handled atomic.Int64
	conns := make(chan *Conn, 4)
	var logs logBuffer
	s := NewServer(ServerOptions{
		MaxQueuedBytesPerConn: bound,
		Logger:                logs.logger(),
		OnConnect:             func(c *Conn) { conns <- c },
	})
	s.Handle(codeEcho, echo)
	s.Handle(codeBig, func(c *Conn, req *Command) *Command {
		handled.Add(1)
		resp := NewResponse(req, Success, "")
		resp.Body = bigBody
		return resp
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := serveOn(t, s, smallBufListener{ln})

	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.(*net.TCPConn).SetReadBuffer(16 << 10)
	sc := <-conns
	// Many requests for 1 MiB each, and not one byte read.
	const n = 64
	for i := 1; i <= n; i++ {
		if _, err := raw.Write(rawRequest(t, codeBig, int32(i))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	got := waitSteady(&handled)
	if peak := peakQueued(sc); peak > bound+len(bigBody)+1024 {
		t.Errorf("queued up to %d bytes, bound %d plus one response", peak, bound)
	}
	// The bound, what the small socket buffers took, and a few handlers
	// that started before the bound was reached.
	if got > 16 {
		t.Errorf("%d of %d requests handled for a peer that reads nothing; want the reader paused", got, n)
	}
	if !strings.Contains(logs.String(), "peer is not reading its responses") {
		t.Errorf("no log line about the paused peer:\n%s", logs.String())
	}

	// Another connection is served meanwhile.
	cl := newTestClient(t, ClientOptions{})
	if _, err := cl.Invoke(testCtx(t), addr, NewRequest(codeEcho, nil, []byte("hi"))); err != nil {
		t.Fatalf("other connection: %v", err)
	}

	// Reading now gets every response, whole.
	_ = raw.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(raw)
	seen := make(map[int32]bool)
	for range n {
		resp := readResponse(t, br)
		if !resp.IsResponse() || resp.Code != Success || !bytes.Equal(resp.Body, bigBody) {
			t.Fatalf("response %d: code %d, %d body bytes", resp.Opaque, resp.Code, len(resp.Body))
		}
		if seen[resp.Opaque] || resp.Opaque < 1 || resp.Opaque > n {
			t.Fatalf("unexpected or repeated opaque %d", resp.Opaque)
		}
		seen[resp.Opaque] = true
	}
}
