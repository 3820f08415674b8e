package broker

import (
	"errors"
	"net/netip"
	"slices"
	"sync"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// This file is the broker's face to in-process front ends that speak
// another protocol (the gRPC endpoint of RocketMQ 5 clients): the same
// send, transaction, filter and dead-letter paths as the remoting
// handlers, without a remoting connection.

// LocalSend is a message sent by an in-process front end. A topic that
// does not exist is created from TBW102 (with at most 4 queues) when the
// broker auto-creates topics.
type LocalSend struct {
	Topic   string
	QueueID int32 // the queue to store in; -1 for any writable queue
	// SysFlag carries message.SysFlagTxPrepared for a half message.
	SysFlag       int32
	BornTimestamp int64 // Unix milliseconds
	// Properties are the message's, encoded (message.EncodeProperties):
	// tags, keys, a delay level or delivery time, a transaction's
	// producer group and the user's own.
	Properties message.Properties
	Body       []byte
	BornHost   netip.AddrPort
	// LiteTopic, for a message of a LITE topic, names its lite topic: the
	// message goes to that lite topic's queue (lite.go), created by the
	// first message within MaxLiteTopics. Such a message is plain: no
	// delay, transaction, group or priority.
	LiteTopic string
}

// LocalSent answers a LocalSend. Err is nil when the message was stored,
// or says why not and wraps one of the refusal kinds (ErrIllegal,
// ErrTooLarge, ErrNoPermission, ErrTopicNotFound, ...).
type LocalSent struct {
	Err         error
	QueueID     int32 // the queue the message was sent to (for a parked one, its real queue)
	QueueOffset int64
	// CommitLogOffset is where the record was stored: for a half message,
	// the offset EndLocalTransaction names.
	CommitLogOffset int64
	Topic           string // the topic the record was stored in (the half topic for a half message)
	// RecallHandle recalls a delayed or timed message while it waits
	// (Recall); "" for any other.
	RecallHandle string
}

// SendLocalBatch stores messages as SEND_MESSAGE_V2 would (the same topic
// checks and auto-creation, size limits, properties, and the transforms
// of delayed, timed and half messages: invariants 1 and 3), each answered
// on its own, in the order given. All of them are queued on the
// store before any is waited for, so messages that arrive together share
// a group-commit round (one write, and one fsync under FlushSync), as the
// remoting port's fast sends do; each is answered once its round is
// stored as Store.Append returns (after the fsync under FlushSync).
func (b *Broker) SendLocalBatch(ss []LocalSend) []LocalSent {
	if slices.ContainsFunc(ss, func(s LocalSend) bool { return s.LiteTopic != "" }) {
		// Until all are answered: no lite topic they went to is deleted
		// as expired meanwhile (expireLiteTopics). One hold for the batch:
		// a second would wait behind a deletion waiting for the first.
		b.liteSends.RLock()
		defer b.liteSends.RUnlock()
	}
	out := make([]LocalSent, len(ss))
	built := make([][]*message.Message, len(ss))
	var all []*message.Message
	for i := range ss {
		msgs, err := b.localMessages(ss[i])
		if err != nil {
			out[i] = LocalSent{Err: err}
			continue
		}
		built[i] = msgs
		all = append(all, msgs...)
	}
	sent := func(i int, err error) {
		if err != nil {
			out[i] = LocalSent{Err: b.storeRefusal(err)}
			return
		}
		m := built[i][0]
		out[i] = LocalSent{QueueID: sentQueue(m), QueueOffset: m.QueueOffset, CommitLogOffset: m.CommitLogOffset, Topic: m.Topic}
		if m.Topic == ScheduleTopic || m.Topic == TimerTopic {
			out[i].RecallHandle = b.recallHandleOf(m)
		}
	}
	// One append queues them all in the store's next round. What it
	// refuses before queueing anything (together too large for a segment,
	// or one message's own limits) is queued message by message instead,
	// so each is answered on its own.
	done := make(chan struct{})
	err := b.store.AppendAsync(all, func(err error) {
		// On the store's completion goroutine: quick, no waiting.
		for i := range built {
			if built[i] != nil {
				sent(i, err)
			}
		}
		close(done)
	})
	if err == nil {
		<-done
		return out
	}
	var wg sync.WaitGroup
	for i, msgs := range built {
		if msgs == nil {
			continue
		}
		wg.Add(1)
		if err := b.store.AppendAsync(msgs, func(err error) { sent(i, err); wg.Done() }); err != nil {
			sent(i, err)
			wg.Done()
		}
	}
	wg.Wait()
	return out
}

// localMessages builds what a LocalSend stores: its message, then any of
// the broker's own (outbox events); or why it is refused.
func (b *Broker) localMessages(s LocalSend) ([]*message.Message, error) {
	h := remoting.SendHeader{Topic: s.Topic, QueueID: s.QueueID, SysFlag: s.SysFlag, BornTimestamp: s.BornTimestamp,
		Properties: string(s.Properties), DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: 4}
	var qid int32
	var err error
	if s.LiteTopic != "" {
		if len(h.Properties) > message.MaxPropertiesLen {
			return nil, refusef(ErrTooLarge, "%w: %d bytes", message.ErrPropertiesTooLong, len(h.Properties))
		}
		if s.SysFlag&message.SysFlagTxPrepared != 0 || s.Properties.Has(message.PropertyDelayLevel) || s.Properties.Has(message.PropertyTimerDeliverMS) ||
			s.Properties.Has(message.PropertyTimerDelaySec) || s.Properties.Has(message.PropertyTimerDelayMS) ||
			s.Properties.Has(message.PropertyShardingKey) || s.Properties.Has(message.PropertyPriority) {
			return nil, refusef(ErrIllegal, "a lite topic's message is plain: no transaction, delay, message group or priority")
		}
		if h.Topic, err = b.liteSendQueue(s.Topic, s.LiteTopic); err != nil {
			return nil, err
		}
	} else if qid, err = b.sendQueue(&h, true); err != nil {
		return nil, err
	}
	if len(s.Body) > b.opts.MaxMessageSize {
		return nil, refusef(ErrTooLarge, "body of %d bytes exceeds the %d-byte limit", len(s.Body), b.opts.MaxMessageSize)
	}
	m := &message.Message{
		Topic: h.Topic, QueueID: qid, Flag: h.Flag, SysFlag: h.SysFlag, BornTimestamp: h.BornTimestamp,
		BornHost: s.BornHost, StoreHost: b.storeHost, ReconsumeTimes: h.ReconsumeTimes, Body: s.Body,
	}
	if m.Properties, err = b.storedPropertiesString(h.Properties); err != nil {
		return nil, err
	}
	if m.Properties.Has(message.PropertyReplyToClient) {
		return nil, refusef(ErrIllegal, "REPLY_TO_CLIENT needs a remoting connection")
	}
	if err := b.transformSend(h.Topic, []*message.Message{m}); err != nil {
		return nil, err
	}
	extra, err := b.transform(nil, m, &h)
	if err != nil {
		return nil, err
	}
	return append([]*message.Message{m}, extra...), nil
}

// EndLocalTransaction commits (commit true) or rolls back the half message
// stored at off by producer group, as END_TRANSACTION does; the caller has
// checked the sender may. A transaction unknown or already resolved is
// ErrTxnNotPending.
func (b *Broker) EndLocalTransaction(group string, off int64, commit bool) error {
	outcome := outcomeRollback
	if commit {
		outcome = outcomeCommit
	}
	err := b.txn.end(group, off, outcome)
	if errors.Is(err, errTxnNotPending) {
		return errors.Join(ErrTxnNotPending, err)
	}
	return err
}

// ErrTxnNotPending: EndLocalTransaction named no pending half message.
var ErrTxnNotPending = errors.New("broker: no pending transaction at that offset")

// CompileFilter returns the shared compiled filter of a subscription
// expression of type typ (TAG when empty, SQL92, or a plugin's), or an
// error naming what is wrong with it.
func (b *Broker) CompileFilter(typ, expr string) (Filter, error) {
	return b.filters.compile(typ, expr)
}

// GroupConfig returns a consumer group's configuration: the stored one,
// or the defaults and false.
func (b *Broker) GroupConfig(group string) (SubscriptionGroupConfig, bool) {
	return b.storedGroupConfig(group)
}

// CheckConsumerGroup reports why group may not consume here, or nil: a
// bad name, or no configuration while autoCreateSubscriptionGroup is off.
func (b *Broker) CheckConsumerGroup(group string) error {
	if err := checkGroup(group); err != nil {
		return err
	}
	return b.checkConfigured(group)
}

// EnsureTopic returns topic's configuration, creating it from TBW102 as a
// send to an unknown topic would when autoCreateTopic is on; otherwise
// err says why not (ErrBadTopic, ErrNoPermission, ErrTopicNotFound, ...).
func (b *Broker) EnsureTopic(topic string) (TopicConfig, error) {
	if err := ValidateTopic(topic); err != nil {
		return TopicConfig{}, refusef(ErrNoQueue, "%w", err)
	}
	// A replica's table reads a topic its leader created since the table
	// was last reloaded from the store (lookup).
	tc, ok, err := b.topics.lookup(topic)
	switch {
	case err != nil:
		return TopicConfig{}, refusef(ErrInternal, "%w", err)
	case ok:
		return tc, nil
	case b.opts.ReplicaID > 0:
		// The leader creates topics; a replica creates none.
		return TopicConfig{}, refusef(ErrTopicNotFound, "topic %s does not exist on this replica; its set's master creates topics", logName(topic))
	}
	if reservedTopic(topic) {
		return TopicConfig{}, refusef(ErrNoPermission, "%w: %s", ErrReservedTopic, topic)
	}
	return b.autoCreate(topic, "", 0)
}

// Topic returns a topic's configuration.
func (b *Broker) Topic(topic string) (TopicConfig, bool) { return b.topics.get(topic) }

// DeadLetter stores a copy of the record rec, delivered to group and given
// up on, in %DLQ%<group>, with its outbox event when the outbox is on
// (invariant 5), as a send-back past the retry limit does. reason says why.
func (b *Broker) DeadLetter(group string, rec message.Record, reason string) error {
	var orig message.Message
	rec.Decode(&orig)
	msgs, err := b.sendBack(&orig, group, -1, 0, "", reason)
	if err != nil {
		return err
	}
	return b.store.Append(msgs)
}

// TxnCheckFunc asks a producer of group, reached by an in-process front
// end, for the state of the transaction whose half message was first
// stored at origin; m is the message as the producer sent it. It reports
// whether a producer was asked (it must not block); false lets the broker
// try its remoting producers.
type TxnCheckFunc func(group string, m *message.Message, origin int64) bool

// OnTransactionCheck makes the transaction checker offer every check to fn
// first. The producer answers with EndLocalTransaction.
func (h Hooks) OnTransactionCheck(fn TxnCheckFunc) {
	b := h.b
	b.txn.checkHook.Store(&fn)
}

// OnLiteExpired makes the broker tell fn of each lite topic it deleted as
// expired, once deleted; a front end tells the lite topic's subscribers.
func (h Hooks) OnLiteExpired(fn func(parent, lite string)) {
	h.b.liteExpired.Store(&fn)
}

// OnPull makes every PULL_MESSAGE ask fn whether its consumer group may
// pull; an error refuses the pull with NO_PERMISSION and the error as
// remark. A front end uses it to keep a group consumed one way at a time.
func (h Hooks) OnPull(fn func(group string) error) {
	b := h.b
	b.pullCheck.Store(&fn)
}

func (b *Broker) pullAllowed(group string) error {
	if fn := b.pullCheck.Load(); fn != nil {
		return (*fn)(group)
	}
	return nil
}
