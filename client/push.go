package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rmq-go/rmq/core/message"
)

// ConsumeResult is a concurrent handler's verdict on its messages.
type ConsumeResult int

const (
	// ConsumeSuccess acknowledges the messages up to the context's
	// AckIndex (all of them by default); the rest are retried.
	ConsumeSuccess ConsumeResult = iota
	// ConsumeRetryLater retries every message of the call later, through
	// the group's retry topic.
	ConsumeRetryLater
)

// ConcurrentContext is what a concurrent handler may read and set.
type ConcurrentContext struct {
	// Queue is where the messages were read from.
	Queue MessageQueue
	// AckIndex, on success, is the index of the last message handled;
	// the ones after it are retried. It starts past the last message.
	AckIndex int
	// DelayLevelWhenNextConsume is the delay level of the retry; 0 lets
	// the broker choose (3 + reconsume times).
	DelayLevelWhenNextConsume int32
}

// OrderlyResult is an orderly handler's verdict on its messages.
type OrderlyResult int

const (
	// OrderlySuccess acknowledges the messages (with AutoCommit, commits
	// their offsets).
	OrderlySuccess OrderlyResult = iota
	// OrderlySuspend puts the messages back at the head of their queue
	// and consumes them again after the context's SuspendTime; past
	// MaxReconsumeTimes they go to the dead-letter topic instead.
	OrderlySuspend
	// OrderlyCommit commits the offsets of every message consumed so
	// far (for AutoCommit false).
	OrderlyCommit
	// OrderlyRollback puts every message consumed since the last commit
	// back and consumes them again (for AutoCommit false).
	OrderlyRollback
)

// OrderlyContext is what an orderly handler may read and set.
type OrderlyContext struct {
	Queue MessageQueue
	// AutoCommit commits after each successful call (the default). When
	// false, offsets move only on OrderlyCommit.
	AutoCommit bool
	// SuspendTime is how long the queue pauses after OrderlySuspend.
	SuspendTime time.Duration
}

// Handler is the function a push consumer hands messages to: a
// ConcurrentFunc or an OrderlyFunc.
type Handler interface{ isHandler() }

// ConcurrentFunc consumes messages of any queue in parallel.
type ConcurrentFunc func(ctx context.Context, cc *ConcurrentContext, msgs []*MessageExt) ConsumeResult

// OrderlyFunc consumes each queue's messages one call at a time, in queue
// order, while this client holds the queue's lock at the broker.
type OrderlyFunc func(ctx context.Context, oc *OrderlyContext, msgs []*MessageExt) OrderlyResult

func (ConcurrentFunc) isHandler() {}
func (OrderlyFunc) isHandler()    {}

// Timings of the push consumer that are not options.
const (
	// pullHold is how long a broker may hold a pull that found nothing.
	pullHold = 20 * time.Second
	// pullErrorBackoff is the wait after a failed pull.
	pullErrorBackoff = 3 * time.Second
	// unlockedBackoff is the wait of an orderly queue that lost its lock.
	unlockedBackoff = 3 * time.Second
	// resubmitDelay is the wait before messages whose send-back failed
	// are consumed again locally.
	resubmitDelay = 5 * time.Second
	// lockInterval is how often orderly queues' locks are renewed.
	lockInterval = 20 * time.Second
	// maxOrderlyRun is how long one orderly run keeps a queue before
	// yielding to the others.
	maxOrderlyRun = time.Minute
)

// PushConsumer reads its subscriptions and hands the messages to its
// handler: pull, buffer, consume, acknowledge, retry.
type PushConsumer struct {
	consumerCore
	concurrent ConcurrentFunc
	orderly    OrderlyFunc
	flow       *flowControl
	work       chan consumeRequest // concurrent consume requests
	// resubmitDelay is resubmitDelay's value; tests shorten it.
	resubmitDelay time.Duration

	started bool
	// rebalMu keeps an offset reset (relays.go) and a rebalance from
	// taking up or giving up queues at the same time.
	rebalMu sync.Mutex
	qmu     struct {
		sync.Mutex
		closed bool // set by Shutdown: no queue is taken up after it
		queues map[MessageQueue]*queueState
	}
}

// queueState is one held queue: its process queue and puller.
type queueState struct {
	q      MessageQueue
	pq     *processQueue
	cancel context.CancelFunc
	done   chan struct{} // closed when the puller has returned
	// run is held by the orderly run consuming the queue: one at a time.
	run chan struct{}
}

// consumeRequest is one concurrent handler call's messages.
type consumeRequest struct {
	qs   *queueState
	msgs []*MessageExt
}

