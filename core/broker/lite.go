package broker

import (
	"context"
	"encoding/binary"
	"encoding/json"
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
	// LiteWildcard, alone in what POPReceive.LiteTopics returns, stands
	// for every lite topic of the LITE topic.
	LiteWildcard = "*"
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
// parent, to bound them (MaxLiteTopics), to expire them and to find them
// when the parent is deleted. It is rebuilt from the store's queues at
// startup and kept by the sends and the arrival hook, on a replica too,
// so a promoted member counts right.
type liteTable struct {
	max int
	mu  sync.Mutex
	n   int
	// byParent maps a parent topic to its lite topics and when each was
	// last written (Unix ms: the last send admitted or message stored;
	// at startup, the time it started); sorted caches each parent's as a
	// sorted slice, dropped when they change.
	byParent map[string]map[string]int64
	sorted   map[string][]string
	// pruned is when admit last forgot the lite topics retention emptied:
	// at the bound, at most once per litePruneGap, so that sends refused
	// at the bound do not each walk every lite topic.
	pruned time.Time
}

// litePruneGap spaces admit's walks over the lite topics at the bound.
const litePruneGap = time.Second

func newLiteTable(max int) *liteTable {
	return &liteTable{max: max, byParent: map[string]map[string]int64{}, sorted: map[string][]string{}}
}

// seen records a lite topic the store holds, written at ms, beyond the
// quota if need be (it is stored already).
func (t *liteTable) seen(parent, lite string, ms int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addLocked(parent, lite, ms)
}

func (t *liteTable) addLocked(parent, lite string, ms int64) {
	m := t.byParent[parent]
	if m == nil {
		m = map[string]int64{}
		t.byParent[parent] = m
	}
	last, ok := m[lite]
	m[lite] = max(last, ms)
	if !ok {
		t.n++
		delete(t.sorted, parent)
	}
}

// admit lets a send create a lite topic: a known one always, a new one
// while the table is under its bound. empty reports whether a known lite
// topic's queue holds nothing any more (retention removed its messages):
// at the bound those are forgotten first (at most once per litePruneGap),
// so the quota counts lite topics that hold messages.
func (t *liteTable) admit(parent, lite string, empty func(parent, lite string) bool, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.byParent[parent][lite]; ok {
		t.addLocked(parent, lite, now.UnixMilli()) // written now: not to expire
		return nil
	}
	if t.n >= t.max && now.Sub(t.pruned) >= litePruneGap {
		t.pruned = now
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
	t.addLocked(parent, lite, now.UnixMilli())
	return nil
}

// stale returns a parent's lite topics last written before cutoff (Unix
// ms).
func (t *liteTable) stale(parent string, cutoff int64) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for l, last := range t.byParent[parent] {
		if last < cutoff {
			out = append(out, l)
		}
	}
	return out
}

// forget drops a lite topic last written before cutoff and reports
// whether it did: one written since is kept.
func (t *liteTable) forget(parent, lite string, cutoff int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.byParent[parent]
	if last, ok := m[lite]; !ok || last >= cutoff {
		return false
	}
	delete(m, lite)
	if len(m) == 0 {
		delete(t.byParent, parent)
	}
	delete(t.sorted, parent)
	t.n--
	return true
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

// loadLiteTopics fills the table from the store's queues, each written
// now: a lite topic expires no earlier than its expiration after a start.
func (b *Broker) loadLiteTopics() {
	now := b.now().UnixMilli()
	for _, q := range b.store.Queues() {
		if parent, lite, ok := SplitLiteQueue(q.Topic); ok {
			b.lite.seen(parent, lite, now)
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
	if err := b.lite.admit(parent, lite, b.liteEmpty, b.now()); err != nil {
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
	b.liteSends.Lock() // the lite sends under way land first
	defer b.liteSends.Unlock()
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

// A lite receive looks at the queues of the lite topics it subscribes
// to. The first look of a lite consumer, and any after what it
// subscribes to changed or one of its in-flight messages fell due, is a
// pass over all of them; the others look only at the lite topics that had
// news since (a message stored, a FIFO queue freed, a delivery given up),
// which the store's arrivals and the POP engine tell its waiter. The
// waiter is the consumer's listener, kept between its receives, so what
// happens between two receives is not missed and a steady consumer never
// looks at its quiet lite topics. A pass stopped by a full batch goes on
// where it stopped at the next look, so a pass costs each quiet lite
// topic one look however the batches fall.

// maxHints bounds the lite topics a lite waiter is told of one by one;
// past it, its next look is a pass over all of them.
const maxHints = 64

// liteWait is a lite receive's waiter state, guarded by mu.
type liteWait struct {
	mu sync.Mutex
	// lites is what the consumer subscribed to at its last look: sorted,
	// or LiteWildcard alone.
	lites []string
	// hints are the lite topics with news since the last look.
	hints []string
	// pass is set while a pass over all lite topics is due or under way:
	// it starts at resume, has looked at scanned of them, and was last
	// (re)started as generation gen.
	pass    bool
	resume  int
	scanned int
	gen     uint64
	// due is when, as of its last look, an in-flight message of its lite
	// topics becomes deliverable again: a listener's receives carry it
	// from one to the next. Only the receive that uses the waiter touches
	// it.
	due time.Time
	// busy marks a listener a receive uses; last is when one last did.
	busy bool
	last time.Time
}

func newLiteWait() *liteWait { return &liteWait{pass: true} }

// hint tells the waiter of news in lite topic lite, if its consumer
// subscribes to it; it reports whether it does.
func (l *liteWait) hint(lite string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lites) != 1 || l.lites[0] != LiteWildcard {
		if _, ok := slices.BinarySearch(l.lites, lite); !ok {
			return false
		}
	}
	l.hintLocked(lite)
	return true
}

func (l *liteWait) hintLocked(lite string) {
	if slices.Contains(l.hints, lite) {
		return
	}
	if len(l.hints) >= maxHints {
		l.allLocked()
		return
	}
	l.hints = append(l.hints, lite)
}

// all makes the next look a pass over every lite topic.
func (l *liteWait) all() {
	l.mu.Lock()
	l.allLocked()
	l.mu.Unlock()
}

func (l *liteWait) allLocked() {
	l.pass, l.scanned, l.hints = true, 0, nil
	l.gen++
}

// lookLite is one look of a lite receive with waiter l at the lite topics
// its consumer subscribes to now (lites, as POPReceive.LiteTopics):
// complete reports whether it took in all of them.
func (p *popEngine) lookLite(l *liteWait, r popRequest, lites []string, now time.Time) (complete bool, out []POPDelivery, next time.Time, err error) {
	l.mu.Lock()
	l.lites = lites
	pass, resume, gen := l.pass, l.resume, l.gen
	var hints []string
	if !pass {
		// A pass keeps the hints: it may stop before it reaches them.
		hints, l.hints = l.hints, nil
	}
	l.mu.Unlock()
	all := lites
	if len(all) == 1 && all[0] == LiteWildcard {
		all = p.b.lite.of(r.topic)
	}
	names, start := all, 0
	if pass {
		start = resume
	} else {
		names = slices.DeleteFunc(hints, func(n string) bool { _, ok := slices.BinarySearch(all, n); return !ok })
	}
	out, next, filled, gave, err := p.receiveLite(r, names, start, now)

	l.mu.Lock()
	defer l.mu.Unlock()
	if !pass && filled >= 0 {
		// The hints not looked at, the batch being full, come first next
		// time.
		for i := filled + 1; i < len(names); i++ {
			l.hintLocked(names[i])
		}
	}
	// Those that gave messages may hold more: looked at again next time,
	// after the others.
	for _, g := range gave {
		if i := slices.Index(l.hints, g); i >= 0 {
			l.hints = slices.Delete(l.hints, i, i+1)
		}
		l.hintLocked(g)
	}
	switch {
	case pass && l.gen == gen && len(names) > 0:
		looked := len(names)
		if filled >= 0 {
			// Go on after the lite topic that filled the batch; it may
			// hold more, so it counts as not looked at yet.
			looked = filled
			l.resume = (start + filled + 1) % len(names)
		}
		if l.scanned += looked; l.scanned >= len(names) {
			l.pass, l.scanned = false, 0
		}
	case pass && l.gen == gen:
		l.pass = false // nothing to look at
	}
	return filled < 0 && (pass || len(names) == len(all)), out, next, err
}

// receiveLite is receive for a lite consumer: up to r.batch messages of
// the lite topics named, from names[start] on, each a queue of its own
// under r.group's rules (in order when the group is FIFO). next is the
// earliest time one of their in-flight messages becomes deliverable
// again; filled is the index (from start) of the lite topic that filled
// the batch, -1 if none did; gave are those that gave messages.
func (p *popEngine) receiveLite(r popRequest, names []string, start int, now time.Time) (out []POPDelivery, next time.Time, filled int, gave []string, err error) {
	filled = -1
	for i := range names {
		lite := names[(start+i)%len(names)]
		sub := r
		sub.topic = LiteQueueTopic(r.topic, lite)
		sub.readQueues, sub.batch = 1, r.batch-len(out)
		got, n, err := p.receive(sub, now)
		for j := range got {
			got[j].Topic = sub.topic
		}
		out = append(out, got...)
		if err != nil {
			return out, next, filled, gave, err
		}
		if len(got) > 0 {
			gave = append(gave, lite)
		}
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
		if len(out) >= r.batch {
			return out, next, i, gave, nil
		}
	}
	return out, next, filled, gave, nil
}

// liteKey names a lite consumer's listener: its group, LITE topic and
// client.
type liteKey struct{ group, topic, client string }

// maxLiteListeners bounds the lite listeners; past it, a lite receive
// waits as any other does, with a pass over all its lite topics first.
const maxLiteListeners = 1 << 16

// liteListenerIdle is how long a lite listener no receive used lives
// once the listeners reach their bound.
const liteListenerIdle = 2 * time.Minute

// liteListener returns the waiter of a lite consumer's receives, which
// stays registered between them, so that the news of its lite topics
// while it is not waiting is kept for its next receive. It returns nil
// when the client has none to lend (no client id, another receive of it
// uses it, or too many listeners): the receive then watches on its own.
// stop ends the receive's use of it.
func (p *popEngine) liteListener(group, topic, client string) (w *waiter, stop func()) {
	if client == "" {
		return nil, nil
	}
	k := liteKey{group, topic, client}
	now := time.Now()
	p.waits.Lock()
	defer p.waits.Unlock()
	if p.waits.lite == nil {
		p.waits.lite = map[liteKey]*waiter{}
	}
	w = p.waits.lite[k]
	if w == nil {
		if len(p.waits.lite) >= maxLiteListeners {
			p.sweepListenersLocked(now)
			if len(p.waits.lite) >= maxLiteListeners {
				return nil, nil
			}
		}
		w = &waiter{group: group, ch: make(chan struct{}, 1), lite: newLiteWait()}
		p.waits.lite[k] = w
		p.registerLocked(topic, w)
	}
	l := w.lite
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy {
		return nil, nil
	}
	l.busy = true
	return w, func() {
		l.mu.Lock()
		l.busy, l.last = false, time.Now()
		l.mu.Unlock()
	}
}

// sweepListenersLocked drops the lite listeners no receive used for
// liteListenerIdle. p.waits must be held.
func (p *popEngine) sweepListenersLocked(now time.Time) {
	for k, w := range p.waits.lite {
		w.lite.mu.Lock()
		idle := !w.lite.busy && now.Sub(w.lite.last) > liteListenerIdle
		w.lite.mu.Unlock()
		if idle {
			delete(p.waits.lite, k)
			p.unregisterLocked(k.topic, w)
		}
	}
}

// LiteChanged tells the listener of a lite consumer that what it
// subscribes to changed: its next look is a pass over every lite topic
// it subscribes to then (one subscribed may hold messages already).
func (p POP) LiteChanged(group, topic, client string) {
	e := p.b.pop
	e.waits.Lock()
	defer e.waits.Unlock()
	if w := e.waits.lite[liteKey{group, topic, client}]; w != nil {
		w.lite.all()
		w.signal()
	}
}

// ForgetLite drops the lite listeners of a client that is gone.
func (p POP) ForgetLite(client string) {
	e := p.b.pop
	e.waits.Lock()
	defer e.waits.Unlock()
	for k, w := range e.waits.lite {
		if k.client == client {
			delete(e.waits.lite, k)
			e.unregisterLocked(k.topic, w)
		}
	}
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
	if parent, lite, ok := SplitLiteQueue(k.topic); ok {
		p.wakeLite(parent, lite)
	} else {
		p.wake(k.topic)
	}
	return nil
}

// expireLiteTopics deletes the lite topics of every LITE topic with an
// expiration (TopicConfig.LiteExpiration) that nothing was written to for
// that long: their queues, every group's offsets and POP state on them,
// and their place in the quota, as DeleteTopic does a topic's; then it
// tells OnLiteExpired. A send admitted to a lite topic marks it written,
// and the deletion waits for the lite sends in progress (liteSends), so
// a message is never deleted with its lite topic once sent: a lite topic
// written to during the walk is kept, and one written to after its
// deletion starts anew. The leader of a set runs it.
func (b *Broker) expireLiteTopics() {
	now := b.now()
	topics, _ := b.topics.snapshot()
	for parent, tc := range topics {
		if tc.MessageType != MessageTypeLite || tc.LiteExpiration <= 0 {
			continue
		}
		cutoff := now.Add(-time.Duration(tc.LiteExpiration) * time.Minute).UnixMilli()
		stale := b.lite.stale(parent, cutoff)
		if len(stale) == 0 {
			continue
		}
		var gone []string
		b.liteSends.Lock()
		for _, l := range stale {
			if !b.lite.forget(parent, l, cutoff) {
				continue // written since
			}
			if err := b.store.DeleteTopic(LiteQueueTopic(parent, l)); err != nil {
				b.liteSends.Unlock()
				b.log.Warn("expire lite topic", "topic", logName(parent), "lite_topic", l, "err", err)
				return
			}
			gone = append(gone, l)
		}
		b.liteSends.Unlock()
		internal := make(map[string]bool, len(gone))
		for _, l := range gone {
			internal[LiteQueueTopic(parent, l)] = true
		}
		b.pop.dropTopics(func(topic string) bool { return internal[topic] })
		if fn := b.liteExpired.Load(); fn != nil {
			for _, l := range gone {
				(*fn)(parent, l)
			}
		}
		if len(gone) > 0 {
			b.log.Info("lite topics expired", "topic", logName(parent), "lite_topics", len(gone), "expiration_minutes", tc.LiteExpiration)
		}
	}
}

// LiteTopicRow is one lite topic as the topics.lite admin command lists
// it.
type LiteTopicRow struct {
	LiteTopic string `json:"liteTopic"`
	MinOffset int64  `json:"minOffset"`
	MaxOffset int64  `json:"maxOffset"`
	// LastWritten is when it was last written (Unix ms): its last send
	// admitted or message stored, or this broker's start.
	LastWritten int64 `json:"lastWritten"`
}

// LiteTopicList is the answer of topics.lite: a page of a LITE topic's
// lite topics in name order, and how many it has.
type LiteTopicList struct {
	Topic string         `json:"topic"`
	Total int            `json:"total"`
	Rows  []LiteTopicRow `json:"rows"`
}

// maxLitePage bounds one page of topics.lite.
const maxLitePage = 10_000

// handleLiteAdmin serves topics.lite: {"topic", "after" (list the names
// after this one), "limit" (default 100, at most maxLitePage)}.
func (b *Broker) handleLiteAdmin(ctx context.Context, args json.RawMessage) (any, error) {
	a := struct {
		Topic string `json:"topic"`
		After string `json:"after"`
		Limit int    `json:"limit"`
	}{Limit: 100}
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	tc, ok := b.topics.get(a.Topic)
	switch {
	case !ok:
		return nil, fmt.Errorf("topic %s does not exist", logName(a.Topic))
	case tc.MessageType != MessageTypeLite:
		return nil, fmt.Errorf("topic %s is not of type LITE (it is %q)", logName(a.Topic), tc.MessageType)
	case a.Limit < 1 || a.Limit > maxLitePage:
		return nil, fmt.Errorf("limit %d: want 1 to %d", a.Limit, maxLitePage)
	}
	names := b.lite.of(a.Topic)
	out := LiteTopicList{Topic: a.Topic, Total: len(names), Rows: []LiteTopicRow{}}
	i, _ := slices.BinarySearch(names, a.After)
	if i < len(names) && names[i] == a.After {
		i++
	}
	for _, l := range names[i:min(len(names), i+a.Limit)] {
		minOff, maxOff := b.store.QueueOffsets(LiteQueueTopic(a.Topic, l), 0)
		out.Rows = append(out.Rows, LiteTopicRow{LiteTopic: l, MinOffset: max(minOff, 0), MaxOffset: max(maxOff, 0), LastWritten: b.lite.lastWritten(a.Topic, l)})
	}
	return out, nil
}

// lastWritten returns when a lite topic was last written (Unix ms), 0
// for one unknown.
func (t *liteTable) lastWritten(parent, lite string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byParent[parent][lite]
}
