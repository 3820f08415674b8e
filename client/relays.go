package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// Requests a broker relays from an operator to a consumer (the broker's
// operator relays):
//
//	+----------------------------------+----------------------------------------------+
//	| request                          | what the push consumer of the group does     |
//	+----------------------------------+----------------------------------------------+
//	| RESET_CONSUMER_CLIENT_OFFSET 220 | drops its queues named in the offset table,  |
//	|   (oneway)                       | commits their new offsets and takes them up  |
//	|                                  | again from there                             |
//	| GET_CONSUMER_STATUS_FROM_CLIENT  | answers {"messageQueueTable":{mq:offset}}:   |
//	|   221                            | the offsets it holds for the topic           |
//	| GET_CONSUMER_RUNNING_INFO 307    | answers its running info: properties,        |
//	|                                  | subscriptions, held queues, status per topic |
//	| CONSUME_MESSAGE_DIRECTLY 309     | hands the message to its handler once and    |
//	|                                  | answers the result; nothing is committed or  |
//	|                                  | sent back                                    |
//	+----------------------------------+----------------------------------------------+
//
// A lite pull consumer answers the same, but for a reset it seeks its
// queues (dropping what it buffered) and commits, and it refuses 309: it
// has no handler.
//
// Queue-keyed tables are in fastjson's form (remoting.AppendQueueOffsets),
// as the official clients read and write them.

// adminMember is what a consumer group offers the operator relays; the
// push and lite pull consumers implement it.
type adminMember interface {
	resetOffsets(topic string, table map[MessageQueue]int64)
	consumerStatus(topic string) map[MessageQueue]int64
	runningInfo() ([]byte, error)
	consumeDirectly(msg *MessageExt, brokerName string) (directResult, error)
}

// directResult is the body of a CONSUME_MESSAGE_DIRECTLY answer,
// RocketMQ's ConsumeMessageDirectlyResult.
type directResult struct {
	Order          bool   `json:"order"`
	AutoCommit     bool   `json:"autoCommit"`
	ConsumeResult  string `json:"consumeResult"` // CR_SUCCESS, CR_LATER, CR_THROW_EXCEPTION
	Remark         string `json:"remark"`
	SpentTimeMills int64  `json:"spentTimeMills"`
}

// serveRelay answers the relayed requests, and reports false for any
// other code.
func (in *instance) serveRelay(c *remoting.Conn, req *remoting.Command) (*remoting.Command, bool) {
	switch req.Code {
	case remoting.ResetConsumerClientOffset, remoting.GetConsumerStatusFromClient:
	case remoting.GetConsumerRunningInfo, remoting.ConsumeMessageDirectly:
		if id := req.Get("clientId"); id != in.id {
			return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("this is client %s, not %s", in.id, id)), true
		}
	default:
		return nil, false
	}
	group := req.Get("group")
	if req.Code == remoting.GetConsumerRunningInfo || req.Code == remoting.ConsumeMessageDirectly {
		group = req.Get("consumerGroup")
	}
	in.mu.Lock()
	cm, _ := in.mu.consumers[group].(adminMember)
	in.mu.Unlock()
	if cm == nil {
		in.log.Warn("operator request for a consumer group this client does not run", "code", remoting.RequestCode(req.Code), "group", group)
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("client %s runs no consumer of group %s", in.id, group)), true
	}
	switch req.Code {
	case remoting.ResetConsumerClientOffset:
		raw, err := remoting.FastjsonField(req.Body, "offsetTable")
		var table []remoting.QueueOffset
		if err == nil {
			table, err = remoting.ParseQueueOffsets(raw)
		}
		if err != nil {
			in.log.Warn("offset reset with an unreadable offset table", "broker", c.RemoteAddr(), "group", group, "err", err)
			return remoting.NewResponse(req, remoting.SystemError, err.Error()), true
		}
		m := make(map[MessageQueue]int64, len(table))
		for _, e := range table {
			m[MessageQueue{Topic: e.Queue.Topic, BrokerName: e.Queue.BrokerName, QueueID: e.Queue.QueueID}] = e.Offset
		}
		in.log.Info("offsets reset by the broker", "broker", c.RemoteAddr(), "group", group, "topic", req.Get("topic"), "queues", len(m))
		cm.resetOffsets(req.Get("topic"), m)
		return remoting.NewResponse(req, remoting.Success, ""), true
	case remoting.GetConsumerStatusFromClient:
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = appendOffsetTable([]byte(`{"messageQueueTable":`), cm.consumerStatus(req.Get("topic")))
		resp.Body = append(resp.Body, '}')
		return resp, true
	case remoting.GetConsumerRunningInfo:
		body, err := cm.runningInfo()
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error()), true
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = body
		return resp, true
	}
	recs, err := message.DecodeRecords(req.Body)
	if err != nil || len(recs) != 1 {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("consume message directly: unreadable message (%v)", err)), true
	}
	msg, err := fromRecord(recs[0], req.Get("brokerName"))
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("consume message directly: %v", err)), true
	}
	res, err := cm.consumeDirectly(msg, req.Get("brokerName"))
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("consume message directly: %v", err)), true
	}
	body, _ := json.Marshal(res)
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp, true
}