// NewPushConsumer returns a consumer that calls h. Subscribe before Start.
func NewPushConsumer(opts ConsumerOptions, h Handler) (*PushConsumer, error) {
	o, err := opts.withDefaults()
	var problems []error
	if err != nil {
		problems = append(problems, err)
	}
	if _, err := o.Client.withDefaults(); err != nil {
		problems = append(problems, err)
	}
	p := &PushConsumer{}
	switch f := h.(type) {
	case ConcurrentFunc:
		p.concurrent = f
	case OrderlyFunc:
		p.orderly = f
	default:
		problems = append(problems, fmt.Errorf("client: handler %T is neither a ConcurrentFunc nor an OrderlyFunc", h))
	}
	if f, ok := h.(ConcurrentFunc); ok && f == nil {
		problems = append(problems, errors.New("client: nil handler"))
	}
	if f, ok := h.(OrderlyFunc); ok && f == nil {
		problems = append(problems, errors.New("client: nil handler"))
	}
	fc, err := newFlowControl(flowLimits{
		queueCount: o.PullThresholdForQueue,
		queueSize:  int64(o.PullThresholdSizeForQueue) << 20,
		topicCount: o.PullThresholdForTopic,
		topicSize:  mib(o.PullThresholdSizeForTopic),
		maxSpan:    int64(o.MaxSpan),
	})
	if err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	p.opts = o
	p.flow = fc
	p.resubmitDelay = resubmitDelay
	p.kind = "CONSUME_PASSIVELY"
	p.quit = make(chan struct{})
	p.kick = make(chan struct{}, 1)
	p.mu.subs = make(map[string]*subscription)
	p.qmu.queues = make(map[MessageQueue]*queueState)
	p.rebal = newRebalancer(&p.consumerCore, p)
	return p, nil
}

func mib(v int) int64 {
	if v < 0 {
		return -1
	}
	return int64(v) << 20
}

// Subscribe adds or replaces the subscription of topic. It must be called
// before Start.
func (p *PushConsumer) Subscribe(topic string, sel Selector) error {
	if p.started {
		return errors.New("client: Subscribe after Start")
	}
	s, err := newSubscription(topic, sel)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.mu.subs[topic] = s
	p.mu.Unlock()
	return nil
}

// Start connects, registers the group and starts consuming.
func (p *PushConsumer) Start() error {
	if p.started {
		return errors.New("client: Start called twice")
	}
	if len(p.subscriptions()) == 0 {
		return errors.New("client: Start without a subscription")
	}
	if p.opts.Model == Clustering {
		s, _ := newSubscription(retryTopic(p.opts.Group), Selector{})
		p.mu.Lock()
		p.mu.subs[s.topic] = s
		p.mu.Unlock()
	}
	if err := p.startCore(p); err != nil {
		return err
	}
	p.started = true
	if p.concurrent != nil {
		p.work = make(chan consumeRequest, 1024)
		for range p.opts.ConsumeGoroutines {
			p.wg.Add(1)
			go p.consumeWorker()
		}
		p.goLoop(p.opts.ConsumeTimeout, nil, p.sweepExpired)
	} else if p.opts.Model == Clustering {
		p.goLoop(lockInterval, nil, p.renewLocks)
	}
	p.goLoop(p.opts.PersistInterval, nil, p.persist)
	p.goLoop(p.opts.RebalanceInterval, p.kick, func() {
		p.rebalMu.Lock()
		defer p.rebalMu.Unlock()
		p.rebal.run()
	})
	p.rebalanceSoon()
	return nil
}

// Shutdown stops pulling, lets handler calls under way finish (until ctx
// ends), commits the offsets of what was consumed, releases orderly
// locks and unregisters from the brokers. It may be called more than
// once.
func (p *PushConsumer) Shutdown(ctx context.Context) error {
	if !p.started {
		return nil
	}
	var err error
	p.stopOnce.Do(func() {
		close(p.quit)
		p.qmu.Lock()
		p.qmu.closed = true
		states := make([]*queueState, 0, len(p.qmu.queues))
		for _, qs := range p.qmu.queues {
			states = append(states, qs)
		}
		p.qmu.Unlock()
		for _, qs := range states {
			qs.cancel()
		}
		for _, qs := range states {
			<-qs.done
		}
		done := make(chan struct{})
		go func() { p.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = fmt.Errorf("client: handlers still running at shutdown: %w", ctx.Err())
		}
		var qs []MessageQueue
		for _, s := range states {
			qs = append(qs, s.q)
		}
		pctx, cancel := p.in.ctx()
		err = errors.Join(err, p.offsets.persist(pctx, qs))
		cancel()
		if p.orderly != nil && p.opts.Model == Clustering {
			err = errors.Join(err, p.unlockAll(states))
		}
		for _, s := range states {
			s.pq.dropped.Store(true)
		}
		err = errors.Join(err, p.stopCore(ctx))
	})
	return err
}

