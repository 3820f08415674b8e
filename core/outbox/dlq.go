package outbox

import (
	"errors"
	"time"
)

// DLQSelector picks dead letters of one group: one message by id or by
// queue offset, or every message stored in a time range.
type DLQSelector struct {
	Group string `json:"group"`
	// MsgID matches the message id clients saw (UNIQ_KEY), the original
	// message id, or the dead letter's offsetMsgId.
	MsgID string `json:"msgId,omitempty"`
	// QueueOffset, when set, picks the dead letter at that offset of the
	// group's dead-letter queue 0.
	QueueOffset *int64 `json:"queueOffset,omitempty"`
	// From and To bound the time the dead letter was stored (zero: open).
	From time.Time `json:"from,omitzero"`
	To   time.Time `json:"to,omitzero"`
	// Limit caps the number of messages; default 100 for lists, no limit
	// for resends of a range.
	Limit int `json:"limit,omitempty"`
}

// DeadLetter is one message in a dead-letter topic.
type DeadLetter struct {
	QueueOffset    int64             `json:"queueOffset"`
	MsgID          string            `json:"msgId"`
	OffsetMsgID    string            `json:"offsetMsgId"`
	OriginMsgID    string            `json:"originMsgId,omitempty"`
	Topic          string            `json:"topic"`
	Tags           string            `json:"tags,omitempty"`
	Keys           string            `json:"keys,omitempty"`
	ReconsumeTimes int32             `json:"reconsumeTimes"`
	StoredAt       time.Time         `json:"storedAt"`
	BodySize       int               `json:"bodySize"`
	Properties     map[string]string `json:"properties,omitempty"`
}

// Resend targets.
const (
	ResendOrigin = "origin" // the message's original topic
	ResendRetry  = "retry"  // the group's retry topic, consumed at once
)

// Resent reports one dead letter sent again.
type Resent struct {
	QueueOffset int64  `json:"queueOffset"` // in the dead-letter queue
	OldMsgID    string `json:"oldMsgId"`
	NewMsgID    string `json:"newMsgId"`
	Topic       string `json:"topic"`
	QueueID     int32  `json:"queueId"`
}

// ErrNoDeadLetter is returned when a selector matches nothing. Compare
// with errors.Is.
var ErrNoDeadLetter = errors.New("outbox: no matching dead letter")
