package broker

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// Read-only views for in-process operators' tools (the web console): the
// same figures the stats and connection commands serve, as Go values.
// Each call is bounded by the table it walks or by its limit, and none
// serves a record of a topic reserved for the broker (half messages,
// parked delays, events), as VIEW_MESSAGE_BY_ID and QUERY_MESSAGE do not.

// ConsumerConnection returns a consumer group's online members, its
// subscriptions and consume settings, false when no member is online.
func (v View) ConsumerConnection(group string) (remoting.ConsumerConnection, bool) {
	b := v.b
	return b.clients.consumerConnection(group)
}

// OnlineConsumerGroups returns the consumer groups with a member online,
// sorted.
func (v View) OnlineConsumerGroups() []string {
	b := v.b
	b.clients.mu.Lock()
	out := make([]string, 0, len(b.clients.consumers))
	for g, cg := range b.clients.consumers {
		if len(cg.members) > 0 {
			out = append(out, g)
		}
	}
	b.clients.mu.Unlock()
	slices.Sort(out)
	return out
}

// GroupConfigs returns the stored consumer group configurations, sorted by
// name (bounded by MaxGroups).
func (v View) GroupConfigs() []SubscriptionGroupConfig {
	b := v.b
	var out []SubscriptionGroupConfig
	b.store.EachMeta(groupMetaKey, func(_ string, v []byte) error {
		var gc SubscriptionGroupConfig
		if json.Unmarshal(v, &gc) == nil {
			out = append(out, gc)
		}
		return nil
	})
	slices.SortFunc(out, func(x, y SubscriptionGroupConfig) int { return cmp.Compare(x.GroupName, y.GroupName) })
	return out
}

// checkReadable refuses a record of a topic reserved for the broker.
func checkReadable(r message.Record) error {
	if topic := string(r.Topic()); systemTopic(topic) || topic == TxnCheckMaxTopic {
		return fmt.Errorf("%w: the message is in %s", ErrReservedTopic, logName(topic))
	}
	return nil
}

// MessageAt returns the record at a queue offset of a topic, a copy.
func (v View) MessageAt(topic string, queueID int32, off int64) (message.Record, error) {
	b := v.b
	r, err := b.readOne(topic, queueID, off)
	if err != nil {
		return nil, err
	}
	return r, checkReadable(r)
}

// MessageByCommitOffset returns the record at a commit-log offset (the
// offset an offsetMsgId names).
func (v View) MessageByCommitOffset(off int64) (message.Record, error) {
	b := v.b
	r, err := b.store.ReadRecordAt(off)
	if err != nil {
		return nil, err
	}
	return r, checkReadable(r)
}

// MessagesByKey returns up to limit records of topic whose KEYS hold key
// or, with unique, whose UNIQ_KEY is key (the client's message id), as
// QUERY_MESSAGE finds them.
func (v View) MessagesByKey(topic, key string, unique bool, limit int) ([]message.Record, error) {
	b := v.b
	if systemTopic(topic) || topic == TxnCheckMaxTopic {
		return nil, fmt.Errorf("%w: %s", ErrReservedTopic, logName(topic))
	}
	limit = min(max(limit, 1), maxQueryMessages)
	offs, err := b.store.QueryByKey(topic, key, unique, 0, 1<<62, limit)
	if err != nil {
		return nil, err
	}
	var out []message.Record
	for _, off := range offs {
		r, err := b.store.ReadRecordAt(off)
		if err != nil || string(r.Topic()) != topic || !recordHasKey(r, key, unique) {
			continue // gone, corrupt, or a stale index entry
		}
		out = append(out, r)
	}
	return out, nil
}

// DelayPending is the number of delayed messages waiting at one level.
type DelayPending struct {
	Level   int
	Delay   time.Duration
	Pending int64
}

// PendingDelayed returns, for each delay level, how many delayed messages
// wait in it: the level's queue past the scheduler's progress.
func (v View) PendingDelayed() []DelayPending {
	b := v.b
	out := make([]DelayPending, 0, len(b.levels))
	for i, d := range b.levels {
		from, _ := b.store.Progress(levelProgressName + strconv.Itoa(i+1))
		minOff, maxOff := b.store.QueueOffsets(ScheduleTopic, int32(i))
		out = append(out, DelayPending{Level: i + 1, Delay: d, Pending: max(0, maxOff-max(from, minOff))})
	}
	return out
}

// PendingTimed counts the timed messages waiting, up to limit indexed
// ones plus those stored since the indexer last ran, and returns the due
// time of the earliest indexed one (zero when none). more tells that the
// count stopped at limit.
func (v View) PendingTimed(limit int) (n int, earliest time.Time, more bool, err error) {
	b := v.b
	err = b.store.ScanKeys([]byte{timerDueKey}, nil, func(k []byte) bool {
		if n == limit {
			more = true
			return false
		}
		if n == 0 && len(k) >= 9 {
			earliest = time.UnixMilli(int64(binary.BigEndian.Uint64(k[1:])))
		}
		n++
		return true
	})
	indexed, _ := b.store.Progress(timerIndexedName)
	n += int(max(0, b.store.MaxOffset(TimerTopic, 0)-indexed))
	return n, earliest, more, err
}

// PendingTxn is one unresolved transaction.
type PendingTxn struct {
	ProducerGroup string
	// CommitLogOffset is the half message's offset as first stored: the
	// transaction's key (tranStateTableOffset's record).
	CommitLogOffset int64
	Stored          time.Time
	Checks          int32
	LastCheck       time.Time // zero before the first check
}

// UnresolvedTransactions returns how many transactions are unresolved and
// the oldest of them, up to limit.
func (v View) UnresolvedTransactions(limit int) (total int, oldest []PendingTxn) {
	b := v.b
	s := b.txn
	s.mu.Lock()
	total = len(s.mu.pending)
	all := make([]PendingTxn, 0, total)
	for _, t := range s.mu.pending {
		p := PendingTxn{ProducerGroup: t.group, CommitLogOffset: t.origin, Stored: time.UnixMilli(t.stored), Checks: t.checks}
		if t.lastCheck > 0 {
			p.LastCheck = time.UnixMilli(t.lastCheck)
		}
		all = append(all, p)
	}
	s.mu.Unlock()
	slices.SortFunc(all, func(x, y PendingTxn) int { return cmp.Compare(x.CommitLogOffset, y.CommitLogOffset) })
	return total, all[:min(len(all), max(limit, 0))]
}

// DelayLevels returns the broker's delay levels, level 1 first.
func (v View) DelayLevels() []time.Duration {
	b := v.b
	return slices.Clone(b.levels)
}

// BootTime returns when the broker was built.
func (v View) BootTime() time.Time {
	b := v.b
	return b.boot
}

// ConnCount returns how many client connections the broker holds open.
func (v View) ConnCount() int {
	b := v.b
	if b.rs == nil {
		return 0
	}
	return b.rs.Conns()
}