// Assigned returns the queues of topic the consumer holds now.
func (p *PushConsumer) Assigned(topic string) []MessageQueue { return p.held(topic) }

// held implements queueTable.
func (p *PushConsumer) held(topic string) []MessageQueue {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	var out []MessageQueue
	for q := range p.qmu.queues {
		if q.Topic == topic {
			out = append(out, q)
		}
	}
	slices.SortFunc(out, offsetQueueOrder)
	return out
}

// topicQueues counts the held queues of topic.
func (p *PushConsumer) topicQueues(topic string) int {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	n := 0
	for q := range p.qmu.queues {
		if q.Topic == topic {
			n++
		}
	}
	return n
}

// add implements queueTable: lock an orderly queue, work out where to
// start, and start its puller.
func (p *PushConsumer) add(q MessageQueue) error {
	select {
	case <-p.quit:
		return errShutDown
	default:
	}
	ctx, cancel := p.in.ctx()
	defer cancel()
	pq := newProcessQueue(p.orderly != nil, time.Now())
	if p.orderly != nil && p.opts.Model == Clustering {
		locked, err := p.in.lockBatch(ctx, q.BrokerName, p.opts.Group, []MessageQueue{q})
		if err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if !slices.Contains(locked, q) {
			return errors.New("locked by another consumer")
		}
		pq.setLocked(true, time.Now())
	}
	p.offsets.remove(q)
	offset, err := p.startOffset(ctx, q)
	if err != nil {
		return err
	}
	p.offsets.update(q, offset, false)
	pctx, pcancel := context.WithCancel(context.Background())
	qs := &queueState{q: q, pq: pq, cancel: pcancel, done: make(chan struct{}), run: make(chan struct{}, 1)}
	p.qmu.Lock()
	if p.qmu.closed {
		p.qmu.Unlock()
		pcancel()
		return errShutDown
	}
	p.qmu.queues[q] = qs
	p.qmu.Unlock()
	p.in.log.Debug("queue taken up", "group", p.opts.Group, "queue", q, "offset", offset)
	go p.pullLoop(pctx, qs, offset)
	return nil
}

// startOffset is where a newly held queue starts: the group's committed
// offset, else the ConsumeFrom rule.
func (p *PushConsumer) startOffset(ctx context.Context, q MessageQueue) (int64, error) {
	return startOffset(ctx, &p.consumerCore, q)
}

func startOffset(ctx context.Context, c *consumerCore, q MessageQueue) (int64, error) {
	off, err := c.offsets.read(ctx, q, readStore)
	if err != nil {
		return 0, fmt.Errorf("committed offset: %w", err)
	}
	if off >= 0 {
		return off, nil
	}
	isRetry := q.Topic == retryTopic(c.opts.Group)
	switch c.opts.ConsumeFrom {
	case ConsumeFromFirstOffset:
		return 0, nil
	case ConsumeFromTimestamp:
		if isRetry {
			return c.in.maxOffset(ctx, q)
		}
		return c.in.searchOffset(ctx, q, c.opts.ConsumeTimestamp.UnixMilli())
	default:
		if isRetry {
			return 0, nil
		}
		return c.in.maxOffset(ctx, q)
	}
}

// drop implements queueTable: stop pulling q, commit its offset, and for
// an orderly queue wait (at most 1 s) for its handler and unlock it.
func (p *PushConsumer) drop(q MessageQueue) bool { return p.dropQueue(q, true) }

// dropQueue is drop; without commit the queue's offset is left as it is
// in memory and at the broker (an offset reset sets it next).
func (p *PushConsumer) dropQueue(q MessageQueue, commit bool) bool {
	p.qmu.Lock()
	qs := p.qmu.queues[q]
	p.qmu.Unlock()
	if qs == nil {
		return true
	}
	qs.pq.dropped.Store(true)
	qs.cancel()
	<-qs.done
	orderlyLocked := p.orderly != nil && p.opts.Model == Clustering
	if orderlyLocked {
		select {
		case qs.run <- struct{}{}:
			defer func() { <-qs.run }()
		case <-time.After(time.Second):
			return false
		}
	}
	ctx, cancel := p.in.ctx()
	defer cancel()
	if commit {
		p.releaseOffset(ctx, q)
	}
	if orderlyLocked {
		if err := p.in.unlockBatch(ctx, q.BrokerName, p.opts.Group, []MessageQueue{q}); err != nil {
			p.in.log.Warn("unlocking a dropped queue failed; its lock expires at the broker", "queue", q, "err", err)
		}
	}
	p.qmu.Lock()
	if p.qmu.queues[q] == qs {
		delete(p.qmu.queues, q)
	}
	p.qmu.Unlock()
	return true
}

