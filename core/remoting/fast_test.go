package remoting

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Codes of the fast-path tests.
const (
	codeFast    = 1100 // taken by the fast path, answered later by the test
	codeDecline = 1101 // declined by the fast path, served by the Handler
	codeFastBad = 1102 // the fast path panics
)

// fastServer serves codeFast on the fast path, parking each reply on the
// returned channel for the test to call, codeDecline on the Handler after
// the fast path declines, and codeFastBad with a panic.
func fastServer(t *testing.T, opts ServerOptions) (*Server, chan func(), *sync.Map) {
	t.Helper()
	parked := make(chan func(), 64)
	var onReader sync.Map // codes the fast path saw, by code
	if opts.Logger == nil {
		opts.Logger = new(logBuffer).logger()
	}
	s := NewServer(opts)
	s.Handle(codeFast, func(c *Conn, req *Command) *Command {
		t.Error("the Handler of a taken code ran")
		return nil
	})
	s.Handle(codeDecline, func(c *Conn, req *Command) *Command { return NewResponse(req, Success, "handler") })
	s.Handle(codeFastBad, func(c *Conn, req *Command) *Command { return nil })
	fast := func(c *Conn, req *Command, reply func(*Command)) bool {
		onReader.Store(req.Code, true)
		switch req.Code {
		case codeFast:
			parked <- func() { reply(NewResponse(req, Success, "fast "+req.Get("n"))) }
			return true
		case codeFastBad:
			panic("fast path broke")
		}
		return false
	}
	for _, code := range []int16{codeFast, codeDecline, codeFastBad} {
		s.HandleFast(code, fast)
	}
	return s, parked, &onReader
}

func TestFastHandlerAnswersLater(t *testing.T) {
	s, parked, seen := fastServer(t, ServerOptions{MaxInflightPerConn: 2})
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)

	// A declined request reaches the Handler; a panic is answered.
	if r, err := cl.Invoke(ctx, addr, NewRequest(codeDecline, nil, nil)); err != nil || r.Remark != "handler" {
		t.Fatalf("declined request: %v %v", r, err)
	}
	if _, ok := seen.Load(int16(codeDecline)); !ok {
		t.Fatal("the fast path was not offered the declined request")
	}
	if r, err := cl.Invoke(ctx, addr, NewRequest(codeFastBad, nil, nil)); err != nil || r.Code != SystemError {
		t.Fatalf("panicking fast path: %v %v", r, err)
	}

	// Three requests on one connection with two slots: two are taken and
	// wait for their replies; the third is not read until one is answered.
	answers := make(chan *Command, 3)
	for i := range 3 {
		go func() {
			r, err := cl.Invoke(ctx, addr, NewRequest(codeFast, map[string]string{"n": strconv.Itoa(i)}, nil))
			if err != nil {
				t.Error(err)
			}
			answers <- r
		}()
	}
	first, second := <-parked, <-parked
	select {
	case <-parked:
		t.Fatal("a third request was taken while two held both slots")
	case <-time.After(200 * time.Millisecond):
	}
	go first() // answered from another goroutine
	if r := <-answers; r == nil || r.Code != Success {
		t.Fatalf("first answer: %v", r)
	}
	third := <-parked // the freed slot let the reader go on
	second()
	third()
	third() // a second answer is dropped, not sent
	for range 2 {
		if r := <-answers; r == nil || r.Code != Success {
			t.Fatalf("answer: %v", r)
		}
	}
}

