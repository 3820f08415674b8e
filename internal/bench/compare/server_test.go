package compare

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
)

// fakeServerEnv makes the test binary act as a server child instead of
// running tests: its value says which.
const fakeServerEnv = "COMPARE_FAKE_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeServerEnv); mode != "" {
		os.Exit(fakeServer(mode))
	}
	os.Exit(m.Run())
}

// fakeServer listens on loopback and logs as the broker ("broker") or
// nats-server ("nats") does, then serves until SIGTERM; "exit" logs a
// line and fails at once.
func fakeServer(mode string) int {
	if mode == "exit" {
		fmt.Fprintln(os.Stderr, "level=ERROR msg=\"broker failed to start\" err=\"no space\"")
		return 3
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 1
	}
	switch mode {
	case "broker":
		fmt.Fprintln(os.Stderr, `time=2026-12-01T21:33:52.850Z level=WARN msg="no name server"`)
		fmt.Fprintf(os.Stderr, "time=2026-12-01T21:33:52.899Z level=INFO msg=\"broker started\" listen=%s namesrv=off\n", ln.Addr())
	case "nats":
		fmt.Fprintf(os.Stderr, "[1] 2026/12/01 21:21:44.731738 [INF] Starting JetStream\n")
		fmt.Fprintf(os.Stderr, "[1] 2026/12/01 21:21:44.734301 [INF] Listening for client connections on %s\n", ln.Addr())
		fmt.Fprintf(os.Stderr, "[1] 2026/12/01 21:21:44.734337 [INF] Server is ready\n")
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	<-term
	return 0
}

func startFake(t *testing.T, mode string, r readiness) (*server, string, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeServerEnv, mode)
	dir := t.TempDir() + "/srv"
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := startServer(context.Background(), mode, dir, []string{exe}, r)
	return s, dir, err
}

func TestStartServer(t *testing.T) {
	for _, tc := range []struct {
		mode string
		r    readiness
	}{{"broker", brokerReady}, {"nats", natsReady}} {
		t.Run(tc.mode, func(t *testing.T) {
			s, dir, err := startFake(t, tc.mode, tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(s.addr, "127.0.0.1:") {
				t.Errorf("address %q, want the fake's loopback listener", s.addr)
			}
			s.stop()
			if !s.cmd.ProcessState.Success() {
				t.Errorf("the fake exited with %v after SIGTERM, want 0", s.cmd.ProcessState)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the server's directory is still there after stop: %v", err)
			}
		})
	}
}

func TestStartServerExits(t *testing.T) {
	_, dir, err := startFake(t, "exit", brokerReady)
	if !errors.Is(err, ErrServer) || !strings.Contains(err.Error(), "no space") {
		t.Fatalf("start of a server that fails: %v; want ErrServer quoting its log", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory is still there after a failed start: %v", err)
	}
}

func TestLogLines(t *testing.T) {
	var got []string
	l := newLogLines(func(s string) { got = append(got, s) })
	for _, w := range []string{"ab", "c\nde\n", "", "f"} {
		if n, err := l.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", w, n, err)
		}
	}
	if strings.Join(got, ",") != "abc,de" {
		t.Errorf("lines %q, want abc and de", got)
	}
	if tail := l.tail(); tail != "abc | de | f" {
		t.Errorf("tail %q", tail)
	}
	for i := range 2 * logTail {
		fmt.Fprintf(l, "line %d\n", i)
	}
	// "f" began the first of them.
	if tail := l.tail(); !strings.HasPrefix(tail, fmt.Sprintf("line %d |", logTail)) || strings.Count(tail, "|") != logTail-1 {
		t.Errorf("tail after many lines: %q, want the last %d", tail, logTail)
	}
}

func TestNatsConfig(t *testing.T) {
	lazy, always := natsConfig("/tmp/x", false), natsConfig("/tmp/x", true)
	for _, c := range []string{lazy, always} {
		if !strings.Contains(c, "listen: 127.0.0.1:-1\n") || !strings.Contains(c, `store_dir: "/tmp/x/jetstream"`) {
			t.Errorf("config lacks the listener or the store:\n%s", c)
		}
	}
	if strings.Contains(lazy, "sync_interval") || !strings.Contains(always, "sync_interval: always") {
		t.Errorf("sync_interval: lazy config\n%s\nalways config\n%s", lazy, always)
	}
}