// persist commits the offsets of every held queue.
func (p *PushConsumer) persist() {
	ctx, cancel := p.in.ctx()
	defer cancel()
	if err := p.offsets.persist(ctx, heldQueues(p, p.topics())); err != nil {
		p.in.log.Warn("committing offsets failed; retrying at the next round", "group", p.opts.Group, "err", err)
	}
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// pullLoop is the puller of one queue: one pull outstanding at a time,
// paused by flow control, feeding the process queue.
func (p *PushConsumer) pullLoop(ctx context.Context, qs *queueState, offset int64) {
	defer close(qs.done)
	pq, q := qs.pq, qs.q
	for ctx.Err() == nil && !pq.dropped.Load() {
		now := time.Now()
		pq.pulled(now)
		if d, reason := p.flow.check(pq, p.topicQueues(q.Topic), p.orderly != nil); d > 0 {
			p.in.log.Debug("flow control: pull delayed", "queue", q, "reason", reason)
			sleep(ctx, d)
			continue
		}
		if p.orderly != nil && p.opts.Model == Clustering && !pq.locked.Load() {
			sleep(ctx, unlockedBackoff)
			continue
		}
		sub := p.subscription(q.Topic)
		if sub == nil {
			return
		}
		req := pullRequest{
			group: p.opts.Group, queue: q, offset: offset, maxNums: int32(p.opts.PullBatchSize),
			sysFlag: pullFlagSuspend | pullFlagSubscription, suspend: pullHold.Milliseconds(),
			expression: sub.data.SubString, expressionType: sub.data.ExpressionType,
		}
		if p.opts.Model == Clustering {
			if committed, _ := p.offsets.read(ctx, q, readMemory); committed > 0 {
				req.sysFlag |= pullFlagCommitOffset
				req.commitOffset = committed
			}
		}
		res, err := p.in.pull(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.in.log.Warn("pull failed", "queue", q, "offset", offset, "err", err)
			sleep(ctx, pullErrorBackoff)
			continue
		}
		if pq.dropped.Load() {
			return
		}
		switch res.status {
		case pullFound:
			msgs := res.msgs[:0]
			for _, m := range res.msgs {
				if sub.matches(m) {
					msgs = append(msgs, m)
				}
			}
			p.restoreRetryTopic(msgs)
			offset = res.nextBeginOffset
			if len(msgs) == 0 {
				if pq.count() == 0 {
					p.offsets.update(q, offset, true)
				}
				continue
			}
			dispatch := pq.put(msgs)
			p.dispatch(qs, msgs, dispatch)
		case pullNoNewMsg, pullNoMatchedMsg:
			offset = res.nextBeginOffset
			if pq.count() == 0 {
				p.offsets.update(q, offset, true)
			}
		case pullOffsetIllegal:
			p.in.log.Warn("pull offset out of range; moving on", "queue", q, "offset", offset, "next", res.nextBeginOffset)
			offset = res.nextBeginOffset
			p.offsets.update(q, offset, false)
			pctx, cancel := p.in.ctx()
			_ = p.offsets.persist(pctx, []MessageQueue{q})
			cancel()
		}
	}
}

// dispatch hands pulled messages to the consume service.
func (p *PushConsumer) dispatch(qs *queueState, msgs []*MessageExt, dispatch bool) {
	if p.orderly != nil {
		if dispatch {
			p.goOrderly(qs, 0)
		}
		return
	}
	for batch := range slices.Chunk(msgs, p.opts.ConsumeBatchSize) {
		p.submit(consumeRequest{qs: qs, msgs: batch})
	}
}

// submit queues a concurrent consume request; it waits when the workers
// are behind, which holds the queue's puller too.
func (p *PushConsumer) submit(r consumeRequest) {
	select {
	case p.work <- r:
	case <-p.quit:
	}
}

// restoreRetryTopic gives retried messages back their original topic.
func (c *consumerCore) restoreRetryTopic(msgs []*MessageExt) {
	rt := retryTopic(c.opts.Group)
	for _, m := range msgs {
		if m.Topic == rt {
			if orig := m.Property(message.PropertyRetryTopic); orig != "" {
				m.Topic = orig
			}
		}
	}
}
