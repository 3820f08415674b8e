package remoting

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// asyncResult is what one InvokeAsync's done was called with, and how often.
type asyncResult struct {
	resp  *Command
	err   error
	calls atomic.Int32
}

func (r *asyncResult) done(ch chan<- *asyncResult) func(*Command, error) {
	return func(resp *Command, err error) {
		if r.calls.Add(1) == 1 {
			r.resp, r.err = resp, err
			ch <- r
		}
	}
}

func TestInvokeAsync(t *testing.T) {
	s := NewServer(ServerOptions{})
	s.Handle(codeEcho, echo)
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)

	const n = 500
	got := make(chan *asyncResult, n)
	results := make([]*asyncResult, n)
	// One request value, rewritten between calls: it is encoded before
	// InvokeAsync returns.
	req := NewRequest(codeEcho, nil, nil)
	for i := range n {
		results[i] = new(asyncResult)
		req.SetFields("i", strconv.Itoa(i))
		req.Body = []byte(strconv.Itoa(i))
		if err := cl.InvokeAsync(ctx, addr, req, 10*time.Second, results[i].done(got)); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		<-got
	}
	for i, r := range results {
		want := strconv.Itoa(i)
		if r.err != nil || r.resp.Code != Success || r.resp.Get("i") != want || string(r.resp.Body) != want {
			t.Fatalf("call %d: %v, %v", i, r.resp, r.err)
		}
		if c := r.calls.Load(); c != 1 {
			t.Fatalf("call %d: done called %d times", i, c)
		}
	}
}

func TestInvokeAsyncTimeout(t *testing.T) {
	held := make(chan struct {
		c   *Conn
		req *Command
	}, 1)
	s := NewServer(ServerOptions{})
	s.Handle(codeHold, func(c *Conn, req *Command) *Command {
		held <- struct {
			c   *Conn
			req *Command
		}{c, req}
		return nil
	})
	s.Handle(codeEcho, echo)
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)

	got := make(chan *asyncResult, 2)
	r := new(asyncResult)
	start := time.Now()
	if err := cl.InvokeAsync(ctx, addr, NewRequest(codeHold, nil, nil), 50*time.Millisecond, r.done(got)); err != nil {
		t.Fatal(err)
	}
	h := <-held
	<-got
	if !errors.Is(r.err, context.DeadlineExceeded) || r.resp != nil {
		t.Fatalf("unanswered call: %v, %v; want a DeadlineExceeded error", r.resp, r.err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("timed out after %v, before its 50ms", waited)
	}
	// A late answer is dropped: done is not called again, and the
	// connection goes on serving.
	if err := h.c.Reply(h.req, NewResponse(h.req, Success, "late")); err != nil {
		t.Fatal(err)
	}
	resp, err := cl.Invoke(ctx, addr, NewRequest(codeEcho, nil, []byte("after")))
	if err != nil || string(resp.Body) != "after" {
		t.Fatalf("call after a timeout: %v, %v", resp, err)
	}
	if c := r.calls.Load(); c != 1 {
		t.Fatalf("done called %d times", c)
	}
}

func TestInvokeAsyncContext(t *testing.T) {
	held := make(chan struct{}, 1)
	s := NewServer(ServerOptions{})
	s.Handle(codeHold, func(c *Conn, req *Command) *Command {
		held <- struct{}{}
		return nil
	})
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})

	if cl.Connected(addr) {
		t.Fatal("Connected before any call")
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	got := make(chan *asyncResult, 1)
	r := new(asyncResult)
	if err := cl.InvokeAsync(ctx, addr, NewRequest(codeHold, nil, nil), time.Minute, r.done(got)); err != nil {
		t.Fatal(err)
	}
	<-held
	if !cl.Connected(addr) {
		t.Fatal("not Connected while a call is pending")
	}
	cancel()
	<-got
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("call whose context ended: %v, want context.Canceled", r.err)
	}
	if err := cl.InvokeAsync(ctx, addr, NewRequest(codeHold, nil, nil), time.Minute, r.done(got)); !errors.Is(err, context.Canceled) {
		t.Fatalf("InvokeAsync with an ended context: %v", err)
	}
	if c := r.calls.Load(); c != 1 {
		t.Fatalf("done called %d times", c)
	}
}

