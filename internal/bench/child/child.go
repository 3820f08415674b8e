package child

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNotReady is returned by Start, wrapped with what went wrong and the
// child's last log lines, when the child exited, did not become ready in
// time, or said it listens on an address that refuses a dial.
var ErrNotReady = errors.New("child: server did not start")

// Defaults of Options.
const (
	// DefaultTimeout bounds a start. Servers start on an empty directory
	// in well under a second; recovering a large one takes longer, so
	// callers that restart on data raise it.
	DefaultTimeout = 30 * time.Second
	// DefaultStopTimeout bounds a graceful stop before the child is killed.
	DefaultStopTimeout = 20 * time.Second
)

// Readiness tells from a server's log lines when it accepts clients and
// where.
type Readiness struct {
	// Addr finds the client address: its first submatch.
	Addr *regexp.Regexp
	// Ready matches the line that says the server accepts clients; it may
	// be the same line as Addr's.
	Ready *regexp.Regexp
}

// BrokerReady matches this project's broker, which logs
//
//	time=... level=INFO msg="broker started" listen=127.0.0.1:43839 namesrv=off ...
var BrokerReady = Readiness{
	Addr:  regexp.MustCompile(`msg="broker started" listen=(\S+)`),
	Ready: regexp.MustCompile(`msg="broker started"`),
}

// Options describes a child to start. Argv and Ready are required; the
// zero value of every other field means its default.
type Options struct {
	// Name names the server in errors; default the base name of Argv[0].
	Name string
	// Argv is the program and its arguments.
	Argv []string
	// Dir is the child's working directory; default this process's.
	Dir string
	// Env is added to this process's environment for the child.
	Env []string
	// Ready says when the child accepts clients.
	Ready Readiness
	// Timeout bounds the start, from exec to a successful dial; default
	// DefaultTimeout.
	Timeout time.Duration
	// StopTimeout bounds Stop's wait after SIGTERM; default
	// DefaultStopTimeout.
	StopTimeout time.Duration
}

// Process is a started child.
type Process struct {
	o    Options
	addr string // where clients connect, host:port
	cmd  *exec.Cmd
	log  *logLines
	done chan struct{} // closed once the child has exited
}

// Start runs o.Argv and returns once the child's log says it accepts
// clients and a dial to the address it names succeeds. An error other
// than ctx's wraps ErrNotReady; either way the child has exited by then.
func Start(ctx context.Context, o Options) (*Process, error) {
	if len(o.Argv) == 0 || o.Ready.Addr == nil || o.Ready.Ready == nil {
		panic("child: Start without Argv or Ready")
	}
	if o.Name == "" {
		o.Name = filepath.Base(o.Argv[0])
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	p := &Process{o: o, done: make(chan struct{})}
	addrCh := make(chan string, 1)
	var addr string
	p.log = newLogLines(func(line string) {
		// Runs on exec's copying goroutine, one line at a time.
		if m := o.Ready.Addr.FindStringSubmatch(line); m != nil {
			addr = m[1]
		}
		if addr != "" && o.Ready.Ready.MatchString(line) {
			select {
			case addrCh <- addr:
			default:
			}
		}
	})
	p.cmd = exec.Command(o.Argv[0], o.Argv[1:]...)
	p.cmd.Dir = o.Dir
	if len(o.Env) > 0 {
		p.cmd.Env = append(os.Environ(), o.Env...)
	}
	p.cmd.Stdout = p.log
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotReady, o.Name, err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	timer := time.NewTimer(o.Timeout)
	defer timer.Stop()
	select {
	case p.addr = <-addrCh:
	case <-p.done:
		return nil, fmt.Errorf("%w: %s exited before it was ready (%v): %s", ErrNotReady, o.Name, p.cmd.ProcessState, p.log.tail())
	case <-timer.C:
		err := fmt.Errorf("%w: %s not ready in %v: %s", ErrNotReady, o.Name, o.Timeout, p.log.tail())
		p.Stop()
		return nil, err
	case <-ctx.Done():
		p.Stop()
		return nil, ctx.Err()
	}
	conn, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
	if err != nil {
		p.Stop()
		return nil, fmt.Errorf("%w: %s said it listens on %s: %v", ErrNotReady, o.Name, p.addr, err)
	}
	conn.Close()
	return p, nil
}

// Addr is the address the child accepts clients on, host:port.
func (p *Process) Addr() string { return p.addr }

// PID is the child's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the child has exited, and if so how.
func (p *Process) Exited() (*os.ProcessState, bool) {
	select {
	case <-p.done:
		return p.cmd.ProcessState, true
	default:
		return nil, false
	}
}

// LogTail returns the child's last few output lines, joined by " | ",
// for error messages.
func (p *Process) LogTail() string { return p.log.tail() }

// Stop ends the child, gracefully if it will, and returns once it has
// exited.
func (p *Process) Stop() {
	select {
	case <-p.done:
	default:
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(p.o.StopTimeout):
			p.cmd.Process.Kill()
			<-p.done
		}
	}
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