// appendOffsetTable appends a queue-keyed table, in queue order.
func appendOffsetTable(dst []byte, m map[MessageQueue]int64) []byte {
	qs := make([]MessageQueue, 0, len(m))
	for q := range m {
		qs = append(qs, q)
	}
	slices.SortFunc(qs, offsetQueueOrder)
	table := make([]remoting.QueueOffset, len(qs))
	for i, q := range qs {
		table[i] = remoting.QueueOffset{Queue: remoting.QueueKey{BrokerName: q.BrokerName, QueueID: q.QueueID, Topic: q.Topic}, Offset: m[q]}
	}
	return remoting.AppendQueueOffsets(dst, table)
}

// resetOffsets implements adminMember: each held queue of topic that the
// table names is dropped without committing, its new offset committed,
// and taken up again from there. Queues this consumer does not hold were
// set by the broker already.
func (p *PushConsumer) resetOffsets(topic string, table map[MessageQueue]int64) {
	p.rebalMu.Lock()
	defer p.rebalMu.Unlock()
	for _, q := range p.held(topic) {
		off, ok := table[q]
		if !ok {
			continue
		}
		if !p.dropQueue(q, false) {
			p.in.log.Warn("offset reset: the queue's handler is still running; it keeps its offset", "group", p.opts.Group, "queue", q)
			continue
		}
		p.offsets.update(q, off, false)
		ctx, cancel := p.in.ctx()
		if err := p.offsets.persist(ctx, []MessageQueue{q}); err != nil {
			p.in.log.Warn("offset reset: committing the new offset failed", "group", p.opts.Group, "queue", q, "err", err)
		}
		cancel()
		if err := p.add(q); err != nil {
			p.in.log.Warn("offset reset: taking the queue up again failed; the next rebalance will", "group", p.opts.Group, "queue", q, "err", err)
			p.rebalanceSoon()
		}
	}
}

// consumerStatus implements adminMember: the offsets held for topic.
func (p *PushConsumer) consumerStatus(topic string) map[MessageQueue]int64 {
	return p.heldOffsets(p.held(topic))
}

// heldOffsets returns the offsets in memory of qs.
func (c *consumerCore) heldOffsets(qs []MessageQueue) map[MessageQueue]int64 {
	out := map[MessageQueue]int64{}
	for _, q := range qs {
		if off, err := c.offsets.read(context.Background(), q, readMemory); err == nil && off >= 0 {
			out[q] = off
		}
	}
	return out
}

// Property keys of a running info, RocketMQ's ConsumerRunningInfo.
const (
	propConsumeType        = "PROP_CONSUME_TYPE"
	propConsumeOrderly     = "PROP_CONSUMEORDERLY"
	propThreadPoolCoreSize = "PROP_THREADPOOL_CORE_SIZE"
	propConsumerStartTime  = "PROP_CONSUMER_START_TIMESTAMP"
	propNameServerAddr     = "PROP_NAMESERVER_ADDR"
	propClientVersion      = "PROP_CLIENT_VERSION"
)

