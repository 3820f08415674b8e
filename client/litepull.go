package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// LitePullOptions configures a lite pull consumer: the options it shares
// with the push consumer (of which the consume-service ones, such as
// ConsumeGoroutines, are unused) and its own. Zero means default.
type LitePullOptions struct {
	ConsumerOptions
	// ManualCommit turns auto-commit off: a queue's offset then moves only
	// on Commit and Seek. By default a message counts as consumed once
	// Poll has returned it, and offsets are sent to the broker every
	// AutoCommitInterval and at Shutdown.
	ManualCommit bool
	// AutoCommitInterval is how often auto-commit sends offsets to the
	// broker; default 5 s. With ManualCommit, PersistInterval paces the
	// sending of offsets set by Seek instead.
	AutoCommitInterval time.Duration
	// PollTimeout is the longest Poll waits for a message; default 5 s.
	PollTimeout time.Duration
}

// Defaults of LitePullOptions.
const (
	DefaultAutoCommitInterval = 5 * time.Second
	DefaultPollTimeout        = 5 * time.Second
)

// withDefaults returns a copy of o with defaults filled in, or every
// problem found.
func (o LitePullOptions) withDefaults() (LitePullOptions, error) {
	var problems []error
	co, err := o.ConsumerOptions.withDefaults()
	if err != nil {
		problems = append(problems, err)
	}
	if _, err := o.Client.withDefaults(); err != nil {
		problems = append(problems, err)
	}
	if o.AutoCommitInterval < 0 {
		problems = append(problems, fmt.Errorf("client: invalid LitePullOptions: AutoCommitInterval %v is negative", o.AutoCommitInterval))
	}
	if o.PollTimeout < 0 {
		problems = append(problems, fmt.Errorf("client: invalid LitePullOptions: PollTimeout %v is negative", o.PollTimeout))
	}
	if len(problems) > 0 {
		return o, errors.Join(problems...)
	}
	o.ConsumerOptions = co
	if o.AutoCommitInterval == 0 {
		o.AutoCommitInterval = DefaultAutoCommitInterval
	}
	if o.PollTimeout == 0 {
		o.PollTimeout = DefaultPollTimeout
	}
	return o, nil
}

// litePullMode is how a lite pull consumer gets its queues; the two are
// exclusive.
type litePullMode uint8

const (
	modeUnset     litePullMode = iota
	modeSubscribe              // the group's rebalance assigns queues
	modeAssign                 // the caller names the queues
)

// litePullState is a lite pull consumer's life cycle.
type litePullState uint8

const (
	stateCreated litePullState = iota
	stateRunning
	stateClosed
)

// LitePullConsumer reads queues in the background and hands the messages
// out when asked: the caller drives consumption with Poll and decides
// where each queue stands with Seek and Commit. Its queues come either from
// the group's rebalance (Subscribe) or from the caller (Assign).
//
// Offsets: a queue's consumed offset is the offset after the last message
// Poll handed out, or where Seek put it. With auto-commit it becomes the
// queue's committed offset at once, and is sent to the broker every
// AutoCommitInterval; with ManualCommit only Commit makes it the committed
// offset (and sends it at once).
//
// Lock order: lmu, then consumerCore.mu, then the offset store's locks.
// lmu is never held across a broker call.
type LitePullConsumer struct {
	consumerCore
	lopts LitePullOptions
	// ready holds a token when a queue may have buffered messages, waking
	// a waiting Poll.
	ready chan struct{}
	// rebalMu serializes rebalances and assignment changes.
	rebalMu sync.Mutex

	lmu struct {
		sync.Mutex
		state    litePullState
		mode     litePullMode
		assigned []MessageQueue // the queues of Assign
		queues   map[MessageQueue]*litePullQueue
		// paused queues are neither pulled nor polled; a queue may be
		// paused before it is held.
		paused map[MessageQueue]bool
		// next rotates where Poll starts taking, so one busy queue does
		// not starve the others.
		next int
		// flowHolds counts pulls delayed by flow control, for tests.
		flowHolds int64
	}
}

