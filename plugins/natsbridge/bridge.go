package natsbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rmq-go/rmq/core/outbox"
)

// readBatch bounds the events read from the outbox at once.
const readBatch = 256

// Bridge publishes the broker's retry and dead-letter events to NATS.
type Bridge struct {
	opts   Options
	src    Source
	log    *slog.Logger
	filter filter

	nc    *nats.Conn
	js    jetstream.JetStream // nil in core mode
	enc   *encoder
	epoch string

	// Loop state, touched by the run goroutine alone.
	win         window
	buf         []outbox.Event
	failing     bool
	failedAt    time.Time
	backoff     time.Duration
	provisioned bool
	saved       int64 // the cursor last written
	savedAt     time.Time

	// outcomes holds publish outcomes reported by NATS callbacks until the
	// run goroutine takes them.
	outcomes struct {
		sync.Mutex
		list []outcome
	}
	outcomeSig  chan struct{} // cap 1: outcomes were added
	reconnected chan struct{} // cap 1: the connection came (back) up

	st     stats
	resend *resendService

	quit     chan struct{} // closed by Shutdown
	hurry    chan struct{} // closed when Shutdown's context ends
	wg       sync.WaitGroup
	startMu  sync.Mutex
	started  bool
	stopOnce sync.Once
}

// outcome is one publish's result.
type outcome struct {
	msg *nats.Msg
	dup bool
	err error
}

// stats are the figures Status reports, written by the run goroutine.
type stats struct {
	cursor, head atomic.Int64
	cursorMS     atomic.Int64
	inFlight     atomic.Int64
	published    atomic.Int64
	duplicates   atomic.Int64
	expired      atomic.Int64
	filtered     atomic.Int64
	unreadable   atomic.Int64
	failures     atomic.Int64
	backingOff   atomic.Bool
	stopped      atomic.Bool
	lastErr      atomic.Pointer[errorNote]
	// downSince is when the connection to NATS was lost (Unix ms), zero
	// while connected.
	downSince atomic.Int64
}

type errorNote struct {
	msg  string
	at   time.Time
	down bool // the note reports an outage
}

// New validates opts and builds a bridge; Start starts it.
func New(opts Options) (*Bridge, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	b := &Bridge{
		opts:        opts,
		src:         opts.Source,
		log:         opts.Logger.With("component", "natsbridge"),
		outcomeSig:  make(chan struct{}, 1),
		reconnected: make(chan struct{}, 1),
		quit:        make(chan struct{}),
		hurry:       make(chan struct{}),
		backoff:     opts.BackoffMin,
	}
	b.filter = newFilter(&opts)
	return b, nil
}

// Start loads the cursor, connects to NATS (in the background: an
// unreachable server is not an error) and starts publishing. It returns
// an error only for what retrying cannot fix, such as a missing
// credentials file.
func (b *Bridge) Start() error {
	b.startMu.Lock()
	defer b.startMu.Unlock()
	if b.started {
		panic("natsbridge: Start called twice")
	}
	epoch, err := b.loadEpoch()
	if err != nil {
		return err
	}
	b.epoch = epoch
	b.enc = newEncoder(&b.opts, epoch)

	minOff, maxOff := b.src.EventOffsets()
	cursor, ok := b.src.Progress(cursorName)
	switch {
	case !ok:
		cursor = minOff
	case cursor > maxOff:
		b.log.Warn("cursor is past the end of the outbox; starting at the end", "cursor", cursor, "end", maxOff)
		cursor = maxOff
	}
	b.win = newWindow(b.opts.MaxInFlight, cursor)
	b.saved, b.savedAt = cursor, b.opts.Now()
	b.st.cursor.Store(cursor)
	b.st.head.Store(maxOff)

	b.nc, err = b.connect()
	if err != nil {
		return err
	}
	if !b.nc.IsConnected() {
		b.markDown()
	}
	if b.opts.Mode == ModeJetStream {
		b.js, err = jetstream.New(b.nc,
			jetstream.WithPublishAsyncMaxPending(2*b.opts.MaxInFlight),
			jetstream.WithPublishAsyncTimeout(b.opts.PublishTimeout),
			jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, pa *jetstream.PubAck) {
				b.addOutcome(outcome{msg: m, dup: pa.Duplicate})
			}),
			jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
				b.addOutcome(outcome{msg: m, err: err})
			}))
		if err != nil {
			b.nc.Close()
			return fmt.Errorf("natsbridge: %w", err)
		}
	}
	if b.opts.Resend {
		b.resend = newResendService(b)
		if err := b.resend.start(); err != nil {
			b.nc.Close()
			return err
		}
	}
	b.started = true
	b.log.Info("bridge started", "mode", b.opts.Mode, "cursor", cursor, "outbox", fmt.Sprintf("%d..%d", minOff, maxOff),
		"subjects", b.opts.SubjectPrefix+"."+EscapeToken(b.opts.Cluster)+".>", "epoch", epoch)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.run()
	}()
	return nil
}

