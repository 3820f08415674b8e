package broker

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/histogram"
)

// Metrics for operators. The request paths only add to atomic counters
// and fixed-bucket histograms (internal/histogram); everything else —
// gauges, lag, pending counts — is read from the broker's and the store's
// in-memory state when Metrics is called, so a scrape pays for it, not a
// message. This package imports no metrics library: internal/metrics
// turns a Metrics snapshot into Prometheus series.

// meters are the broker's running counters.
type meters struct {
	topics sync.Map // topic name → *topicMeters; a deleted topic's entry is dropped
	send   *histogram.Histogram
	pull   *histogram.Histogram

	retries     atomic.Int64 // messages sent back for a retry
	deadLetters atomic.Int64 // messages moved to a dead-letter topic
	recalled    atomic.Int64 // delayed and timed messages recalled
	filterEvals atomic.Int64 // records a pull's filter evaluated (Filter.Match)
	// timedIndexed counts the timer index's due keys: timed messages
	// indexed and not yet delivered. Counted once at start, then kept by
	// the scheduler as it adds and deletes keys.
	timedIndexed atomic.Int64
}

// topicMeters count one topic's traffic.
type topicMeters struct {
	inMsgs, inBytes, outMsgs, outBytes atomic.Int64
}

func newMeters() meters {
	return meters{send: histogram.New(histogram.Durations...), pull: histogram.New(histogram.Durations...)}
}

func (m *meters) topic(name string) *topicMeters {
	if v, ok := m.topics.Load(name); ok {
		return v.(*topicMeters)
	}
	v, _ := m.topics.LoadOrStore(name, new(topicMeters))
	return v.(*topicMeters)
}

// stored counts the messages of a send stored for topic, the topic the
// send named (a delayed or transactional message counts for its real
// topic), and the send's latency since start.
func (m *meters) stored(topic string, msgs []*message.Message, start time.Time) {
	var n int64
	for _, msg := range msgs {
		n += int64(len(msg.Body))
	}
	t := m.topic(topic)
	t.inMsgs.Add(int64(len(msgs)))
	t.inBytes.Add(n)
	m.send.Since(start)
	switch {
	case strings.HasPrefix(msgs[0].Topic, DLQGroupTopicPrefix):
		m.deadLetters.Add(1) // a consumer's own retry past the limit (retryLimit)
	case strings.HasPrefix(topic, RetryGroupTopicPrefix):
		m.retries.Add(1)
	}
}

// sentBack counts a CONSUMER_SEND_MSG_BACK stored in storedTopic.
func (m *meters) sentBack(storedTopic string) {
	if strings.HasPrefix(storedTopic, DLQGroupTopicPrefix) {
		m.deadLetters.Add(1)
	} else {
		m.retries.Add(1)
	}
}

// pulled counts the records of a pull's answer body.
func (m *meters) pulled(topic string, body []byte) {
	var n, bytes int64
	for len(body) >= message.MinRecordLen {
		r := message.Record(body)
		size := r.Size()
		if size < message.MinRecordLen || size > len(body) {
			break
		}
		n++
		bytes += int64(len(message.Record(body[:size]).Body()))
		body = body[size:]
	}
	t := m.topic(topic)
	t.outMsgs.Add(n)
	t.outBytes.Add(bytes)
}

// Metrics is a snapshot of the broker's figures, filled by
// Broker.Metrics. Counters are cumulative since the broker started.
type Metrics struct {
	// Topics are the traffic counters of each topic that had any, in no
	// particular order: message bodies' bytes, messages sent in and
	// pulled out.
	Topics []TopicMetrics
	// Send and Pull are the latency distributions, in nanoseconds, of
	// sends (until stored, and so under sync flush until fsynced) and of
	// pulls answered at once (a held pull is not counted).
	Send, Pull histogram.Snapshot
	// Lag is each committed consumer offset's lag: the queue's max offset
	// minus the offset, from memory (no queue is read).
	Lag []QueueLag
	// DeadLetters are the messages held in each group's dead-letter topic
	// (max minus min offset), one entry per queue: a group may appear
	// more than once.
	DeadLetters []GroupCount

	HeldPulls   int // long-polling pulls waiting
	Connections int // open client connections
	// Remoting is what the client port's connections hold against its
	// memory budgets.
	Remoting  remoting.Stats
	Producers int // producer clients, by heartbeat
	Consumers int // consumer clients, by heartbeat

	Retries      int64 // messages sent back for a retry
	DeadLettered int64 // messages moved to a dead-letter topic
	Recalled     int64 // delayed and timed messages recalled (Recall)
	// DelayedPending counts delayed messages (and retries waiting their
	// delay) not yet delivered: each level's queue end minus its
	// scheduler's progress.
	DelayedPending int64
	// TimedParked counts timed messages ever parked in the timer topic
	// (its queue's max offset); TimedPending those not yet delivered.
	TimedParked  int64
	TimedPending int64
	TxnPending   int   // half messages awaiting their outcome
	LiteTopics   int   // lite topics whose queues the store holds (lite.go)
	TxnChecks    int64 // transaction checks sent to producers
	FilterEvals  int64 // records evaluated by a pull's filter
	FilterErrors int64 // filter failures during pulls
	Prefiltered  int64 // records pulls skipped on their pre-filter mask
}

