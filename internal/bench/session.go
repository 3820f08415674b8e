package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
)

const (
	// maxErrorSamples is how many distinct error texts a run keeps for its
	// summary.
	maxErrorSamples = 5
	// maxHistograms bounds the latency histograms of a run, so memory does
	// not grow with Conns×InFlight; workers share them round robin.
	maxHistograms = 16
	// failureBackoff is how long a worker waits after a request failed
	// without a response (a refused dial, a lost connection), so a dead
	// broker is not hammered in a tight loop.
	failureBackoff = 50 * time.Millisecond
)

// session is what the workers of one Produce or Consume run share: the
// clients, the counters that progress lines and the summary are made of,
// and the two goroutines that watch the workers (progress and timeouts).
type session struct {
	opts    Options
	out     io.Writer
	clk     clock
	ctx     context.Context // the caller's; ends the run early when done
	clients []*remoting.Client
	admin   string // the address setup requests go to
	workers []*worker
	grpc    []*grpcConn        // under ProtocolGRPC, one per connection
	hists   []*lockedHistogram // send-to-response latency of answered requests

	// origin is the wall time request ages are measured from by the
	// timeout watchdog, which keeps real time even under a virtual clock.
	origin time.Time

	start    time.Duration // clock time the measured part began
	cpu      time.Duration // broker CPU used over the run; see Options.BrokerPID
	deadline time.Duration // start + Duration; meaningful when Duration > 0
	elapsed  time.Duration // set when the workers have finished

	messages atomic.Int64 // acknowledged (Produce) or read (Consume)
	bytes    atomic.Int64 // body bytes of those messages
	requests atomic.Int64 // requests that got a response or failed
	errors   atomic.Int64 // requests that failed

	samples struct {
		sync.Mutex
		list []string // first distinct error texts, at most maxErrorSamples
	}

	quit chan struct{}  // closed when the workers have finished
	aux  sync.WaitGroup // the progress reporter and the watchdog
}

// newSession returns a session with nclients clients and nworkers workers,
// worker i using client i mod nclients.
func newSession(ctx context.Context, opts Options, out io.Writer, clk clock, nclients, nworkers int) *session {
	if out == nil {
		out = io.Discard
	}
	s := &session{opts: opts, out: out, clk: clk, ctx: ctx, origin: time.Now(), admin: opts.Broker}
	if opts.Protocol == ProtocolGRPC {
		s.admin = opts.Admin
	}
	// Failures are counted and sampled into the summary; the clients' own
	// logs would only repeat them.
	quiet := slog.New(slog.DiscardHandler)
	for range nclients {
		s.clients = append(s.clients, remoting.NewClient(remoting.ClientOptions{DialTimeout: opts.Timeout, Logger: quiet}))
	}
	s.addHistograms(nworkers)
	for i := range nworkers {
		w := &worker{s: s, client: s.clients[i%nclients], hist: s.hists[i%len(s.hists)]}
		w.renew()
		s.workers = append(s.workers, w)
	}
	return s
}

// addHistograms gives the session the histograms of n request streams,
// at most maxHistograms in all.
func (s *session) addHistograms(n int) {
	for len(s.hists) < min(n, maxHistograms) {
		s.hists = append(s.hists, new(lockedHistogram))
	}
}

// close releases the workers' contexts and closes the clients.
func (s *session) close() {
	for _, c := range s.grpc {
		c.close()
	}
	for _, w := range s.workers {
		w.mu.Lock()
		w.mu.cancel()
		w.mu.Unlock()
	}
	for _, cl := range s.clients {
		_ = cl.Close()
	}
}

// setup sends a request that must succeed before the run starts: a
// transport failure or a code other than SUCCESS is an error, the latter
// wrapping ErrRefused.
func (s *session) setup(cl *remoting.Client, code int16, ext map[string]string) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.Timeout)
	defer cancel()
	resp, err := cl.Invoke(ctx, s.admin, remoting.NewRequest(code, ext, nil))
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", remoting.RequestCode(code), err)
	}
	if resp.Code != remoting.Success {
		return nil, fmt.Errorf("%w %s with %s: %s", ErrRefused, remoting.RequestCode(code), remoting.ResponseCode(resp.Code), resp.Remark)
	}
	return resp, nil
}

