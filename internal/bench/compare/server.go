package compare

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Bounds on a server's life.
const (
	// readyTimeout bounds a server's start, from exec to accepting
	// clients. Both start on an empty directory in well under a second.
	readyTimeout = 30 * time.Second
	// stopTimeout bounds a graceful stop before the process is killed.
	stopTimeout = 20 * time.Second
)

// readiness tells from a server's log lines when it accepts clients and
// where.
type readiness struct {
	// addr finds the client address: its first submatch.
	addr *regexp.Regexp
	// ready matches the line that says the server accepts clients; it may
	// be the same line as addr's.
	ready *regexp.Regexp
}

// Log lines of the two servers.
var (
	// brokerReady matches the broker's
	//	time=... level=INFO msg="broker started" listen=127.0.0.1:43839 namesrv=off ...
	brokerReady = readiness{
		addr:  regexp.MustCompile(`msg="broker started" listen=(\S+)`),
		ready: regexp.MustCompile(`msg="broker started"`),
	}
	// natsReady matches nats-server's
	//	[32035] 2026/12/01 21:21:44.734301 [INF] Listening for client connections on 127.0.0.1:35671
	//	[32035] 2026/12/01 21:21:44.734337 [INF] Server is ready
	natsReady = readiness{
		addr:  regexp.MustCompile(`Listening for client connections on (\S+)`),
		ready: regexp.MustCompile(`\] Server is ready`),
	}
)

// server is a server running as a child process on a directory of its own,
// which stop removes.
type server struct {
	name string
	dir  string
	addr string // where clients connect, host:port
	cmd  *exec.Cmd
	log  *logLines
	done chan struct{} // closed once the process has exited
}

// startServer runs argv in dir (which it takes ownership of: stop, or a
// failed start, removes it) and returns once the server's log says it
// accepts clients and a dial to its address succeeds.
func startServer(ctx context.Context, name, dir string, argv []string, r readiness) (*server, error) {
	s := &server{name: name, dir: dir, done: make(chan struct{})}
	addrCh := make(chan string, 1)
	var addr string
	s.log = newLogLines(func(line string) {
		// Runs on exec's copying goroutine, one line at a time.
		if m := r.addr.FindStringSubmatch(line); m != nil {
			addr = m[1]
		}
		if addr != "" && r.ready.MatchString(line) {
			select {
			case addrCh <- addr:
			default:
			}
		}
	})
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Dir = dir
	s.cmd.Stdout = s.log
	s.cmd.Stderr = s.log
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w: %s: %v", ErrServer, name, err)
	}
	go func() {
		s.cmd.Wait()
		close(s.done)
	}()
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case s.addr = <-addrCh:
	case <-s.done:
		err := fmt.Errorf("%w: %s exited before it was ready (%v): %s", ErrServer, name, s.cmd.ProcessState, s.log.tail())
		s.stop()
		return nil, err
	case <-timer.C:
		err := fmt.Errorf("%w: %s not ready in %v: %s", ErrServer, name, readyTimeout, s.log.tail())
		s.stop()
		return nil, err
	case <-ctx.Done():
		s.stop()
		return nil, ctx.Err()
	}
	conn, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("%w: %s said it listens on %s: %v", ErrServer, name, s.addr, err)
	}
	conn.Close()
	return s, nil
}

// pid is the server's process id.
func (s *server) pid() int { return s.cmd.Process.Pid }

// stop ends the server, gracefully if it will, and removes its directory.
func (s *server) stop() {
	select {
	case <-s.done:
	default:
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(stopTimeout):
			s.cmd.Process.Kill()
			<-s.done
		}
	}
	os.RemoveAll(s.dir)
}

// natsConfig is nats-server's configuration for a run: loopback on a port
// the server picks, JetStream with file storage under dir. JetStream's
// default fsync is lazy (every 2 minutes); syncAlways makes it fsync
// every write before acknowledging it.
func natsConfig(dir string, syncAlways bool) string {
	sync := ""
	if syncAlways {
		sync = "\n\tsync_interval: always"
	}
	return fmt.Sprintf("listen: 127.0.0.1:-1\njetstream {\n\tstore_dir: %s%s\n}\n",
		strconv.Quote(filepath.Join(dir, "jetstream")), sync)
}

// logLines is an io.Writer for a child's output that hands each complete
// line to a function and keeps the last few for error messages.
type logLines struct {
	onLine func(string)
	mu     struct {
		sync.Mutex
		partial []byte
		last    []string // at most logTail lines, oldest first
	}
}

// logTail is how many lines of a child's output an error quotes.
const logTail = 8

func newLogLines(onLine func(string)) *logLines {
	return &logLines{onLine: onLine}
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.partial = append(l.mu.partial, p...)
	for {
		i := bytes.IndexByte(l.mu.partial, '\n')
		if i < 0 {
			break
		}
		line := string(l.mu.partial[:i])
		l.mu.partial = l.mu.partial[i+1:]
		if len(l.mu.last) == logTail {
			l.mu.last = l.mu.last[1:]
		}
		l.mu.last = append(l.mu.last, line)
		l.onLine(line)
	}
	return len(p), nil
}

// tail returns the last lines written, joined by " | ".
func (l *logLines) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := slices.Clone(l.mu.last)
	if len(l.mu.partial) > 0 {
		lines = append(lines, string(l.mu.partial))
	}
	return strings.Join(lines, " | ")
}
