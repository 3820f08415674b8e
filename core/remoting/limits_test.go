package remoting

import (
	"bufio"
	"bytes"
	"log/slog"
	"net"
	"runtime"
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

func TestFrameReadTimeoutClosesTrickle(t *testing.T) {
	var logs logBuffer
	s := NewServer(ServerOptions{FrameReadTimeout: 500 * time.Millisecond, Logger: logs.logger()})
	s.Handle(codeEcho, echo)
	addr := startServer(t, s)

	// A slow but whole frame within the deadline is served.
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	f := rawRequest(t, codeEcho, 1)
	_, _ = slow.Write(f[:len(f)/2])
	time.Sleep(100 * time.Millisecond)
	_, _ = slow.Write(f[len(f)/2:])
	_ = slow.SetReadDeadline(time.Now().Add(10 * time.Second))
	if resp := readResponse(t, bufio.NewReader(slow)); resp.Opaque != 1 || resp.Code != Success {
		t.Fatalf("slow frame answered with code %d opaque %d", resp.Code, resp.Opaque)
	}

	// A large frame trickled a byte every 50 ms is cut off.
	trickle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer trickle.Close()
	start := time.Now()
	_, _ = trickle.Write([]byte{0, 1, 0, 0}) // 64 KiB frame
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for time.Since(start) < 5*time.Second {
			if _, err := trickle.Write([]byte{0}); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	expectClosed(t, trickle, 5*time.Second, "trickled frame")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("trickled frame cut off after %v, timeout 500ms", d)
	}
	<-closed
	if !strings.Contains(logs.String(), "frame arrives too slowly") {
		t.Errorf("no log line about the slow frame:\n%s", logs.String())
	}
}

func TestIdleTimeoutClosesSilentConnection(t *testing.T) {
	var logs logBuffer
	s := NewServer(ServerOptions{IdleTimeout: 400 * time.Millisecond, Logger: logs.logger()})
	s.Handle(codeEcho, echo)
	addr := startServer(t, s)

	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	busy, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	start := time.Now()
	// The busy connection sends a request every 100 ms for longer than
	// the idle timeout and stays open.
	br := bufio.NewReader(busy)
	_ = busy.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := int32(1); i <= 10; i++ {
		if _, err := busy.Write(rawRequest(t, codeEcho, i)); err != nil {
			t.Fatal(err)
		}
		if resp := readResponse(t, br); resp.Opaque != i {
			t.Fatalf("busy connection: opaque %d, want %d", resp.Opaque, i)
		}
		time.Sleep(100 * time.Millisecond)
	}
	expectClosed(t, silent, 5*time.Second, "silent connection")
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("silent connection closed after %v, idle timeout 400ms", d)
	}
	if !strings.Contains(logs.String(), "closing idle connection") {
		t.Errorf("no log line about the idle connection:\n%s", logs.String())
	}
}

func TestDeclaredFrameLengthPinsLittleMemory(t *testing.T) {
	s := NewServer(ServerOptions{Logger: discardLogger()})
	addr := startServer(t, s)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const conns = 40
	for range conns {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		// 16 MiB - 1 declared, a few bytes sent.
		if _, err := nc.Write([]byte{0, 0xff, 0xff, 0xff, 0, 0, 0, 2, '{', '}'}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	// A read buffer and a first chunk each: about 100 KiB a connection.
	if grown > conns*256<<10 {
		t.Errorf("heap grew %d KiB for %d connections that each sent a few bytes", grown>>10, conns)
	}
}

func TestConnectionCaps(t *testing.T) {
	var logs logBuffer
	s := NewServer(ServerOptions{MaxConns: 3, MaxConnsPerAddr: 2, Logger: logs.logger()})
	s.Handle(codeEcho, echo)
	addr := startServer(t, s)
	dialFrom := func(ip string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		nc, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return nc
	}
	opaque := int32(0)
	served := func(nc net.Conn) bool {
		opaque++
		if _, err := nc.Write(rawRequest(t, codeEcho, opaque)); err != nil {
			return false
		}
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		frame, err := ReadFrame(bufio.NewReader(nc), 0, nil)
		return err == nil && len(frame) > 0
	}

	a1, a2 := dialFrom("127.0.0.1"), dialFrom("127.0.0.1")
	if !served(a1) || !served(a2) {
		t.Fatal("connections under the caps not served")
	}
	expectClosed(t, dialFrom("127.0.0.1"), 5*time.Second, "third connection from one address")
	b1 := dialFrom("127.0.0.2")
	if !served(b1) {
		t.Fatal("connection from another address not served")
	}
	expectClosed(t, dialFrom("127.0.0.3"), 5*time.Second, "connection over the total cap")
	if !served(a1) || !served(a2) || !served(b1) {
		t.Fatal("existing connections affected by refused ones")
	}
	// A slot freed is a slot for the next connection.
	a2.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !served(dialFrom("127.0.0.3")) {
		if time.Now().After(deadline) {
			t.Fatal("no connection accepted after one closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	out := logs.String()
	for _, want := range []string{"per-address connection limit reached", "remoting: connection limit reached"} {
		if strings.Count(out, want) != 1 {
			t.Errorf("want one log line %q (rate-limited):\n%s", want, out)
		}
	}
}

func TestResponseTooLargeAnsweredAndConnectionKept(t *testing.T) {
	const limit = 64 << 10
	s := NewServer(ServerOptions{MaxFrameSize: limit, Logger: discardLogger()})
	s.Handle(codeEcho, echo)
	s.Handle(codeHuge, func(c *Conn, req *Command) *Command {
		resp := NewResponse(req, Success, "")
		resp.Body = make([]byte, 2*limit)
		return resp
	})
	s.Handle(codeWide, func(c *Conn, req *Command) *Command {
		return NewResponse(req, Success, strings.Repeat("x", MaxHeaderSize+1))
	})
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)
	for _, code := range []int16{codeHuge, codeWide} {
		resp, err := cl.Invoke(ctx, addr, NewRequest(code, nil, nil))
		if err != nil {
			t.Fatalf("%d: %v", code, err)
		}
		if resp.Code != ResponseNotEncodable || !strings.Contains(resp.Remark, "frame too large") {
			t.Fatalf("%d: code %d remark %.200q; want ResponseNotEncodable naming the size", code, resp.Code, resp.Remark)
		}
		// The connection stays usable.
		resp, err = cl.Invoke(ctx, addr, NewRequest(codeEcho, nil, []byte("after")))
		if err != nil || string(resp.Body) != "after" {
			t.Fatalf("after %d: %v", code, err)
		}
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