// litePullQueue is one held queue: its buffer and its puller. Every field
// but q and space is guarded by LitePullConsumer.lmu.
type litePullQueue struct {
	q MessageQueue
	// gen is bumped when the puller is restarted (Seek); a puller whose
	// generation is no longer current drops what it pulled and returns.
	gen    uint64
	cancel context.CancelFunc // stops the current puller
	// msgs are pulled and not yet polled, in offset order; size is the
	// sum of their body lengths.
	msgs []*MessageExt
	size int64
	// consumed is the offset after the last message Poll handed out, or
	// where Seek put the queue; what Commit commits.
	consumed int64
	// space holds a token when Poll took messages, waking a puller held
	// by flow control.
	space chan struct{}
}

// NewLitePullConsumer returns a lite pull consumer. Call Subscribe or
// Assign, then Start.
func NewLitePullConsumer(opts LitePullOptions) (*LitePullConsumer, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &LitePullConsumer{lopts: o, ready: make(chan struct{}, 1)}
	c.opts = o.ConsumerOptions
	c.kind = "CONSUME_ACTIVELY"
	c.quit = make(chan struct{})
	c.kick = make(chan struct{}, 1)
	c.mu.subs = make(map[string]*subscription)
	c.lmu.queues = make(map[MessageQueue]*litePullQueue)
	c.lmu.paused = make(map[MessageQueue]bool)
	c.rebal = newRebalancer(&c.consumerCore, c)
	return c, nil
}

// Subscribe adds or replaces the subscription of topic; the group's
// rebalance then decides which of its queues this consumer reads. It must
// be called before Start, and not on a consumer that Assign was called on.
func (c *LitePullConsumer) Subscribe(topic string, sel Selector) error {
	s, err := newSubscription(topic, sel)
	if err != nil {
		return err
	}
	c.lmu.Lock()
	defer c.lmu.Unlock()
	switch {
	case c.lmu.state != stateCreated:
		return errors.New("client: Subscribe after Start")
	case c.lmu.mode == modeAssign:
		return errors.New("client: Subscribe on a consumer with assigned queues")
	}
	c.lmu.mode = modeSubscribe
	c.mu.Lock()
	c.mu.subs[topic] = s
	c.mu.Unlock()
	return nil
}

// Assign sets the queues the consumer reads, replacing any assigned before;
// there is no rebalance, but offsets are still committed for the group.
// Queues no longer assigned are given up (their offsets committed) and new
// ones taken up at once when the consumer runs, else at Start. It may not
// be called on a consumer that Subscribe was called on.
func (c *LitePullConsumer) Assign(queues []MessageQueue) error {
	c.lmu.Lock()
	switch {
	case c.lmu.state == stateClosed:
		c.lmu.Unlock()
		return ErrNotStarted
	case c.lmu.mode == modeSubscribe:
		c.lmu.Unlock()
		return errors.New("client: Assign on a consumer with subscriptions")
	}
	c.lmu.mode = modeAssign
	c.lmu.assigned = slices.Clone(queues)
	running := c.lmu.state == stateRunning
	c.lmu.Unlock()
	if running {
		return c.rebalance()
	}
	return nil
}

// Start connects, registers the group and starts reading.
func (c *LitePullConsumer) Start() error {
	c.lmu.Lock()
	mode, state := c.lmu.mode, c.lmu.state
	c.lmu.Unlock()
	switch {
	case state != stateCreated:
		return errors.New("client: Start called twice")
	case mode == modeUnset:
		return errors.New("client: Start without Subscribe or Assign")
	}
	if mode == modeSubscribe && c.opts.Model == Clustering {
		s, _ := newSubscription(retryTopic(c.opts.Group), Selector{})
		c.mu.Lock()
		c.mu.subs[s.topic] = s
		c.mu.Unlock()
	}
	if err := c.startCore(c); err != nil {
		return err
	}
	c.lmu.Lock()
	c.lmu.state = stateRunning
	c.lmu.Unlock()
	interval := c.lopts.AutoCommitInterval
	if c.lopts.ManualCommit {
		interval = c.opts.PersistInterval
	}
	c.goLoop(interval, nil, c.persistHeld)
	c.goLoop(c.opts.RebalanceInterval, c.kick, func() { _ = c.rebalance() })
	if mode == modeAssign {
		// Take the queues up before returning, so Seek works at once;
		// the loop retries any that failed.
		if err := c.rebalance(); err != nil {
			c.in.log.Warn("taking up assigned queues failed; retrying at the next rebalance", "group", c.opts.Group, "err", err)
		}
	} else {
		c.rebalanceSoon()
	}
	return nil
}

