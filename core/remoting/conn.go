package remoting

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/internal/ratelog"
)

const (
	// readBufferSize is the bufio buffer of each connection's reader.
	readBufferSize = 32 << 10
	// keptFrameBuffer is the largest frame buffer a reader keeps for the
	// next frame; a larger one, read for a big frame, is dropped after use.
	// It is small, since every connection may keep one: 10,000 idle
	// connections that each sent one large frame must not pin gigabytes.
	keptFrameBuffer = 64 << 10
	// inlineBodyMax is the largest body copied into the send queue; larger
	// bodies are written from the caller's slice without a copy.
	inlineBodyMax = 64 << 10
	// smallResponse is the largest body of a response that is queued
	// without waiting for the queue to drain (Conn.send).
	smallResponse = 1 << 10
	// keptWriteBuffer is the largest send-queue buffer kept for reuse.
	keptWriteBuffer = 4 << 20
	// defaultMaxQueuedBytes is ServerOptions.MaxQueuedBytesPerConn's
	// default, and the bound of a Client connection's send queue.
	defaultMaxQueuedBytes = 64 << 20
	// defaultWriteTimeout bounds one write of queued frames.
	defaultWriteTimeout = 30 * time.Second
	// defaultMaxInflight is the default number of handlers running at once
	// on one connection.
	defaultMaxInflight = 4096
	// maxIdleWorkers is how many handler goroutines a connection keeps
	// waiting for work; more than that exit when done.
	maxIdleWorkers = 16
)

// nextConnID numbers connections across all servers and clients of the
// process.
var nextConnID atomic.Uint64

// endpoint is what a connection needs from its owner, a Server or a Client.
type endpoint struct {
	// handler serves requests from the peer; nil ignores them.
	handler func(c *Conn, req *Command) *Command
	// fast, if set, is offered each request first, on the reader's
	// goroutine (Server.HandleFast); false passes it to handler. lazy
	// reports the commands whose JSON extFields the reader leaves as
	// pairs (Command.lazyExt): a server's requests for fast, a client's
	// responses.
	fast         func(c *Conn, req *Command, reply func(*Command)) bool
	lazy         func(c *Command) bool
	logger       *slog.Logger
	maxFrame     int
	maxInflight  int
	writeTimeout time.Duration
	// maxQueued bounds the bytes queued and not yet written on one
	// connection; senders wait above it.
	maxQueued int
	// gateReads makes the reader stop dispatching requests while maxQueued
	// is reached (a Server's connections; a Client's never stop reading,
	// so two of this package's ends cannot wait on each other).
	gateReads bool
	// frameTimeout bounds the arrival of a frame once its first byte is
	// in, and idleTimeout the wait for a frame's first byte; zero is no
	// limit (a Client's connections).
	frameTimeout time.Duration
	idleTimeout  time.Duration
	// sniffTLS closes a plain connection whose first byte starts a TLS
	// handshake, which would otherwise be read as a 369 MB frame.
	sniffTLS bool
	// logRefusals logs the requests answered with a refusal code
	// (isRefusal), at a bounded rate: a Server's connections.
	logRefusals bool
	// frames, if set, counts the frames being read over all of a
	// Server's connections against ServerOptions.MaxPartialFrameBytes.
	frames *frameBudget
	// queuedTotal, if set, counts the unwritten and reserved response
	// bytes of all of a Server's connections, against maxQueuedTotal.
	queuedTotal    *atomic.Int64
	maxQueuedTotal int64
	// limits logs limit hits at most once per interval per kind.
	limits    *ratelog.Log
	onConnect func(*Conn)
	onClose   func(*Conn)
	// drain is closed when the owner shuts down gracefully: readers stop
	// and connections close once their handlers have answered. nil for a
	// Client, whose connections always close at once.
	drain <-chan struct{}
}