func TestInvokeAsyncConnectionLost(t *testing.T) {
	const n = 8
	held := make(chan *Conn, n)
	s := NewServer(ServerOptions{})
	s.Handle(codeHold, func(c *Conn, req *Command) *Command {
		held <- c
		return nil
	})
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)

	got := make(chan *asyncResult, n)
	results := make([]*asyncResult, n)
	for i := range results {
		results[i] = new(asyncResult)
		if err := cl.InvokeAsync(ctx, addr, NewRequest(codeHold, nil, nil), time.Minute, results[i].done(got)); err != nil {
			t.Fatal(err)
		}
	}
	var c *Conn
	for range n {
		c = <-held
	}
	_ = c.Close()
	for range n {
		r := <-got
		if !errors.Is(r.err, ErrClosed) {
			t.Fatalf("pending async call: %v, want ErrClosed", r.err)
		}
	}

	// Closing the client fails the calls pending on it too.
	r := new(asyncResult)
	if err := cl.InvokeAsync(ctx, addr, NewRequest(codeHold, nil, nil), time.Minute, r.done(got)); err != nil {
		t.Fatal(err)
	}
	<-held
	_ = cl.Close()
	<-got
	if !errors.Is(r.err, ErrClientClosed) {
		t.Fatalf("async call pending at Close: %v", r.err)
	}
	if err := cl.InvokeAsync(ctx, addr, NewRequest(codeHold, nil, nil), time.Minute, r.done(got)); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("InvokeAsync after Close: %v", err)
	}
	for _, r := range results {
		if c := r.calls.Load(); c != 1 {
			t.Fatalf("done called %d times", c)
		}
	}
}

// TestInvokeAsyncExactlyOnce races responses against timeouts, ended
// contexts and a closing connection: whichever wins, each done runs once.
func TestInvokeAsyncExactlyOnce(t *testing.T) {
	s := NewServer(ServerOptions{})
	s.Handle(codeEcho, echo)
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)

	const n = 2000
	var (
		wg      sync.WaitGroup
		results []*asyncResult
		got     = make(chan *asyncResult, n)
	)
	for i := range n {
		r := new(asyncResult)
		// Timeouts of 1–100 µs, about as long as a loopback round trip.
		timeout := time.Duration(1+i%100) * time.Microsecond
		callCtx, cancel := context.WithCancel(ctx)
		err := cl.InvokeAsync(callCtx, addr, NewRequest(codeEcho, nil, nil), timeout, r.done(got))
		if i%3 == 0 {
			cancel() // races with the response and the timer
		} else {
			defer cancel()
		}
		if err != nil {
			// The connection was closed under us (below) and not yet
			// redialled: this call never started, and done is not called.
			if !errors.Is(err, ErrClosed) {
				t.Fatal(err)
			}
			continue
		}
		results = append(results, r)
		if i == n/2 {
			wg.Go(func() {
				for _, c := range cl.dialled() {
					_ = c.Close()
				}
			})
		}
	}
	wg.Wait()
	for range results {
		select {
		case <-got:
		case <-ctx.Done():
			t.Fatal("an async call never completed")
		}
	}
	for i, r := range results {
		if c := r.calls.Load(); c != 1 {
			t.Fatalf("call %d: done called %d times", i, c)
		}
		if (r.resp == nil) == (r.err == nil) {
			t.Fatalf("call %d: done(%v, %v); want a response or an error", i, r.resp, r.err)
		}
	}
}

func TestInvokeAsyncBadTimeout(t *testing.T) {
	cl := newTestClient(t, ClientOptions{})
	defer func() {
		if recover() == nil {
			t.Fatal("InvokeAsync with a zero timeout did not panic")
		}
	}()
	_ = cl.InvokeAsync(testCtx(t), "127.0.0.1:1", NewRequest(codeEcho, nil, nil), 0, func(*Command, error) {})
}

// TestClientResponsesKeepPairs checks that a Client leaves a JSON
// response's extFields as pairs and that the readers build the map from
// them.
func TestClientResponsesKeepPairs(t *testing.T) {
	s := NewServer(ServerOptions{})
	s.Handle(codeEcho, echo)
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)

	ext := map[string]string{"a": "1", "b": "two", "n": "42"}
	for _, st := range []byte{SerializeJSON, SerializeRocketMQ} {
		req := NewRequest(codeEcho, ext, nil)
		req.SerializeType = st
		resp, err := cl.Invoke(ctx, addr, req)
		if err != nil {
			t.Fatal(err)
		}
		if st == SerializeJSON && resp.ExtFields != nil {
			t.Fatalf("JSON response decoded into a map: %v", resp.ExtFields)
		}
		if n, err := resp.Int64("n"); err != nil || n != 42 || resp.Get("b") != "two" {
			t.Fatalf("serialization %d: n=%d (%v), b=%q", st, n, err, resp.Get("b"))
		}
		if got := resp.Fields(); !maps.Equal(got, ext) || !maps.Equal(resp.ExtFields, ext) {
			t.Fatalf("serialization %d: Fields %v, ExtFields %v, want %v", st, got, resp.ExtFields, ext)
		}
	}
}