// Shutdown stops reading, commits the offsets of the held queues (with
// auto-commit, those of every message Poll handed out) and unregisters from
// the brokers. Buffered messages are dropped. It may be called more than
// once.
func (c *LitePullConsumer) Shutdown(ctx context.Context) error {
	c.lmu.Lock()
	if c.lmu.state == stateCreated {
		c.lmu.state = stateClosed
		c.lmu.Unlock()
		return nil
	}
	c.lmu.Unlock()
	var err error
	c.stopOnce.Do(func() {
		c.lmu.Lock()
		c.lmu.state = stateClosed
		var held []MessageQueue
		for q, lq := range c.lmu.queues {
			lq.cancel()
			lq.msgs, lq.size = nil, 0
			held = append(held, q)
		}
		c.lmu.Unlock()
		close(c.quit)
		done := make(chan struct{})
		go func() { c.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = fmt.Errorf("client: pullers still running at shutdown: %w", ctx.Err())
		}
		pctx, cancel := c.in.ctx()
		err = errors.Join(err, c.offsets.persist(pctx, held))
		cancel()
		err = errors.Join(err, c.stopCore(ctx))
	})
	return err
}

// FetchQueues returns the readable queues of topic, from its route as the
// name servers have it now.
func (c *LitePullConsumer) FetchQueues(ctx context.Context, topic string) ([]MessageQueue, error) {
	if !c.running() {
		return nil, ErrNotStarted
	}
	r, err := c.in.updateRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	return slices.Clone(r.readQueues), nil
}

// Poll returns buffered messages, at most PullBatchSize, each queue's in
// offset order. When none are buffered it waits for some until ctx ends or
// PollTimeout passes, and then returns an empty slice and no error. With
// auto-commit, the messages returned count as consumed.
func (c *LitePullConsumer) Poll(ctx context.Context) ([]*MessageExt, error) {
	t := time.NewTimer(c.lopts.PollTimeout)
	defer t.Stop()
	for {
		msgs, err := c.take()
		if err != nil || len(msgs) > 0 {
			return msgs, err
		}
		select {
		case <-c.ready:
		case <-ctx.Done():
			return msgs, nil
		case <-t.C:
			return msgs, nil
		case <-c.quit:
			return nil, ErrNotStarted
		}
	}
}

// take hands out up to PullBatchSize buffered messages, starting at a
// rotating queue, and records them as consumed.
func (c *LitePullConsumer) take() ([]*MessageExt, error) {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	if c.lmu.state != stateRunning {
		return nil, ErrNotStarted
	}
	qs := c.heldLocked("")
	out := []*MessageExt{}
	more := false
	start := c.lmu.next
	c.lmu.next++
	for i := range qs {
		q := qs[(start+i)%len(qs)]
		lq := c.lmu.queues[q]
		if len(lq.msgs) == 0 || c.lmu.paused[q] {
			continue
		}
		if len(out) == c.opts.PullBatchSize {
			more = true
			break
		}
		n := min(len(lq.msgs), c.opts.PullBatchSize-len(out))
		for _, m := range lq.msgs[:n] {
			lq.size -= int64(len(m.Body))
		}
		out = append(out, lq.msgs[:n]...)
		clear(lq.msgs[:n])
		lq.msgs = lq.msgs[n:]
		more = more || len(lq.msgs) > 0
		lq.consumed = out[len(out)-1].QueueOffset + 1
		if !c.lopts.ManualCommit {
			c.offsets.update(lq.q, lq.consumed, false)
		}
		signal(lq.space)
	}
	if more {
		signal(c.ready) // for another Poll waiting meanwhile
	}
	return out, nil
}

