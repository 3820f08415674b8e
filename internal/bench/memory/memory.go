package memory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/bench"
	"github.com/rmq-go/rmq/internal/bench/child"
)

// Names and shapes of what the probe creates on the broker.
const (
	// probeTopic is the empty topic the idle connections query and the
	// long-polls wait on.
	probeTopic  = "MemProbe"
	probeQueues = 16
	probeGroup  = "memprobe"
	// backlogTopic holds the backlog, written by bench.Produce.
	backlogTopic  = "MemProbeBacklog"
	backlogQueues = 8
	// The backlog's load: batches of backlogBatch messages over
	// backlogConns connections with backlogInFlight batches in flight on
	// each, enough to keep the broker's group commit busy.
	backlogBatch    = 32
	backlogConns    = 4
	backlogInFlight = 8
	// dialers is how many connections are being opened at once.
	dialers = 16
	// restartTimeout bounds the broker's start on the backlog.
	restartTimeout = 10 * time.Minute
	// controlFiles is the open files the probe keeps beyond its
	// connections: the control connection, the executable, pipes.
	controlFiles = 64
)

// Stage is one reading of the broker's memory.
type Stage struct {
	Name   string
	Memory bench.Memory
	Note   string
}

// Report is the outcome of Run.
type Report struct {
	Stages   []Stage
	Conns    int
	Messages int64
	Size     int
	Polls    int
	Settle   time.Duration
	// BacklogRate is the msgs/s at which the backlog was written.
	BacklogRate float64
	// DataBytes is the size of the broker's data directory with the
	// backlog stored.
	DataBytes int64
	// RestartReady is how long the broker took, started again on the
	// backlog, from exec to accepting clients.
	RestartReady time.Duration
}

// Run starts the broker as a child process on a fresh data directory and
// reads its memory at each stage of the package documentation. It writes
// a line per stage, and the backlog's progress, to log (which may be
// nil). The broker is stopped and its directory removed before Run
// returns, whether it succeeded or not.
func Run(ctx context.Context, opts Options, log io.Writer) (Report, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return Report{}, err
	}
	if log == nil {
		log = io.Discard
	}
	if _, err := bench.ProcessMemory(os.Getpid()); err != nil {
		return Report{}, err
	}
	if err := raiseFileLimit(o.Conns + o.pollConns() + controlFiles); err != nil {
		return Report{}, err
	}
	dir, err := os.MkdirTemp(o.TempDir, "rmq-memory-*")
	if err != nil {
		return Report{}, err
	}
	defer os.RemoveAll(dir)
	p := &prober{o: o, dir: dir, log: log,
		rep: Report{Conns: o.Conns, Messages: o.Messages, Size: o.Size, Polls: o.Polls, Settle: o.Settle}}
	defer p.stopBroker()
	for _, stage := range []func(context.Context) error{p.idle, p.connections, p.backlog, p.restart, p.polls} {
		if err := stage(ctx); err != nil {
			return p.rep, err
		}
	}
	return p.rep, nil
}

// prober is the state of one Run.
type prober struct {
	o      Options
	dir    string // the broker's working directory, config and data
	log    io.Writer
	broker *child.Process
	ctl    *probeConn // a connection for setup requests
	rep    Report
}

// config is the broker's config file: its defaults but for maxConns,
// raised so the measured connections fit beside the probe's own.
func (p *prober) config() string {
	return fmt.Sprintf("remoting:\n  maxConns: %d\n", p.o.Conns+controlFiles)
}

// startBroker starts the broker on the data directory, new or not, and
// opens the control connection.
func (p *prober) startBroker(ctx context.Context) error {
	cfg := filepath.Join(p.dir, "broker.yaml")
	if err := os.WriteFile(cfg, []byte(p.config()), 0o600); err != nil {
		return err
	}
	b, err := child.Start(ctx, child.Options{
		Name: "broker",
		Argv: []string{p.o.Broker, "--config", cfg, "--data-dir", filepath.Join(p.dir, "data"),
			"--listen", "127.0.0.1:0", "--namesrv-listen", "", "--http-listen", ""},
		Dir:     p.dir,
		Ready:   child.BrokerReady,
		Timeout: restartTimeout,
	})
	if err != nil {
		return err
	}
	p.broker = b
	p.ctl, err = dial(ctx, b.Addr(), nil)
	return err
}

// stopBroker closes the control connection and stops the broker, if
// running.
func (p *prober) stopBroker() {
	if p.ctl != nil {
		p.ctl.close()
		p.ctl = nil
	}
	if p.broker != nil {
		p.broker.Stop()
		p.broker = nil
	}
}

// measure waits Settle and reads the broker's memory.
func (p *prober) measure(ctx context.Context) (bench.Memory, error) {
	select {
	case <-time.After(p.o.Settle):
	case <-ctx.Done():
		return bench.Memory{}, ctx.Err()
	}
	if st, exited := p.broker.Exited(); exited {
		return bench.Memory{}, fmt.Errorf("%w: the broker exited (%v): %s", ErrProbe, st, p.broker.LogTail())
	}
	return bench.ProcessMemory(p.broker.PID())
}