// run starts the clock, runs loop once per worker, and returns when every
// worker has returned and the watching goroutines have stopped. prepare,
// if not nil, runs once the start time is known and before any worker.
func (s *session) run(prepare func(), loop func(w *worker)) {
	s.runLoops(prepare, len(s.workers), func(i int) { loop(s.workers[i]) })
}

// runLoops is run with n loops that are not workers: loop(i) for each i
// below n, each on a goroutine of its own.
func (s *session) runLoops(prepare func(), n int, loop func(i int)) {
	cpu0, cpuErr := s.brokerCPU()
	defer func() {
		if cpu1, err := s.brokerCPU(); err == nil && cpuErr == nil {
			s.cpu = cpu1 - cpu0
		}
	}()
	s.start = s.clk.now()
	s.deadline = s.start + s.opts.Duration
	if prepare != nil {
		prepare()
	}
	s.quit = make(chan struct{})
	s.aux.Go(s.watchdog)
	if s.opts.Progress > 0 {
		s.aux.Go(s.report)
	}
	var workers sync.WaitGroup
	for i := range n {
		workers.Go(func() { loop(i) })
	}
	workers.Wait()
	s.elapsed = s.clk.now() - s.start
	close(s.quit)
	s.aux.Wait()
}

// brokerCPU returns the broker's CPU time so far, or 0 when
// Options.BrokerPID is not set.
func (s *session) brokerCPU() (time.Duration, error) {
	if s.opts.BrokerPID == 0 {
		return 0, nil
	}
	return ProcessCPU(s.opts.BrokerPID)
}

// pastDeadline reports whether the run's Duration is over.
func (s *session) pastDeadline(t time.Duration) bool {
	return s.opts.Duration > 0 && t >= s.deadline
}

// backoff pauses a worker after a failed request. It reports false when the
// run's context ended meanwhile.
func (s *session) backoff() bool {
	return s.clk.sleepUntil(s.ctx, s.clk.now()+failureBackoff) == nil
}

// failed counts one failed request: either err (no response) or a response
// with an error code.
func (s *session) failed(resp *remoting.Command, err error) {
	s.errors.Add(1)
	s.samples.Lock()
	defer s.samples.Unlock()
	if len(s.samples.list) >= maxErrorSamples {
		return
	}
	var text string
	if err != nil {
		text = err.Error()
	} else {
		text = remoting.ResponseCode(resp.Code).String()
		if resp.Remark != "" {
			text += ": " + resp.Remark
		}
	}
	if !slices.Contains(s.samples.list, text) {
		s.samples.list = append(s.samples.list, text)
	}
}

// lockedHistogram is a Histogram shared by several workers.
type lockedHistogram struct {
	mu struct {
		sync.Mutex
		h Histogram
	}
}

func (l *lockedHistogram) record(d time.Duration) {
	l.mu.Lock()
	l.mu.h.Record(d)
	l.mu.Unlock()
}

// mergeLatencies fills h with every worker's latencies so far.
func (s *session) mergeLatencies(h *Histogram) {
	h.Reset()
	for _, l := range s.hists {
		l.mu.Lock()
		h.Merge(&l.mu.h)
		l.mu.Unlock()
	}
}

// report writes a progress line every Progress until the run ends.
func (s *session) report() {
	t := time.NewTicker(s.opts.Progress)
	defer t.Stop()
	var (
		h         = new(Histogram)
		lastAt    = s.start
		lastMsgs  int64
		lastBytes int64
	)
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		now := s.clk.now()
		msgs, bytes := s.messages.Load(), s.bytes.Load()
		s.mergeLatencies(h)
		fmt.Fprintln(s.out, progressLine(now-s.start, now-lastAt, msgs-lastMsgs, bytes-lastBytes, s.errors.Load(), h.Quantile(0.99)))
		lastAt, lastMsgs, lastBytes = now, msgs, bytes
	}
}

// progressLine formats one progress line: the time into the run, the
// message and byte rates over the last interval, the errors so far and the
// p99 latency so far.
func progressLine(at, interval time.Duration, msgs, bytes, errors int64, p99 time.Duration) string {
	var mps, mbps float64
	if secs := interval.Seconds(); secs > 0 {
		mps = float64(msgs) / secs
		mbps = float64(bytes) / 1e6 / secs
	}
	return fmt.Sprintf("%8s %10.0f msgs/s %9.2f MB/s %8d errors   p99 %v", short(at), mps, mbps, errors, short(p99))
}