// signal puts a token in ch unless one is there.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Seek makes q's next polled message the one at offset, which must lie
// between q's min and max offsets: q's buffered messages are dropped, its
// puller restarts at offset, and its consumed offset becomes offset (with
// auto-commit, its committed offset too).
func (c *LitePullConsumer) Seek(q MessageQueue, offset int64) error {
	if !c.running() {
		return ErrNotStarted
	}
	if !c.holds(q) {
		return fmt.Errorf("%w: %s", ErrQueueNotHeld, q)
	}
	ctx, cancel := c.in.ctx()
	defer cancel()
	lo, err := c.in.minOffset(ctx, q)
	if err != nil {
		return fmt.Errorf("client: seek %s: %w", q, err)
	}
	hi, err := c.in.maxOffset(ctx, q)
	if err != nil {
		return fmt.Errorf("client: seek %s: %w", q, err)
	}
	if offset < lo || offset > hi {
		return fmt.Errorf("client: seek %s to %d: outside [%d, %d]", q, offset, lo, hi)
	}
	return c.seek(q, offset)
}

// SeekToBegin seeks q to its oldest stored message.
func (c *LitePullConsumer) SeekToBegin(q MessageQueue) error { return c.seekTo(q, false) }

// SeekToEnd seeks q past its newest message: only messages stored from
// now on are polled.
func (c *LitePullConsumer) SeekToEnd(q MessageQueue) error { return c.seekTo(q, true) }

func (c *LitePullConsumer) seekTo(q MessageQueue, end bool) error {
	if !c.running() {
		return ErrNotStarted
	}
	if !c.holds(q) {
		return fmt.Errorf("%w: %s", ErrQueueNotHeld, q)
	}
	ctx, cancel := c.in.ctx()
	defer cancel()
	where := c.in.minOffset
	if end {
		where = c.in.maxOffset
	}
	offset, err := where(ctx, q)
	if err != nil {
		return fmt.Errorf("client: seek %s: %w", q, err)
	}
	return c.seek(q, offset)
}

// seek restarts q's puller at offset.
func (c *LitePullConsumer) seek(q MessageQueue, offset int64) error {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	if c.lmu.state != stateRunning {
		return ErrNotStarted
	}
	lq := c.lmu.queues[q]
	if lq == nil {
		return fmt.Errorf("%w: %s", ErrQueueNotHeld, q)
	}
	lq.cancel()
	lq.gen++
	clear(lq.msgs)
	lq.msgs, lq.size = nil, 0
	lq.consumed = offset
	c.offsets.update(q, offset, false)
	c.startPullerLocked(lq, offset)
	return nil
}

// Committed returns q's committed offset: the one in memory when the
// consumer has one (with auto-commit, possibly not yet sent to the
// broker), else the broker's; -1 when there is none.
func (c *LitePullConsumer) Committed(ctx context.Context, q MessageQueue) (int64, error) {
	if !c.running() {
		return -1, ErrNotStarted
	}
	return c.offsets.read(ctx, q, readMemoryThenStore)
}

// Commit makes the consumed offset of every held queue (after the last
// message Poll handed out) its committed offset and sends the offsets to
// the broker now.
func (c *LitePullConsumer) Commit(ctx context.Context) error {
	c.lmu.Lock()
	if c.lmu.state != stateRunning {
		c.lmu.Unlock()
		return ErrNotStarted
	}
	qs := c.heldLocked("")
	for _, q := range qs {
		c.offsets.update(q, c.lmu.queues[q].consumed, false)
	}
	c.lmu.Unlock()
	return c.offsets.persist(ctx, qs)
}

// Pause stops pulling qs and handing out their buffered messages until
// Resume; it holds for queues taken up later too.
func (c *LitePullConsumer) Pause(qs ...MessageQueue) {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	for _, q := range qs {
		c.lmu.paused[q] = true
	}
}

