package broker

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// This file is the broker's face to in-process front ends that speak
// another protocol (the gRPC endpoint of RocketMQ 5 clients): the same
// send, transaction, filter and dead-letter paths as the remoting
// handlers, without a remoting connection.

// LocalSend is a message sent by an in-process front end: the header a
// SEND_MESSAGE_V2 would carry, its body and the sender's address.
type LocalSend struct {
	Header   remoting.SendHeader
	Body     []byte
	BornHost netip.AddrPort
}

// LocalSent answers a LocalSend. Code is a remoting response code
// (remoting.Success when stored) and Remark says why not.
type LocalSent struct {
	Code        int16
	Remark      string
	QueueID     int32 // the queue the message was sent to (for a parked one, its real queue)
	QueueOffset int64
	// CommitLogOffset is where the record was stored: for a half message,
	// the offset EndLocalTransaction names.
	CommitLogOffset int64
	Topic           string // the topic the record was stored in (the half topic for a half message)
}

// SendLocal stores one message as SEND_MESSAGE_V2 would: the same topic
// checks and auto-creation, size limits, properties, and the transforms
// of delayed, timed and half messages (invariants 1 and 3).
func (b *Broker) SendLocal(s LocalSend) LocalSent {
	return b.SendLocalBatch([]LocalSend{s})[0]
}

// SendLocalBatch stores several messages, each as SendLocal does and
// answered on its own, in the order given. All of them are queued on the
// store before any is waited for, so messages that arrive together share
// a group-commit round (one write, and one fsync under FlushSync), as the
// remoting port's fast sends do; each is answered once its round is
// stored as Store.Append returns (after the fsync under FlushSync).
func (b *Broker) SendLocalBatch(ss []LocalSend) []LocalSent {
	out := make([]LocalSent, len(ss))
	var wg sync.WaitGroup
	for i := range ss {
		req, msgs, refused := b.localMessages(ss[i])
		if msgs == nil {
			out[i] = refused
			continue
		}
		m := msgs[0]
		wg.Add(1)
		err := b.store.AppendAsync(msgs, func(err error) {
			// On the store's completion goroutine: quick, no waiting.
			if err != nil {
				r := b.storeError(req, err)
				out[i] = LocalSent{Code: r.Code, Remark: r.Remark}
			} else {
				out[i] = LocalSent{Code: remoting.Success, QueueID: sentQueue(m), QueueOffset: m.QueueOffset, CommitLogOffset: m.CommitLogOffset, Topic: m.Topic}
			}
			wg.Done()
		})
		if err != nil {
			r := b.storeError(req, err)
			out[i] = LocalSent{Code: r.Code, Remark: r.Remark}
			wg.Done()
		}
	}
	wg.Wait()
	return out
}

