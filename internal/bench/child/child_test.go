package child

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeServerEnv makes the test binary act as a server child instead of
// running tests: its value says which.
const fakeServerEnv = "CHILD_FAKE_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeServerEnv); mode != "" {
		os.Exit(fakeServer(mode))
	}
	os.Exit(m.Run())
}

// fakeServer listens on loopback and logs as the broker does ("broker"),
// or names its address and says it is ready on separate lines ("split"),
// then serves until SIGTERM; "exit" logs a line and fails at once, and
// "mute" listens without saying so.
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
	case "split":
		fmt.Fprintf(os.Stderr, "listening on %s\n", ln.Addr())
		fmt.Fprintf(os.Stderr, "ready\n")
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

var splitReady = Readiness{Addr: regexp.MustCompile(`listening on (\S+)`), Ready: regexp.MustCompile(`^ready$`)}

func startFake(t *testing.T, mode string, o Options) (*Process, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeServerEnv, mode)
	o.Argv = []string{exe}
	return Start(context.Background(), o)
}

func TestStart(t *testing.T) {
	for _, tc := range []struct {
		mode string
		r    Readiness
	}{{"broker", BrokerReady}, {"split", splitReady}} {
		t.Run(tc.mode, func(t *testing.T) {
			dir := t.TempDir()
			p, err := startFake(t, tc.mode, Options{Dir: dir, Ready: tc.r})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(p.Addr(), "127.0.0.1:") {
				t.Errorf("address %q, want the fake's loopback listener", p.Addr())
			}
			if p.PID() <= 0 {
				t.Errorf("pid %d", p.PID())
			}
			if _, ok := p.Exited(); ok {
				t.Fatal("the child has exited while it should serve")
			}
			p.Stop()
			st, ok := p.Exited()
			if !ok || !st.Success() {
				t.Errorf("the fake exited with %v after SIGTERM, want 0", st)
			}
			p.Stop() // a second Stop returns at once
			if _, err := os.Stat(dir); err != nil {
				t.Errorf("Stop touched the child's directory: %v", err)
			}
		})
	}
}

func TestStartFails(t *testing.T) {
	_, err := startFake(t, "exit", Options{Ready: BrokerReady})
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "no space") {
		t.Errorf("start of a server that fails: %v; want ErrNotReady quoting its log", err)
	}
	start := time.Now()
	_, err = startFake(t, "mute", Options{Ready: BrokerReady, Timeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "not ready in 200ms") {
		t.Errorf("start of a server that never says it is ready: %v; want ErrNotReady after the timeout", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the failed start took %v", d)
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
