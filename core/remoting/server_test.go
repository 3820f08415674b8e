package remoting

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Codes the tests register; they are not protocol codes.
const (
	codeEcho  = 1000 // answers with the request's extFields and body
	codeBlock = 1001 // waits on the test's gate before answering
	codeHold  = 1002 // keeps the request for a later Reply
	codePanic = 1003
)

// logBuffer collects a component's logs so tests can look for a line.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func echo(c *Conn, req *Command) *Command {
	resp := NewResponse(req, Success, "")
	resp.ExtFields = req.ExtFields
	resp.Body = req.Body
	return resp
}

// startServer serves s on a fresh loopback port and shuts it down when the
// test ends, checking that Serve returned ErrServerClosed.
func startServer(t testing.TB, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return ln.Addr().String()
}

func newTestClient(t testing.TB, opts ClientOptions) *Client {
	t.Helper()
	cl := NewClient(opts)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestConcurrentRequestsAnsweredOutOfOrder(t *testing.T) {
	const n = 64
	arrived := make(chan int, n)
	gates := make([]chan struct{}, n)
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	var conns sync.Map
	s := NewServer(ServerOptions{})
	s.Handle(codeBlock, func(c *Conn, req *Command) *Command {
		conns.Store(c.ID(), true)
		i, err := req.Int32("i")
		if err != nil {
			return NewResponse(req, SystemError, err.Error())
		}
		arrived <- int(i)
		<-gates[i]
		resp := NewResponse(req, Success, "")
		resp.Set("i", req.Get("i"))
		return resp
	})
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)

	errs := make(chan error, n)
	for i := range n {
		go func() {
			req := NewRequest(codeBlock, map[string]string{"i": strconv.Itoa(i)}, nil)
			resp, err := cl.Invoke(ctx, addr, req)
			if err == nil && (resp.Code != Success || resp.Get("i") != strconv.Itoa(i)) {
				err = errors.New("request " + strconv.Itoa(i) + " got " + resp.String())
			}
			errs <- err
		}()
	}
	// All n handlers run at once on one connection; answer them last first.
	for range n {
		<-arrived
	}
	for i := n - 1; i >= 0; i-- {
		close(gates[i])
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	count := 0
	conns.Range(func(any, any) bool { count++; return true })
	if count != 1 {
		t.Errorf("requests came over %d connections, want 1", count)
	}
}

func TestHeldRequestDoesNotBlockConnection(t *testing.T) {
	type held struct {
		c   *Conn
		req *Command
	}
	holds := make(chan held, 1)
	s := NewServer(ServerOptions{})
	s.Handle(codeHold, func(c *Conn, req *Command) *Command {
		holds <- held{c, req}
		return nil
	})
	s.Handle(codeEcho, echo)
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)

	pulled := make(chan *Command, 1)
	go func() {
		resp, err := cl.Invoke(ctx, addr, NewRequest(codeHold, nil, nil))
		if err != nil {
			t.Error(err)
		}
		pulled <- resp
	}()
	h := <-holds
	// The held request does not stop others on the same connection.
	for i := range 10 {
		resp, err := cl.Invoke(ctx, addr, NewRequest(codeEcho, nil, []byte{byte(i)}))
		if err != nil || !bytes.Equal(resp.Body, []byte{byte(i)}) {
			t.Fatalf("echo %d while a request is held: %v, %v", i, resp, err)
		}
	}
	// A reply built by hand gets opaque and flag filled in.
	if err := h.c.Reply(h.req, &Command{Code: PullNotFound, ExtFields: map[string]string{"nextBeginOffset": "7"}}); err != nil {
		t.Fatal(err)
	}
	resp := <-pulled
	if resp == nil || resp.Code != PullNotFound || resp.Get("nextBeginOffset") != "7" || !resp.IsResponse() ||
		resp.Language != LanguageGo || resp.Version != DefaultVersion {
		t.Fatalf("held request answered with %v", resp)
	}
}