// Conn is one connection of a Server or a Client. Its methods are safe for
// concurrent use.
type Conn struct {
	id     uint64
	nc     net.Conn
	ep     *endpoint
	remote net.Addr
	local  net.Addr

	// out is the send queue. Frames are encoded straight into buf; segs
	// lists the pieces to write in order when a large body is queued by
	// reference. Whoever holds the write token takes everything queued at
	// once and writes it with one (vectored) write, until the queue is
	// empty: a sender that finds no write in progress writes its own frame
	// (sparing a hand-over to the writer goroutine), one that finds a write
	// in progress leaves its frame to the writer.
	out struct {
		sync.Mutex
		cond    sync.Cond // signalled when the queue is taken, the token is released, or the connection closes
		buf     []byte
		segs    [][]byte
		mark    int  // start of the part of buf not yet in segs
		queued  int  // bytes queued since the queue was last taken
		inWrite int  // bytes taken by the write in progress, until it ends
		peak    int  // the most queued+inWrite has been, for tests
		closed  bool // no more frames are accepted
		// reserved is response bytes handlers set aside
		// (Conn.ReserveResponse) and have not queued yet.
		reserved int
		// counted is what this connection adds to the endpoint's
		// queuedTotal; settled is set once it has been taken back, at
		// the end of serve, after which nothing more is counted.
		counted   int
		settled   bool
		writing   bool // the write token is held
		spareBuf  []byte
		spareSegs [][]byte
		// released are the bodies in segs whose commands asked to hear
		// when the connection lets go of them (Command.ReleaseBody).
		released      []release
		spareReleased []release
	}
	wake       chan struct{} // capacity 1; a send tells the writer there is work
	stopWrite  chan struct{} // closed to make the writer flush and stop
	writerDone chan struct{}

	// pending holds the calls waiting for a response, by opaque.
	pending struct {
		sync.Mutex
		m map[int32]*call
	}
	opaque atomic.Int32

	// Handlers run on worker goroutines that stay for the next request, so
	// their grown stacks are reused. The reader hands a request to an idle
	// worker through work, or starts a new one.
	slots      chan struct{} // one token per running handler
	work       chan *Command // unbuffered; idle workers receive on it
	readerDone chan struct{} // closed when the reader stops: idle workers exit
	idle       atomic.Int32  // workers waiting on work
	workers    sync.WaitGroup

	closeOnce sync.Once
	cause     error // why the connection closed; set before done is closed
	done      chan struct{}

	// frameDeadline is when the frame being read must be whole; the
	// reader's own, zero when none.
	frameDeadline time.Time
}

// call is one request waiting for its response: a blocked caller's
// channel, or an asynchronous caller's function with the timer, and the
// context hook if its context can end, that end its wait.
type call struct {
	ch    chan *Command
	fn    func(*Command, error)
	timer *time.Timer
	stop  func() bool // context.AfterFunc's; nil when the context cannot end
}

// disarm stops what would end an asynchronous call's wait; its caller has
// taken the call out of pending, so either would find nothing to do.
func (cl *call) disarm() {
	cl.timer.Stop()
	if cl.stop != nil {
		cl.stop()
	}
}

var callPool = sync.Pool{New: func() any { return &call{ch: make(chan *Command, 1)} }}

// errClosedLocally is the cause recorded when Close is called.
var errClosedLocally = errors.New("closed locally")

func newConn(nc net.Conn, ep *endpoint) *Conn {
	c := &Conn{
		id:         nextConnID.Add(1),
		nc:         nc,
		ep:         ep,
		remote:     nc.RemoteAddr(),
		local:      nc.LocalAddr(),
		wake:       make(chan struct{}, 1),
		stopWrite:  make(chan struct{}),
		writerDone: make(chan struct{}),
		slots:      make(chan struct{}, ep.maxInflight),
		work:       make(chan *Command),
		readerDone: make(chan struct{}),
		done:       make(chan struct{}),
	}
	c.out.cond.L = &c.out.Mutex
	c.pending.m = make(map[int32]*call)
	return c
}

// ID returns the connection's number, unique within the process.
func (c *Conn) ID() uint64 { return c.id }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// LocalAddr returns this end's address.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// Done returns a channel that is closed when the connection is gone.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Close closes the connection at once: queued frames that are not written
// yet are dropped and pending calls fail with ErrClosed. It may be called
// any number of times, since the peer or an error may have closed the
// connection first; it always returns nil.
func (c *Conn) Close() error {
	c.closeWith(errClosedLocally)
	return nil
}

func (c *Conn) closeWith(cause error) {
	c.closeOnce.Do(func() {
		c.cause = cause
		c.out.Lock()
		c.out.closed = true
		c.out.cond.Broadcast()
		c.out.Unlock()
		close(c.done)
		_ = c.nc.Close()
		c.failAsync()
	})
}

// failAsync ends the asynchronous calls pending when the connection
// closed. A call registers only while done is open (callAsync checks under
// the pending lock), so none is left behind.
func (c *Conn) failAsync() {
	var failed []*call
	c.pending.Lock()
	for opaque, cl := range c.pending.m {
		if cl.fn != nil {
			delete(c.pending.m, opaque)
			failed = append(failed, cl)
		}
	}
	c.pending.Unlock()
	if len(failed) == 0 {
		return
	}
	err := c.closedErr()
	for _, cl := range failed {
		cl.disarm()
		cl.fn(nil, err)
	}
}

