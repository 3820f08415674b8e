package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/rmq-go/rmq/core/message"
)

// The concurrent consume service: ConsumeGoroutines workers take batches
// of ConsumeBatchSize messages, call the handler, and settle the result:
// acknowledged messages leave the process queue, which yields the offset
// to commit; the others are sent back to the broker for retry, and those
// whose send-back fails are consumed again locally after 5 s.

// consumeWorker serves concurrent consume requests until shutdown.
func (p *PushConsumer) consumeWorker() {
	defer p.wg.Done()
	for {
		select {
		case <-p.quit:
			return
		case r := <-p.work:
			p.consumeConcurrently(r)
		}
	}
}

// consumeConcurrently runs the handler on one request and settles it.
func (p *PushConsumer) consumeConcurrently(r consumeRequest) {
	pq := r.qs.pq
	if pq.dropped.Load() {
		return
	}
	cc := &ConcurrentContext{Queue: r.qs.q, AckIndex: math.MaxInt}
	pq.markConsuming(r.msgs, time.Now())
	res := p.callConcurrent(cc, r.msgs)
	if pq.dropped.Load() {
		// The queue went to another consumer meanwhile; it reads these
		// messages again from the committed offset.
		return
	}
	p.settle(r, cc, res)
}

// callConcurrent calls the handler; a panic counts as ConsumeRetryLater.
func (p *PushConsumer) callConcurrent(cc *ConcurrentContext, msgs []*MessageExt) ConsumeResult {
	return callHandler(p, cc.Queue, ConsumeRetryLater, func(ctx context.Context) ConsumeResult { return p.concurrent(ctx, cc, msgs) })
}

// callHandler runs call under ConsumeTimeout; a panic is logged and
// answered with onPanic, so one bad message cannot stop the consumer.
func callHandler[R any](p *PushConsumer, q MessageQueue, onPanic R, call func(context.Context) R) (res R) {
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.ConsumeTimeout)
	defer cancel()
	defer func() {
		if v := recover(); v != nil {
			p.in.log.Error("handler panicked", "group", p.opts.Group, "queue", q, "panic", v, "result", onPanic)
			res = onPanic
		}
	}()
	return call(ctx)
}

// ackIndex returns the index of the last acknowledged message of a call
// with n messages: -1 when none is.
func ackIndex(res ConsumeResult, cc *ConcurrentContext, n int) int {
	if res != ConsumeSuccess {
		return -1
	}
	return max(min(cc.AckIndex, n-1), -1)
}

// settle acknowledges, sends back or resubmits the messages of one call.
func (p *PushConsumer) settle(r consumeRequest, cc *ConcurrentContext, res ConsumeResult) {
	ack := ackIndex(res, cc, len(r.msgs))
	done := r.msgs
	if p.opts.Model == Broadcasting {
		for _, m := range r.msgs[ack+1:] {
			p.in.log.Warn("broadcasting consumers do not retry; message dropped", "group", p.opts.Group, "msg", m.MsgID)
		}
	} else if ack+1 < len(r.msgs) {
		done = slices.Clone(r.msgs[:ack+1])
		var failed []*MessageExt
		for _, m := range r.msgs[ack+1:] {
			if err := p.sendBack(m, cc.DelayLevelWhenNextConsume); err != nil {
				p.in.log.Warn("send-back failed; consuming again locally in 5 s", "msg", m.MsgID, "err", err)
				m.ReconsumeTimes++
				failed = append(failed, m)
				continue
			}
			done = append(done, m)
		}
		if len(failed) > 0 {
			p.resubmitLater(r.qs, failed, p.resubmitDelay)
		}
	}
	if off := r.qs.pq.remove(done); off >= 0 && !r.qs.pq.dropped.Load() {
		p.offsets.update(r.qs.q, off, true)
	}
}

// sendBack asks the broker to retry msg for the group.
func (p *PushConsumer) sendBack(m *MessageExt, delayLevel int32) error {
	ctx, cancel := p.in.ctx()
	defer cancel()
	return p.in.sendBack(ctx, p.opts.Group, m, delayLevel, int32(p.opts.MaxReconsumeTimes))
}