// watchdog abandons requests that have waited longer than Timeout, checking
// four times per Timeout, until the run ends.
func (s *session) watchdog() {
	t := time.NewTicker(max(s.opts.Timeout/4, time.Millisecond))
	defer t.Stop()
	limit := int64(s.opts.Timeout)
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		now := int64(time.Since(s.origin))
		for _, w := range s.workers {
			if at := w.sentAt.Load(); at > 0 && now-at > limit && w.sentAt.CompareAndSwap(at, -1) {
				w.mu.Lock()
				w.mu.cancel()
				w.mu.Unlock()
			}
		}
	}
}

// summary returns the totals of the finished run.
func (s *session) summary() Summary {
	h := new(Histogram)
	s.mergeLatencies(h)
	sum := Summary{
		Messages: s.messages.Load(),
		Bytes:    s.bytes.Load(),
		Requests: s.requests.Load(),
		Errors:   s.errors.Load(),
		Elapsed:  s.elapsed,
		P50:      h.Quantile(0.50),
		P90:      h.Quantile(0.90),
		P99:      h.Quantile(0.99),
		P999:     h.Quantile(0.999),
		Max:      h.Max(),
	}
	if s.cpu > 0 {
		sum.BrokerCPU = s.cpu
		if sum.Messages > 0 {
			sum.BrokerCPUPerMsg = s.cpu / time.Duration(sum.Messages)
		}
	}
	if secs := s.elapsed.Seconds(); secs > 0 {
		sum.MsgsPerSec = float64(sum.Messages) / secs
		sum.MBPerSec = float64(sum.Bytes) / 1e6 / secs
	}
	s.samples.Lock()
	sum.ErrorSamples = slices.Clone(s.samples.list)
	s.samples.Unlock()
	return sum
}

// worker runs one stream of requests, one at a time, on one client.
type worker struct {
	s      *session
	client *remoting.Client
	// req is the request the worker sends; the loop rewrites its extFields
	// and body between calls, which is safe because Invoke has encoded
	// them by the time it returns.
	req remoting.Command

	hist *lockedHistogram // where its latencies go, shared with other workers

	// sentAt is the wall time (ns since the session's origin, plus one) at
	// which the request in flight was sent, 0 when none is, and -1 once
	// the watchdog has given up on it and cancels ctx.
	sentAt atomic.Int64
	// ctx bounds the request in flight. Only the worker's goroutine
	// replaces it, under mu; the watchdog ends it through mu.cancel.
	ctx context.Context
	mu  struct {
		sync.Mutex
		cancel context.CancelFunc
	}
}

// renew gives the worker a fresh context after the old one was cancelled.
func (w *worker) renew() {
	ctx, cancel := context.WithCancel(w.s.ctx)
	w.mu.Lock()
	old := w.mu.cancel
	w.ctx, w.mu.cancel = ctx, cancel
	w.mu.Unlock()
	if old != nil {
		old()
	}
}

// invoke sends w.req and waits for its response for about Timeout at most.
// It counts the request and records its latency when answered. An error is
// either the run's context ending, ErrTimeout, or the client's.
func (w *worker) invoke() (*remoting.Command, error) {
	s := w.s
	if w.ctx.Err() != nil {
		w.renew()
	}
	sent := int64(time.Since(s.origin)) + 1
	w.sentAt.Store(sent)
	t0 := s.clk.now()
	resp, err := w.client.Invoke(w.ctx, s.opts.Broker, &w.req)
	lat := s.clk.now() - t0
	if !w.sentAt.CompareAndSwap(sent, 0) {
		// The watchdog gave up on this call and is cancelling w.ctx.
		<-w.ctx.Done()
		w.sentAt.Store(0)
		w.renew()
		if err != nil && s.ctx.Err() == nil {
			err = fmt.Errorf("%w: %s unanswered after %v", ErrTimeout, remoting.RequestCode(w.req.Code), s.opts.Timeout)
		}
	}
	if err != nil && s.ctx.Err() != nil {
		return nil, err // the run was stopped; this request does not count
	}
	s.requests.Add(1)
	if err == nil {
		w.hist.record(lat)
	}
	return resp, err
}

// short rounds d to three significant digits for display.
func short(d time.Duration) time.Duration {
	unit := time.Duration(1)
	for d/unit >= 1000 {
		unit *= 10
	}
	return d.Round(unit)
}