// loadEpoch returns the store's epoch, creating it on first use. It tells
// message ids of a recreated store apart from the old store's.
//
// With a Resender, a new epoch is written as a record first: a record is
// durable everywhere the store is (on a replicated set, committed by the
// set) when PutRecord returns, while a progress value reaches the other
// members only with a later checkpoint. So a leader that dies right after
// creating the epoch leaves it to its successor, whose ids then match the
// ones already published and the stream's deduplication holds.
func (b *Bridge) loadEpoch() (string, error) {
	v, ok := b.src.Progress(epochName)
	if ok && v > 0 {
		return strconv.FormatInt(v, 36), nil
	}
	v = 0
	if r := b.opts.Resender; r != nil {
		raw, found, err := r.Record(epochName)
		if err != nil {
			return "", fmt.Errorf("natsbridge: read epoch: %w", err)
		}
		if found {
			v, _ = strconv.ParseInt(string(raw), 36, 64)
		}
		if v <= 0 {
			v = rand.Int64N(1<<62) + 1
			if err := r.PutRecord(epochName, []byte(strconv.FormatInt(v, 36))); err != nil {
				return "", fmt.Errorf("natsbridge: write epoch: %w", err)
			}
		}
	}
	if v <= 0 {
		v = rand.Int64N(1<<62) + 1
	}
	b.src.SetProgress(epochName, v)
	if err := b.src.FlushProgress(); err != nil {
		return "", fmt.Errorf("natsbridge: write epoch: %w", err)
	}
	return strconv.FormatInt(v, 36), nil
}

// Shutdown stops publishing, lets the publishes in flight settle (until
// ctx ends), writes the cursor durably and closes the connection. It is
// safe to call more than once.
func (b *Bridge) Shutdown(ctx context.Context) error {
	b.startMu.Lock()
	started := b.started
	b.startMu.Unlock()
	if !started {
		return ErrNotStarted
	}
	b.stopOnce.Do(func() {
		if b.resend != nil {
			b.resend.stop()
		}
		close(b.quit)
		done := make(chan struct{})
		go func() {
			b.wg.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			close(b.hurry)
			<-done
		}
	})
	return nil
}

func (b *Bridge) addOutcome(o outcome) {
	b.outcomes.Lock()
	b.outcomes.list = append(b.outcomes.list, o)
	b.outcomes.Unlock()
	signal(b.outcomeSig)
}

// run is the publishing loop.
func (b *Bridge) run() {
	defer b.finish()
	tick := time.NewTicker(b.opts.CursorInterval)
	defer tick.Stop()
	for {
		b.applyOutcomes()
		b.win.advance()
		b.maybePersist(false)
		b.publishStatus()
		select {
		case <-b.quit:
			b.drain()
			return
		default:
		}
		if b.failing {
			if !b.recover() {
				b.drain()
				return
			}
			continue
		}
		if err := b.provision(); err != nil {
			b.fail(err)
			continue
		}
		events := b.src.WaitEvents() // before reading, so no event is missed
		for b.fill() {
		}
		if b.opts.Mode == ModeCore && b.win.sent > 0 && !b.failing {
			b.flushCore()
		}
		if b.failing {
			continue
		}
		b.publishStatus()
		if b.win.room() == 0 {
			events = nil // nothing can be read until outcomes arrive
		}
		select {
		case <-b.outcomeSig:
		case <-events:
		case <-tick.C:
		case <-b.quit:
		}
	}
}

