package grpcserver_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	pb "github.com/rmq-go/rmq/internal/rmqpb"
	"github.com/rmq-go/rmq/internal/server"
)

// syncBuffer is a log sink the broker's goroutines write while the test
// reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRefusalsLogged refuses the same request three times (no client id)
// and checks one log line names the method, the client's address, the
// code and the reason.
func TestRefusalsLogged(t *testing.T) {
	var logs syncBuffer
	e := start(t, func(c *server.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	for range 3 {
		r, err := e.cl.QueryRoute(t.Context(), &pb.QueryRouteRequest{Topic: res("T")})
		if err != nil || r.Status.GetCode() != pb.Code_CLIENT_ID_REQUIRED {
			t.Fatalf("route without a client id: %v %v", r, err)
		}
	}
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "grpc: request refused") && strings.Contains(l, "CLIENT_ID_REQUIRED") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d refusal lines for three refusals, want 1:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, want := range []string{"level=INFO", "method=/apache.rocketmq.v2.MessagingService/QueryRoute", "peer=127.0.0.1:", "x-mq-client-id"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the refusal line lacks %q: %s", want, lines[0])
		}
	}
}