// closedErr describes a call that failed because the connection is gone.
func (c *Conn) closedErr() error {
	select {
	case <-c.done:
		return fmt.Errorf("%w (peer %s): %w", ErrClosed, c.remote, c.cause)
	default:
		return fmt.Errorf("%w (peer %s)", ErrClosed, c.remote)
	}
}

func (c *Conn) log() *slog.Logger {
	return c.ep.logger.With("conn", c.id, "peer", c.remote.String())
}

// Reply sends resp as the response to req, for handlers that returned nil
// and answer later. It sets resp's Opaque, FlagResponse and SerializeType
// from req (and Language and Version if they are zero), so resp may be
// built by hand. It does nothing for a oneway request. It is safe from any
// goroutine and fails with ErrClosed once the connection is gone. The
// connection keeps resp.Body until it is written: do not change it.
func (c *Conn) Reply(req, resp *Command) error {
	if req.IsOneway() {
		return nil
	}
	prepareReply(req, resp)
	// Write at once unless other handlers of this connection are about to
	// answer too: then the writer gathers their answers into one write.
	return c.send(resp, directIf(len(c.slots) <= 1))
}

// prepareReply completes resp as Reply does.
func prepareReply(req, resp *Command) {
	resp.Opaque = req.Opaque
	resp.Flag = resp.Flag&^FlagOneway | FlagResponse
	resp.SerializeType = req.SerializeType
	fillDefaults(resp)
}

func fillDefaults(cmd *Command) {
	if cmd.Language == "" {
		cmd.Language = LanguageGo
	}
	if cmd.Version == 0 {
		cmd.Version = DefaultVersion
	}
}

// Oneway sends req as a oneway request (flag bit 1) in JSON, which every
// client reads, with an opaque of its own; req is not modified. It returns
// once the frame is queued. ctx is checked first; a full send queue may
// still hold the call until the writer catches up or the connection closes.
func (c *Conn) Oneway(ctx context.Context, req *Command) error {
	return c.oneway(ctx, req, SerializeJSON)
}

// Request sends req in JSON with an opaque of its own and waits for the
// response with that opaque, until ctx is done or the connection closes;
// req is not modified.
func (c *Conn) Request(ctx context.Context, req *Command) (*Command, error) {
	return c.call(ctx, req, SerializeJSON)
}

func (c *Conn) oneway(ctx context.Context, req *Command, st byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	out := *req
	out.Opaque = c.opaque.Add(1)
	out.Flag = req.Flag&^FlagResponse | FlagOneway
	out.SerializeType = st
	fillDefaults(&out)
	return c.send(&out, sendQueue)
}

func (c *Conn) call(ctx context.Context, req *Command, st byte) (*Command, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cl := callPool.Get().(*call)
	out := outgoing(req, st)
	c.pending.Lock()
	alone := c.registerLocked(&out, cl)
	c.pending.Unlock()

	// A lone call writes itself; with others in flight the writer gathers
	// them into one write.
	if err := c.send(&out, directIf(alone)); err != nil {
		if resp, ok := c.abandon(out.Opaque, cl); ok {
			return resp, nil
		}
		return nil, err
	}
	var err error
	select {
	case resp := <-cl.ch:
		callPool.Put(cl)
		return resp, nil
	case <-ctx.Done():
		err = fmt.Errorf("remoting: %s to %s: %w", RequestCode(req.Code), c.remote, ctx.Err())
	case <-c.done:
		err = c.closedErr()
	}
	if resp, ok := c.abandon(out.Opaque, cl); ok {
		return resp, nil
	}
	return nil, err
}

// outgoing returns the copy of req that a call sends: a request in
// serialization st, with the defaults filled in.
func outgoing(req *Command, st byte) Command {
	out := *req
	out.Flag = req.Flag &^ (FlagResponse | FlagOneway)
	out.SerializeType = st
	fillDefaults(&out)
	return out
}

// registerLocked gives out an opaque no pending call has and records cl
// under it. It reports whether cl is the only call pending. c.pending must
// be held.
func (c *Conn) registerLocked(out *Command, cl *call) (alone bool) {
	for {
		// Skip opaques still pending after the counter wraps.
		out.Opaque = c.opaque.Add(1)
		if _, busy := c.pending.m[out.Opaque]; !busy {
			break
		}
	}
	c.pending.m[out.Opaque] = cl
	return len(c.pending.m) == 1
}