func TestServerInitiatedRequests(t *testing.T) {
	conns := make(chan *Conn, 1)
	s := NewServer(ServerOptions{OnConnect: func(c *Conn) { conns <- c }})
	addr := startServer(t, s)

	notified := make(chan *Command, 1)
	cl := newTestClient(t, ClientOptions{OnRequest: func(c *Conn, req *Command) *Command {
		switch req.Code {
		case GetConsumerRunningInfo:
			resp := NewResponse(req, Success, "")
			resp.Set("group", req.Get("consumerGroup"))
			return resp
		case NotifyConsumerIdsChanged:
			notified <- req
			return NewResponse(req, Success, "") // dropped: the request is oneway
		}
		return nil
	}})
	ctx := testCtx(t)
	// The first call dials; the server then has the connection.
	if _, err := cl.Invoke(ctx, addr, NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	sc := <-conns

	req := NewRequest(GetConsumerRunningInfo, map[string]string{"consumerGroup": "g1"}, nil)
	req.SerializeType = SerializeRocketMQ // broker-initiated requests go out in JSON regardless
	resp, err := sc.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != Success || resp.Get("group") != "g1" || resp.SerializeType != SerializeJSON {
		t.Fatalf("client answered %v", resp)
	}
	if req.Opaque != 0 || req.SerializeType != SerializeRocketMQ {
		t.Fatalf("Request modified its argument: %+v", req)
	}

	if err := sc.Oneway(ctx, NewRequest(NotifyConsumerIdsChanged, map[string]string{"consumerGroup": "g1"}, nil)); err != nil {
		t.Fatal(err)
	}
	n := <-notified
	if !n.IsOneway() || n.SerializeType != SerializeJSON || n.Get("consumerGroup") != "g1" {
		t.Fatalf("client got %v", n)
	}

	// A request the client does not answer times out with ctx.
	short, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := sc.Request(short, NewRequest(CheckTransactionState, nil, nil)); !errors.Is(err, context.Canceled) {
		t.Fatalf("unanswered request: %v", err)
	}
}

func TestBadFrameClosesOnlyItsConnection(t *testing.T) {
	var logs logBuffer
	closed := make(chan *Conn, 4)
	s := NewServer(ServerOptions{MaxFrameSize: 1024, Logger: logs.logger(), OnClose: func(c *Conn) { closed <- c }})
	s.Handle(codeEcho, echo)
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)
	if _, err := cl.Invoke(ctx, addr, NewRequest(codeEcho, nil, nil)); err != nil {
		t.Fatal(err)
	}

	for name, frame := range map[string][]byte{
		"malformed": append([]byte{0, 0, 0, 6, 5, 0, 0, 2}, "{}"...), // serialization type 5
		"oversize":  {0, 0, 8, 0, 0, 0, 0, 2},                        // 2048 > 1024
		"bad json":  jsonFrameWithPrefix(`{"code":"x"}`),
	} {
		raw, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Write(frame); err != nil {
			t.Fatal(err)
		}
		// The server closes it: the read ends without a response.
		_ = raw.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := raw.Read(make([]byte, 64)); err != io.EOF {
			t.Fatalf("%s: read %d bytes, err %v; want EOF", name, n, err)
		}
		c := <-closed
		if c.RemoteAddr().String() != raw.LocalAddr().String() {
			t.Fatalf("%s: OnClose for %s, want %s", name, c.RemoteAddr(), raw.LocalAddr())
		}
		if !strings.Contains(logs.String(), "peer="+raw.LocalAddr().String()) {
			t.Fatalf("%s: no log line names the peer %s:\n%s", name, raw.LocalAddr(), logs.String())
		}
		raw.Close()
		// The other connection keeps working.
		if _, err := cl.Invoke(ctx, addr, NewRequest(codeEcho, nil, nil)); err != nil {
			t.Fatalf("after %s frame: %v", name, err)
		}
	}
	out := logs.String()
	for _, want := range []string{"remoting: malformed frame", "remoting: frame too large: 2048 bytes, limit 1024"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, out)
		}
	}
}

func jsonFrameWithPrefix(header string) []byte {
	f := jsonFrame(header)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(f))), f...)
}