// Resume undoes Pause.
func (c *LitePullConsumer) Resume(qs ...MessageQueue) {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	for _, q := range qs {
		delete(c.lmu.paused, q)
		if lq := c.lmu.queues[q]; lq != nil {
			signal(lq.space)
			if len(lq.msgs) > 0 {
				signal(c.ready)
			}
		}
	}
}

// running reports whether the consumer has started and not shut down.
func (c *LitePullConsumer) running() bool {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	return c.lmu.state == stateRunning
}

// holds reports whether q is held.
func (c *LitePullConsumer) holds(q MessageQueue) bool {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	return c.lmu.queues[q] != nil
}

// heldLocked returns the held queues of topic ("" for all), in order.
func (c *LitePullConsumer) heldLocked(topic string) []MessageQueue {
	out := make([]MessageQueue, 0, len(c.lmu.queues))
	for q := range c.lmu.queues {
		if topic == "" || q.Topic == topic {
			out = append(out, q)
		}
	}
	slices.SortFunc(out, offsetQueueOrder)
	return out
}

// held implements queueTable.
func (c *LitePullConsumer) held(topic string) []MessageQueue {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	return c.heldLocked(topic)
}

// add implements queueTable: work out where q starts and start its puller.
func (c *LitePullConsumer) add(q MessageQueue) error {
	if !c.running() {
		return ErrNotStarted
	}
	ctx, cancel := c.in.ctx()
	defer cancel()
	c.offsets.remove(q)
	offset, err := startOffset(ctx, &c.consumerCore, q)
	if err != nil {
		return err
	}
	c.lmu.Lock()
	defer c.lmu.Unlock()
	if c.lmu.state != stateRunning {
		return ErrNotStarted
	}
	if c.lmu.queues[q] != nil {
		return nil
	}
	c.offsets.update(q, offset, false)
	lq := &litePullQueue{q: q, consumed: offset, space: make(chan struct{}, 1)}
	c.lmu.queues[q] = lq
	c.startPullerLocked(lq, offset)
	c.in.log.Debug("queue taken up", "group", c.opts.Group, "queue", q, "offset", offset)
	return nil
}

// drop implements queueTable: stop pulling q, drop its buffered messages
// and commit its offset.
func (c *LitePullConsumer) drop(q MessageQueue) bool {
	c.lmu.Lock()
	lq := c.lmu.queues[q]
	if lq != nil {
		delete(c.lmu.queues, q)
		lq.cancel()
		clear(lq.msgs)
		lq.msgs, lq.size = nil, 0
	}
	c.lmu.Unlock()
	if lq == nil {
		return true
	}
	ctx, cancel := c.in.ctx()
	defer cancel()
	c.releaseOffset(ctx, q)
	return true
}

// rebalance makes the held queues match the group's assignment
// (Subscribe) or the caller's (Assign).
func (c *LitePullConsumer) rebalance() error {
	c.rebalMu.Lock()
	defer c.rebalMu.Unlock()
	c.lmu.Lock()
	mode, assigned := c.lmu.mode, slices.Clone(c.lmu.assigned)
	held := c.heldLocked("")
	c.lmu.Unlock()
	if mode == modeSubscribe {
		c.rebal.run()
		return nil
	}
	for _, q := range held {
		if !slices.Contains(assigned, q) {
			c.drop(q)
		}
	}
	var errs []error
	for _, q := range assigned {
		if !slices.Contains(held, q) {
			if err := c.add(q); err != nil {
				errs = append(errs, fmt.Errorf("client: take up %s: %w", q, err))
			}
		}
	}
	return errors.Join(errs...)
}

// persistHeld sends the committed offsets of the held queues.
func (c *LitePullConsumer) persistHeld() {
	c.lmu.Lock()
	qs := c.heldLocked("")
	c.lmu.Unlock()
	ctx, cancel := c.in.ctx()
	defer cancel()
	if err := c.offsets.persist(ctx, qs); err != nil {
		c.in.log.Warn("committing offsets failed; retrying at the next round", "group", c.opts.Group, "err", err)
	}
}