// callAsync sends req with an opaque of its own and returns once the frame
// is queued; fn gets the response, or an error when none comes within
// timeout, ctx ends or the connection closes first. It is called exactly
// once, unless callAsync returns an error. See Client.InvokeAsync.
func (c *Conn) callAsync(ctx context.Context, req *Command, st byte, timeout time.Duration, fn func(*Command, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cl := &call{fn: fn}
	out := outgoing(req, st)
	c.pending.Lock()
	select {
	case <-c.done:
		c.pending.Unlock()
		return c.closedErr()
	default:
	}
	alone := c.registerLocked(&out, cl)
	opaque, code := out.Opaque, req.Code
	// Both are set under the lock, so that whoever takes the call finds
	// them; either that fires meanwhile waits for the lock.
	cl.timer = time.AfterFunc(timeout, func() {
		if c.take(opaque, cl) {
			cl.fn(nil, fmt.Errorf("remoting: %s to %s: no response in %v: %w", RequestCode(code), c.remote, timeout, context.DeadlineExceeded))
		}
	})
	if ctx.Done() != nil {
		cl.stop = context.AfterFunc(ctx, func() {
			if c.take(opaque, cl) {
				cl.fn(nil, fmt.Errorf("remoting: %s to %s: %w", RequestCode(code), c.remote, ctx.Err()))
			}
		})
	}
	c.pending.Unlock()

	if err := c.send(&out, directIf(alone)); err != nil && c.take(opaque, cl) {
		return err
	}
	// Sent, or the call was answered, expired or failed meanwhile: fn has
	// been or will be called.
	return nil
}

// take removes an asynchronous call from pending and disarms it. It
// reports false when something else took it first; that one calls fn.
func (c *Conn) take(opaque int32, cl *call) bool {
	c.pending.Lock()
	mine := c.pending.m[opaque] == cl
	if mine {
		delete(c.pending.m, opaque)
	}
	c.pending.Unlock()
	if mine {
		cl.disarm()
	}
	return mine
}

// abandon removes a call that stops waiting. If its response was delivered
// meanwhile, it returns it.
func (c *Conn) abandon(opaque int32, cl *call) (*Command, bool) {
	c.pending.Lock()
	if c.pending.m[opaque] == cl {
		delete(c.pending.m, opaque)
		c.pending.Unlock()
		callPool.Put(cl)
		return nil, false
	}
	c.pending.Unlock()
	// deliver removed it under the lock and has already sent.
	resp := <-cl.ch
	callPool.Put(cl)
	return resp, true
}

// deliver hands a response to the call waiting for its opaque. A response
// nobody waits for (late, or for a request the peer thought oneway) is
// dropped.
func (c *Conn) deliver(resp *Command) {
	c.pending.Lock()
	cl := c.pending.m[resp.Opaque]
	if cl != nil {
		delete(c.pending.m, resp.Opaque)
		if cl.fn == nil {
			cl.ch <- resp // buffered; nobody else sends on it
		}
	}
	c.pending.Unlock()
	switch {
	case cl == nil:
		c.ep.logger.Debug("remoting: dropping response nobody waits for", "conn", c.id, "opaque", resp.Opaque, "code", resp.Code)
	case cl.fn != nil:
		cl.disarm()
		cl.fn(resp, nil)
	}
}

// sendMode says how send hands a frame to the connection.
type sendMode uint8

const (
	// sendQueue queues the frame and wakes the writer goroutine.
	sendQueue sendMode = iota
	// sendDirect writes on the caller's goroutine unless a write is in
	// progress, then the writer takes it with the rest.
	sendDirect
	// sendDeferred queues and wakes the writer without ever blocking: no
	// wait for space, bounded instead by the requests already read
	// (reads stop at the bound, see waitForWriter). For answers given
	// off the connection's goroutines (FastHandler replies).
	sendDeferred
	// sendBatched queues without waiting or waking anyone: the reader
	// writes the queue itself before it next waits for input
	// (flushBatched), so the answers to the requests of one read leave
	// in one write. For answers given on the reader's goroutine.
	sendBatched
)

// send hands cmd's frame to the connection as mode says. Without the
// sendDeferred and sendBatched modes it waits while maxQueued bytes are
// unwritten, unless cmd is a response with a body of at most
// smallResponse bytes: each running handler queues at most one of those
// (MaxInflightPerConn bounds them), and a handler that waited would hold
// its goroutine and stack instead, which costs more than the bytes.
// Encoding errors leave the connection open; ErrClosed means it is gone.
func (c *Conn) send(cmd *Command, mode sendMode) error {
	o := &c.out
	o.Lock()
	wait := mode <= sendDirect && !(cmd.IsResponse() && len(cmd.Body) <= smallResponse)
	for wait && o.queued+o.inWrite >= c.ep.maxQueued && !o.closed {
		o.cond.Wait()
	}
	if o.closed {
		o.Unlock()
		cmd.releaseBody()
		cmd.Reservation.Release()
		return c.closedErr()
	}
	start := len(o.buf)
	buf, err := appendFrameHead(o.buf, cmd)
	if err != nil {
		o.buf = buf
		o.Unlock()
		cmd.releaseBody()
		cmd.Reservation.Release()
		return err
	}
	if n := len(buf) - start - 4 + len(cmd.Body); c.ep.maxFrame > 0 && n > c.ep.maxFrame {
		o.buf = buf[:start]
		o.Unlock()
		cmd.releaseBody()
		cmd.Reservation.Release()
		return fmt.Errorf("%w: %s of %d bytes, limit %d", ErrFrameTooLarge, frameKind(cmd), n, c.ep.maxFrame)
	}
	copied := len(cmd.Body) <= inlineBodyMax
	if copied {
		buf = append(buf, cmd.Body...)
	} else {
		o.segs = append(o.segs, buf[o.mark:], cmd.Body)
		o.mark = len(buf)
		if cmd.ReleaseBody != nil {
			o.released = append(o.released, release{cmd.ReleaseBody, cmd.Body})
			cmd.ReleaseBody = nil
		}
	}
	o.queued += len(buf) - start + len(cmd.Body)
	c.countLocked(len(buf) - start + len(cmd.Body))
	if r := cmd.Reservation; r.c == c && r.n > 0 {
		o.reserved -= r.n
		c.countLocked(-r.n)
		cmd.Reservation.n = 0
	}
	o.peak = max(o.peak, o.queued+o.inWrite)
	o.buf = buf
	if mode == sendBatched {
		o.Unlock()
		if copied {
			cmd.releaseBody()
		}
		return nil
	}
	if copied {
		defer cmd.releaseBody()
	}
	if o.writing || mode != sendDirect {
		o.Unlock()
		select {
		case c.wake <- struct{}{}:
		default:
		}
		return nil
	}
	o.writing = true
	o.Unlock()
	c.writeOut()
	return nil
}

// release is a body written by reference and the function its command
// asked to be called once the write is done.
type release struct {
	fn   func([]byte)
	body []byte
}

// writeLoop writes what senders queued while a write was in progress,
// until the connection closes, or after a last flush when stopWrite is
// closed.
func (c *Conn) writeLoop() {
	defer close(c.writerDone)
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		case <-c.stopWrite:
			c.out.Lock()
			for c.out.writing {
				c.out.cond.Wait()
			}
			c.out.writing = true
			c.out.Unlock()
			c.writeOut()
			return
		}
		// Let the goroutines that are about to send queue their frames
		// too, so one write carries them all.
		runtime.Gosched()
		c.out.Lock()
		if c.out.writing {
			c.out.Unlock()
			continue // the token holder writes the queue before it lets go
		}
		c.out.writing = true
		c.out.Unlock()
		if !c.writeOut() {
			return
		}
	}
}