// processQueueInfo is one held queue of a running info, RocketMQ's
// ProcessQueueInfo (the fields this client has).
type processQueueInfo struct {
	CommitOffset         int64 `json:"commitOffset"`
	CachedMsgMinOffset   int64 `json:"cachedMsgMinOffset"`
	CachedMsgMaxOffset   int64 `json:"cachedMsgMaxOffset"`
	CachedMsgCount       int   `json:"cachedMsgCount"`
	CachedMsgSizeInMiB   int64 `json:"cachedMsgSizeInMiB"`
	Locked               bool  `json:"locked"`
	Dropped              bool  `json:"dropped"`
	LastPullTimestamp    int64 `json:"lastPullTimestamp"`
	LastConsumeTimestamp int64 `json:"lastConsumeTimestamp"`
}

// consumeStatus is one topic's figures of a running info, RocketMQ's
// ConsumeStatus; this client does not measure them and reports zeros.
type consumeStatus struct {
	PullRT            float64 `json:"pullRT"`
	PullTPS           float64 `json:"pullTPS"`
	ConsumeRT         float64 `json:"consumeRT"`
	ConsumeOKTPS      float64 `json:"consumeOKTPS"`
	ConsumeFailedTPS  float64 `json:"consumeFailedTPS"`
	ConsumeFailedMsgs int64   `json:"consumeFailedMsgs"`
}

// runningInfo implements adminMember.
func (p *PushConsumer) runningInfo() ([]byte, error) {
	p.qmu.Lock()
	states := make([]*queueState, 0, len(p.qmu.queues))
	for _, qs := range p.qmu.queues {
		states = append(states, qs)
	}
	p.qmu.Unlock()
	slices.SortFunc(states, func(a, b *queueState) int { return offsetQueueOrder(a.q, b.q) })
	queues := make([]queueInfo, len(states))
	for i, qs := range states {
		queues[i] = queueInfo{q: qs.q, info: qs.pq.info()}
	}
	return p.runningInfoBody(map[string]string{
		propConsumeOrderly:     strconv.FormatBool(p.orderly != nil),
		propThreadPoolCoreSize: strconv.Itoa(p.opts.ConsumeGoroutines),
	}, queues)
}

// queueInfo is a held queue's row of a running info.
type queueInfo struct {
	q    MessageQueue
	info processQueueInfo
}

