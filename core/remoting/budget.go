package remoting

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Memory budgets of a Server (ServerOptions.MaxPartialFrameBytes,
// MaxQueuedBytes): what its connections may hold, all together, in frames
// not yet read whole and in responses not yet written.

const (
	// DefaultMaxPartialFrameBytes is ServerOptions.MaxPartialFrameBytes'
	// default.
	DefaultMaxPartialFrameBytes = 64 << 20
	// DefaultMaxQueuedBytes is ServerOptions.MaxQueuedBytes' default.
	DefaultMaxQueuedBytes = 256 << 20
	// partialChunk is the unit in which a frame that is not yet buffered
	// whole is read and counted: a stalled frame holds at most this
	// beyond the bytes that arrived.
	partialChunk = 64 << 10
	// stallAge is how long a partial frame must have gone without new
	// bytes before it may be dropped to make room for another.
	stallAge = time.Second
)

// errFrameBudget is why a connection whose partial frame was dropped to
// make room for others was closed.
var errFrameBudget = errors.New("remoting: partial frame dropped: the server's budget for frames in progress is spent and this one had stalled")

// frameBudget counts the bytes of frames being read, over every connection
// of a Server, against a cap. A reader that would go over it waits; when
// partial frames that stalled hold the budget, the largest of them is
// dropped with its connection.
type frameBudget struct {
	max     int64
	dropped atomic.Int64 // connections closed for the budget
	mu      struct {
		sync.Mutex
		used    int64
		partial map[*Conn]*partialFrame
		freed   chan struct{} // closed and replaced when bytes are released
	}
}

// partialFrame is one connection's frame in progress.
type partialFrame struct {
	held    int64
	last    time.Time // when bytes last arrived
	waiting bool      // its reader waits for the budget, so it is not stalled by its peer
	victim  bool      // chosen to be dropped
}

func newFrameBudget(max int) *frameBudget {
	b := &frameBudget{max: int64(max)}
	b.mu.partial = make(map[*Conn]*partialFrame)
	b.mu.freed = make(chan struct{})
	return b
}

// used is the bytes held by frames in progress.
func (b *frameBudget) used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.used
}

// reserve counts n more bytes of c's frame in progress, waiting while the
// budget is spent and dropping the largest stalled frame of another
// connection when one holds bytes. It fails when c closes or the server
// drains meanwhile; the frame's read deadline bounds the wait, since the
// caller's read then fails.
func (b *frameBudget) reserve(c *Conn, n int64) error {
	for {
		b.mu.Lock()
		pf := b.mu.partial[c]
		if pf == nil {
			pf = &partialFrame{}
			b.mu.partial[c] = pf
		}
		if b.mu.used+n <= b.max {
			b.mu.used += n
			pf.held += n
			pf.last = time.Now()
			pf.waiting = false
			b.mu.Unlock()
			return nil
		}
		victim := b.victimLocked(c)
		pf.waiting = victim == nil
		freed := b.mu.freed
		b.mu.Unlock()
		if victim != nil {
			b.dropped.Add(1)
			c.ep.limits.Warn("frameBudget", "remoting: closing a connection whose partial frame stalled, to make room for others",
				"peer", victim.remote.String(), "conn", victim.id, "limit_bytes", b.max)
			victim.closeWith(errFrameBudget)
			continue
		}
		t := time.NewTimer(stallAge / 4)
		select {
		case <-freed:
		case <-t.C:
		case <-c.done:
			t.Stop()
			return c.cause
		case <-c.ep.drain:
			t.Stop()
			return ErrServerClosed
		}
		t.Stop()
		if dl, ok := c.readDeadline(); ok && time.Now().After(dl) {
			return fmt.Errorf("%w: waited for room to read it", errFrameTimeout)
		}
	}
}

// victimLocked picks the largest partial frame, other than self's, that
// has had no new bytes for stallAge and whose reader does not itself wait
// for the budget.
func (b *frameBudget) victimLocked(self *Conn) *Conn {
	var (
		victim *Conn
		most   int64
	)
	now := time.Now()
	for c, pf := range b.mu.partial {
		if c == self || pf.waiting || pf.victim || pf.held <= most || now.Sub(pf.last) < stallAge {
			continue
		}
		victim, most = c, pf.held
	}
	if victim != nil {
		b.mu.partial[victim].victim = true
	}
	return victim
}

// release returns everything c's frame in progress holds.
func (b *frameBudget) release(c *Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	pf := b.mu.partial[c]
	if pf == nil {
		return
	}
	delete(b.mu.partial, c)
	if pf.held == 0 {
		return
	}
	b.mu.used -= pf.held
	close(b.mu.freed)
	b.mu.freed = make(chan struct{})
}

// chunkPool holds the chunks partial frames are read into.
var chunkPool = sync.Pool{New: func() any { return new([partialChunk]byte) }}