// writeOut writes the queue until it is empty, then releases the write
// token, which the caller holds. It reports false when a write failed and
// closed the connection.
func (c *Conn) writeOut() bool {
	o := &c.out
	for {
		o.Lock()
		if o.mark < len(o.buf) {
			o.segs = append(o.segs, o.buf[o.mark:])
		}
		segs, buf, released := o.segs, o.buf, o.released
		if len(segs) == 0 {
			o.buf, o.mark = buf[:0], 0
			o.writing = false
			o.cond.Broadcast()
			o.Unlock()
			return true
		}
		// The bytes taken stay counted until they are written, so a peer
		// that does not read holds at most maxQueued (plus one frame).
		o.inWrite += o.queued
		o.buf, o.segs, o.mark, o.queued = o.spareBuf[:0], o.spareSegs[:0], 0, 0
		o.released = o.spareReleased[:0]
		o.Unlock()

		_ = c.nc.SetWriteDeadline(time.Now().Add(c.ep.writeTimeout))
		bufs := net.Buffers(segs)
		_, err := bufs.WriteTo(c.nc)
		clear(segs) // drop the bodies written by reference
		for _, r := range released {
			r.fn(r.body)
		}
		clear(released)

		o.Lock()
		c.countLocked(-o.inWrite)
		o.inWrite = 0
		o.cond.Broadcast()
		o.spareSegs = segs[:0]
		o.spareReleased = released[:0]
		if cap(buf) <= keptWriteBuffer {
			o.spareBuf = buf[:0]
		} else {
			o.spareBuf = nil
		}
		if err != nil {
			o.writing = false
			o.cond.Broadcast()
			o.Unlock()
			c.log().Info("remoting: write failed, closing connection", "err", err)
			c.closeWith(fmt.Errorf("write: %w", err))
			return false
		}
		o.Unlock()
	}
}