func TestFastHandlerAuthorizeFirst(t *testing.T) {
	s, parked, _ := fastServer(t, ServerOptions{Authorize: func(c *Conn, req *Command) *Command {
		if req.Get("who") != "friend" {
			return NewResponse(req, NoPermission, "who are you")
		}
		return nil
	}})
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)
	if r, err := cl.Invoke(ctx, addr, NewRequest(codeFast, nil, nil)); err != nil || r.Code != NoPermission {
		t.Fatalf("unauthorized: %v %v", r, err)
	}
	select {
	case <-parked:
		t.Fatal("the fast path ran for a refused request")
	default:
	}
	done := make(chan *Command, 1)
	go func() {
		r, _ := cl.Invoke(ctx, addr, NewRequest(codeFast, map[string]string{"who": "friend"}, nil))
		done <- r
	}()
	(<-parked)()
	if r := <-done; r == nil || r.Code != Success {
		t.Fatalf("authorized: %v", r)
	}
}

// A graceful shutdown waits for a taken request's answer and writes it
// before closing the connection.
func TestFastHandlerShutdownWaits(t *testing.T) {
	s, parked, _ := fastServer(t, ServerOptions{})
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
		r, _ := cl.Invoke(ctx, ln.Addr().String(), NewRequest(codeFast, map[string]string{"n": "7"}, nil))
		answered <- r
	}()
	reply := <-parked
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(ctx) }()
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v before the taken request was answered", err)
	case <-time.After(100 * time.Millisecond):
	}
	reply()
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if r := <-answered; r == nil || r.Remark != "fast 7" {
		t.Fatalf("answer across the shutdown: %v", r)
	}
}

// A FastHandler's request keeps its JSON extFields unparsed until asked;
// the Handler of a declined one, and Authorize, get the map.
func TestFastHandlerLazyExtFields(t *testing.T) {
	type seen struct {
		mapBuilt bool
		value    string
	}
	fastSaw, handlerSaw, authSaw := make(chan seen, 1), make(chan seen, 1), make(chan seen, 8) // a declined request is authorized twice
	s := NewServer(ServerOptions{Logger: new(logBuffer).logger(), Authorize: func(c *Conn, req *Command) *Command {
		v := req.Fields()["k"] // Fields builds the map an unparsed request lacks
		authSaw <- seen{req.ExtFields != nil, v}
		return nil
	}})
	s.Handle(codeFast, func(c *Conn, req *Command) *Command { return nil })
	s.Handle(codeDecline, func(c *Conn, req *Command) *Command {
		handlerSaw <- seen{req.ExtFields != nil, req.ExtFields["k"]}
		return NewResponse(req, Success, "")
	})
	fast := func(c *Conn, req *Command, reply func(*Command)) bool {
		if req.Code == codeDecline {
			return false
		}
		built := req.ExtFields != nil
		fastSaw <- seen{built, req.Get("k")}
		reply(NewResponse(req, Success, ""))
		return true
	}
	s.HandleFast(codeFast, fast)
	s.HandleFast(codeDecline, fast)
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)
	for _, code := range []int16{codeFast, codeDecline} {
		if _, err := cl.Invoke(ctx, addr, NewRequest(code, map[string]string{"k": "v"}, nil)); err != nil {
			t.Fatal(err)
		}
	}
	// Authorize, which runs first, reads the map through Fields; the
	// Handler of the declined request gets the map; every one saw the
	// value.
	for _, ch := range []chan seen{authSaw, authSaw, fastSaw, handlerSaw} {
		if got := <-ch; !got.mapBuilt && ch != fastSaw || got.value != "v" {
			t.Fatalf("saw %+v", got)
		}
	}

	// Without Authorize the fast path gets the pairs, not the map.
	s2 := NewServer(ServerOptions{Logger: new(logBuffer).logger()})
	s2.Handle(codeFast, func(c *Conn, req *Command) *Command { return nil })
	s2.HandleFast(codeFast, fast)
	addr2 := startServer(t, s2)
	if _, err := cl.Invoke(ctx, addr2, NewRequest(codeFast, map[string]string{"k": "v"}, nil)); err != nil {
		t.Fatal(err)
	}
	if got := <-fastSaw; got.mapBuilt || got.value != "v" {
		t.Fatalf("fast path without Authorize saw %+v; want the value from unparsed pairs", got)
	}
}
