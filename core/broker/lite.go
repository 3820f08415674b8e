package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
)

// Lite topics (RocketMQ 5.5's LiteTopic): a topic of type LITE is a
// parent of many small, ordered channels, one per session or task. A
// message names its lite topic; the first message to a name creates it.
// Each lite topic is one queue of its own, stored as the internal topic
// LiteQueueTopic(parent, lite) with queue 0: its offsets, its POP state
// and its retention are those of any queue. Lite queues are not topics of
// the table: they are not registered with the name servers, do not count
// against MaxTopics, and no client names them; MaxLiteTopics bounds them.
//
// Consumers subscribe to lite topics one by one (the gRPC front end keeps
// who subscribes to what) and receive from them through POP
// (POPReceive.LiteTopics), in order within each lite topic when their
// group is FIFO.

const (
	// MessageTypeLite is the type of a topic of lite topics.
	MessageTypeLite = "LITE"
	// LiteQueuePrefix starts the internal topic of every lite topic's
	// queue; clients may not send to such a topic directly.
	LiteQueuePrefix = "%LMQ%"
	// MaxLiteTopicLen is the longest lite topic name, as RocketMQ's.
	MaxLiteTopicLen = 64
	// MaxLiteParentLen is the longest name of a LITE topic: the internal
	// topic of its longest lite topic must fit a topic name.
	MaxLiteParentLen = 127 - len(LiteQueuePrefix) - 1 - MaxLiteTopicLen
	// DefaultMaxLiteTopics is Options.MaxLiteTopics' default.
	DefaultMaxLiteTopics = 100_000
)

var (
	// ErrBadLiteTopic: a lite topic's name breaks the rule (ValidateLiteTopic).
	ErrBadLiteTopic = errors.New("broker: invalid lite topic")
	// ErrLiteTopicQuota: a new lite topic would pass MaxLiteTopics.
	ErrLiteTopicQuota = errors.New("broker: lite topic quota exceeded")
)

// ValidateLiteTopic checks a lite topic's name: 1 to MaxLiteTopicLen
// letters, digits, _ and -.
func ValidateLiteTopic(name string) error {
	if name == "" {
		return fmt.Errorf("%w: the name is empty", ErrBadLiteTopic)
	}
	if len(name) > MaxLiteTopicLen {
		return fmt.Errorf("%w: %q is longer than %d characters", ErrBadLiteTopic, name[:20]+"…", MaxLiteTopicLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q holds %q; allowed are letters, digits, _ and -", ErrBadLiteTopic, name, c)
		}
	}
	return nil
}

// LiteQueueTopic is the internal topic that holds a lite topic's queue.
func LiteQueueTopic(parent, lite string) string {
	return LiteQueuePrefix + parent + "%" + lite
}

// SplitLiteQueue returns the parent and lite topic of an internal topic
// LiteQueueTopic made; ok is false for any other topic. A lite topic's
// name holds no %, so the last one ends the parent's.
func SplitLiteQueue(topic string) (parent, lite string, ok bool) {
	rest, found := strings.CutPrefix(topic, LiteQueuePrefix)
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '%')
	if i <= 0 || i == len(rest)-1 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// liteTable knows the lite topics whose queues the store holds, per
// parent, to bound them (MaxLiteTopics) and to find them when the parent
// is deleted. It is rebuilt from the store's queues at startup and kept
// by the arrival hook, on a replica too, so a promoted member counts
// right.
type liteTable struct {
	max int
	mu  sync.Mutex
	n   int
	// byParent maps a parent topic to its lite topics; sorted caches
	// each parent's as a sorted slice, dropped when they change.
	byParent map[string]map[string]struct{}
	sorted   map[string][]string
}

func newLiteTable(max int) *liteTable {
	return &liteTable{max: max, byParent: map[string]map[string]struct{}{}, sorted: map[string][]string{}}
}

// seen records a lite topic the store holds, beyond the quota if need be
// (it is stored already).
func (t *liteTable) seen(parent, lite string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addLocked(parent, lite)
}

func (t *liteTable) addLocked(parent, lite string) bool {
	m := t.byParent[parent]
	if m == nil {
		m = map[string]struct{}{}
		t.byParent[parent] = m
	}
	if _, ok := m[lite]; ok {
		return false
	}
	m[lite] = struct{}{}
	t.n++
	delete(t.sorted, parent)
	return true
}

