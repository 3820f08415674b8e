package broker

import (
	"errors"
	"fmt"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
)

// Errors of the broker's limits and name rules (limits.go). Compare with
// errors.Is.
var (
	// ErrFilterTooLong refuses a subscription expression longer than
	// Options.MaxFilterExpression.
	ErrFilterTooLong = errors.New("broker: subscription expression too long")
	// ErrBadGroup refuses a group name that is empty, longer than
	// MaxGroupNameLen or outside RocketMQ's character set.
	ErrBadGroup = errors.New("broker: invalid group name")
	// ErrUnknownGroup refuses to create a retry or dead-letter topic for a
	// consumer group the broker does not know.
	ErrUnknownGroup = errors.New("broker: unknown consumer group")
	// ErrReservedTopic refuses a write, by a client or a dead-letter
	// resend, into a topic the broker keeps for itself (reservedTopic).
	ErrReservedTopic = errors.New("broker: topic reserved for the broker")
	// ErrGroupNotConfigured refuses a consumer group without a
	// subscription group config while Options.DisableAutoCreateGroup is
	// set.
	ErrGroupNotConfigured = errors.New("broker: consumer group not configured")
	// ErrTopicQuota refuses to create a topic beyond Options.MaxTopics.
	ErrTopicQuota = errors.New("broker: topic quota reached")
	// ErrGroupQuota refuses a heartbeat's new group, or the automatic
	// creation of a group's config, beyond Options.MaxGroups.
	ErrGroupQuota = errors.New("broker: group quota reached")
	// ErrNoRetry refuses a retry topic to a group configured with
	// retryQueueNums 0 (no retries).
	ErrNoRetry = errors.New("broker: group has no retries")
)

// maxBatchMessagesLimit is the largest Options.MaxBatchMessages: a batch's
// answer lists every message id (32 hex digits and a comma) in its header,
// which must stay under remoting.MaxHeaderSize with room for the rest.
const maxBatchMessagesLimit = (remoting.MaxHeaderSize - 64<<10) / 33

// MaxHeartbeatGroups bounds the consumer groups, and the producer groups,
// one heartbeat may name. A client process sends one heartbeat for all
// its producers and consumers; a thousand of either is far beyond what
// one process runs.
const MaxHeartbeatGroups = 1000

// maxClientIDLen bounds a heartbeat's client id, which the broker keeps
// and logs. The official clients send "ip@instance", some tens of bytes.
const maxClientIDLen = 1024

// MaxGroupNameLen is the longest producer or consumer group name, as in
// RocketMQ (CHARACTER_MAX_LENGTH).
const MaxGroupNameLen = 255

// validName is RocketMQ's character set for topic and group names
// (TopicValidator.VALID_PATTERN_STR).
var validName = regexp.MustCompile(`^[%|a-zA-Z0-9_-]+$`)

// checkGroup reports why group is not a valid group name, or nil. Its
// error quotes at most logName's prefix of the name.
func checkGroup(group string) error {
	switch {
	case group == "":
		return fmt.Errorf("%w: empty", ErrBadGroup)
	case len(group) > MaxGroupNameLen:
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrBadGroup, len(group), MaxGroupNameLen)
	case !validName.MatchString(group):
		return fmt.Errorf("%w: %q has characters outside [%%|a-zA-Z0-9_-]", ErrBadGroup, logName(group))
	}
	return nil
}

// logNameMax is how much of a client-supplied name a log line or an error
// quotes.
const logNameMax = 64

// logName returns name cut to logNameMax bytes, marked when cut, for logs
// and error remarks: a hostile client's 4 MiB name must not be written
// whole.
func logName(name string) string {
	if len(name) <= logNameMax {
		return name
	}
	return fmt.Sprintf("%s…(%d bytes)", name[:logNameMax], len(name))
}

// limitLogGap is the least time between two log lines of one limit.
const limitLogGap = 10 * time.Second

// limitLog rate-limits the log line of a limit being hit, so a client
// that keeps hitting it cannot flood the log.
type limitLog struct{ last atomic.Int64 } // unix nanoseconds of the last line

// allow reports whether a line may be logged now.
func (l *limitLog) allow(now time.Time) bool {
	last := l.last.Load()
	if now.UnixNano()-last < int64(limitLogGap) {
		return false
	}
	return l.last.CompareAndSwap(last, now.UnixNano())
}
