package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/core/remoting"
)

// DefaultMaxReconsumeTimes is how often a message is retried before it
// goes to the dead-letter topic.
const DefaultMaxReconsumeTimes = 16

// retryBaseLevel is added to a message's reconsume times to pick the delay
// level of its next retry when the consumer leaves it to the broker.
const retryBaseLevel = 3

func isRetryTopic(topic string) bool { return strings.HasPrefix(topic, RetryGroupTopicPrefix) }

// SubscriptionGroupConfig is a consumer group's configuration, as
// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP sets it.
type SubscriptionGroupConfig struct {
	GroupName                      string `json:"groupName"`
	ConsumeEnable                  bool   `json:"consumeEnable"`
	ConsumeFromMinEnable           bool   `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         bool   `json:"consumeBroadcastEnable"`
	RetryQueueNums                 int    `json:"retryQueueNums"`
	RetryMaxTimes                  int    `json:"retryMaxTimes"`
	BrokerID                       int64  `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64  `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable bool   `json:"notifyConsumerIdsChangedEnable"`
	// AllocateStrategy is the group's queue-allocation strategy for
	// QUERY_ASSIGNMENT: AVG, AVG_BY_CIRCLE or CONSISTENT_HASH; empty
	// leaves it to the client's request (see Broker.Assign). Not a
	// RocketMQ field: an update without it keeps the stored one.
	AllocateStrategy string `json:"allocateStrategy,omitempty"`
	// AutoCreated marks a configuration the broker saved at the group's
	// first heartbeat (autoCreateSubscriptionGroup), not one an operator
	// set: it does not cap the consumer's own retry limit. Not a RocketMQ
	// field; an operator's update clears it.
	AutoCreated bool `json:"autoCreated,omitempty"`
	// ConsumeMessageOrderly marks a FIFO group (RocketMQ 5's field): POP
	// consumers over gRPC get nothing more from a queue while an earlier
	// message of it is in flight.
	ConsumeMessageOrderly bool `json:"consumeMessageOrderly,omitempty"`
	// GroupRetryPolicy spaces the retries of the group's RocketMQ 5
	// consumers (RocketMQ 5's field); nil is the delay levels' ladder.
	GroupRetryPolicy *GroupRetryPolicy `json:"groupRetryPolicy,omitempty"`
	// Attributes are RocketMQ's group attributes (see
	// PriorityFactorAttribute), by name. An update without them keeps
	// the stored ones; one with them changes those it names ("+name",
	// "-name").
	Attributes map[string]string `json:"attributes,omitempty"`
}

const groupMetaKey = "group/"

// defaultGroupConfig is what a group without explicit configuration gets.
func defaultGroupConfig(group string) SubscriptionGroupConfig {
	return SubscriptionGroupConfig{GroupName: group, ConsumeEnable: true, ConsumeFromMinEnable: true, ConsumeBroadcastEnable: true,
		RetryQueueNums: 1, RetryMaxTimes: DefaultMaxReconsumeTimes, WhichBrokerWhenConsumeSlowly: 1, NotifyConsumerIdsChangedEnable: true}
}

// groupConfig returns a group's configuration and whether an operator
// set it (a configuration the broker created at the group's first
// heartbeat holds the defaults and does not count).
func (b *Broker) groupConfig(group string) (SubscriptionGroupConfig, bool) {
	gc, ok := b.storedGroupConfig(group)
	return gc, ok && !gc.AutoCreated
}

// storedGroupConfig returns a group's stored configuration, or the
// default and false when it has none.
func (b *Broker) storedGroupConfig(group string) (SubscriptionGroupConfig, bool) {
	v, err := b.store.Meta(groupMetaKey + group)
	if err != nil {
		return defaultGroupConfig(group), false
	}
	var gc SubscriptionGroupConfig
	if err := json.Unmarshal(v, &gc); err != nil {
		b.log.Error("subscription group config unreadable; using defaults", "group", group, "err", err)
		return defaultGroupConfig(group), false
	}
	return gc, true
}

// hasGroupConfig reports whether a group has a configuration of its own.
func (b *Broker) hasGroupConfig(group string) bool {
	_, err := b.store.Meta(groupMetaKey + group)
	return err == nil
}

// checkConfigured reports why group may not consume from this broker, or
// nil: with Options.DisableAutoCreateGroup, only groups with a
// configuration may.
func (b *Broker) checkConfigured(group string) error {
	if !b.opts.DisableAutoCreateGroup || b.hasGroupConfig(group) {
		return nil
	}
	if b.unconfiguredLog.allow(b.now()) {
		b.log.Warn("consumer group without a subscription group config refused (autoCreateSubscriptionGroup is off)", "group", logName(group))
	}
	return fmt.Errorf("%w: %s has no subscription group config here and autoCreateSubscriptionGroup is off", ErrGroupNotConfigured, logName(group))
}

// checkGroupConfig reports what is wrong with a group's configuration.
func checkGroupConfig(gc SubscriptionGroupConfig) error {
	if err := checkGroup(gc.GroupName); err != nil {
		return err
	}
	if gc.RetryQueueNums < 0 || gc.RetryQueueNums > maxQueueNums {
		return fmt.Errorf("broker: group %s: retryQueueNums %d is outside 0..%d (0: no retries)", gc.GroupName, gc.RetryQueueNums, maxQueueNums)
	}
	if gc.RetryMaxTimes < 0 {
		return fmt.Errorf("broker: group %s: retryMaxTimes must not be negative", gc.GroupName)
	}
	if err := checkGroupAttributes(gc.GroupName, gc.Attributes); err != nil {
		return err
	}
	return checkRetryPolicy(gc.GroupName, gc.GroupRetryPolicy)
}

// PutGroupConfig creates or replaces a group's configuration durably.
// A group with retryQueueNums 0 has no retries: its consumers' failed
// messages are dropped when sent back (as RocketMQ does), and no retry
// topic is created for it; one that exists already is left as it is.
func (b *Broker) PutGroupConfig(gc SubscriptionGroupConfig) error {
	if err := checkGroupConfig(gc); err != nil {
		return err
	}
	if err := checkGroupStrategy(&gc); err != nil {
		return err
	}
	if err := b.saveGroupConfig(gc, false); err != nil {
		return err
	}
	// Grow the retry topic to the configured queue count.
	topic := RetryGroupTopicPrefix + gc.GroupName
	if tc, ok := b.topics.get(topic); ok && gc.RetryQueueNums > 0 && tc.WriteQueueNums != gc.RetryQueueNums {
		tc.ReadQueueNums, tc.WriteQueueNums = gc.RetryQueueNums, gc.RetryQueueNums
		return b.topics.put(tc)
	}
	return nil
}

func (b *Broker) handleUpdateGroup(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	gc := defaultGroupConfig("")
	if err := json.Unmarshal(req.Body, &gc); err != nil {
		return response(req, remoting.SystemError, "subscription group config: bad body: %v", err)
	}
	// RocketMQ's tools do not know allocateStrategy; keep the stored one
	// unless the body names it. Attributes change as the body says.
	old, _ := b.storedGroupConfig(gc.GroupName)
	var named struct {
		AllocateStrategy *string `json:"allocateStrategy"`
	}
	if json.Unmarshal(req.Body, &named) == nil && named.AllocateStrategy == nil {
		gc.AllocateStrategy = old.AllocateStrategy
	}
	gc.Attributes = alterGroupAttributes(old.Attributes, gc.Attributes)
	gc.AutoCreated = false
	if err := b.PutGroupConfig(gc); err != nil {
		return response(req, remoting.SystemError, "%v", err)
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// groupCount counts the stored group configurations, which the quota of
// auto-created ones bounds (Options.MaxGroups).
type groupCount struct {
	sync.Mutex
	n int
}

// saveGroupConfig writes a group's configuration durably. With onlyNew
// it writes only a group that has none, and only below the quota, and
// reports ErrGroupQuota at it.
func (b *Broker) saveGroupConfig(gc SubscriptionGroupConfig, onlyNew bool) error {
	b.groupN.Lock()
	defer b.groupN.Unlock()
	exists := b.hasGroupConfig(gc.GroupName)
	if onlyNew && exists {
		return nil
	}
	if onlyNew && b.groupN.n >= b.opts.MaxGroups {
		return fmt.Errorf("%w: %d group configs exist, the limit is %d (maxGroups); %s not saved", ErrGroupQuota, b.groupN.n, b.opts.MaxGroups, logName(gc.GroupName))
	}
	v, _ := json.Marshal(gc)
	if err := b.store.PutMeta(groupMetaKey+gc.GroupName, v); err != nil {
		return err
	}
	if !exists {
		b.groupN.n++
	}
	return nil
}

// ensureGroupConfig saves the default configuration of a consumer group
// that has none, as RocketMQ does at a group's first heartbeat with
// autoCreateSubscriptionGroup on, so GET_ALL_SUBSCRIPTIONGROUP_CONFIG
// lists it. At the quota the group goes on with the defaults, unsaved.
func (b *Broker) ensureGroupConfig(group string) {
	if b.opts.DisableAutoCreateGroup || b.opts.ReplicaID > 0 || b.hasGroupConfig(group) {
		return
	}
	gc := defaultGroupConfig(group)
	gc.AutoCreated = true
	if err := b.saveGroupConfig(gc, true); err != nil {
		if !errors.Is(err, ErrGroupQuota) || b.groupQuotaLog.allow(b.now()) {
			b.log.Warn("subscription group config not created", "group", logName(group), "err", err)
		}
		return
	}
	b.log.Info("subscription group config created", "group", group)
}

// DeleteGroupConfig removes a group's configuration durably, as
// DELETE_SUBSCRIPTIONGROUP does, and with cleanOffset every offset the
// group committed. Its live consumers, its retry and dead-letter topics
// stay (RocketMQ's tools delete those topics by name); with
// autoCreateSubscriptionGroup on, its next heartbeat creates the
// configuration again.
func (b *Broker) DeleteGroupConfig(group string, cleanOffset bool) error {
	if err := checkGroup(group); err != nil {
		return err
	}
	b.groupN.Lock()
	if b.hasGroupConfig(group) {
		if err := b.store.DeleteMeta(groupMetaKey + group); err != nil {
			b.groupN.Unlock()
			return err
		}
		b.groupN.n--
	}
	b.groupN.Unlock()
	if cleanOffset {
		b.store.DeleteConsumerOffsets(group, "")
		if err := b.store.Checkpoint(); err != nil {
			return err
		}
	}
	b.log.Info("subscription group deleted", "group", group, "offsets_removed", cleanOffset)
	return nil
}

func (b *Broker) handleDeleteGroup(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.Get("groupName")
	clean, err := req.BoolOr("cleanOffset", false)
	if err != nil {
		return response(req, remoting.SystemError, "delete subscription group: %v", err)
	}
	if err := b.DeleteGroupConfig(group, clean); err != nil {
		return response(req, remoting.SystemError, "delete subscription group: %v", err)
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

func (b *Broker) handleAllGroups(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	table := map[string]SubscriptionGroupConfig{}
	b.store.EachMeta(groupMetaKey, func(name string, v []byte) error {
		var gc SubscriptionGroupConfig
		if json.Unmarshal(v, &gc) == nil {
			table[gc.GroupName] = gc
		}
		return nil
	})
	body, _ := json.Marshal(map[string]any{"subscriptionGroupTable": table, "dataVersion": map[string]int64{"timestamp": b.now().UnixMilli()}})
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// maxReconsume is the retry limit for a group: the consumer's own, capped
// by the group's configuration when an operator set one.
func (b *Broker) maxReconsume(group string, fromClient int32, hasClient bool) int32 {
	gc, explicit := b.groupConfig(group)
	switch {
	case hasClient && fromClient >= 0 && explicit:
		return min(fromClient, int32(gc.RetryMaxTimes))
	case hasClient && fromClient >= 0:
		return fromClient
	}
	return int32(gc.RetryMaxTimes)
}

// knownGroup reports why group is not a consumer group the broker knows
// (a valid name that a live consumer registered by heartbeat, that has a
// configuration, or whose retry topic exists; with
// Options.DisableAutoCreateGroup, one with a configuration), or nil. Only
// known groups get retry and dead-letter topics.
func (b *Broker) knownGroup(group string) error {
	if err := checkGroup(group); err != nil {
		return err
	}
	if err := b.checkConfigured(group); err != nil {
		return err
	}
	if b.clients.hasConsumerGroup(group) {
		return nil
	}
	if _, ok := b.topics.get(RetryGroupTopicPrefix + group); ok {
		return nil
	}
	if b.hasGroupConfig(group) {
		return nil
	}
	return fmt.Errorf("%w: consumer group %s is not known (no heartbeat and no group config)", ErrUnknownGroup, group)
}

// ensureDLQ creates a group's dead-letter topic, readable and writable so
// operators and consumers can drain it.
func (b *Broker) ensureDLQ(group string) (TopicConfig, error) {
	return b.topics.ensure(TopicConfig{TopicName: DLQGroupTopicPrefix + group, ReadQueueNums: 1, WriteQueueNums: 1, Perm: permRW})
}

// ensureRetry creates a group's retry topic with the group's queue count;
// a group configured with none has no retry topic (ErrNoRetry).
func (b *Broker) ensureRetry(group string) (TopicConfig, error) {
	gc, _ := b.groupConfig(group)
	if gc.RetryQueueNums == 0 {
		if tc, ok := b.topics.get(RetryGroupTopicPrefix + group); ok {
			return tc, nil
		}
		return TopicConfig{}, fmt.Errorf("%w: group %s is configured with retryQueueNums 0", ErrNoRetry, logName(group))
	}
	return b.topics.ensure(TopicConfig{TopicName: RetryGroupTopicPrefix + group, ReadQueueNums: gc.RetryQueueNums, WriteQueueNums: gc.RetryQueueNums, Perm: permRW})
}

func (b *Broker) handleSendBack(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.Get("group")
	off, err := req.Int64("offset")
	if group == "" || err != nil {
		return response(req, remoting.SystemError, "send back: group and a commit-log offset are required")
	}
	if err := b.knownGroup(group); err != nil {
		return response(req, remoting.SubscriptionGroupNotExist, "send back: %v", err)
	}
	delayLevel, err := req.Int32Or("delayLevel", 0)
	if err != nil {
		return response(req, remoting.SystemError, "send back: %v", err)
	}
	clientMax, hasMax := int32(0), req.Get("maxReconsumeTimes") != ""
	if hasMax {
		if clientMax, err = req.Int32("maxReconsumeTimes"); err != nil {
			return response(req, remoting.SystemError, "send back: %v", err)
		}
	}
	if gc, _ := b.groupConfig(group); gc.RetryQueueNums == 0 {
		// RocketMQ answers a group without retries with success and
		// stores nothing: the failed message is dropped.
		b.log.Debug("send-back dropped: the group has no retries (retryQueueNums 0)", "group", group, "offset", off)
		return remoting.NewResponse(req, remoting.Success, "")
	}
	rec, err := b.store.ReadRecordAt(off)
	if err != nil {
		// The client falls back to sending the message itself.
		return response(req, remoting.SystemError, "send back: look message by offset %d failed: %v", off, err)
	}
	if topic := string(rec.Topic()); reservedTopic(topic) && !strings.HasPrefix(topic, DLQGroupTopicPrefix) {
		// Sending back a half message would copy it where anyone reads.
		return response(req, remoting.NoPermission, "send back: the message at %d is in %s, reserved for the broker", off, topic)
	}
	var orig message.Message
	rec.Decode(&orig)
	msgs, err := b.sendBack(&orig, group, delayLevel, b.maxReconsume(group, clientMax, hasMax), req.Get("originMsgId"), "consumer asked for a retry")
	if err != nil {
		return response(req, remoting.SystemError, "send back: %v", err)
	}
	if err := b.store.Append(msgs); err != nil {
		return refused(req, "send", b.storeRefusal(err))
	}
	b.meters.sentBack(msgs[0].Topic)
	return remoting.NewResponse(req, remoting.Success, "")
}

// sendBack builds the messages for a failed delivery: a new message in the
// group's retry topic, parked in the schedule until its delay passes, or
// in its dead-letter topic once the retries are used up (or when the
// consumer asks with a negative level); plus, with the outbox on, the
// event that describes the move.
func (b *Broker) sendBack(orig *message.Message, group string, delayLevel, maxTimes int32, originID, reason string) ([]*message.Message, error) {
	props := orig.Properties
	if !props.Has(message.PropertyRetryTopic) {
		props = props.With(message.PropertyRetryTopic, orig.Topic)
	}
	if !props.Has(message.PropertyOriginMessageID) {
		if originID == "" {
			originID = msgID(orig)
		}
		props = props.With(message.PropertyOriginMessageID, originID)
	}
	props = props.Without(message.PropertyDelayLevel, message.PropertyRealTopic, message.PropertyRealQueueID, message.PropertyTransactionPrepared)
	m := &message.Message{
		Flag:           orig.Flag,
		SysFlag:        orig.SysFlag &^ message.SysFlagTxMask,
		BornTimestamp:  orig.BornTimestamp,
		BornHost:       orig.BornHost,
		StoreHost:      b.storeHost,
		ReconsumeTimes: orig.ReconsumeTimes + 1,
		Body:           orig.Body,
	}
	ev := outbox.Record{
		Group: group, Topic: props.Get(message.PropertyRetryTopic), MsgID: msgID(orig), OriginMsgID: props.Get(message.PropertyOriginMessageID),
		QueueID: orig.QueueID, QueueOffset: orig.QueueOffset, ReconsumeTimes: orig.ReconsumeTimes + 1, MaxReconsumeTimes: maxTimes, Reason: reason,
	}
	if orig.ReconsumeTimes >= maxTimes || delayLevel < 0 {
		tc, err := b.ensureDLQ(group)
		if err != nil {
			return nil, err
		}
		m.Topic, m.QueueID, m.Properties = tc.TopicName, rand.Int32N(int32(tc.WriteQueueNums)), props
		ev.Kind = outbox.KindDLQ
		if delayLevel < 0 {
			ev.Reason = "consumer gave up (delay level < 0)"
		} else {
			ev.Reason = deadLetterReason(ev.ReconsumeTimes, maxTimes)
		}
		b.log.Info("message moved to the dead-letter topic", "group", group, "msg_id", ev.MsgID, "topic", ev.Topic, "reconsume_times", orig.ReconsumeTimes)
	} else {
		tc, err := b.ensureRetry(group)
		if err != nil {
			return nil, err
		}
		level := int(delayLevel)
		if level == 0 {
			level = retryBaseLevel + int(orig.ReconsumeTimes)
		}
		level = min(level, len(b.levels))
		m.Topic, m.QueueID = tc.TopicName, rand.Int32N(int32(tc.WriteQueueNums))
		m.Properties = props.With(message.PropertyDelayLevel, strconv.Itoa(level))
		if err := b.toSchedule(m); err != nil {
			return nil, err
		}
		ev.Kind, ev.DelayLevel = outbox.KindRetry, int32(level)
		ev.NextAttemptMS = b.now().Add(b.levelDelay(level)).UnixMilli()
	}
	msgs := []*message.Message{m}
	if b.outboxOn() {
		msgs = append(msgs, b.newEvent(ev, m))
	}
	return msgs, nil
}

// deadLetterReason says why a message went to the dead-letter topic, in
// the terms of the event's ReconsumeTimes (failed attempts, the first
// delivery included) so the two agree.
func deadLetterReason(failed, maxRetries int32) string {
	return fmt.Sprintf("failed %d times (the first delivery and %d retries); the limit is %d retries", failed, failed-1, maxRetries)
}

// retryLimit applies the retry rules to a failed message that its consumer
// sent back as an ordinary send to %RETRY%<group> (the client's fallback
// when CONSUMER_SEND_MSG_BACK fails): once the retries are used up it goes
// to the dead-letter topic instead. The client has already counted this
// failure in reconsumeTimes, so the limit is passed when it exceeds the
// maximum, as with send-back. A group holding queue locks consumes
// orderly, and its consumers send a message there only to give it up (the
// Java orderly consumer, with reconsumeTimes at the limit up to 5.1.0):
// it goes to the dead-letter topic at once, as RocketMQ's broker sends it.
// With the outbox on it returns the event to store after the message.
func (b *Broker) retryLimit(m *message.Message, h *remoting.SendHeader) (*outbox.Record, error) {
	group := strings.TrimPrefix(m.Topic, RetryGroupTopicPrefix)
	maxTimes := b.maxReconsume(group, h.MaxReconsumeTimes, h.MaxReconsumeTimes > 0)
	ev := &outbox.Record{Group: group, Topic: m.Properties.Get(message.PropertyRetryTopic),
		MsgID: msgIDOf(m), OriginMsgID: m.Properties.Get(message.PropertyOriginMessageID),
		ReconsumeTimes: m.ReconsumeTimes, MaxReconsumeTimes: maxTimes, QueueID: -1, QueueOffset: -1}
	if m.ReconsumeTimes <= maxTimes && !b.locks.anyLive(group, b.now()) {
		level, _ := strconv.Atoi(m.Properties.Get(message.PropertyDelayLevel))
		ev.Kind, ev.DelayLevel, ev.Reason = outbox.KindRetry, int32(level), "consumer sent the message back itself"
		if level > 0 {
			ev.NextAttemptMS = b.now().Add(b.levelDelay(level)).UnixMilli()
		}
	} else {
		tc, err := b.ensureDLQ(group)
		if err != nil {
			return nil, err
		}
		m.Topic, m.QueueID = tc.TopicName, 0
		m.Properties = m.Properties.Without(message.PropertyDelayLevel, message.PropertyTimerDeliverMS, message.PropertyTimerDelaySec, message.PropertyTimerDelayMS)
		b.log.Info("message moved to the dead-letter topic", "group", group, "msg_id", ev.MsgID, "reconsume_times", m.ReconsumeTimes)
		ev.Kind = outbox.KindDLQ
		ev.Reason = deadLetterReason(ev.ReconsumeTimes, maxTimes)
		if ev.ReconsumeTimes <= maxTimes {
			ev.Reason = "its orderly consumer gave it up after " + strconv.Itoa(int(ev.ReconsumeTimes)) + " attempts"
		}
	}
	if !b.outboxOn() {
		return nil, nil
	}
	return ev, nil
}

func msgIDOf(m *message.Message) string { return m.Properties.Get(message.PropertyUniqKey) }