// resubmitLater consumes msgs again after d, unless the consumer stops.
func (p *PushConsumer) resubmitLater(qs *queueState, msgs []*MessageExt, d time.Duration) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-p.quit:
			return
		case <-t.C:
		}
		if !qs.pq.dropped.Load() {
			p.submit(consumeRequest{qs: qs, msgs: msgs})
		}
	}()
}

// sweepExpired sends back, with delay level 3, messages that have been in
// a handler longer than ConsumeTimeout, so a stuck handler cannot hold
// its queue's offset forever.
func (p *PushConsumer) sweepExpired() {
	p.qmu.Lock()
	states := make([]*queueState, 0, len(p.qmu.queues))
	for _, qs := range p.qmu.queues {
		states = append(states, qs)
	}
	p.qmu.Unlock()
	now := time.Now()
	for _, qs := range states {
		off, err := qs.pq.cleanExpired(now, p.opts.ConsumeTimeout, func(m *MessageExt) error {
			return p.sendBack(m, expiredSendBackDelayLevel)
		})
		if err != nil {
			p.in.log.Warn("sending back an expired message failed", "queue", qs.q, "err", err)
		}
		if off >= 0 && !qs.pq.dropped.Load() {
			p.offsets.update(qs.q, off, true)
		}
	}
}

// The orderly consume service: one run at a time per queue (qs.run), in
// queue order, while the queue's broker lock is held; suspended messages
// are consumed again locally, and past MaxReconsumeTimes dead-lettered.

// goOrderly starts an orderly run of qs after d.
func (p *PushConsumer) goOrderly(qs *queueState, d time.Duration) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-p.quit:
				return
			case <-t.C:
			}
		}
		p.consumeOrderly(qs)
	}()
}

// lockValid reports whether qs may be consumed orderly now.
func (p *PushConsumer) lockValid(pq *processQueue) bool {
	return p.opts.Model == Broadcasting || (pq.locked.Load() && !pq.isLockExpired(time.Now(), pqLockMaxLive))
}

// consumeOrderly is one orderly run over a queue.
func (p *PushConsumer) consumeOrderly(qs *queueState) {
	select {
	case qs.run <- struct{}{}:
	case <-p.quit:
		return
	}
	defer func() { <-qs.run }()
	pq := qs.pq
	start := time.Now()
	for {
		if pq.dropped.Load() {
			return
		}
		select {
		case <-p.quit:
			return
		default:
		}
		if !p.lockValid(pq) {
			p.relockLater(qs)
			return
		}
		if time.Since(start) > maxOrderlyRun {
			p.goOrderly(qs, 10*time.Millisecond)
			return
		}
		msgs := pq.takeMessages(p.opts.ConsumeBatchSize)
		if len(msgs) == 0 {
			return
		}
		oc := &OrderlyContext{Queue: qs.q, AutoCommit: true, SuspendTime: p.opts.SuspendTime}
		res := p.callOrderly(oc, msgs)
		if pq.dropped.Load() {
			return
		}
		if !p.settleOrderly(qs, oc, msgs, res) {
			return
		}
	}
}

// callOrderly calls the handler; a panic counts as OrderlySuspend.
func (p *PushConsumer) callOrderly(oc *OrderlyContext, msgs []*MessageExt) OrderlyResult {
	return callHandler(p, oc.Queue, OrderlySuspend, func(ctx context.Context) OrderlyResult { return p.orderly(ctx, oc, msgs) })
}

