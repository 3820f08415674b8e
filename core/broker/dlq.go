package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/core/store"
)

// ListDLQ lists a group's dead letters matching sel. A group that never
// had one (no dead-letter topic) has an empty list, as has a selector
// that matches nothing.
func (o Outbox) ListDLQ(sel outbox.DLQSelector) ([]outbox.DeadLetter, error) {
	b := o.b
	if sel.Group != "" && sel.QueueOffset == nil {
		if _, ok := b.topics.get(DLQGroupTopicPrefix + sel.Group); !ok {
			return nil, nil
		}
	}
	limit := sel.Limit
	if limit <= 0 {
		limit = 100
	}
	var out []outbox.DeadLetter
	err := b.eachDeadLetter(sel, limit, func(r message.Record) error {
		var m message.Message
		r.Decode(&m)
		out = append(out, outbox.DeadLetter{
			QueueOffset:    m.QueueOffset,
			MsgID:          msgID(&m),
			OffsetMsgID:    message.OffsetMsgID(m.StoreHost, m.CommitLogOffset),
			OriginMsgID:    m.Properties.Get(message.PropertyOriginMessageID),
			Topic:          originTopic(&m),
			Tags:           m.Properties.Get(message.PropertyTags),
			Keys:           m.Properties.Get(message.PropertyKeys),
			ReconsumeTimes: m.ReconsumeTimes,
			StoredAt:       time.UnixMilli(m.StoreTimestamp),
			BodySize:       len(m.Body),
			Properties:     m.Properties.Map(),
		})
		return nil
	})
	return out, err
}