// serve runs the connection until it closes: it starts the writer, reads
// frames, and cleans up. It is the goroutine that owns the connection;
// exit runs last.
func (c *Conn) serve(exit func()) {
	defer exit()
	go c.writeLoop()
	if c.ep.onConnect != nil {
		c.ep.onConnect(c)
	}
	err := c.readLoop()
	close(c.readerDone)
	if c.draining() {
		// Graceful: answer what is running, write it out, then close.
		c.workers.Wait()
		c.out.Lock()
		c.out.closed = true
		c.out.cond.Broadcast()
		c.out.Unlock()
		close(c.stopWrite)
		<-c.writerDone
		c.closeWith(ErrServerClosed)
	} else {
		select {
		case <-c.done:
			// Closed by this side (Close, a failed write, Shutdown's
			// deadline); whoever closed it has said why.
		default:
			c.logReadEnd(err)
			c.closeWith(err)
		}
	}
	c.workers.Wait()
	<-c.writerDone
	c.settleCount()
	if c.ep.onClose != nil {
		c.ep.onClose(c)
	}
}

func (c *Conn) draining() bool {
	select {
	case <-c.ep.drain:
		return true
	default:
		return false
	}
}

func (c *Conn) logReadEnd(err error) {
	switch {
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrFrameTooLarge):
		// Warn at a bounded rate, so a flood of bad frames cannot flood
		// the log; each one is still there at Debug.
		c.ep.limits.Warn("badFrame", "remoting: closing connection after a bad frame",
			"conn", c.id, "peer", c.remote.String(), "err", err)
		c.log().Debug("remoting: bad frame", "err", err)
	case errors.Is(err, errTLSOnPlainPort):
		c.ep.limits.Warn("tlsOnPlain", "remoting: TLS client on a plain port; closing (connect without TLS, or turn tls on for this port)",
			"conn", c.id, "peer", c.remote.String())
	case errors.Is(err, errIdle):
		c.ep.limits.Info("idle", "remoting: closing idle connection",
			"conn", c.id, "peer", c.remote.String(), "idle_timeout", c.ep.idleTimeout)
	case errors.Is(err, errFrameTimeout):
		c.ep.limits.Warn("frameTimeout", "remoting: closing connection whose frame arrives too slowly",
			"conn", c.id, "peer", c.remote.String(), "timeout", c.ep.frameTimeout)
	case errors.Is(err, io.EOF):
		c.log().Debug("remoting: connection closed by peer")
	default:
		c.log().Info("remoting: connection lost", "err", err)
	}
}

// readLoop reads frames until an error, delivering responses and starting a
// handler per request.
func (c *Conn) readLoop() error {
	br := bufio.NewReaderSize(c.nc, readBufferSize)
	var buf []byte
	_, isTLS := c.nc.(*tls.Conn)
	for first := c.ep.sniffTLS && !isTLS; ; first = false {
		if c.ep.fast != nil && !frameBuffered(br) {
			c.flushBatched()
		}
		if err := c.awaitFrame(br); err != nil {
			return err
		}
		if first {
			if p, err := br.Peek(1); err == nil && p[0] == tlsRecordHandshake {
				_ = c.nc.SetWriteDeadline(time.Now().Add(c.ep.writeTimeout))
				_, _ = c.nc.Write(tlsAlertProtocolVersion)
				return errTLSOnPlainPort
			}
		}
		frame, err := c.readFrame(br, buf)
		if err != nil {
			select {
			case <-c.done:
				return c.cause
			default:
			}
			if isTimeout(err) && !c.draining() {
				return fmt.Errorf("%w: %w", errFrameTimeout, err)
			}
			return err
		}
		cmd := new(Command)
		if err := decodeFrame(frame, cmd, c.ep.lazy); err != nil {
			return err
		}
		// The frame buffer is reused for the next frame: a body that
		// outlives this iteration is copied out of it first. A fast
		// handler reads it in place (see FastHandler).
		if cap(frame) <= keptFrameBuffer {
			buf = frame[:0]
		} else {
			buf = nil
		}
		if cmd.IsResponse() {
			cmd.Body, cmd.pooled = copyBody(cmd.Body)
			c.deliver(cmd)
			continue
		}
		if c.ep.handler == nil {
			continue
		}
		if c.ep.gateReads {
			if err := c.waitForWriter(); err != nil {
				return err
			}
		}
		select {
		case c.slots <- struct{}{}:
		case <-c.done:
			return c.cause
		case <-c.ep.drain:
			return ErrServerClosed
		}
		if c.ep.fast != nil && c.serveFast(cmd) {
			continue
		}
		cmd.Body = bytes.Clone(cmd.Body)
		select {
		case c.work <- cmd:
		default:
			c.workers.Add(1)
			go c.worker(cmd)
		}
	}
}

