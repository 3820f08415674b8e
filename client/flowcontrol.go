package client

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Flow-control defaults, RocketMQ's push-consumer values.
const (
	flowDefaultQueueCount = 1000
	flowDefaultQueueSize  = 100 << 20
	flowDefaultMaxSpan    = 2000
	// flowHoldDelay is how long the next pull of a queue waits when
	// flow control holds it.
	flowHoldDelay = 50 * time.Millisecond
)

// flowLimits bounds what a push consumer caches per queue before it stops
// pulling that queue for a while. Zero means the default; -1 means no limit
// where the comment allows it.
//
// A limit is exceeded when the cached amount is strictly greater than it,
// as in RocketMQ: with the default of 1000 messages a queue holding 1000
// still pulls, one holding 1001 waits.
type flowLimits struct {
	// queueCount is the most messages cached per queue (RocketMQ's
	// pullThresholdForQueue). Default 1000.
	queueCount int
	// queueSize is the most body bytes cached per queue. Default 100 MiB.
	// RocketMQ counts pullThresholdSizeForQueue in whole MiB, rounding the
	// cached size down; we compare bytes.
	queueSize int64
	// topicCount, when not -1, replaces queueCount with topicCount divided
	// by the number of the topic's queues assigned to this consumer, at
	// least 1 (RocketMQ's pullThresholdForTopic). Default -1.
	topicCount int
	// topicSize does the same for queueSize, in bytes (RocketMQ's
	// pullThresholdSizeForTopic). Default -1.
	topicSize int64
	// maxSpan is the largest distance between the smallest and the
	// largest cached offset of a concurrently consumed queue (RocketMQ's
	// consumeConcurrentlyMaxSpan). Default 2000.
	maxSpan int64
}

// withDefaults returns l with zero fields set to their defaults.
func (l flowLimits) withDefaults() flowLimits {
	if l.queueCount == 0 {
		l.queueCount = flowDefaultQueueCount
	}
	if l.queueSize == 0 {
		l.queueSize = flowDefaultQueueSize
	}
	if l.topicCount == 0 {
		l.topicCount = -1
	}
	if l.topicSize == 0 {
		l.topicSize = -1
	}
	if l.maxSpan == 0 {
		l.maxSpan = flowDefaultMaxSpan
	}
	return l
}

// validate reports every limit out of range.
func (l flowLimits) validate() error {
	var errs []error
	if l.queueCount < 0 {
		errs = append(errs, fmt.Errorf("client: per-queue message limit %d is negative", l.queueCount))
	}
	if l.queueSize < 0 {
		errs = append(errs, fmt.Errorf("client: per-queue size limit %d is negative", l.queueSize))
	}
	if l.topicCount < -1 {
		errs = append(errs, fmt.Errorf("client: per-topic message limit %d is below -1", l.topicCount))
	}
	if l.topicSize < -1 {
		errs = append(errs, fmt.Errorf("client: per-topic size limit %d is below -1", l.topicSize))
	}
	if l.maxSpan < 0 {
		errs = append(errs, fmt.Errorf("client: max offset span %d is negative", l.maxSpan))
	}
	return errors.Join(errs...)
}

// flowReason says why flow control held a pull.
type flowReason uint8

const (
	flowOK flowReason = iota
	flowQueueCount
	flowQueueSize
	flowTopicCount
	flowTopicSize
	flowSpan
	numFlowReasons
)

func (r flowReason) String() string {
	switch r {
	case flowOK:
		return "ok"
	case flowQueueCount:
		return "queue message count"
	case flowQueueSize:
		return "queue message size"
	case flowTopicCount:
		return "topic message count"
	case flowTopicSize:
		return "topic message size"
	case flowSpan:
		return "queue offset span"
	}
	return fmt.Sprintf("flowReason(%d)", uint8(r))
}

// flowControl decides, before each pull, whether a queue has cached enough
// for now. It only delays pulls; nothing is ever dropped. It counts the
// pulls it held by reason, so the consumer can log every thousandth as
// RocketMQ does.
type flowControl struct {
	limits flowLimits
	held   [numFlowReasons]atomic.Int64
}

// newFlowControl returns flow control with l's defaults filled in, or every
// problem with l.
func newFlowControl(l flowLimits) (*flowControl, error) {
	l = l.withDefaults()
	if err := l.validate(); err != nil {
		return nil, err
	}
	return &flowControl{limits: l}, nil
}

// check returns how long to delay the next pull of pq and why, or 0 and
// flowOK. topicQueues is the number of queues of pq's topic assigned to this
// consumer; the span limit applies only when not orderly. Whether an
// orderly queue is locked is the consumer's business.
func (fc *flowControl) check(pq *processQueue, topicQueues int, orderly bool) (time.Duration, flowReason) {
	r := fc.reason(pq, topicQueues, orderly)
	if r == flowOK {
		return 0, flowOK
	}
	fc.held[r].Add(1)
	return flowHoldDelay, r
}

func (fc *flowControl) reason(pq *processQueue, topicQueues int, orderly bool) flowReason {
	l := &fc.limits
	count, countReason := int64(l.queueCount), flowQueueCount
	size, sizeReason := l.queueSize, flowQueueSize
	if topicQueues > 0 {
		if l.topicCount != -1 {
			count, countReason = max(1, int64(l.topicCount)/int64(topicQueues)), flowTopicCount
		}
		if l.topicSize != -1 {
			size, sizeReason = max(1, l.topicSize/int64(topicQueues)), flowTopicSize
		}
	}
	switch {
	case int64(pq.count()) > count:
		return countReason
	case pq.size() > size:
		return sizeReason
	case !orderly && pq.spanTooLarge(l.maxSpan):
		return flowSpan
	}
	return flowOK
}

// heldCount returns how many pulls were held for reason r.
func (fc *flowControl) heldCount(r flowReason) int64 { return fc.held[r].Load() }