// runningInfoBody writes RocketMQ's ConsumerRunningInfo:
// {"properties":{…},"statusTable":{topic:…},"subscriptionSet":[…],
// "mqTable":{mq:…},"jstack":""}, mqTable queue-keyed in fastjson's form
// as the official clients write it. props are added to the consumer's
// common ones; each queue's commit offset is filled in.
func (c *consumerCore) runningInfoBody(props map[string]string, queues []queueInfo) ([]byte, error) {
	all := map[string]string{
		propConsumeType:       c.kind,
		propConsumerStartTime: strconv.FormatInt(c.startTime.UnixMilli(), 10),
		propNameServerAddr:    strings.Join(c.opts.Client.NameServers, ";"),
		propClientVersion:     "rmq-go",
		"consumerGroup":       c.opts.Group,
		"messageModel":        c.opts.Model.String(),
		"consumeFromWhere":    c.opts.ConsumeFrom.String(),
	}
	maps.Copy(all, props)
	status := map[string]consumeStatus{}
	subs := []remoting.SubscriptionData{}
	for _, s := range c.subscriptions() {
		subs = append(subs, s.data)
		status[s.topic] = consumeStatus{}
	}
	slices.SortFunc(subs, func(a, b remoting.SubscriptionData) int { return strings.Compare(a.Topic, b.Topic) })
	var b bytes.Buffer
	b.WriteString(`{"properties":`)
	for _, part := range []struct {
		v    any
		next string
	}{{all, `,"statusTable":`}, {status, `,"subscriptionSet":`}, {subs, `,"mqTable":{`}} {
		v, err := json.Marshal(part.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
		b.WriteString(part.next)
	}
	for i, qi := range queues {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(remoting.QueueKey{BrokerName: qi.q.BrokerName, QueueID: qi.q.QueueID, Topic: qi.q.Topic})
		b.Write(k)
		b.WriteByte(':')
		qi.info.CommitOffset, _ = c.offsets.read(context.Background(), qi.q, readMemory)
		v, _ := json.Marshal(qi.info)
		b.Write(v)
	}
	b.WriteString(`},"jstack":""}`)
	return b.Bytes(), nil
}

// info is the queue's part of a running info.
func (pq *processQueue) info() processQueueInfo {
	pq.mu.Lock()
	i := processQueueInfo{
		CachedMsgCount:       pq.mu.count,
		CachedMsgSizeInMiB:   pq.mu.size >> 20,
		LastPullTimestamp:    pq.mu.lastPull.UnixMilli(),
		LastConsumeTimestamp: pq.mu.lastConsume.UnixMilli(),
	}
	if n := len(pq.mu.msgs); n > 0 {
		i.CachedMsgMinOffset, i.CachedMsgMaxOffset = pq.mu.msgs[0].offset, pq.mu.msgs[n-1].offset
	}
	pq.mu.Unlock()
	i.Locked, i.Dropped = pq.locked.Load(), pq.dropped.Load()
	return i
}

// consumeDirectly implements adminMember: the handler gets the message
// once, as if pulled; its result is reported and nothing else follows
// from it (no commit, no send-back).
func (p *PushConsumer) consumeDirectly(msg *MessageExt, brokerName string) (directResult, error) {
	q := MessageQueue{Topic: msg.Topic, BrokerName: brokerName, QueueID: msg.QueueID}
	p.restoreRetryTopic([]*MessageExt{msg})
	start := time.Now()
	r := directResult{AutoCommit: true, Order: p.orderly != nil}
	panicked := false
	if p.concurrent != nil {
		cc := &ConcurrentContext{Queue: q, AckIndex: math.MaxInt}
		res := callHandler(p, q, ConsumeResult(-1), func(ctx context.Context) ConsumeResult { return p.concurrent(ctx, cc, []*MessageExt{msg}) })
		switch res {
		case ConsumeSuccess:
			r.ConsumeResult = "CR_SUCCESS"
		case ConsumeRetryLater:
			r.ConsumeResult = "CR_LATER"
		default:
			panicked = true
		}
	} else {
		oc := &OrderlyContext{Queue: q, AutoCommit: true}
		res := callHandler(p, q, OrderlyResult(-1), func(ctx context.Context) OrderlyResult { return p.orderly(ctx, oc, []*MessageExt{msg}) })
		switch res {
		case OrderlySuccess, OrderlyCommit:
			r.ConsumeResult = "CR_SUCCESS"
		case OrderlySuspend, OrderlyRollback:
			r.ConsumeResult = "CR_LATER"
		default:
			panicked = true
		}
	}
	if panicked {
		r.ConsumeResult, r.Remark = "CR_THROW_EXCEPTION", "the handler panicked; see the client's log"
	}
	r.SpentTimeMills = time.Since(start).Milliseconds()
	return r, nil
}

// resetOffsets implements adminMember: each held queue of topic that the
// table names is sought to its new offset (its buffered messages are
// dropped), and the offsets are committed.
func (c *LitePullConsumer) resetOffsets(topic string, table map[MessageQueue]int64) {
	c.rebalMu.Lock()
	defer c.rebalMu.Unlock()
	var moved []MessageQueue
	for _, q := range c.held(topic) {
		off, ok := table[q]
		if !ok {
			continue
		}
		if err := c.seek(q, off); err != nil {
			c.in.log.Warn("offset reset: seeking the queue failed", "group", c.opts.Group, "queue", q, "err", err)
			continue
		}
		moved = append(moved, q)
	}
	ctx, cancel := c.in.ctx()
	defer cancel()
	if err := c.offsets.persist(ctx, moved); err != nil {
		c.in.log.Warn("offset reset: committing the new offsets failed", "group", c.opts.Group, "err", err)
	}
}

// consumerStatus implements adminMember: the offsets held for topic.
func (c *LitePullConsumer) consumerStatus(topic string) map[MessageQueue]int64 {
	return c.heldOffsets(c.held(topic))
}

// runningInfo implements adminMember.
func (c *LitePullConsumer) runningInfo() ([]byte, error) {
	var queues []queueInfo
	for _, q := range c.held("") {
		n, _ := c.buffered(q)
		queues = append(queues, queueInfo{q: q, info: processQueueInfo{CachedMsgCount: n}})
	}
	return c.runningInfoBody(map[string]string{propConsumeOrderly: "false"}, queues)
}

// consumeDirectly implements adminMember: a lite pull consumer has no
// handler to consume with.
func (c *LitePullConsumer) consumeDirectly(*MessageExt, string) (directResult, error) {
	return directResult{}, fmt.Errorf("group %s is a lite pull consumer, which has no handler to consume with", c.opts.Group)
}