// serveFast offers req to the endpoint's fast path on the reader's
// goroutine (Server.HandleFast). The request holds its slot until it is
// answered and counts as a running handler, so MaxInflightPerConn and a
// graceful close treat it as one. It reports false when the fast path
// declined; the slot then passes to the worker that serves req.
func (c *Conn) serveFast(req *Command) bool {
	c.workers.Add(1)
	// req.fast holds fastOnReader while the fast handler runs: an answer
	// given then is batched for the reader to write before it next waits
	// for input; a later one goes to the writer, since its caller must not
	// block. fastAnswered makes a second answer a logged no-op. The flags
	// live in req, so the callback captures only c and req: one allocation
	// per request.
	reply := func(resp *Command) {
		if !req.setFast(fastAnswered) {
			c.log().Error("remoting: a fast handler answered twice; the second answer is dropped", "code", RequestCode(req.Code), "opaque", req.Opaque)
			return
		}
		if resp != nil {
			c.noteRefusal(req, resp)
		}
		if resp != nil && !req.IsOneway() {
			prepareReply(req, resp)
			mode := sendDeferred
			if atomic.LoadUint32(&req.fast)&fastOnReader != 0 {
				mode = sendBatched
			}
			if err := c.send(resp, mode); err != nil && !errors.Is(err, ErrClosed) {
				c.notEncodable(req, err, mode)
			}
		}
		<-c.slots
		c.workers.Done()
	}
	taken := func() (ok bool) {
		defer func() {
			if r := recover(); r != nil {
				c.log().Error("remoting: fast handler panicked", "code", RequestCode(req.Code), "opaque", req.Opaque,
					"panic", r, "stack", string(debug.Stack()))
				if atomic.LoadUint32(&req.fast)&fastAnswered == 0 {
					reply(NewResponse(req, SystemError, fmt.Sprintf("remoting: handler for %s failed: %v", RequestCode(req.Code), r)))
				}
				ok = true
			}
		}()
		req.setFast(fastOnReader)
		defer req.clearFast(fastOnReader)
		return c.ep.fast(c, req, reply)
	}()
	if !taken {
		req.parseExt() // the Handler and Authorize read the map
		c.workers.Done()
	}
	return taken
}

// waitForWriter waits while the connection's unwritten bytes are at the
// bound, so a peer that does not read its responses gets no more requests
// served until it does: its requests wait in the socket, not as responses
// in memory.
func (c *Conn) waitForWriter() error {
	o := &c.out
	o.Lock()
	unwritten := o.queued + o.inWrite + o.reserved
	o.Unlock()
	if unwritten < c.ep.maxQueued {
		return nil
	}
	c.ep.limits.Warn("queued", "remoting: peer is not reading its responses; reading its requests paused",
		"conn", c.id, "peer", c.remote.String(), "queued_bytes", unwritten, "limit", c.ep.maxQueued)
	o.Lock()
	defer o.Unlock()
	for o.queued+o.inWrite+o.reserved >= c.ep.maxQueued {
		if o.closed {
			return c.cause
		}
		if c.draining() {
			return ErrServerClosed
		}
		o.cond.Wait()
	}
	return nil
}

// wakeReader makes a reader blocked in a read or in waitForWriter look at
// the connection's state again; Shutdown uses it.
func (c *Conn) wakeReader() {
	_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	c.out.Lock()
	c.out.cond.Broadcast()
	c.out.Unlock()
}

// Why the reader gave up on a connection whose peer was too slow.
var (
	errIdle         = errors.New("remoting: no frame within the idle timeout")
	errFrameTimeout = errors.New("remoting: frame not received whole within the frame read timeout")
)

