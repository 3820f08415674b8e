package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestJSONLogs runs the broker command with --log-format json in a child
// process through start and a graceful stop, and parses every line it
// logs as one JSON object with time, level and msg.
func TestJSONLogs(t *testing.T) {
	args := []string{"--log-format", "json", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--namesrv-listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "RMQ_BROKER_CHILD_ARGS="+strings.Join(args, "\x1f"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	type line struct {
		text string
		rec  map[string]any
		err  error
	}
	lines := make(chan line, 256)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec map[string]any
			err := json.Unmarshal(sc.Bytes(), &rec)
			lines <- line{sc.Text(), rec, err}
		}
	}()
	check := func(l line) {
		t.Helper()
		if l.err != nil {
			t.Fatalf("a log line is not JSON (%v): %s", l.err, l.text)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := l.rec[k]; !ok {
				t.Fatalf("a log line lacks %q: %s", k, l.text)
			}
		}
	}
	var rec map[string]any // the "broker started" line
	deadline := time.After(30 * time.Second)
	for rec == nil {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the broker exited before it started")
			}
			check(l)
			if l.rec["msg"] == "broker started" {
				rec = l.rec
			}
		case <-deadline:
			t.Fatal("the broker did not log that it started within 30s")
		}
	}
	if addr, _ := rec["listen"].(string); !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("the started line's listen attribute is %v", rec["listen"])
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for l := range lines {
		check(l)
		msgs = append(msgs, l.rec["msg"].(string))
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the broker's exit: %v", err)
	}
	if len(msgs) == 0 || msgs[len(msgs)-1] != "stopped" {
		t.Fatalf("the last lines after SIGTERM are %q, want the last to be \"stopped\"", msgs)
	}
}