// settleOrderly applies an orderly result and reports whether the run
// goes on.
func (p *PushConsumer) settleOrderly(qs *queueState, oc *OrderlyContext, msgs []*MessageExt, res OrderlyResult) bool {
	pq := qs.pq
	commit := int64(-1)
	goOn := true
	switch {
	case res == OrderlySuspend:
		if p.retryOrderly(msgs) {
			pq.makeMessageToConsumeAgain(msgs)
			p.goOrderly(qs, oc.SuspendTime)
			goOn = false
		} else {
			commit = pq.commit()
		}
	case oc.AutoCommit:
		if res == OrderlyCommit || res == OrderlyRollback {
			p.in.log.Warn("commit and rollback need AutoCommit off; taken as success", "queue", qs.q)
		}
		commit = pq.commit()
	case res == OrderlyCommit:
		commit = pq.commit()
	case res == OrderlyRollback:
		pq.rollback()
		p.goOrderly(qs, oc.SuspendTime)
		goOn = false
	}
	if commit >= 0 && !pq.dropped.Load() {
		p.offsets.update(qs.q, commit, false)
	}
	return goOn
}

// retryOrderly decides the fate of suspended messages: under
// MaxReconsumeTimes they are consumed again (true); past it they go to
// the dead-letter topic, and only if that fails are they consumed again.
func (p *PushConsumer) retryOrderly(msgs []*MessageExt) (again bool) {
	for _, m := range msgs {
		if int(m.ReconsumeTimes) >= p.opts.MaxReconsumeTimes && p.opts.Model == Clustering {
			m.SetProperty(message.PropertyReconsumeTime, strconv.Itoa(int(m.ReconsumeTimes)))
			if err := p.sendBack(m, -1); err != nil {
				p.in.log.Warn("dead-lettering failed; consuming again", "msg", m.MsgID, "err", err)
				again = true
				m.ReconsumeTimes++
			}
			continue
		}
		again = true
		m.ReconsumeTimes++
	}
	return again
}

// relockLater tries to lock qs again and resumes its run.
func (p *PushConsumer) relockLater(qs *queueState) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx, cancel := p.in.ctx()
		locked, err := p.in.lockBatch(ctx, qs.q.BrokerName, p.opts.Group, []MessageQueue{qs.q})
		cancel()
		if err == nil && slices.Contains(locked, qs.q) {
			qs.pq.setLocked(true, time.Now())
			p.goOrderly(qs, 10*time.Millisecond)
			return
		}
		p.goOrderly(qs, unlockedBackoff)
	}()
}

// renewLocks renews the broker locks of every held orderly queue; a queue
// whose lock is refused stops consuming until it is locked again.
func (p *PushConsumer) renewLocks() {
	byBroker := map[string][]*queueState{}
	p.qmu.Lock()
	for _, qs := range p.qmu.queues {
		byBroker[qs.q.BrokerName] = append(byBroker[qs.q.BrokerName], qs)
	}
	p.qmu.Unlock()
	for broker, states := range byBroker {
		qs := make([]MessageQueue, len(states))
		for i, s := range states {
			qs[i] = s.q
		}
		ctx, cancel := p.in.ctx()
		locked, err := p.in.lockBatch(ctx, broker, p.opts.Group, qs)
		cancel()
		if err != nil {
			p.in.log.Warn("renewing queue locks failed", "broker", broker, "err", err)
			continue
		}
		now := time.Now()
		for _, s := range states {
			ok := slices.Contains(locked, s.q)
			if !ok && s.pq.locked.Load() {
				p.in.log.Warn("queue lock lost", "queue", s.q)
			}
			s.pq.setLocked(ok, now)
		}
	}
}

// unlockAll releases the broker locks of the given queues.
func (p *PushConsumer) unlockAll(states []*queueState) error {
	byBroker := map[string][]MessageQueue{}
	for _, s := range states {
		byBroker[s.q.BrokerName] = append(byBroker[s.q.BrokerName], s.q)
	}
	var errs []error
	for broker, qs := range byBroker {
		ctx, cancel := p.in.ctx()
		if err := p.in.unlockBatch(ctx, broker, p.opts.Group, qs); err != nil {
			errs = append(errs, fmt.Errorf("unlock at %s: %w", broker, err))
		}
		cancel()
	}
	return errors.Join(errs...)
}