func TestHandlerPanicAndUnknownCode(t *testing.T) {
	var logs logBuffer
	s := NewServer(ServerOptions{Logger: logs.logger()})
	s.Handle(codePanic, func(c *Conn, req *Command) *Command { panic("boom") })
	s.Handle(codeEcho, echo)
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)

	resp, err := cl.Invoke(ctx, addr, NewRequest(codePanic, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != SystemError || !strings.Contains(resp.Remark, "boom") {
		t.Fatalf("panicking handler answered %v", resp)
	}
	if !strings.Contains(logs.String(), "handler panicked") {
		t.Fatalf("panic not logged:\n%s", logs.String())
	}
	resp, err = cl.Invoke(ctx, addr, NewRequest(QueryMessage, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != RequestCodeNotSupported || !strings.Contains(resp.Remark, "12 (QUERY_MESSAGE)") {
		t.Fatalf("unknown code answered %v", resp)
	}
	if _, err := cl.Invoke(ctx, addr, NewRequest(codeEcho, nil, nil)); err != nil {
		t.Fatalf("after a panic: %v", err)
	}
}

func TestRocketMQSerializationOverTCP(t *testing.T) {
	s := NewServer(ServerOptions{})
	seen := make(chan byte, 1)
	s.Handle(codeEcho, func(c *Conn, req *Command) *Command {
		seen <- req.SerializeType
		return echo(c, req)
	})
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	req := sendRequest(SerializeRocketMQ)
	req.Code = codeEcho
	resp, err := cl.Invoke(testCtx(t), addr, req)
	if err != nil {
		t.Fatal(err)
	}
	if st := <-seen; st != SerializeRocketMQ {
		t.Fatalf("server saw serialization %d", st)
	}
	if resp.SerializeType != SerializeRocketMQ || resp.Get("properties") != req.Get("properties") || !bytes.Equal(resp.Body, req.Body) {
		t.Fatalf("response %v", resp)
	}
}

func TestLargeAndSmallBodiesInterleaved(t *testing.T) {
	s := NewServer(ServerOptions{})
	s.Handle(codeEcho, echo)
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			size := 10 + i
			if i%3 == 0 {
				size = inlineBodyMax + 1 + i*1000 // written by reference
			}
			body := bytes.Repeat([]byte{byte(i)}, size)
			resp, err := cl.Invoke(ctx, addr, NewRequest(codeEcho, nil, body))
			if err != nil {
				t.Error(err)
				return
			}
			if !bytes.Equal(resp.Body, body) {
				t.Errorf("body %d: got %d bytes", i, len(resp.Body))
			}
		})
	}
	wg.Wait()
}

func TestInflightLimitHoldsTheReader(t *testing.T) {
	var firstDone atomic.Bool
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	s := NewServer(ServerOptions{MaxInflightPerConn: 1})
	s.Handle(codeBlock, func(c *Conn, req *Command) *Command {
		started <- struct{}{}
		if req.Get("first") == "true" {
			<-release
			firstDone.Store(true)
		} else if !firstDone.Load() {
			return NewResponse(req, SystemError, "second handler ran while the first was running")
		}
		return NewResponse(req, Success, "")
	})
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)

	results := make(chan *Command, 2)
	go func() {
		r, _ := cl.Invoke(ctx, addr, NewRequest(codeBlock, map[string]string{"first": "true"}, nil))
		results <- r
	}()
	<-started
	go func() {
		r, _ := cl.Invoke(ctx, addr, NewRequest(codeBlock, nil, nil))
		results <- r
	}()
	close(release)
	for range 2 {
		if r := <-results; r == nil || r.Code != Success {
			t.Fatalf("got %v", r)
		}
	}
}

func TestShutdownWaitsForHandlers(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	var finished atomic.Bool
	var closes atomic.Int32
	s := NewServer(ServerOptions{OnClose: func(*Conn) { closes.Add(1) }})
	s.Handle(codeBlock, func(c *Conn, req *Command) *Command {
		close(started)
		<-release
		finished.Store(true)
		return NewResponse(req, Success, "done")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)

	answered := make(chan *Command, 1)
	go func() {
		r, err := cl.Invoke(ctx, ln.Addr().String(), NewRequest(codeBlock, nil, nil))
		if err != nil {
			t.Error(err)
		}
		answered <- r
	}()
	<-started
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(ctx) }()
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v while a handler runs", err)
	default:
	}
	close(release)
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if !finished.Load() {
		t.Fatal("Shutdown returned before the handler finished")
	}
	// The response was written before the connection closed.
	if r := <-answered; r == nil || r.Remark != "done" {
		t.Fatalf("in-flight request got %v", r)
	}
	if n := closes.Load(); n != 1 {
		t.Fatalf("OnClose ran %d times", n)
	}
	// Idempotent, and the server stays closed.
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	if err := s.Serve(ln2); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
	if _, err := cl.Invoke(ctx, ln.Addr().String(), NewRequest(codeBlock, nil, nil)); err == nil {
		t.Fatal("request to a shut-down server succeeded")
	}
}

