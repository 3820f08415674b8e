package sql92

import (
	"container/list"
	"sync"
)

// DefaultCacheSize is the number of expressions a Cache keeps when
// NewCache is given zero or less.
const DefaultCacheSize = 1024

// Cache shares compiled expressions: every subscription with the same
// expression gets the same *Expr, compiled once. It keeps the most
// recently used expressions (and compile errors, so a client repeating a
// bad expression costs no reparse) up to its size. It is safe for
// concurrent use.
type Cache struct {
	max int
	mu  struct {
		sync.Mutex
		entries map[string]*cacheEntry
		lru     list.List // of *cacheEntry, most recently used first
	}
}

type cacheEntry struct {
	expr  string
	elem  *list.Element
	ready chan struct{} // closed once e and err are set
	e     *Expr
	err   error
}

// NewCache returns a cache holding up to max expressions (DefaultCacheSize
// when max ≤ 0).
func NewCache(max int) *Cache {
	if max <= 0 {
		max = DefaultCacheSize
	}
	c := &Cache{max: max}
	c.mu.entries = make(map[string]*cacheEntry)
	return c
}

// Compile returns the compiled form of expr, compiling it on first use.
// Concurrent calls for the same new expression compile it once; the others
// wait for that result. Expressions longer than MaxExprLen are refused
// without being remembered.
func (c *Cache) Compile(expr string) (*Expr, error) {
	if len(expr) > MaxExprLen {
		return Compile(expr)
	}
	c.mu.Lock()
	if ent, ok := c.mu.entries[expr]; ok {
		c.mu.lru.MoveToFront(ent.elem)
		c.mu.Unlock()
		<-ent.ready
		return ent.e, ent.err
	}
	ent := &cacheEntry{expr: expr, ready: make(chan struct{})}
	c.insertLocked(ent)
	c.mu.Unlock()

	// Compile outside the lock; waiters hold ent even if it is evicted.
	ent.e, ent.err = Compile(expr)
	close(ent.ready)
	return ent.e, ent.err
}

func (c *Cache) insertLocked(ent *cacheEntry) {
	ent.elem = c.mu.lru.PushFront(ent)
	c.mu.entries[ent.expr] = ent
	for c.mu.lru.Len() > c.max {
		old := c.mu.lru.Remove(c.mu.lru.Back()).(*cacheEntry)
		delete(c.mu.entries, old.expr)
	}
}

// Len returns the number of expressions the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.lru.Len()
}