// startPullerLocked starts a puller of lq's current generation at offset.
func (c *LitePullConsumer) startPullerLocked(lq *litePullQueue, offset int64) {
	ctx, cancel := context.WithCancel(context.Background())
	lq.cancel = cancel
	c.wg.Add(1)
	go c.pullLoop(ctx, lq, lq.gen, offset)
}

// pullHeld reports whether lq's puller must wait: lq is paused or buffers
// more than the flow-control limits allow.
func (c *LitePullConsumer) pullHeld(lq *litePullQueue) bool {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	if c.lmu.paused[lq.q] {
		return true
	}
	count, size := int64(c.opts.PullThresholdForQueue), int64(c.opts.PullThresholdSizeForQueue)<<20
	if n := int64(len(c.heldLocked(lq.q.Topic))); n > 0 {
		if c.opts.PullThresholdForTopic > 0 {
			count = max(1, int64(c.opts.PullThresholdForTopic)/n)
		}
		if c.opts.PullThresholdSizeForTopic > 0 {
			size = max(1, mib(c.opts.PullThresholdSizeForTopic)/n)
		}
	}
	held := int64(len(lq.msgs)) > count || lq.size > size
	if held {
		c.lmu.flowHolds++
	}
	return held
}

// pullLoop is the puller of one queue generation: one long-polling pull
// at a time, held while the queue's buffer is over the flow-control limits.
func (c *LitePullConsumer) pullLoop(ctx context.Context, lq *litePullQueue, gen uint64, offset int64) {
	defer c.wg.Done()
	q := lq.q
	for ctx.Err() == nil {
		if c.pullHeld(lq) {
			t := time.NewTimer(flowHoldDelay)
			select {
			case <-lq.space:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			continue
		}
		sub := c.subscription(q.Topic)
		if sub == nil {
			// An assigned queue reads everything.
			sub, _ = newSubscription(q.Topic, Selector{})
		}
		req := pullRequest{
			group: c.opts.Group, queue: q, offset: offset, maxNums: int32(c.opts.PullBatchSize),
			sysFlag: pullFlagSuspend | pullFlagSubscription, suspend: pullHold.Milliseconds(),
			expression: sub.data.SubString, expressionType: sub.data.ExpressionType,
		}
		res, err := c.in.pull(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.in.log.Warn("pull failed", "queue", q, "offset", offset, "err", err)
			sleep(ctx, pullErrorBackoff)
			continue
		}
		var msgs []*MessageExt
		switch res.status {
		case pullFound:
			for _, m := range res.msgs {
				if sub.matches(m) {
					msgs = append(msgs, m)
				}
			}
			c.restoreRetryTopic(msgs)
		case pullOffsetIllegal:
			c.in.log.Warn("pull offset out of range; moving on", "queue", q, "offset", offset, "next", res.nextBeginOffset)
		}
		if !c.buffer(lq, gen, msgs, res.nextBeginOffset) {
			return
		}
		offset = res.nextBeginOffset
	}
}

// buffer adds pulled messages to lq, or reports false when gen is no
// longer lq's current generation or lq is no longer held. When a pull
// brought nothing to poll and nothing is buffered, the queue's consumed
// offset moves past what the pull skipped (filtered messages).
func (c *LitePullConsumer) buffer(lq *litePullQueue, gen uint64, msgs []*MessageExt, next int64) bool {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	if c.lmu.queues[lq.q] != lq || lq.gen != gen {
		return false
	}
	if len(msgs) == 0 {
		if len(lq.msgs) == 0 && next > lq.consumed {
			lq.consumed = next
			if !c.lopts.ManualCommit {
				c.offsets.update(lq.q, next, false)
			}
		}
		return true
	}
	for _, m := range msgs {
		lq.size += int64(len(m.Body))
	}
	lq.msgs = append(lq.msgs, msgs...)
	signal(c.ready)
	return true
}

// buffered returns how many messages lq holds and how many pulls flow
// control delayed, for tests.
func (c *LitePullConsumer) buffered(q MessageQueue) (msgs int, flowHolds int64) {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	if lq := c.lmu.queues[q]; lq != nil {
		msgs = len(lq.msgs)
	}
	return msgs, c.lmu.flowHolds
}