// TopicMetrics are one topic's traffic counters.
type TopicMetrics struct {
	Topic                 string
	MessagesIn, BytesIn   int64
	MessagesOut, BytesOut int64
}

// QueueLag is one consumer group's lag on one queue.
type QueueLag struct {
	Group, Topic   string
	QueueID        int32
	BrokerOffset   int64 // the queue's max offset
	ConsumerOffset int64 // the group's committed offset
	Lag            int64 // BrokerOffset − ConsumerOffset, at least 0
}

// QueueLags appends to dst each queue group ("" for every group) has
// committed an offset on, with its lag; topics deleted since the commit
// are left out. It reads offsets from memory, no queue.
func (v View) QueueLags(dst []QueueLag, group string) []QueueLag {
	b := v.b
	for _, e := range b.store.ConsumerOffsets(group) {
		if _, ok := b.topics.get(e.Topic); !ok {
			continue
		}
		maxOff := b.store.MaxOffset(e.Topic, e.QueueID)
		dst = append(dst, QueueLag{Group: e.Group, Topic: e.Topic, QueueID: e.QueueID,
			BrokerOffset: maxOff, ConsumerOffset: e.Offset, Lag: max(maxOff-e.Offset, 0)})
	}
	return dst
}

// GroupCount is a count for one group.
type GroupCount struct {
	Group string
	N     int64
}

// Metrics fills m with the broker's figures, reusing its slices. It
// takes each component's lock briefly, one at a time, and reads no queue.
func (b *Broker) Metrics(m *Metrics) {
	m.Topics = m.Topics[:0]
	b.meters.topics.Range(func(k, v any) bool {
		t := v.(*topicMeters)
		m.Topics = append(m.Topics, TopicMetrics{Topic: k.(string),
			MessagesIn: t.inMsgs.Load(), BytesIn: t.inBytes.Load(), MessagesOut: t.outMsgs.Load(), BytesOut: t.outBytes.Load()})
		return true
	})
	b.meters.send.Snapshot(&m.Send)
	b.meters.pull.Snapshot(&m.Pull)

	m.Lag = b.View().QueueLags(m.Lag[:0], "")
	m.DeadLetters = m.DeadLetters[:0]
	m.DelayedPending, m.TimedParked = 0, 0
	for _, q := range b.store.Queues() {
		switch {
		case strings.HasPrefix(q.Topic, DLQGroupTopicPrefix):
			m.DeadLetters = append(m.DeadLetters, GroupCount{Group: q.Topic[len(DLQGroupTopicPrefix):], N: q.MaxOffset - q.MinOffset})
		case q.Topic == ScheduleTopic:
			done, _ := b.store.Progress(levelProgressName + strconv.Itoa(int(q.QueueID)+1))
			m.DelayedPending += max(q.MaxOffset-max(done, q.MinOffset), 0)
		case q.Topic == TimerTopic:
			m.TimedParked += q.MaxOffset
		}
	}
	indexed, _ := b.store.Progress(timerIndexedName)
	m.TimedPending = b.meters.timedIndexed.Load() + max(b.store.MaxOffset(TimerTopic, 0)-indexed, 0)

	m.HeldPulls = b.holds.count()
	m.Connections = b.rs.Conns()
	m.Remoting = b.rs.Stats()
	m.Producers, m.Consumers = b.clients.counts()
	m.Retries, m.DeadLettered = b.meters.retries.Load(), b.meters.deadLetters.Load()
	m.Recalled = b.meters.recalled.Load()
	m.TxnPending = b.txn.pendingCount()
	m.LiteTopics = b.lite.count()
	m.TxnChecks = b.txn.checksSent.Load()
	m.FilterEvals, m.FilterErrors = b.meters.filterEvals.Load(), b.filters.errors.Load()
	if b.prefilter != nil {
		m.Prefiltered = b.prefilter.skipped.Load()
	}
}

// Ready reports whether the broker serves and its last full registration
// reached at least one name server (clients find it through any), or it
// has none.
func (b *Broker) Ready() bool {
	select {
	case <-b.started:
	default:
		return false
	}
	return b.registered.Load()
}

// counts returns the producer and consumer clients tracked.
func (t *clientTable) counts() (producers, consumers int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, g := range t.producers {
		producers += len(g)
	}
	for _, g := range t.consumers {
		consumers += len(g.members)
	}
	return producers, consumers
}

// pendingCount returns the half messages awaiting their outcome.
func (s *txnService) pendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.pending)
}
