package remoting

import (
	"sync/atomic"
	"testing"
)

// TestAuthorize checks that the hook sees every request, known code or
// not, that its answer replaces the handler's, and that a nil answer lets
// the handler run.
func TestAuthorize(t *testing.T) {
	var handled, asked atomic.Int32
	s := NewServer(ServerOptions{Authorize: func(c *Conn, req *Command) *Command {
		asked.Add(1)
		if req.Get("deny") != "" {
			return NewResponse(req, NoPermission, "denied: "+req.Get("deny"))
		}
		return nil
	}})
	s.Handle(codeEcho, func(c *Conn, req *Command) *Command {
		handled.Add(1)
		return echo(c, req)
	})
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)

	resp, err := cl.Invoke(ctx, addr, NewRequest(codeEcho, map[string]string{"x": "1"}, nil))
	if err != nil || resp.Code != Success || resp.Get("x") != "1" {
		t.Fatalf("allowed request: %v, %v", resp, err)
	}
	resp, err = cl.Invoke(ctx, addr, NewRequest(codeEcho, map[string]string{"deny": "no"}, nil))
	if err != nil || resp.Code != NoPermission || resp.Remark != "denied: no" {
		t.Fatalf("denied request: %v, %v", resp, err)
	}
	resp, err = cl.Invoke(ctx, addr, NewRequest(4321, map[string]string{"deny": "unknown"}, nil))
	if err != nil || resp.Code != NoPermission {
		t.Fatalf("denied unknown code: %v, %v; want NO_PERMISSION before RequestCodeNotSupported", resp, err)
	}
	resp, err = cl.Invoke(ctx, addr, NewRequest(4321, nil, nil))
	if err != nil || resp.Code != RequestCodeNotSupported {
		t.Fatalf("allowed unknown code: %v, %v", resp, err)
	}
	if h, a := handled.Load(), asked.Load(); h != 1 || a != 4 {
		t.Fatalf("handled %d, asked %d; want 1 and 4", h, a)
	}
}
