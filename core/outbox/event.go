package outbox

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/core/message"
)

// Event kinds.
const (
	KindRetry = "retry"
	KindDLQ   = "dlq"
)

// Event describes one retry or dead-letter move.
type Event struct {
	// Offset is the event's position in the outbox.
	Offset int64
	// Kind is KindRetry or KindDLQ.
	Kind string
	// Time is when the move was stored.
	Time time.Time
	// Group is the consumer group, without %RETRY% or %DLQ%.
	Group string
	// Topic is the message's original topic.
	Topic string
	// MsgID is the message id clients see (UNIQ_KEY, or the offsetMsgId).
	MsgID string
	// OriginMsgID is the id of the first delivery.
	OriginMsgID string
	// Keys and Tags are the message's KEYS and TAGS.
	Keys, Tags string
	// QueueID and QueueOffset locate the failed delivery in its queue.
	QueueID     int32
	QueueOffset int64
	// ReconsumeTimes is the number of failed attempts so far;
	// MaxReconsumeTimes the limit that applied.
	ReconsumeTimes    int32
	MaxReconsumeTimes int32
	// DelayLevel and NextAttemptAt say when a retry is due (zero for DLQ).
	DelayLevel    int32
	NextAttemptAt time.Time
	// Reason says why the message moved.
	Reason string
	// Target locates the moved copy: its topic and commit-log offset.
	TargetTopic     string
	TargetLogOffset int64
	// Body and Properties are the moved message's. Body is nil when the
	// moved record is no longer in the store.
	Body       []byte
	Properties message.Properties
}

// Record is the JSON body of an outbox record; the package documentation
// describes each field. The moved message is the record stored right
// before it in the same append, MovedSize bytes earlier in the commit log.
type Record struct {
	Kind              string `json:"kind"`
	Group             string `json:"group"`
	Topic             string `json:"topic"`
	MsgID             string `json:"msgId"`
	OriginMsgID       string `json:"originMsgId,omitempty"`
	QueueID           int32  `json:"queueId"`
	QueueOffset       int64  `json:"queueOffset"`
	ReconsumeTimes    int32  `json:"reconsumeTimes"`
	MaxReconsumeTimes int32  `json:"maxReconsumeTimes"`
	DelayLevel        int32  `json:"delayLevel,omitempty"`
	NextAttemptMS     int64  `json:"nextAttemptAt,omitempty"`
	Reason            string `json:"reason"`
	MovedSize         int64  `json:"movedSize"`
}

// Encode returns the record's body.
func (r *Record) Encode() []byte {
	body, _ := json.Marshal(r) // plain strings and integers: cannot fail
	return body
}

// DecodeRecord parses an outbox record's body.
func DecodeRecord(body []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(body, &r); err != nil {
		return Record{}, fmt.Errorf("outbox: malformed event record: %w", err)
	}
	return r, nil
}

// Event returns the event a record describes, given where the record was
// stored: its offset in the outbox, its store time (Unix ms) and its
// commit-log offset. The moved message's fields are left for SetMoved.
func (r *Record) Event(offset, storeTime, logOffset int64) Event {
	e := Event{
		Offset: offset, Kind: r.Kind, Time: time.UnixMilli(storeTime), Group: r.Group, Topic: r.Topic,
		MsgID: r.MsgID, OriginMsgID: r.OriginMsgID, QueueID: r.QueueID, QueueOffset: r.QueueOffset,
		ReconsumeTimes: r.ReconsumeTimes, MaxReconsumeTimes: r.MaxReconsumeTimes, DelayLevel: r.DelayLevel,
		Reason: r.Reason, TargetLogOffset: logOffset - r.MovedSize,
	}
	if r.NextAttemptMS > 0 {
		e.NextAttemptAt = time.UnixMilli(r.NextAttemptMS)
	}
	return e
}

// SetMoved fills in the fields that come from the moved message m: its
// topic, body, properties, keys and tags.
func (e *Event) SetMoved(m *message.Message) {
	e.TargetTopic = m.Topic
	e.Body = m.Body
	e.Properties = m.Properties
	e.Keys = m.Properties.Get(message.PropertyKeys)
	e.Tags = m.Properties.Get(message.PropertyTags)
}