// awaitFrame waits for the first byte of the next frame, at most
// idleTimeout, then gives the rest of the frame until frameTimeout from
// now. Both deadlines are set only when they are configured and the bytes
// are not already buffered.
func (c *Conn) awaitFrame(br *bufio.Reader) error {
	if c.ep.idleTimeout == 0 && c.ep.frameTimeout == 0 {
		return nil
	}
	if br.Buffered() == 0 {
		var deadline time.Time
		if c.ep.idleTimeout > 0 {
			deadline = time.Now().Add(c.ep.idleTimeout)
		}
		_ = c.nc.SetReadDeadline(deadline)
		// Shutdown closes drain before it sets its own deadline to wake
		// readers; look after setting ours so neither is lost.
		if c.draining() {
			return ErrServerClosed
		}
		if _, err := br.Peek(1); err != nil {
			if isTimeout(err) && !c.draining() {
				select {
				case <-c.done:
					return c.cause
				default:
				}
				return fmt.Errorf("%w (%v)", errIdle, c.ep.idleTimeout)
			}
			return err
		}
	}
	if frameBuffered(br) {
		return nil
	}
	var deadline time.Time
	if c.ep.frameTimeout > 0 {
		deadline = time.Now().Add(c.ep.frameTimeout)
	}
	c.frameDeadline = deadline
	_ = c.nc.SetReadDeadline(deadline)
	if c.draining() {
		return ErrServerClosed
	}
	return nil
}

// frameBuffered reports whether br holds the whole next frame, so reading
// it will not wait.
func frameBuffered(br *bufio.Reader) bool {
	p, err := br.Peek(min(4, br.Buffered()))
	return err == nil && len(p) == 4 && int64(int32(binary.BigEndian.Uint32(p)))+4 <= int64(br.Buffered())
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// worker handles req, then waits for more work until the reader stops or
// enough other workers are idle.
func (c *Conn) worker(req *Command) {
	defer c.workers.Done()
	for {
		c.handle(req)
		if c.idle.Add(1) > maxIdleWorkers {
			c.idle.Add(-1)
			return
		}
		select {
		case req = <-c.work:
			c.idle.Add(-1)
		case <-c.readerDone:
			c.idle.Add(-1)
			return
		}
	}
}

// handle runs the handler for one request and writes its response.
func (c *Conn) handle(req *Command) {
	defer func() { <-c.slots }()
	resp := c.runHandler(req)
	if resp == nil {
		return
	}
	if req.IsOneway() {
		resp.Reservation.Release()
		return
	}
	err := c.Reply(req, resp)
	if err == nil || errors.Is(err, ErrClosed) {
		return
	}
	c.notEncodable(req, err, sendDirect)
}

// directIf returns sendDirect when direct is set, else sendQueue.
func directIf(direct bool) sendMode {
	if direct {
		return sendDirect
	}
	return sendQueue
}

// flushBatched writes what sendBatched queued, on the reader's goroutine,
// when no write is in progress (a writer in progress takes it along). The
// reader calls it before it waits for more input; a peer that does not
// read blocks it here, and so stops being read.
func (c *Conn) flushBatched() {
	o := &c.out
	o.Lock()
	if o.writing || o.queued == 0 {
		o.Unlock()
		return
	}
	o.writing = true
	o.Unlock()
	c.writeOut()
}

// notEncodable answers req, whose handler did its work but whose response
// cannot be encoded (too large for a frame, most likely), with a code
// clients do not retry, instead of leaving the peer to time out and
// resend.
func (c *Conn) notEncodable(req *Command, err error, mode sendMode) {
	c.ep.limits.Warn("encode", "remoting: response cannot be sent",
		"conn", c.id, "peer", c.remote.String(), "code", RequestCode(req.Code), "err", err)
	resp := NewResponse(req, ResponseNotEncodable,
		fmt.Sprintf("remoting: the response to %s cannot be sent (%v); the request was carried out, do not retry it",
			RequestCode(req.Code), err))
	prepareReply(req, resp)
	if mode == sendDirect || mode == sendQueue {
		mode = directIf(len(c.slots) <= 1)
	}
	_ = c.send(resp, mode)
}

func (c *Conn) runHandler(req *Command) (resp *Command) {
	defer func() {
		if r := recover(); r != nil {
			c.log().Error("remoting: handler panicked", "code", RequestCode(req.Code), "opaque", req.Opaque,
				"panic", r, "stack", string(debug.Stack()))
			resp = NewResponse(req, SystemError, fmt.Sprintf("remoting: handler for %s failed: %v", RequestCode(req.Code), r))
		}
	}()
	return c.ep.handler(c, req)
}
