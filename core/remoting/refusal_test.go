package remoting

import (
	"strings"
	"testing"
)

// TestRefusalsLogged checks that a request answered with a refusal code is
// logged with its code, its peer and the reason, once per interval for a
// burst of the same refusal, on the handler path, the fast path and for
// codes no handler serves; answers that are not refusals, and refusals
// from the Authorize hook (which logs its own), are not logged.
func TestRefusalsLogged(t *testing.T) {
	const (
		codeRefuse  = 9001
		codeFine    = 9002
		codeFastBad = 9003
		codeUnknown = 9004
		codeDenied  = 9005
	)
	var logs logBuffer
	s := NewServer(ServerOptions{
		Logger: logs.logger(),
		Authorize: func(c *Conn, req *Command) *Command {
			if req.Code == codeDenied {
				return NewResponse(req, NoPermission, "denied by the hook")
			}
			return nil
		},
	})
	s.Handle(codeRefuse, func(c *Conn, req *Command) *Command {
		return NewResponse(req, SystemError, "heartbeat: bad body: json: cannot unmarshal number")
	})
	s.Handle(codeFine, func(c *Conn, req *Command) *Command { return NewResponse(req, PullNotFound, "nothing new") })
	s.Handle(codeDenied, echo)
	s.HandleFast(codeFastBad, func(c *Conn, req *Command, reply func(*Command)) bool {
		reply(NewResponse(req, MessageIllegal, "the body is over the limit"))
		return true
	})
	addr := startServer(t, s)
	cl := newTestClient(t, ClientOptions{})
	ctx := testCtx(t)
	for _, code := range []int16{codeRefuse, codeRefuse, codeRefuse, codeFine, codeFastBad, codeFastBad, codeUnknown, codeDenied} {
		if _, err := cl.Invoke(ctx, addr, NewRequest(code, nil, nil)); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var refused []string
	for _, l := range lines {
		if strings.Contains(l, "request refused") {
			refused = append(refused, l)
		}
	}
	want := []struct{ level, code, answer, reason string }{
		{"WARN", "code=RequestCode(9001)", "answer=SYSTEM_ERROR", "cannot unmarshal number"},
		{"INFO", "code=RequestCode(9003)", "answer=MESSAGE_ILLEGAL", "over the limit"},
		{"INFO", "code=RequestCode(9004)", "answer=REQUEST_CODE_NOT_SUPPORTED", "not supported"},
	}
	if len(refused) != len(want) {
		t.Fatalf("got %d refusal lines, want %d:\n%s", len(refused), len(want), strings.Join(refused, "\n"))
	}
	for i, w := range want {
		l := refused[i]
		for _, part := range []string{"level=" + w.level, w.code, w.answer, w.reason, "peer=127.0.0.1:"} {
			if !strings.Contains(l, part) {
				t.Errorf("refusal line %d lacks %q: %s", i, part, l)
			}
		}
	}
}