// record adds a stage to the report and logs it.
func (p *prober) record(name string, m bench.Memory, note string) {
	p.rep.Stages = append(p.rep.Stages, Stage{Name: name, Memory: m, Note: note})
	fmt.Fprintf(p.log, "%-28s RSS %s  VmHWM %s  %s\n", name, mib(m.RSS), mib(m.HWM), note)
}

// measureAs measures and records a stage.
func (p *prober) measureAs(ctx context.Context, name, note string) error {
	m, err := p.measure(ctx)
	if err == nil {
		p.record(name, m, note)
	}
	return err
}

// last is the memory of the last stage recorded.
func (p *prober) last() bench.Memory { return p.rep.Stages[len(p.rep.Stages)-1].Memory }

// idle is stage 1: the broker just started on an empty directory.
func (p *prober) idle(ctx context.Context) error {
	if err := p.startBroker(ctx); err != nil {
		return err
	}
	return p.measureAs(ctx, "1. idle after start", "empty data directory")
}

// connections is stage 2: Conns connections, each having been answered
// one GET_MAX_OFFSET, held open; then closed.
func (p *prober) connections(ctx context.Context) error {
	if err := p.ctl.createTopic(probeTopic, probeQueues); err != nil {
		return err
	}
	base := p.last()
	conns := make([]*probeConn, p.o.Conns)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.close()
			}
		}
	}()
	var (
		next  atomic.Int64
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for range dialers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(conns) || ctx.Err() != nil {
					return
				}
				c, err := dial(ctx, p.broker.Addr(), sourceAddr(i))
				if err == nil {
					conns[i] = c
					_, err = c.maxOffset(probeTopic, i%probeQueues)
					c.hold()
				}
				if err != nil {
					if !errors.Is(err, ErrProbe) {
						err = fmt.Errorf("%w: %v", ErrProbe, err)
					}
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("connection %d of %d, from %v: %w", i+1, len(conns), sourceAddr(i).IP, err)
					}
					mu.Unlock()
					next.Store(int64(len(conns)))
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m, err := p.measure(ctx)
	if err != nil {
		return err
	}
	p.record(fmt.Sprintf("2. %s idle connections", count(int64(len(conns)))), m,
		fmt.Sprintf("%s, %s per connection", delta(m.RSS-base.RSS), perItem(m.RSS-base.RSS, len(conns))))
	for i, c := range conns {
		c.close()
		conns[i] = nil
	}
	m, err = p.measure(ctx)
	if err != nil {
		return err
	}
	p.record("2. connections closed", m, delta(m.RSS-base.RSS)+" over idle")
	return nil
}