// fill reads the next outbox events into the window and publishes them.
// It reports whether it may be called again right away.
func (b *Bridge) fill() bool {
	w := &b.win
	minOff, maxOff := b.src.EventOffsets()
	b.st.head.Store(maxOff)
	if w.next < minOff {
		if !w.empty() {
			return false // publish or rewind what is read first
		}
		b.expire(w.next, minOff)
		w.reset(minOff)
	}
	n := min(int64(w.room()), maxOff-w.next, readBatch)
	if n <= 0 {
		return false
	}
	evs, err := b.src.ReadEvents(w.next, int(n), b.buf[:0])
	b.buf = evs[:0]
	defer clear(evs) // drop the bodies
	if err != nil {
		if lo, _ := b.src.EventOffsets(); w.next < lo {
			return w.empty() // retention passed us; the next call counts it
		}
		b.fail(fmt.Errorf("read outbox at %d: %w", w.next, err))
		return false
	}
	maxPayload := int(b.nc.MaxPayload())
	end := w.next + n
	i := 0
	for off := w.next; off < end; off++ {
		for i < len(evs) && evs[i].Offset < off {
			i++
		}
		if i == len(evs) || evs[i].Offset != off {
			w.push(slotDone, nil, 0) // unreadable; the broker logged it
			b.st.unreadable.Add(1)
			continue
		}
		ev := &evs[i]
		if !b.filter.pass(ev) {
			w.push(slotDone, nil, ev.Time.UnixMilli())
			b.st.filtered.Add(1)
			continue
		}
		m := b.enc.message(ev, maxPayload)
		w.push(slotSent, m, ev.Time.UnixMilli())
		var err error
		if b.js != nil {
			_, err = b.js.PublishMsgAsync(m)
		} else {
			err = b.nc.PublishMsg(m)
		}
		if err != nil {
			w.fail(off, m)
			b.fail(fmt.Errorf("publish outbox event %d: %w", off, err))
			return false
		}
	}
	return true
}

// flushCore confirms core-mode publishes with a round trip to the server.
func (b *Bridge) flushCore() {
	if err := b.nc.FlushTimeout(b.opts.PublishTimeout); err != nil {
		for off := b.win.cursor; off < b.win.next; off++ {
			if s := b.win.at(off); s.state == slotSent {
				b.win.fail(off, s.msg)
			}
		}
		b.fail(fmt.Errorf("flush: %w", err))
		return
	}
	b.st.published.Add(int64(b.win.ackSent()))
	b.backoff = b.opts.BackoffMin
}

// applyOutcomes applies the outcomes reported since the last call.
func (b *Bridge) applyOutcomes() {
	b.outcomes.Lock()
	list := b.outcomes.list
	b.outcomes.list = nil
	b.outcomes.Unlock()
	for _, o := range list {
		off, ok := b.enc.offsetOf(o.msg)
		if !ok {
			continue
		}
		if o.err != nil {
			if b.win.fail(off, o.msg) {
				b.fail(fmt.Errorf("outbox event %d: %w", off, o.err))
			}
			continue
		}
		if b.win.ack(off) {
			if o.dup {
				b.st.duplicates.Add(1)
			} else {
				b.st.published.Add(1)
			}
			b.backoff = b.opts.BackoffMin
		}
	}
}

// fail stops publishing until the window is rewound. While NATS is
// unreachable a publish fails with whatever the client says then (a full
// reconnect buffer, a closed connection); the outage, not that error, is
// what is reported.
func (b *Bridge) fail(err error) {
	if !b.nc.IsConnected() || errors.Is(err, nats.ErrReconnectBufExceeded) {
		b.markDown() // the disconnect handler may not have run yet
	}
	if since, down := b.unreachableSince(); down {
		_, head := b.src.EventOffsets()
		b.st.lastErr.Store(&errorNote{msg: unreachableNote(since, head-b.win.cursor), at: b.opts.Now(), down: true})
		if !b.failing {
			b.failing, b.failedAt = true, time.Now()
			b.st.failures.Add(1)
			b.log.Warn("NATS unreachable; publishing paused, events wait in the outbox", "since", since.UTC().Format(time.RFC3339), "waiting", head-b.win.cursor)
		}
		return
	}
	b.st.lastErr.Store(&errorNote{msg: err.Error(), at: b.opts.Now()})
	if b.failing {
		return
	}
	b.failing, b.failedAt = true, time.Now()
	b.st.failures.Add(1)
	b.log.Warn("publishing stopped; will rewind to the cursor and retry", "cursor", b.win.cursor, "err", err)
}

// markDown records that the connection to NATS is lost, unless it already
// was.
func (b *Bridge) markDown() {
	b.st.downSince.CompareAndSwap(0, b.opts.Now().UnixMilli())
}

// markUp records that the connection to NATS is back.
func (b *Bridge) markUp() { b.st.downSince.Store(0) }

// unreachableSince returns when the connection to NATS was lost, and
// whether it is down.
func (b *Bridge) unreachableSince() (time.Time, bool) {
	ms := b.st.downSince.Load()
	return time.UnixMilli(ms), ms != 0
}

// unreachableNote is the status's and the log's words for an outage.
func unreachableNote(since time.Time, waiting int64) string {
	return fmt.Sprintf("NATS unreachable since %s, %d events waiting", since.UTC().Format(time.RFC3339), max(waiting, 0))
}