// readCounted reads the rest of a frame of n bytes whose length prefix br
// has consumed, counting what it holds against the server's budget as the
// bytes arrive, so a peer that stalls mid-frame holds no more than it
// sent (plus a chunk). It reads into buf when buf can hold the frame,
// else into pooled chunks copied into one slice once the frame is whole.
func (c *Conn) readCounted(br *bufio.Reader, n int, buf []byte) ([]byte, error) {
	b := c.ep.frames
	defer b.release(c)
	if cap(buf) >= n {
		buf = buf[:n]
		for at := 0; at < n; {
			end := min(at+partialChunk, n)
			if err := b.reserve(c, int64(end-at)); err != nil {
				return nil, err
			}
			if _, err := io.ReadFull(br, buf[at:end]); err != nil {
				return nil, unexpectedEOF(err)
			}
			at = end
		}
		return buf, nil
	}
	var chunks []*[partialChunk]byte
	defer func() {
		for _, ch := range chunks {
			chunkPool.Put(ch)
		}
	}()
	for got := 0; got < n; {
		k := min(partialChunk, n-got)
		if err := b.reserve(c, int64(k)); err != nil {
			return nil, err
		}
		ch := chunkPool.Get().(*[partialChunk]byte)
		chunks = append(chunks, ch)
		if _, err := io.ReadFull(br, ch[:k]); err != nil {
			return nil, unexpectedEOF(err)
		}
		got += k
	}
	frame := make([]byte, 0, n)
	for _, ch := range chunks {
		frame = append(frame, ch[:min(partialChunk, n-len(frame))]...)
	}
	return frame, nil
}

// readFrame is ReadFrame for a server's connection: a frame already in
// br's buffer is read as ReadFrame does, one still arriving through
// readCounted.
func (c *Conn) readFrame(br *bufio.Reader, buf []byte) ([]byte, error) {
	if c.ep.frames == nil || frameBuffered(br) {
		return ReadFrame(br, c.ep.maxFrame, buf)
	}
	p, err := br.Peek(4)
	if err != nil {
		if err == io.EOF && len(p) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	n := int64(int32(binary.BigEndian.Uint32(p)))
	if n < 4 || n > int64(c.ep.maxFrame) {
		return ReadFrame(br, c.ep.maxFrame, buf) // the same errors
	}
	_, _ = br.Discard(4)
	return c.readCounted(br, int(n), buf)
}

// readDeadline is when the frame being read must be whole, if it must.
func (c *Conn) readDeadline() (time.Time, bool) {
	return c.frameDeadline, !c.frameDeadline.IsZero()
}

// Reservation is response bytes a handler set aside on its connection
// before building a large response (Conn.ReserveResponse). The zero
// value reserves nothing.
type Reservation struct {
	c *Conn
	n int
}

// Bytes is how many bytes r holds.
func (r Reservation) Bytes() int { return r.n }

// Release gives back what r holds. A reservation set as a response's
// Command.Reservation is released when the response is queued and must
// not be released by its handler as well.
func (r *Reservation) Release() {
	if r.c == nil || r.n == 0 {
		return
	}
	o := &r.c.out
	o.Lock()
	o.reserved -= r.n
	r.c.countLocked(-r.n)
	o.cond.Broadcast()
	o.Unlock()
	r.n = 0
}

// ReserveResponse sets aside up to want bytes of the connection's budget
// for responses not yet written (ServerOptions.MaxQueuedBytesPerConn) and
// of the server's over all connections (MaxQueuedBytes), for a response
// the caller is about to build, and returns what it set aside: want, or
// less, down to nothing, when the budgets are short. A handler that
// builds a large response, such as a pull's, sizes it to what it got, so
// a peer that sends requests and does not read the answers makes the
// server build no more than the budget. The reservation is released when
// the response carrying it (Command.Reservation) is queued, or by its
// Release. A Client's connections reserve nothing but the per-connection
// bound.
func (c *Conn) ReserveResponse(want int) Reservation {
	o := &c.out
	o.Lock()
	defer o.Unlock()
	if o.closed || want <= 0 {
		return Reservation{}
	}
	avail := c.ep.maxQueued - (o.queued + o.inWrite + o.reserved)
	if t := c.ep.queuedTotal; t != nil {
		avail = min(avail, int(c.ep.maxQueuedTotal-t.Load()))
	}
	n := max(min(want, avail), 0)
	if n == 0 {
		c.ep.limits.Info("responseBudget", "remoting: a large response was cut to nothing: the budget for unwritten responses is spent",
			"conn", c.id, "peer", c.remote.String(), "conn_bytes", o.queued+o.inWrite+o.reserved, "conn_limit", c.ep.maxQueued,
			"total_limit", c.ep.maxQueuedTotal)
		return Reservation{}
	}
	o.reserved += n
	c.countLocked(n)
	return Reservation{c: c, n: n}
}

// countLocked adds d to what this connection counts toward the server's
// queuedTotal; c.out is held.
func (c *Conn) countLocked(d int) {
	if c.ep.queuedTotal == nil || c.out.settled || d == 0 {
		return
	}
	c.out.counted += d
	c.ep.queuedTotal.Add(int64(d))
}

// settleCount takes back what the connection counted toward queuedTotal,
// once it has closed and nothing more will be written.
func (c *Conn) settleCount() {
	o := &c.out
	o.Lock()
	defer o.Unlock()
	if c.ep.queuedTotal != nil && !o.settled {
		c.ep.queuedTotal.Add(int64(-o.counted))
	}
	o.counted, o.settled = 0, true
}