// restartBroker stops the broker, checks it stopped cleanly, and starts it
// again on the same directory. It returns how long the start took, from
// exec to accepting clients.
func (p *prober) restartBroker(ctx context.Context) (time.Duration, error) {
	b := p.broker
	p.stopBroker()
	if st, _ := b.Exited(); !st.Success() {
		return 0, fmt.Errorf("%w: the broker's stop ended with %v: %s", ErrProbe, st, b.LogTail())
	}
	t0 := time.Now()
	if err := p.startBroker(ctx); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// backlog is stage 3: Messages messages written, none consumed. It runs
// on a broker process of its own, so that its VmHWM is the backlog's peak
// and not what the connections of stage 2 left behind.
func (p *prober) backlog(ctx context.Context) error {
	if _, err := p.restartBroker(ctx); err != nil {
		return err
	}
	sum, err := bench.Produce(ctx, bench.Options{
		Broker: p.broker.Addr(), Topic: backlogTopic, Queues: backlogQueues, Size: p.o.Size,
		Batch: backlogBatch, Conns: backlogConns, InFlight: backlogInFlight, Count: p.o.Messages,
		Progress: 5 * time.Second,
	}, p.log)
	if err != nil {
		return err
	}
	if sum.Errors > 0 || sum.Messages != p.o.Messages {
		return fmt.Errorf("%w: backlog: %d of %d messages stored, %d failed requests: %v",
			ErrProbe, sum.Messages, p.o.Messages, sum.Errors, sum.ErrorSamples)
	}
	p.rep.BacklogRate = sum.MsgsPerSec
	p.rep.DataBytes = dirSize(filepath.Join(p.dir, "data"))
	return p.measureAs(ctx, fmt.Sprintf("3. %s-message backlog", count(p.o.Messages)),
		fmt.Sprintf("written at %s msgs/s; %s on disk", rate(sum.MsgsPerSec), size(p.rep.DataBytes)))
}

// restart is stage 3's second reading: the broker stopped and started
// again on the backlog, which it recovers.
func (p *prober) restart(ctx context.Context) error {
	ready, err := p.restartBroker(ctx)
	if err != nil {
		return err
	}
	p.rep.RestartReady = ready
	var total int64
	for q := range backlogQueues {
		off, err := p.ctl.maxOffset(backlogTopic, q)
		if err != nil {
			return err
		}
		total += off
	}
	if total != p.o.Messages {
		return fmt.Errorf("%w: after the restart the backlog's queues hold %d messages, not %d", ErrProbe, total, p.o.Messages)
	}
	return p.measureAs(ctx, "3. restarted on the backlog", fmt.Sprintf("ready in %v", p.rep.RestartReady.Round(time.Millisecond)))
}

// polls is stage 4: Polls long-polls held on the empty probe topic.
func (p *prober) polls(ctx context.Context) error {
	base := p.last()
	offsets := make([]int64, probeQueues)
	for q := range offsets {
		off, err := p.ctl.maxOffset(probeTopic, q)
		if err != nil {
			return err
		}
		offsets[q] = off
	}
	conns := make([]*probeConn, p.o.pollConns())
	var (
		answered  atomic.Int64
		firstCode atomic.Int32
		readers   sync.WaitGroup
	)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.close()
			}
		}
		readers.Wait()
	}()
	for i := range conns {
		c, err := dial(ctx, p.broker.Addr(), nil)
		if err != nil {
			return fmt.Errorf("%w: long-poll connection %d: %v", ErrProbe, i+1, err)
		}
		conns[i] = c
		readers.Go(func() {
			// Counts responses until the connection closes: a held
			// pull sends none while the stage lasts.
			for {
				resp, err := c.recv(time.Time{})
				if err != nil {
					return
				}
				if answered.Add(1) == 1 {
					firstCode.Store(int32(resp.Code))
				}
			}
		})
	}
	for i := range p.o.Polls {
		q := i % probeQueues
		if err := conns[i%len(conns)].send(remoting.PullMessage, pullHeader(probeGroup, probeTopic, q, offsets[q])); err != nil {
			return fmt.Errorf("%w: long-poll %d: %v", ErrProbe, i+1, err)
		}
	}
	m, err := p.measure(ctx)
	if err != nil {
		return err
	}
	if n := answered.Load(); n > 0 {
		return fmt.Errorf("%w: %d of %d long-polls were answered instead of held, the first with %s",
			ErrProbe, n, p.o.Polls, remoting.ResponseCode(firstCode.Load()))
	}
	p.record(fmt.Sprintf("4. %s held long-polls", count(int64(p.o.Polls))), m,
		fmt.Sprintf("%s, %s per poll", delta(m.RSS-base.RSS), perItem(m.RSS-base.RSS, p.o.Polls)))
	return nil
}

// dirSize is the total size of the files under dir.
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// String formats the report as a Markdown table followed by a note on how
// it was measured.
func (r Report) String() string {
	rows := [][]string{{"stage", "RSS", "VmHWM", "note"}}
	for _, s := range r.Stages {
		rows = append(rows, []string{s.Name, mib(s.Memory.RSS), mib(s.Memory.HWM), s.Note})
	}
	var b strings.Builder
	bench.WriteTable(&b, rows)
	b.WriteString("\n")
	sources := (r.Conns + connsPerSource - 1) / connsPerSource
	b.WriteString(bench.Wrap(fmt.Sprintf("The broker process's VmRSS and VmHWM (its peak RSS since it started; "+
		"stage 3 and its restart each start a new process) from /proc/<pid>/status, read %v after each stage was set up; "+
		"changes are against the stage before. The broker runs on loopback with its defaults but for maxConns (%d). "+
		"Stage 2: connections from %d loopback source address%s, each answered one GET_MAX_OFFSET. "+
		"Stage 3: %d-byte bodies in batches of %d, %d connections × %d in flight, none consumed. "+
		"Stage 4: pulls at the max offset of an empty %d-queue topic, %d per connection, suspend %v; "+
		"a poll's figure includes its share of a connection.",
		r.Settle, r.Conns+controlFiles, sources, plural(sources, "es"), r.Size, backlogBatch, backlogConns, backlogInFlight,
		probeQueues, pollsPerConn, pollSuspend), 80, ""))
	return b.String()
}

// plural is suffix unless n is 1.
func plural(n int, suffix string) string {
	if n == 1 {
		return ""
	}
	return suffix
}

// mib formats a byte count in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// delta formats a change of RSS.
func delta(n int64) string {
	sign := "+"
	if n < 0 {
		sign, n = "−", -n
	}
	return sign + mib(n)
}

// perItem formats a change of RSS divided among n things.
func perItem(d int64, n int) string {
	if n == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f KiB", float64(d)/float64(n)/1024)
}

// size formats a byte count in the largest fitting binary unit.
func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
}

// count formats n with thousands separators.
func count(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// rate formats msgs/s to three significant digits.
func rate(v float64) string {
	switch {
	case v >= 999_500:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 999.5:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
