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
	// maxFilterBytes bounds the estimated bytes of the distinct compiled
	// filters that held pulls keep alive (Options.FilterCacheMaxBytes): a
	// held pull keeps its filter after the filter cache evicted it, so
	// without this bound pulls that each carry a distinct large SQL92
	// expression pin all their compiled filters for their suspend time.
	maxFilterBytes int64
	capped         limitLog // logs the per-connection cap being hit, at most every 10 s
	filterCapped   limitLog // logs the filter bound being hit, at most every 10 s

	mu sync.Mutex
	// held maps a queue to its held pulls.
	held map[holdKey]map[*heldPull]struct{}
	// perConn counts the held pulls of each connection.
	perConn map[*remoting.Conn]int
	// filters counts the held pulls per filter name ("TYPE expression") of
	// the filters that know their size; filterBytes sums those filters'
	// costs, each counted once.
	filters     map[string]int
	filterBytes int64
	closed      bool
}

type holdKey struct {
	topic string
	queue int32
}

type heldPull struct {
	p     *pullRequest
	timer *time.Timer
	cost  int64 // heldFilterCost(p), computed once
}

// newHoldTable returns a table that checks st for messages that landed
// while a pull was being parked and answers released pulls with rerun.
// It holds at most maxPerConn pulls of one connection, and pulls whose
// distinct filters cost at most maxFilterBytes in all.
func newHoldTable(log *slog.Logger, st *store.Store, maxPerConn int, maxFilterBytes int64, rerun func(*pullRequest) *remoting.Command) *holdTable {
	return &holdTable{log: log, store: st, rerun: rerun, maxPerConn: maxPerConn, maxFilterBytes: maxFilterBytes,
		held: map[holdKey]map[*heldPull]struct{}{}, perConn: map[*remoting.Conn]int{}, filters: map[string]int{}}
}

// heldFilterCost is what holding p adds to filterBytes if no other held
// pull has its filter: the filter's own size estimate, or 0 for filters
// that do not know their size (tags, plugins).
func heldFilterCost(p *pullRequest) int64 {
	if m, ok := p.filter.(memSizer); ok {
		return int64(m.MemSize() + len(p.filterName))
	}
	return 0
}

// hold parks p. It reports false when the broker is stopping, p's
// connection already has maxPerConn pulls held, or p's filter would take
// the held filters over maxFilterBytes; the caller answers at once. A
// message that landed between the caller's check and the hold is not
// missed: the queue is checked again once p is parked.
func (t *holdTable) hold(p *pullRequest) bool {
	k := holdKey{p.topic, p.queueID}
	h := &heldPull{p: p, cost: heldFilterCost(p)}
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
	if h.cost > 0 && t.filters[p.filterName] == 0 && t.filterBytes+h.cost > t.maxFilterBytes {
		t.mu.Unlock()
		if t.filterCapped.allow(time.Now()) {
			t.log.Warn("held pulls' filters at the limit; answering pulls with new filters at once (filterCacheMaxBytes)",
				"peer", p.conn.RemoteAddr(), "limit", t.maxFilterBytes)
		}
		return false
	}
	if h.cost > 0 {
		if t.filters[p.filterName]++; t.filters[p.filterName] == 1 {
			t.filterBytes += h.cost
		}
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
	if h.cost > 0 {
		if t.filters[h.p.filterName]--; t.filters[h.p.filterName] <= 0 {
			delete(t.filters, h.p.filterName)
			t.filterBytes -= h.cost
		}
	}
	h.timer.Stop()
	return true
}

// releaseTopic answers now the pulls held on a deleted topic's queues.
func (t *holdTable) releaseTopic(topic string) {
	type entry struct {
		k holdKey
		h *heldPull
	}
	var found []entry
	t.mu.Lock()
	for k, set := range t.held {
		if k.topic == topic {
			for h := range set {
				found = append(found, entry{k, h})
			}
		}
	}
	t.mu.Unlock()
	for _, e := range found {
		go t.release(e.k, e.h)
	}
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
