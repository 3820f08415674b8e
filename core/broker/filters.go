package broker

import (
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Expression types with a meaning to the broker.
const (
	ExpressionTag   = "TAG"
	ExpressionSQL92 = "SQL92"
)

// filterCache compiles each (type, expression) once and shares the Filter.
// It is bounded by count and by the estimated bytes of what it holds
// (filterCost): one long SQL92 expression compiles to megabytes, so a count
// alone lets a client that subscribes with many distinct expressions
// exhaust memory. Over either bound, entries are evicted at random (map
// order) until the new one fits; a filter costing more than the whole
// budget is used but not kept.
type filterCache struct {
	log        *slog.Logger
	max        int   // compiled filters kept
	maxBytes   int64 // Options.FilterCacheMaxBytes
	maxExpr    int   // Options.MaxFilterExpression
	disableSQL bool  // Options.DisablePropertyFilter

	mu        sync.Mutex
	compiled  map[string]cachedFilter
	bytes     int64                    // sum of the compiled filters' costs
	factories map[string]FilterFactory // by expression type; starts as Options.Filters
	epoch     uint64                   // bumped by setFactory: a compile that straddles it is not cached

	compiling chan struct{} // one token per SQL92 compile running; GOMAXPROCS of them

	errors atomic.Int64 // filter failures during pulls
}

// cachedFilter is a compiled filter and its estimated cost in bytes.
type cachedFilter struct {
	f    Filter
	cost int64
}

// filterCacheLimits bound a filterCache.
type filterCacheLimits struct {
	count    int   // filters kept
	bytes    int64 // their estimated bytes
	exprLen  int   // longest expression compiled
	disableS bool  // refuse SQL92
}

// newFilterCache returns a cache compiling through factories (copied)
// within lim.
func newFilterCache(log *slog.Logger, factories map[string]FilterFactory, lim filterCacheLimits) *filterCache {
	return &filterCache{log: log, max: lim.count, maxBytes: lim.bytes, maxExpr: lim.exprLen, disableSQL: lim.disableS,
		compiled: map[string]cachedFilter{}, factories: maps.Clone(factories),
		compiling: make(chan struct{}, runtime.GOMAXPROCS(0))}
}

// memSizer is implemented by filters that know the bytes they hold (a
// compiled SQL92 expression).
type memSizer interface{ MemSize() int }

// filterCost estimates the bytes a compiled filter holds: its own MemSize
// when it has one, else a bound taken from the worst SQL92 shape (a long OR
// chain holds about 90 bytes per source byte).
func filterCost(key string, f Filter) int64 {
	if m, ok := f.(memSizer); ok {
		return int64(m.MemSize() + len(key))
	}
	return int64(128*len(key) + 256)
}

// cachedBytes returns the estimated bytes the cache holds.
func (c *filterCache) cachedBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// SetFilterFactory makes f serve expression type typ from now on, or with f
// nil removes the type, and drops the filters compiled for typ from the
// cache, so the next subscription of that type compiles through f.
// Subscriptions already compiled keep the Filter they hold: a factory whose
// filters must follow later changes (a reloaded plugin) returns filters
// that do.
func (h Hooks) SetFilterFactory(typ string, f FilterFactory) {
	b := h.b
	b.filters.setFactory(normalizeType(typ), f)
}

func (c *filterCache) setFactory(typ string, f FilterFactory) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f == nil {
		delete(c.factories, typ)
	} else {
		if c.factories == nil {
			c.factories = map[string]FilterFactory{}
		}
		c.factories[typ] = f
	}
	prefix := typ + "\x00"
	for k, e := range c.compiled {
		if strings.HasPrefix(k, prefix) {
			delete(c.compiled, k)
			c.bytes -= e.cost
		}
	}
	c.epoch++
}

// normalizeType maps "" to TAG and upper-cases the type.
func normalizeType(typ string) string {
	if typ == "" {
		return ExpressionTag
	}
	return strings.ToUpper(typ)
}

// compile returns the shared filter for an expression, or an error that
// names the problem. An unknown type is an error, never "match all".
func (c *filterCache) compile(typ, expr string) (Filter, error) {
	typ = normalizeType(typ)
	if typ == ExpressionTag && strings.TrimSpace(expr) == "" {
		expr = "*"
	}
	if c.maxExpr > 0 && len(expr) > c.maxExpr {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d (maxFilterExpression)", ErrFilterTooLong, len(expr), c.maxExpr)
	}
	key := typ + "\x00" + expr
	c.mu.Lock()
	e, ok := c.compiled[key]
	factory, known := c.factories[typ]
	epoch := c.epoch
	c.mu.Unlock()
	if ok {
		return e.f, nil
	}
	if typ == ExpressionSQL92 && c.disableSQL {
		return nil, fmt.Errorf("this broker does not filter by SQL92 (enablePropertyFilter is off)")
	}
	if !known {
		return nil, fmt.Errorf("unknown expression type %q (this broker knows %s)", typ, c.knownTypes())
	}
	if typ == ExpressionSQL92 {
		// Compiling is CPU-bound, and each compile in progress holds its
		// partial tree: up to a megabyte or more per expression, times
		// every pull in flight on every connection. More compiles at once
		// than CPUs only adds memory.
		c.compiling <- struct{}{}
		defer func() { <-c.compiling }()
	}
	f, err := factory.Compile(expr)
	if err != nil {
		return nil, err
	}
	cost := filterCost(key, f)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch || cost > c.maxBytes {
		return f, nil
	}
	if old, ok := c.compiled[key]; ok { // compiled twice at once
		return old.f, nil
	}
	for k, e := range c.compiled {
		if len(c.compiled) < c.max && c.bytes+cost <= c.maxBytes {
			break
		}
		delete(c.compiled, k)
		c.bytes -= e.cost
	}
	c.compiled[key] = cachedFilter{f, cost}
	c.bytes += cost
	return f, nil
}

func (c *filterCache) knownTypes() string {
	c.mu.Lock()
	names := slices.Sorted(maps.Keys(c.factories))
	c.mu.Unlock()
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// failed counts and logs a filter failure.
func (c *filterCache) failed(name string, err error) {
	c.errors.Add(1)
	c.log.Error("filter failed; the subscription holds at the failed message", "filter", name, "err", err)
}