// admit lets a send create a lite topic: a known one always, a new one
// while the table is under its bound. empty reports whether a known lite
// topic's queue holds nothing any more (retention removed its messages):
// at the bound those are forgotten first, so the quota counts lite topics
// that hold messages.
func (t *liteTable) admit(parent, lite string, empty func(parent, lite string) bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.byParent[parent][lite]; ok {
		return nil
	}
	if t.n >= t.max {
		for p, m := range t.byParent {
			for l := range m {
				if empty(p, l) {
					delete(m, l)
					delete(t.sorted, p)
					t.n--
				}
			}
			if len(m) == 0 {
				delete(t.byParent, p)
			}
		}
	}
	if t.n >= t.max {
		return fmt.Errorf("%w: %d lite topics hold messages, the limit is %d (maxLiteTopics); %s of %s not created",
			ErrLiteTopicQuota, t.n, t.max, lite, logName(parent))
	}
	t.addLocked(parent, lite)
	return nil
}

// of returns a parent's lite topics, sorted; the slice is shared and
// must not be changed.
func (t *liteTable) of(parent string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if out, ok := t.sorted[parent]; ok {
		return out
	}
	out := make([]string, 0, len(t.byParent[parent]))
	for l := range t.byParent[parent] {
		out = append(out, l)
	}
	slices.Sort(out)
	t.sorted[parent] = out
	return out
}

// drop forgets a parent's lite topics and returns them.
func (t *liteTable) drop(parent string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.byParent[parent]
	delete(t.byParent, parent)
	delete(t.sorted, parent)
	t.n -= len(m)
	out := make([]string, 0, len(m))
	for l := range m {
		out = append(out, l)
	}
	return out
}

