package bench

import (
	"context"
	"sync"
	"time"
)

// clock is the time a run is measured and paced by. Produce and Consume
// use the wall clock; tests use a virtual one whose sleeps return at once,
// so pacing is checked by counting requests instead of by timing them.
type clock interface {
	// now returns the time elapsed since the clock's origin.
	now() time.Duration
	// sleepUntil returns when now() has reached t, or with ctx's error
	// when ctx ends first.
	sleepUntil(ctx context.Context, t time.Duration) error
}

// wallClock reads time.Now against an origin.
type wallClock struct{ origin time.Time }

func newWallClock() wallClock { return wallClock{origin: time.Now()} }

func (c wallClock) now() time.Duration { return time.Since(c.origin) }

func (c wallClock) sleepUntil(ctx context.Context, t time.Duration) error {
	d := t - c.now()
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pacerBurst is how far behind its schedule a pacer may fall and still
// catch up at full speed. It lets a run make up for a short stall (a GC
// pause, a slow response) without sending a flood after a long one.
const pacerBurst = 10 * time.Millisecond

// pacer spaces messages to a rate shared by every worker of a run. It is a
// token bucket kept as a schedule: each reservation takes the next free
// slots, and the schedule never lags the clock by more than pacerBurst, so
// over any window W it lets through at most rate×(W+pacerBurst) messages
// plus one request.
type pacer struct {
	clk    clock
	perMsg float64 // nanoseconds of schedule one message takes

	mu struct {
		sync.Mutex
		next float64 // clock time, in ns, of the next free slot
	}
}

// newPacer returns a pacer for rate messages per second whose schedule
// starts at start.
func newPacer(clk clock, rate int, start time.Duration) *pacer {
	p := &pacer{clk: clk, perMsg: float64(time.Second) / float64(rate)}
	p.mu.next = float64(start)
	return p
}

// reserve takes the slots for a request of n messages and returns the
// clock time at which it may be sent.
func (p *pacer) reserve(n int) time.Duration {
	now := float64(p.clk.now())
	p.mu.Lock()
	if floor := now - float64(pacerBurst); p.mu.next < floor {
		p.mu.next = floor
	}
	at := p.mu.next
	p.mu.next += float64(n) * p.perMsg
	p.mu.Unlock()
	return time.Duration(at)
}