// ResendDLQ sends the dead letters matching sel again, each as a new
// message, to their original topic or to the group's retry topic. The dead
// letters stay where they are.
func (o Outbox) ResendDLQ(sel outbox.DLQSelector, target string) ([]outbox.Resent, error) {
	b := o.b
	if target != outbox.ResendOrigin && target != outbox.ResendRetry {
		return nil, fmt.Errorf("broker: resend target %q: want %q or %q", target, outbox.ResendOrigin, outbox.ResendRetry)
	}
	limit := sel.Limit
	if limit <= 0 && sel.MsgID == "" && sel.QueueOffset == nil {
		limit = int(^uint(0) >> 1)
	} else if limit <= 0 {
		limit = 1
	}
	var out []outbox.Resent
	err := b.eachDeadLetter(sel, limit, func(r message.Record) error {
		var old message.Message
		r.Decode(&old)
		if parent, lite, ok := SplitLiteQueue(originTopic(&old)); ok {
			return b.resendLite(&old, sel.Group, target, parent, lite, &out)
		}
		if origin := originTopic(&old); reservedTopic(origin) || isRetryTopic(origin) {
			// RETRY_TOPIC is whatever the consumer's message carried; a
			// resend must never write into the broker's own topics.
			return fmt.Errorf("resend %s: %w: its original topic %s belongs to the broker", msgID(&old), ErrReservedTopic, logName(origin))
		}
		m := b.resendMessage(&old, sel.Group, target)
		tc, err := b.resendTopic(m.Topic)
		if err != nil {
			return err
		}
		m.QueueID = int32(old.QueueOffset % int64(writableQueues(tc)))
		if err := b.store.Append([]*message.Message{m}); err != nil {
			return fmt.Errorf("resend %s: %w", msgID(&old), err)
		}
		out = append(out, outbox.Resent{QueueOffset: old.QueueOffset, OldMsgID: msgID(&old), NewMsgID: msgID(m), Topic: m.Topic, QueueID: m.QueueID})
		b.log.Info("dead letter resent", "group", sel.Group, "old_msg_id", msgID(&old), "new_msg_id", msgID(m), "topic", m.Topic)
		return nil
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("%w in group %s", outbox.ErrNoDeadLetter, sel.Group)
	}
	return out, err
}

// resendLite resends the dead letter of a lite topic's message to that
// lite topic, if its LITE topic still takes it; a group's retry topic
// would reach no lite consumer.
func (b *Broker) resendLite(old *message.Message, group, target, parent, lite string, out *[]outbox.Resent) error {
	if target != outbox.ResendOrigin {
		return fmt.Errorf("resend %s: it was a message of lite topic %s of %s, which only its lite topic delivers to lite consumers: resend it there (%q)", msgID(old), lite, logName(parent), outbox.ResendOrigin)
	}
	b.liteSends.RLock()
	defer b.liteSends.RUnlock()
	topic, err := b.liteSendQueue(parent, lite)
	if err != nil {
		return fmt.Errorf("resend %s: %w", msgID(old), err)
	}
	m := b.resendMessage(old, group, target)
	m.Topic, m.QueueID = topic, 0
	if err := b.store.Append([]*message.Message{m}); err != nil {
		return fmt.Errorf("resend %s: %w", msgID(old), err)
	}
	*out = append(*out, outbox.Resent{QueueOffset: old.QueueOffset, OldMsgID: msgID(old), NewMsgID: msgID(m), Topic: m.Topic, QueueID: m.QueueID})
	b.log.Info("dead letter resent to its lite topic", "group", group, "old_msg_id", msgID(old), "new_msg_id", msgID(m), "topic", parent, "lite_topic", lite)
	return nil
}

// resendMessage builds the new message for a dead letter: the same body,
// flag, keys, tags and user properties, a new UNIQ_KEY, the dead letter's
// id kept in ORIGIN_MESSAGE_ID, and a fresh retry count.
func (b *Broker) resendMessage(old *message.Message, group, target string) *message.Message {
	props := old.Properties.Without(message.PropertyDelayLevel, message.PropertyRealTopic, message.PropertyRealQueueID,
		message.PropertyRetryTopic, message.PropertyTransactionPrepared, message.PropertyMaxReconsumeTimes)
	origin := old.Properties.Get(message.PropertyOriginMessageID)
	if origin == "" {
		origin = msgID(old)
	}
	props = props.With(message.PropertyOriginMessageID, origin).With(message.PropertyUniqKey, message.NewUniqID())
	topic := originTopic(old)
	if target == outbox.ResendRetry {
		topic = RetryGroupTopicPrefix + group
		props = props.With(message.PropertyRetryTopic, originTopic(old))
	}
	return &message.Message{
		Topic:         topic,
		Flag:          old.Flag,
		SysFlag:       old.SysFlag &^ message.SysFlagTxMask,
		BornTimestamp: b.now().UnixMilli(),
		BornHost:      b.storeHost,
		StoreHost:     b.storeHost,
		Body:          old.Body,
		Properties:    props,
	}
}

func (b *Broker) resendTopic(topic string) (TopicConfig, error) {
	if tc, ok := b.topics.get(topic); ok {
		return tc, nil
	}
	if group, ok := strings.CutPrefix(topic, RetryGroupTopicPrefix); ok {
		return b.ensureRetry(group) // the group has dead letters: it existed
	}
	tc, err := b.autoCreate(topic, AutoCreateTopicKey, 0)
	return tc, err
}

// eachDeadLetter calls fn for each dead letter of sel.Group matching sel,
// in queue order, up to limit.
func (b *Broker) eachDeadLetter(sel outbox.DLQSelector, limit int, fn func(r message.Record) error) error {
	if sel.Group == "" {
		return errors.New("broker: a consumer group is required")
	}
	topic := DLQGroupTopicPrefix + sel.Group
	tc, ok := b.topics.get(topic)
	if !ok {
		return fmt.Errorf("%w: group %s has no dead-letter topic", outbox.ErrNoDeadLetter, sel.Group)
	}
	n := 0
	for q := int32(0); q < int32(tc.ReadQueueNums) && n < limit; q++ {
		minOff, maxOff := b.store.QueueOffsets(topic, q)
		from, to := minOff, maxOff
		if sel.QueueOffset != nil {
			if q != 0 {
				break
			}
			from, to = *sel.QueueOffset, *sel.QueueOffset+1
			if from < minOff || from >= maxOff {
				return fmt.Errorf("%w at offset %d (the queue holds %d..%d)", outbox.ErrNoDeadLetter, from, minOff, maxOff)
			}
		} else if !sel.From.IsZero() {
			off, err := b.store.OffsetForTimestamp(topic, q, sel.From.UnixMilli())
			if err != nil {
				return err
			}
			from = off
		}
		it := b.store.NewQueueIter(topic, q, store.IterOptions{Filter: func(u store.Unit) store.UnitVerdict {
			if u.QueueOffset >= to {
				return store.UnitStop
			}
			return store.UnitKeep
		}})
		for ok := it.SeekGE(from); ok && n < limit; ok = it.Next() {
			r := it.Record()
			if !sel.To.IsZero() && r.StoreTimestamp() > sel.To.UnixMilli() {
				break
			}
			if sel.MsgID != "" && !matchesID(r, sel.MsgID) {
				continue
			}
			n++
			if err := fn(append(message.Record(nil), r...)); err != nil {
				it.Close()
				return err
			}
		}
		if err := it.Close(); err != nil {
			return err
		}
	}
	return nil
}

func matchesID(r message.Record, id string) bool {
	p := r.Properties()
	return p.Get(message.PropertyUniqKey) == id || p.Get(message.PropertyOriginMessageID) == id ||
		message.OffsetMsgID(r.StoreHost(), r.CommitLogOffset()) == id
}

// msgID is the id clients see: UNIQ_KEY, else the offsetMsgId.
func msgID(m *message.Message) string {
	if id := m.Properties.Get(message.PropertyUniqKey); id != "" {
		return id
	}
	return message.OffsetMsgID(m.StoreHost, m.CommitLogOffset)
}

// originTopic is the topic a retried or dead message first went to.
func originTopic(m *message.Message) string {
	if t := m.Properties.Get(message.PropertyRetryTopic); t != "" {
		return t
	}
	if t := m.Properties.Get(message.PropertyRealTopic); t != "" && !isRetryTopic(t) {
		return t
	}
	return m.Topic
}

func (b *Broker) registerDLQAdmin() {
	b.Admin().Handle("dlq.list", func(ctx context.Context, args json.RawMessage) (any, error) {
		var sel outbox.DLQSelector
		if err := decodeArgs(args, &sel); err != nil {
			return nil, err
		}
		return b.Outbox().ListDLQ(sel)
	})
	b.Admin().Handle("dlq.resend", func(ctx context.Context, args json.RawMessage) (any, error) {
		var a struct {
			outbox.DLQSelector
			Target string `json:"target"`
		}
		if err := decodeArgs(args, &a); err != nil {
			return nil, err
		}
		if a.Target == "" {
			a.Target = outbox.ResendOrigin
		}
		return b.Outbox().ResendDLQ(a.DLQSelector, a.Target)
	})
}