// recover lets the publishes in flight settle, rewinds to the cursor and
// backs off. It returns false if the bridge is shutting down.
func (b *Bridge) recover() bool {
	if !b.settle(b.quit) {
		return false
	}
	b.win.advance()
	b.win.rewind()
	b.failing = false
	b.st.backingOff.Store(true)
	defer b.st.backingOff.Store(false)
	b.publishStatus()

	if b.nc.IsConnected() {
		// A signal from before the failure says nothing now.
		select {
		case <-b.reconnected:
		default:
		}
	}
	wait := b.backoff/2 + rand.N(b.backoff/2+1)
	b.backoff = min(2*b.backoff, b.opts.BackoffMax)
	t := time.NewTimer(wait)
	defer t.Stop()
	tick := time.NewTicker(b.opts.CursorInterval)
	defer tick.Stop()
	for {
		select {
		case <-b.quit:
			return false
		case <-b.reconnected:
			return true
		case <-tick.C:
			b.maybePersist(false)
		case <-t.C:
			if b.nc.IsConnected() {
				return true
			}
			// Down: publishing would fail at once, so wait for the
			// connection instead of spinning.
		}
	}
}

// settle waits until no publish is awaiting an outcome, or a little longer
// than one publish timeout (each publish has one, so a missing outcome is
// a lost callback, not a slow server). It returns false if stop closed.
func (b *Bridge) settle(stop <-chan struct{}) bool {
	if b.win.sent == 0 {
		return true
	}
	guard := time.NewTimer(time.Until(b.failedAt.Add(b.opts.PublishTimeout + time.Second)))
	defer guard.Stop()
	for b.win.sent > 0 {
		select {
		case <-b.outcomeSig:
			b.applyOutcomes()
		case <-guard.C:
			b.log.Warn("publishes did not settle; rewinding anyway", "unsettled", b.win.sent)
			return true
		case <-stop:
			return false
		}
	}
	return true
}

// drain finishes at shutdown: it lets in-flight publishes settle unless
// Shutdown is in a hurry, so that their acknowledgements still count.
func (b *Bridge) drain() {
	if b.win.sent > 0 {
		if !b.failing {
			b.failedAt = time.Now()
		}
		b.settle(b.hurry)
	}
	b.applyOutcomes()
	b.win.advance()
}

// finish writes the cursor durably and closes the connection.
func (b *Bridge) finish() {
	b.maybePersist(true)
	b.publishStatus()
	b.st.stopped.Store(true)
	b.nc.Close()
	b.log.Info("bridge stopped", "cursor", b.win.cursor)
}

// maybePersist writes an advanced cursor durably every CursorInterval, or
// now if force.
func (b *Bridge) maybePersist(force bool) {
	c := b.win.cursor
	if c == b.saved && !force {
		return
	}
	now := b.opts.Now()
	if !force && now.Sub(b.savedAt) < b.opts.CursorInterval {
		return
	}
	b.src.SetProgress(cursorName, c)
	if err := b.src.FlushProgress(); err != nil {
		b.log.Error("cursor not written; it will be retried", "cursor", c, "err", err)
		return
	}
	b.saved, b.savedAt = c, now
}

// expire counts events retention removed before they were published.
func (b *Bridge) expire(from, to int64) {
	b.st.expired.Add(to - from)
	b.log.Warn("outbox events expired before they were published", "from", from, "to", to-1, "count", to-from)
}

func (b *Bridge) publishStatus() {
	b.st.cursor.Store(b.win.cursor)
	b.st.cursorMS.Store(b.win.cursorMS())
	b.st.inFlight.Store(int64(b.win.sent))
}

// filter decides which events are published.
type filter struct {
	retry, dlq   bool
	incG, excG   []string
	incT, excT   []string
	passAllNames bool
}

func newFilter(o *Options) filter {
	f := filter{incG: o.IncludeGroups, excG: o.ExcludeGroups, incT: o.IncludeTopics, excT: o.ExcludeTopics}
	for _, k := range o.Kinds {
		switch k {
		case outbox.KindRetry:
			f.retry = true
		case outbox.KindDLQ:
			f.dlq = true
		}
	}
	f.passAllNames = len(f.incG)+len(f.excG)+len(f.incT)+len(f.excT) == 0
	return f
}

func (f *filter) pass(ev *outbox.Event) bool {
	switch ev.Kind {
	case outbox.KindRetry:
		if !f.retry {
			return false
		}
	case outbox.KindDLQ:
		if !f.dlq {
			return false
		}
	default:
		return false
	}
	if f.passAllNames {
		return true
	}
	return included(f.incG, f.excG, ev.Group) && included(f.incT, f.excT, ev.Topic)
}

func included(inc, exc []string, name string) bool {
	if len(inc) > 0 && !matchAny(inc, name) {
		return false
	}
	return !matchAny(exc, name)
}

func matchAny(pats []string, name string) bool {
	for _, p := range pats {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}
