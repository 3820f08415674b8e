package remoting

import (
	"bytes"
	"strconv"
	"testing"
	"time"
)

// TestReleaseBody checks that a response's ReleaseBody is called once, with
// its body, whether the body is copied into the connection's buffer, written
// by reference, or too large to send at all, and that the bytes the client
// reads are the body's.
func TestReleaseBody(t *testing.T) {
	const codeSized = 1010 // answers with a body of the size asked for
	released := make(chan []byte, 16)
	s := NewServer(ServerOptions{MaxFrameSize: 1 << 20})
	s.Handle(codeSized, func(c *Conn, req *Command) *Command {
		n, err := req.Int32("n")
		if err != nil {
			return NewResponse(req, SystemError, err.Error())
		}
		resp := NewResponse(req, Success, "")
		resp.Body = bytes.Repeat([]byte{'b'}, int(n))
		resp.ReleaseBody = func(b []byte) { released <- b }
		return resp
	})
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	for _, c := range []struct {
		name string
		size int
		ok   bool
	}{
		{"copied", 1000, true},
		{"by reference", inlineBodyMax + 1000, true},
		{"too large", 2 << 20, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := cl.Invoke(testCtx(t), addr, NewRequest(codeSized, map[string]string{"n": strconv.Itoa(c.size)}, nil))
			if c.ok && (err != nil || resp.Code != Success || len(resp.Body) != c.size) {
				t.Fatalf("answer: %v %v", resp, err)
			}
			select {
			case b := <-released:
				if len(b) != c.size {
					t.Fatalf("released a body of %d bytes, want %d", len(b), c.size)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("body not released")
			}
			select {
			case <-released:
				t.Fatal("body released twice")
			default:
			}
		})
	}
}