func TestShutdownDeadlineClosesConnections(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	s := NewServer(ServerOptions{})
	s.Handle(codeBlock, func(c *Conn, req *Command) *Command {
		close(started)
		<-release
		return NewResponse(req, Success, "")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)
	failed := make(chan error, 1)
	go func() {
		_, err := cl.Invoke(ctx, ln.Addr().String(), NewRequest(codeBlock, nil, nil))
		failed <- err
	}()
	<-started
	expired, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Shutdown(expired); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown with an expired context: %v", err)
	}
	if err := <-failed; !errors.Is(err, ErrClosed) {
		t.Fatalf("pending call: %v, want ErrClosed", err)
	}
	close(release)
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
}

func TestPendingCallsFailWhenServerCloses(t *testing.T) {
	const n = 8
	held := make(chan *Conn, n)
	s := NewServer(ServerOptions{})
	s.Handle(codeHold, func(c *Conn, req *Command) *Command {
		held <- c
		return nil
	})
	s.Handle(codeEcho, echo)
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)

	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := cl.Invoke(ctx, addr, NewRequest(codeHold, nil, nil))
			errs <- err
		}()
	}
	var c *Conn
	for range n {
		c = <-held
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.Close() // closing twice is fine
	<-c.Done()
	for range n {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Fatalf("pending call: %v, want ErrClosed", err)
		}
	}
	if err := c.Reply(&Command{}, &Command{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reply on a closed connection: %v", err)
	}
	// The next call dials again.
	resp, err := cl.Invoke(ctx, addr, NewRequest(codeEcho, nil, []byte("again")))
	if err != nil || string(resp.Body) != "again" {
		t.Fatalf("after reconnect: %v, %v", resp, err)
	}
}

func TestClientOnewayAndClose(t *testing.T) {
	got := make(chan *Command, 1)
	s := NewServer(ServerOptions{})
	s.Handle(UpdateConsumerOffset, func(c *Conn, req *Command) *Command {
		got <- req
		return NewResponse(req, Success, "") // not written: oneway
	})
	held := make(chan struct{}, 1)
	s.Handle(codeHold, func(c *Conn, req *Command) *Command {
		held <- struct{}{}
		return nil
	})
	addr := startServer(t, s)
	cl := NewClient(ClientOptions{})
	ctx := testCtx(t)
	if err := cl.InvokeOneway(ctx, addr, NewRequest(UpdateConsumerOffset, map[string]string{"commitOffset": "9"}, nil)); err != nil {
		t.Fatal(err)
	}
	if r := <-got; !r.IsOneway() || r.Get("commitOffset") != "9" {
		t.Fatalf("server got %v", r)
	}

	failed := make(chan error, 1)
	go func() {
		_, err := cl.Invoke(ctx, addr, NewRequest(codeHold, nil, nil))
		failed <- err
	}()
	<-held
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-failed; !errors.Is(err, ErrClosed) || !errors.Is(err, ErrClientClosed) {
		t.Fatalf("pending call after Close: %v", err)
	}
	if _, err := cl.Invoke(ctx, addr, NewRequest(codeEcho, nil, nil)); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("Invoke after Close: %v", err)
	}
	_ = cl.Close()
}

func TestDialFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cl := newTestClient(t, ClientOptions{})
	if _, err := cl.Invoke(testCtx(t), addr, NewRequest(codeEcho, nil, nil)); err == nil || !strings.Contains(err.Error(), "dial "+addr) {
		t.Fatalf("Invoke to a closed port: %v", err)
	}
}
