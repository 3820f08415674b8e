package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// pullSysFlag is the PULL_MESSAGE sysFlag of every pull: the subscription
// travels in the request (bit 2), so no heartbeat is needed first, and
// neither the suspend bit (no long polling: a caught-up queue answers at
// once) nor the commit bit (no consumer offset is stored) is set.
const pullSysFlag = "4"

// maxPullFailures is how many failed pulls in a row make a worker give up
// on a queue.
const maxPullFailures = 3

// Consume reads Options.Topic from the broker, catching up: every queue
// from its min offset to the max offset it had when the run started, with
// one pull at a time per queue on up to Conns×InFlight queues at once. The
// queue count is Options.Queues. It stops early after Duration or Count
// messages. Every pull body is checked record by record. Output and errors
// are as for Produce.
func Consume(ctx context.Context, opts Options, out io.Writer) (Summary, error) {
	return consume(ctx, opts, out, newWallClock())
}

func consume(ctx context.Context, opts Options, out io.Writer, clk clock) (Summary, error) {
	opts = opts.withDefaults(true)
	if err := opts.validate(); err != nil {
		return Summary{}, err
	}
	if opts.Protocol == ProtocolGRPC {
		return consumeGRPC(ctx, opts, out, clk)
	}
	nworkers := min(opts.Conns*opts.InFlight, opts.Queues)
	s := newSession(ctx, opts, out, clk, min(opts.Conns, nworkers), nworkers)
	defer s.close()
	if _, err := s.brokerCPU(); err != nil {
		return Summary{}, err
	}
	c := &consumer{s: s}
	if err := c.offsets(); err != nil {
		return Summary{}, err
	}
	fmt.Fprintln(s.out, c.header(nworkers))
	c.remaining.Store(opts.Count)
	s.run(nil, c.loop)
	return s.summary(), ctx.Err()
}

// consumer is the shared state of a Consume run's workers.
type consumer struct {
	s        *session
	from, to []int64  // per queue: min offset and max offset at start
	queueIDs []string // decimal text of each queue id

	nextQueue atomic.Int64 // next queue a worker takes
	remaining atomic.Int64 // messages still to read under Count
	stopped   atomic.Bool  // set when Count or Duration is reached
}

// offsets reads every queue's min and max offset.
func (c *consumer) offsets() error {
	s := c.s
	read := func(cl *remoting.Client, code int16, q string) (int64, error) {
		resp, err := s.setup(cl, code, map[string]string{"topic": s.opts.Topic, "queueId": q})
		if err != nil {
			return 0, err
		}
		off, err := resp.Int64("offset")
		if err != nil {
			return 0, fmt.Errorf("%w %s for queue %s: %w", ErrRefused, remoting.RequestCode(code), q, err)
		}
		return off, nil
	}
	for q := range s.opts.Queues {
		id := strconv.Itoa(q)
		cl := s.clients[q%len(s.clients)]
		lo, err := read(cl, remoting.GetMinOffset, id)
		if err != nil {
			return err
		}
		hi, err := read(cl, remoting.GetMaxOffset, id)
		if err != nil {
			return err
		}
		c.queueIDs = append(c.queueIDs, id)
		c.from = append(c.from, lo)
		c.to = append(c.to, max(hi, lo))
	}
	return nil
}

func (c *consumer) header(nworkers int) string {
	o := &c.s.opts
	var total int64
	for q := range c.from {
		total += c.to[q] - c.from[q]
	}
	until := "caught up"
	if o.Count > 0 {
		until += fmt.Sprintf(" or %d messages", o.Count)
	}
	if o.Duration > 0 {
		until += fmt.Sprintf(" or %v", o.Duration)
	}
	return fmt.Sprintf("consume from %s topic %s (%d queues holding %d messages): %d queues at a time, %d per pull, until %s",
		o.Broker, o.Topic, o.Queues, total, nworkers, o.PullBatch, until)
}

// take reserves up to n messages of the Count budget and returns how many
// it got; with no Count it returns n.
func (c *consumer) take(n int64) int64 {
	if c.s.opts.Count == 0 {
		return n
	}
	for {
		left := c.remaining.Load()
		k := min(n, left)
		if k <= 0 {
			return 0
		}
		if c.remaining.CompareAndSwap(left, left-k) {
			return k
		}
	}
}

