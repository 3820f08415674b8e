package broker

import (
	"log/slog"
	"sync"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
)

// holdTable keeps pulls that found nothing new until a message arrives on
// their queue or their suspend time ends (long polling).
type holdTable struct {
	log   *slog.Logger
	store *store.Store
	// rerun answers a released pull; it must not hold it again.
	rerun func(p *pullRequest) *remoting.Command
	// maxPerConn is Options.MaxHeldPullsPerConn.
	maxPerConn int
	capped     limitLog // logs the cap being hit, at most every 10 s

	mu sync.Mutex
	// held maps a queue to its held pulls.
	held map[holdKey]map[*heldPull]struct{}
	// perConn counts the held pulls of each connection.
	perConn map[*remoting.Conn]int
	closed  bool
}

type holdKey struct {
	topic string
	queue int32
}

type heldPull struct {
	p     *pullRequest
	timer *time.Timer
}

// newHoldTable returns a table that checks st for messages that landed
// while a pull was being parked and answers released pulls with rerun.
// It holds at most maxPerConn pulls of one connection.
func newHoldTable(log *slog.Logger, st *store.Store, maxPerConn int, rerun func(*pullRequest) *remoting.Command) *holdTable {
	return &holdTable{log: log, store: st, rerun: rerun, maxPerConn: maxPerConn,
		held: map[holdKey]map[*heldPull]struct{}{}, perConn: map[*remoting.Conn]int{}}
}

// hold parks p. It reports false when the broker is stopping or p's
// connection already has maxPerConn pulls held; the caller answers at
// once. A message that landed between the caller's check and the hold is
// not missed: the queue is checked again once p is parked.
func (t *holdTable) hold(p *pullRequest) bool {
	k := holdKey{p.topic, p.queueID}
	h := &heldPull{p: p}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return false
	}
	if t.perConn[p.conn] >= t.maxPerConn {
		t.mu.Unlock()
		if t.capped.allow(time.Now()) {
			t.log.Warn("held pulls per connection at the limit; answering pulls at once (maxHeldPullsPerConn)",
				"peer", p.conn.RemoteAddr(), "limit", t.maxPerConn)
		}
		return false
	}
	t.perConn[p.conn]++
	set := t.held[k]
	if set == nil {
		set = map[*heldPull]struct{}{}
		t.held[k] = set
	}
	set[h] = struct{}{}
	h.timer = time.AfterFunc(p.suspend, func() { t.release(k, h) })
	t.mu.Unlock()
	if t.store.MaxOffset(p.topic, p.queueID) > p.offset {
		t.release(k, h)
	}
	return true
}

// arrived is the store's arrival hook: it releases the pulls held on the
// queue that are now behind its max offset. It runs on the store's flusher,
// so the pulls are answered on their own goroutines.
func (t *holdTable) arrived(topic string, queue int32, maxOffset int64) {
	k := holdKey{topic, queue}
	t.mu.Lock()
	set := t.held[k]
	if len(set) == 0 {
		t.mu.Unlock()
		return
	}
	var ready []*heldPull
	for h := range set {
		if h.p.offset < maxOffset {
			ready = append(ready, h)
		}
	}
	t.mu.Unlock()
	for _, h := range ready {
		go t.release(k, h)
	}
}

// release answers h unless someone else already did.
func (t *holdTable) release(k holdKey, h *heldPull) {
	if !t.remove(k, h) {
		return
	}
	p := h.p
	select {
	case <-p.conn.Done():
		return
	default:
	}
	resp := t.rerun(p)
	if err := p.conn.Reply(p.req, resp); err != nil {
		t.log.Debug("held pull answered on a closed connection", "topic", p.topic, "queue", p.queueID, "err", err)
	}
}

func (t *holdTable) remove(k holdKey, h *heldPull) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	set := t.held[k]
	if _, ok := set[h]; !ok {
		return false
	}
	delete(set, h)
	if len(set) == 0 {
		delete(t.held, k)
	}
	if t.perConn[h.p.conn]--; t.perConn[h.p.conn] <= 0 {
		delete(t.perConn, h.p.conn)
	}
	h.timer.Stop()
	return true
}

// releaseAll answers every held pull now; used at shutdown.
func (t *holdTable) releaseAll() {
	t.mu.Lock()
	t.closed = true
	var all []struct {
		k holdKey
		h *heldPull
	}
	for k, set := range t.held {
		for h := range set {
			all = append(all, struct {
				k holdKey
				h *heldPull
			}{k, h})
		}
	}
	t.mu.Unlock()
	for _, e := range all {
		t.release(e.k, e.h)
	}
}

// connCount returns the number of pulls held for c.
func (t *holdTable) connCount(c *remoting.Conn) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.perConn[c]
}

// count returns the number of held pulls.
func (t *holdTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, set := range t.held {
		n += len(set)
	}
	return n
}
