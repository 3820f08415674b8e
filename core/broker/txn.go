package broker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// Transaction defaults, RocketMQ's.
const (
	DefaultTxnTimeout       = 6 * time.Second
	DefaultTxnCheckInterval = 60 * time.Second
	DefaultTxnCheckMax      = 15
)

// TxnCheckMaxTopic receives a copy of each half message given up on
// (TxnDiscard), so an operator can find it. It has one queue.
const TxnCheckMaxTopic = "TRANS_CHECK_MAX_TIME_TOPIC"

// Properties the broker writes on records of its own (see txncheck.go).
const (
	// propTxnOrigin, on a copy of a half message written at a check, is
	// "commitLogOffset,queueOffset,storeTimestamp" of the half message as
	// first stored: the transaction's key, its half-queue offset and the
	// time its timeout counts from.
	propTxnOrigin = "TXN_ORIGIN"
	// propTxnOutcome, on an op marker, is how the transaction ended.
	propTxnOutcome = "TXN_OUTCOME"
	// opMarkerTag is the TAGS of op markers, as in RocketMQ.
	opMarkerTag = "d"
)

// Transaction outcomes recorded in op markers.
const (
	outcomeCommit   = "commit"
	outcomeRollback = "rollback"
	outcomeDiscard  = "discard"
)

// END_TRANSACTION commitOrRollback values (the sysFlag transaction types).
const (
	endNotType  = 0
	endCommit   = 8
	endRollback = 12
)

// txnDefaults fills the defaults of the queue-lock and transaction fields
// of o and returns their problems.
func (o *Options) txnDefaults() []error {
	if o.QueueLockExpiry == 0 {
		o.QueueLockExpiry = DefaultQueueLockExpiry
	}
	if o.TxnTimeout == 0 {
		o.TxnTimeout = DefaultTxnTimeout
	}
	if o.TxnCheckInterval == 0 {
		o.TxnCheckInterval = DefaultTxnCheckInterval
	}
	if o.TxnCheckMax == 0 {
		o.TxnCheckMax = DefaultTxnCheckMax
	}
	if o.TxnPolicy == nil {
		o.TxnPolicy = NewDefaultTxnPolicy(*o)
	}
	var errs []error
	if o.QueueLockExpiry < 0 || o.TxnTimeout < 0 || o.TxnCheckInterval < 0 {
		errs = append(errs, errors.New("broker: QueueLockExpiry, TxnTimeout and TxnCheckInterval must not be negative"))
	}
	if o.TxnCheckMax < 0 {
		errs = append(errs, fmt.Errorf("broker: TxnCheckMax %d is negative", o.TxnCheckMax))
	}
	for g, p := range o.TxnPolicies {
		if p == nil {
			errs = append(errs, fmt.Errorf("broker: TxnPolicies[%q] is nil", g))
		}
	}
	return errs
}

// DefaultTxnPolicy is RocketMQ's transaction-check rule: the first check
// Timeout after the half message was stored (or
// CHECK_IMMUNITY_TIME_IN_SECONDS, when the producer set it), then one every
// Interval, and after Max checks give up (TxnDiscard: the message is
// dropped and a copy kept in TRANS_CHECK_MAX_TIME_TOPIC).
type DefaultTxnPolicy struct {
	Timeout  time.Duration
	Interval time.Duration
	Max      int32
}

// NewDefaultTxnPolicy returns RocketMQ's rule with o's TxnTimeout,
// TxnCheckInterval and TxnCheckMax, or their defaults where they are zero.
// A policy that handles some groups itself falls back on it for the rest.
func NewDefaultTxnPolicy(o Options) DefaultTxnPolicy {
	p := DefaultTxnPolicy{Timeout: o.TxnTimeout, Interval: o.TxnCheckInterval, Max: int32(o.TxnCheckMax)}
	if p.Timeout == 0 {
		p.Timeout = DefaultTxnTimeout
	}
	if p.Interval == 0 {
		p.Interval = DefaultTxnCheckInterval
	}
	if p.Max == 0 {
		p.Max = DefaultTxnCheckMax
	}
	return p
}

// Decide implements TxnPolicy.
func (p DefaultTxnPolicy) Decide(_ context.Context, now time.Time, batch []HalfMessage, out []TxnDecision) error {
	nowMs := now.UnixMilli()
	for i := range batch {
		m := &batch[i]
		if m.CheckTimes >= p.Max {
			out[i] = TxnDecision{Action: TxnDiscard}
			continue
		}
		var due int64
		if m.CheckTimes == 0 || m.LastCheckTimestamp == 0 {
			first := p.Timeout
			if s, ok := m.Properties.Lookup(message.PropertyCheckImmunityTime); ok {
				if sec, err := strconv.ParseInt(string(s), 10, 64); err == nil && sec > 0 {
					first = time.Duration(sec) * time.Second
				}
			}
			due = m.StoreTimestamp + first.Milliseconds()
		} else {
			due = m.LastCheckTimestamp + p.Interval.Milliseconds()
		}
		if nowMs < due {
			out[i] = TxnDecision{Action: TxnWait, Wait: time.Duration(due-nowMs) * time.Millisecond}
		} else {
			out[i] = TxnDecision{Action: TxnCheckNow}
		}
	}
	return nil
}