// giveBack returns unused budget reserved by take.
func (c *consumer) giveBack(n int64) {
	if c.s.opts.Count > 0 && n > 0 {
		c.remaining.Add(n)
	}
}

// loop is one worker's run: take queues one by one and read each to its
// end.
func (c *consumer) loop(w *worker) {
	s := c.s
	ext := map[string]string{
		"consumerGroup":        s.opts.Group,
		"topic":                s.opts.Topic,
		"queueId":              "",
		"queueOffset":          "",
		"maxMsgNums":           "",
		"sysFlag":              pullSysFlag,
		"commitOffset":         "0",
		"suspendTimeoutMillis": "0",
		"subscription":         "*",
		"subVersion":           "0",
		"expressionType":       "TAG",
	}
	w.req = remoting.Command{
		Code:      remoting.PullMessage,
		Language:  remoting.LanguageGo,
		Version:   remoting.DefaultVersion,
		ExtFields: ext,
	}
	for !c.stopped.Load() {
		q := int(c.nextQueue.Add(1) - 1)
		if q >= len(c.queueIDs) {
			return
		}
		ext["queueId"] = c.queueIDs[q]
		if !c.drain(w, q) {
			return
		}
	}
}

// drain pulls queue q from its min offset to its max offset at start. It
// reports false when the run is over.
func (c *consumer) drain(w *worker, q int) bool {
	s := c.s
	ext := w.req.ExtFields
	offset, end := c.from[q], c.to[q]
	failures := 0
	for offset < end {
		if c.stopped.Load() || s.ctx.Err() != nil {
			return false
		}
		if s.pastDeadline(s.clk.now()) {
			c.stopped.Store(true)
			return false
		}
		want := c.take(min(int64(s.opts.PullBatch), end-offset))
		if want == 0 {
			c.stopped.Store(true)
			return false
		}
		ext["queueOffset"] = strconv.FormatInt(offset, 10)
		ext["maxMsgNums"] = strconv.FormatInt(want, 10)
		resp, err := w.invoke()
		if err != nil {
			c.giveBack(want)
			if s.ctx.Err() != nil {
				return false
			}
			s.failed(nil, err)
			if failures++; failures >= maxPullFailures {
				return true
			}
			if !s.backoff() {
				return false
			}
			continue
		}
		got, bad := int64(0), false
		switch resp.Code {
		case remoting.Success:
			got, bad = c.count(resp, want)
			resp.Recycle()
		case remoting.PullNotFound:
			// Nothing at offset: the queue ends earlier than its max
			// offset said.
			c.giveBack(want)
			return true
		case remoting.PullRetryImmediately:
			// Entries scanned, none returned; nextBeginOffset is past them.
		case remoting.PullOffsetMoved:
			s.failed(resp, nil)
			bad = true
		default:
			c.giveBack(want)
			s.failed(resp, nil)
			if failures++; failures >= maxPullFailures {
				return true
			}
			if !s.backoff() {
				return false
			}
			continue
		}
		c.giveBack(want - got)
		failures = 0
		next, err := resp.Int64("nextBeginOffset")
		if err != nil || next <= offset {
			if bad {
				return true
			}
			s.failed(nil, fmt.Errorf("bench: queue %d: %s at offset %d gave nextBeginOffset %q", q,
				remoting.ResponseCode(resp.Code), offset, resp.Get("nextBeginOffset")))
			return true
		}
		offset = next
	}
	return true
}

// count validates the records of a successful pull and counts up to want of
// them. A body that does not hold well-formed records counts as an error
// (bad is true), after the records before the bad one.
func (c *consumer) count(resp *remoting.Command, want int64) (got int64, bad bool) {
	s := c.s
	recs, err := message.DecodeRecords(resp.Body)
	if err != nil {
		s.failed(nil, fmt.Errorf("bench: pull body: %w", err))
		bad = true
	}
	got = min(int64(len(recs)), want)
	var bytes int64
	for _, r := range recs[:got] {
		bytes += int64(len(r.Body()))
	}
	s.messages.Add(got)
	s.bytes.Add(bytes)
	return got, bad
}