// localMessages builds what a LocalSend stores: its message, then any of
// the broker's own (outbox events); or nil and the answer refusing it.
func (b *Broker) localMessages(s LocalSend) (*remoting.Command, []*message.Message, LocalSent) {
	h := s.Header
	req := remoting.NewRequest(remoting.SendMessageV2, nil, nil)
	qid, resp := b.sendQueue(req, &h, true)
	if resp != nil {
		return req, nil, LocalSent{Code: resp.Code, Remark: resp.Remark}
	}
	if len(s.Body) > b.opts.MaxMessageSize {
		return req, nil, LocalSent{Code: remoting.MessageIllegal, Remark: "send: body of " + strconv.Itoa(len(s.Body)) + " bytes exceeds the " + strconv.Itoa(b.opts.MaxMessageSize) + "-byte limit"}
	}
	m := &message.Message{
		Topic: h.Topic, QueueID: qid, Flag: h.Flag, SysFlag: h.SysFlag, BornTimestamp: h.BornTimestamp,
		BornHost: s.BornHost, StoreHost: b.storeHost, ReconsumeTimes: h.ReconsumeTimes, Body: s.Body,
	}
	var err error
	if m.Properties, err = b.storedPropertiesString(h.Properties); err != nil {
		return req, nil, LocalSent{Code: remoting.MessageIllegal, Remark: "send: " + err.Error()}
	}
	if m.Properties.Has(message.PropertyReplyToClient) {
		return req, nil, LocalSent{Code: remoting.MessageIllegal, Remark: "send: REPLY_TO_CLIENT needs a remoting connection"}
	}
	if code, err := b.transformSend(h.Topic, []*message.Message{m}); err != nil {
		return req, nil, LocalSent{Code: code, Remark: "send: " + err.Error()}
	}
	extra, code, err := b.transform(nil, m, &h)
	if err != nil {
		return req, nil, LocalSent{Code: code, Remark: "send: " + err.Error()}
	}
	return req, append([]*message.Message{m}, extra...), LocalSent{}
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
// err says why not and code is the remoting code of the refusal.
func (b *Broker) EnsureTopic(topic string) (tc TopicConfig, code int16, err error) {
	if err := ValidateTopic(topic); err != nil {
		return TopicConfig{}, remoting.SystemError, err
	}
	if tc, ok := b.topics.get(topic); ok {
		return tc, remoting.Success, nil
	}
	if b.opts.ReplicaID > 0 {
		// The leader creates topics; a replica reads one created since
		// its table was last reloaded from the store, and creates none.
		tc, ok, err := b.topics.stored(topic)
		switch {
		case err != nil:
			return TopicConfig{}, remoting.SystemError, err
		case !ok:
			return TopicConfig{}, remoting.TopicNotExist, fmt.Errorf("topic %s does not exist on this replica; its set's master creates topics", logName(topic))
		}
		return tc, remoting.Success, nil
	}
	if reservedTopic(topic) {
		return TopicConfig{}, remoting.NoPermission, ErrReservedTopic
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

// arrivalHooks are the front ends' callbacks: arrivals (OnArrival) and
// deleted topics (OnTopicDeleted).
type arrivalHooks struct {
	mu      sync.RWMutex
	fns     []func(topic string, queue int32)
	deleted []func(topic string)
}

func (h *arrivalHooks) call(topic string, queue int32) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, fn := range h.fns {
		fn(topic, queue)
	}
}

// OnArrival calls fn, on the store's append path, whenever messages
// arrive on a queue; fn must not block. It is for in-process front ends
// that long-poll.
func (b *Broker) OnArrival(fn func(topic string, queue int32)) {
	b.arrivals.mu.Lock()
	defer b.arrivals.mu.Unlock()
	b.arrivals.fns = append(b.arrivals.fns, fn)
}

// TxnCheckFunc asks a producer of group, reached by an in-process front
// end, for the state of the transaction whose half message was first
// stored at origin; m is the message as the producer sent it. It reports
// whether a producer was asked (it must not block); false lets the broker
// try its remoting producers.
type TxnCheckFunc func(group string, m *message.Message, origin int64) bool

// OnTransactionCheck makes the transaction checker offer every check to fn
// first. The producer answers with EndLocalTransaction.
func (b *Broker) OnTransactionCheck(fn TxnCheckFunc) { b.txn.checkHook.Store(&fn) }

// OnPull makes every PULL_MESSAGE ask fn whether its consumer group may
// pull; an error refuses the pull with NO_PERMISSION and the error as
// remark. A front end uses it to keep a group consumed one way at a time.
func (b *Broker) OnPull(fn func(group string) error) { b.pullCheck.Store(&fn) }

func (b *Broker) pullAllowed(group string) error {
	if fn := b.pullCheck.Load(); fn != nil {
		return (*fn)(group)
	}
	return nil
}

// OnTopicDeleted calls fn after DeleteTopic removed a topic's data, so a
// front end drops what it keeps of the topic (a topic created again
// starts empty, invariant 13).
func (b *Broker) OnTopicDeleted(fn func(topic string)) {
	b.arrivals.mu.Lock()
	defer b.arrivals.mu.Unlock()
	b.arrivals.deleted = append(b.arrivals.deleted, fn)
}

func (b *Broker) topicDeleted(topic string) {
	b.arrivals.mu.RLock()
	fns := b.arrivals.deleted
	b.arrivals.mu.RUnlock()
	for _, fn := range fns {
		fn(topic)
	}
}