// toHalf stores a half message invisibly until its producer commits or
// rolls it back: in the half topic's queue 0, with its real topic and
// queue kept in REAL_TOPIC and REAL_QID and no transaction type in its
// sysFlag (spec §7.1). The checker indexes it from the half queue.
func (b *Broker) toHalf(m *message.Message) error {
	if !m.Properties.Has(message.PropertyProducerGroup) {
		b.log.Warn("half message without a producer group; it cannot be checked back", "topic", m.Topic)
	}
	m.Properties = m.Properties.With(message.PropertyRealTopic, m.Topic).
		With(message.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
	m.Topic, m.QueueID = HalfTopic, 0
	m.SysFlag &^= message.SysFlagTxMask
	return nil
}

// handleEndTransaction commits or rolls back a half message. The producer
// sends it oneway and ignores the answer; every outcome is logged, and
// only a request that cannot be parsed or applied is an error.
func (b *Broker) handleEndTransaction(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.Get("producerGroup")
	off, err := req.Int64("commitLogOffset")
	typ, terr := req.Int32Or("commitOrRollback", endNotType)
	if err != nil || terr != nil || group == "" {
		return response(req, remoting.SystemError, "end transaction: producerGroup, commitLogOffset and commitOrRollback are required")
	}
	if err := checkGroup(group); err != nil {
		return response(req, remoting.SystemError, "end transaction: %v", err)
	}
	fromCheck := req.Get("fromTransactionCheck") == "true"
	if !b.isProducerConn(group, c) {
		// Without this anyone could commit or roll back another
		// producer's transactions by offset.
		return response(req, remoting.NoPermission, "end transaction: this connection is not a producer of group %s (no heartbeat or half message from it)", logName(group))
	}
	var outcome string
	switch typ {
	case endCommit:
		outcome = outcomeCommit
	case endRollback:
		outcome = outcomeRollback
	case endNotType:
		// Unknown: the checker asks again later.
		b.txn.catchUp()
		b.log.Debug("transaction state unknown", "group", group, "offset", off, "msg_id", req.Get("msgId"), "from_check", fromCheck)
		return remoting.NewResponse(req, remoting.Success, "")
	default:
		return response(req, remoting.SystemError, "end transaction: commitOrRollback %d is not 0, 8 or 12", typ)
	}
	if err := b.txn.end(group, off, outcome); err != nil {
		if errors.Is(err, errTxnNotPending) {
			b.log.Info("end transaction for a half message that is unknown or already resolved",
				"group", group, "offset", off, "outcome", outcome, "msg_id", req.Get("msgId"), "from_check", fromCheck, "detail", err)
			return remoting.NewResponse(req, remoting.Success, err.Error())
		}
		b.log.Warn("end transaction failed", "group", group, "offset", off, "outcome", outcome, "err", err)
		return response(req, remoting.SystemError, "end transaction: %v", err)
	}
	b.log.Debug("transaction ended", "group", group, "offset", off, "outcome", outcome, "from_check", fromCheck)
	return remoting.NewResponse(req, remoting.Success, "")
}

// isProducerConn reports whether c belongs to producer group: it
// registered as one by heartbeat, or sent one of the group's half messages.
func (b *Broker) isProducerConn(group string, c *remoting.Conn) bool {
	return slices.Contains(b.clients.producerConns(group), c) || b.txn.isProducer(group, c)
}

// committed builds the visible message of a committed half message stored
// as rec: its real topic and queue, its properties without the transaction
// markers, transaction type COMMIT and the half message's offset.
func committed(rec message.Record, origin int64, storeHost netip.AddrPort) (*message.Message, error) {
	var m message.Message
	rec.Decode(&m)
	topic := m.Properties.Get(message.PropertyRealTopic)
	qid, err := strconv.ParseInt(m.Properties.Get(message.PropertyRealQueueID), 10, 32)
	if topic == "" || err != nil {
		return nil, fmt.Errorf("half message at %d has no real topic and queue", m.CommitLogOffset)
	}
	m.Topic, m.QueueID = topic, int32(qid)
	m.Properties = m.Properties.Without(message.PropertyTransactionPrepared, message.PropertyRealTopic,
		message.PropertyRealQueueID, message.PropertyTransactionCheckTimes, propTxnOrigin)
	m.SysFlag = m.SysFlag&^message.SysFlagTxMask | message.SysFlagTxCommit
	m.PreparedTransactionOffset = origin
	m.StoreHost = storeHost
	return &m, nil
}

// opMarkerProps are the properties of op markers, by outcome.
var opMarkerProps = map[string]message.Properties{}

func init() {
	for _, o := range []string{outcomeCommit, outcomeRollback, outcomeDiscard} {
		opMarkerProps[o] = message.EncodeProperties(map[string]string{message.PropertyTags: opMarkerTag, propTxnOutcome: o})
	}
}

// opMarker builds the op marker recording a transaction's outcome: body
// the half message's commit-log offset in decimal.
func opMarker(origin int64, outcome string, now time.Time, storeHost netip.AddrPort) *message.Message {
	return &message.Message{
		Topic:         OpHalfTopic,
		BornTimestamp: now.UnixMilli(),
		BornHost:      storeHost,
		StoreHost:     storeHost,
		Body:          strconv.AppendInt(nil, origin, 10),
		Properties:    opMarkerProps[outcome],
	}
}