// count returns how many lite topics the table knows.
func (t *liteTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// loadLiteTopics fills the table from the store's queues.
func (b *Broker) loadLiteTopics() {
	for _, q := range b.store.Queues() {
		if parent, lite, ok := SplitLiteQueue(q.Topic); ok {
			b.lite.seen(parent, lite)
		}
	}
}

// liteSendQueue checks a lite message's send: its parent exists, is of
// type LITE and writable, the lite topic's name is good and the quota
// admits it. It returns the internal topic to store the message in; its
// queue is 0.
func (b *Broker) liteSendQueue(parent, lite string) (string, error) {
	if err := ValidateLiteTopic(lite); err != nil {
		return "", refusef(ErrIllegal, "%w", err)
	}
	tc, ok := b.topics.get(parent)
	switch {
	case !ok:
		return "", refusef(ErrTopicNotFound, "topic %s does not exist; lite topics live in a topic of type LITE, created first", logName(parent))
	case tc.MessageType != MessageTypeLite:
		return "", refusef(ErrIllegal, "topic %s is not of type LITE (it is %q); a lite topic lives in a LITE topic", logName(parent), tc.MessageType)
	case tc.Perm&remoting.PermWrite == 0:
		return "", refusef(ErrNoPermission, "topic %s is not writable (perm %d)", parent, tc.Perm)
	}
	if err := b.lite.admit(parent, lite, b.liteEmpty); err != nil {
		if b.liteLog.allow(b.now()) {
			b.log.Warn("lite topic quota reached; creation refused", "topic", logName(parent), "lite_topic", lite, "limit", b.lite.max)
		}
		return "", refusef(ErrIllegal, "%w", err)
	}
	return LiteQueueTopic(parent, lite), nil
}

// liteEmpty reports whether a lite topic's queue holds no message.
func (b *Broker) liteEmpty(parent, lite string) bool {
	minOff, maxOff := b.store.QueueOffsets(LiteQueueTopic(parent, lite), 0)
	return minOff >= maxOff
}

// LiteTopics returns the lite topics of a LITE topic that this broker's
// store holds, sorted; the slice is shared and must not be changed.
func (v View) LiteTopics(parent string) []string { return v.b.lite.of(parent) }

// deleteLiteTopics deletes the lite topics of a deleted parent: their
// queues and every group's offsets and POP state on them.
func (b *Broker) deleteLiteTopics(parent string) error {
	lites := b.lite.drop(parent)
	if len(lites) == 0 {
		return nil
	}
	internal := make(map[string]bool, len(lites))
	for _, l := range lites {
		t := LiteQueueTopic(parent, l)
		internal[t] = true
		if err := b.store.DeleteTopic(t); err != nil {
			return err
		}
	}
	b.pop.dropTopics(func(topic string) bool { return internal[topic] })
	b.log.Info("lite topics deleted with their parent", "topic", parent, "lite_topics", len(lites))
	return nil
}

// LiteOffset says where a group's consumption of a lite topic starts when
// it subscribes (RocketMQ 5's OffsetOption). The zero value keeps where
// the group left off.
type LiteOffset struct {
	// Policy is "" (where the group left off), "MIN" (the first message
	// the queue holds) or "MAX" (only messages stored from now on).
	Policy string
	// Offset, when Set, is the queue offset to start at.
	Offset int64
	// TailN, when Set, starts at the last TailN messages.
	TailN int64
	// Timestamp, when Set, starts at the first message stored at or after
	// it (Unix ms).
	Timestamp int64
	// Set says which one of Offset, TailN and Timestamp is given (the
	// field's name), "" for none.
	Set string
}

// SeekLite moves group's consumption of a lite topic to where o says,
// dropping what it has in flight there: the messages from the new start
// are delivered again. A zero o changes nothing.
func (p POP) SeekLite(group, parent, lite string, o LiteOffset) error {
	if o == (LiteOffset{}) {
		return nil
	}
	if err := ValidateLiteTopic(lite); err != nil {
		return refusef(ErrIllegal, "%w", err)
	}
	topic := LiteQueueTopic(parent, lite)
	minOff, maxOff := p.b.store.QueueOffsets(topic, 0)
	minOff, maxOff = max(minOff, 0), max(maxOff, 0)
	var to int64
	switch {
	case o.Set == "Offset":
		to = min(max(o.Offset, minOff), maxOff)
	case o.Set == "TailN":
		to = max(maxOff-max(o.TailN, 0), minOff)
	case o.Set == "Timestamp":
		off, err := p.b.store.OffsetForTimestamp(topic, 0, o.Timestamp)
		if err != nil {
			return refusef(ErrInternal, "lite topic %s of %s: offset at %d: %w", lite, logName(parent), o.Timestamp, err)
		}
		to = min(max(off, minOff), maxOff)
	case o.Policy == "MIN":
		to = minOff
	case o.Policy == "MAX":
		to = maxOff
	default:
		return nil
	}
	return p.b.pop.seek(popKey{group, topic}, 0, to)
}

// liteWakeTopic is the topic whose receives an arrival in topic wakes: a
// lite queue's parent, where lite receives wait, or topic itself.
func liteWakeTopic(topic string) string {
	if parent, _, ok := SplitLiteQueue(topic); ok {
		return parent
	}
	return topic
}

// receiveLite is receive for a lite consumer: up to r.batch messages of
// the lite topics named, each a queue of its own under r.group's rules
// (in order when the group is FIFO). Each receive starts one lite topic
// further on, so a busy one does not starve the others. next is the
// earliest time one of their in-flight messages becomes deliverable
// again.
func (p *popEngine) receiveLite(r popRequest, lites []string, now time.Time) (out []POPDelivery, next time.Time, err error) {
	if len(lites) == 0 {
		return nil, next, nil
	}
	start := int(p.liteTurn.Add(1) % uint64(len(lites)))
	for i := range lites {
		sub := r
		sub.topic = LiteQueueTopic(r.topic, lites[(start+i)%len(lites)])
		sub.readQueues, sub.batch = 1, r.batch-len(out)
		got, n, err := p.receive(sub, now)
		for j := range got {
			got[j].Topic = sub.topic
		}
		out = append(out, got...)
		if err != nil {
			return out, next, err
		}
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
		if len(out) >= r.batch {
			break
		}
	}
	return out, next, nil
}

// seek moves k's queue q to offset to: what is in flight there is
// dropped and the cursor and the group's offset move to it.
func (p *popEngine) seek(k popKey, q int32, to int64) error {
	pt := p.lock(k)
	defer pt.mu.Unlock()
	qs, err := p.queuesLocked(pt, k, int(q)+1)
	if err != nil {
		return err
	}
	pq := qs[q]
	var del [][]byte
	for off := range pq.flights {
		del = append(del, popFlightKey(k, q, off))
	}
	fresh := newPOPQueue()
	fresh.cursor = to
	qs[q] = fresh
	if err := p.b.store.DeleteKeys(del...); err != nil {
		return err
	}
	if err := p.b.store.PutValues(store.KV{Key: popCursorKey(k, q), Value: binary.BigEndian.AppendUint64(nil, uint64(to))}); err != nil {
		return err
	}
	p.commitLocked(k, q, fresh)
	p.wake(liteWakeTopic(k.topic))
	return nil
}
