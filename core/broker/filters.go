package broker

import (
	"fmt"
	"log/slog"
	"maps"
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
type filterCache struct {
	log        *slog.Logger
	max        int  // compiled filters kept before the cache is cleared
	disableSQL bool // Options.DisablePropertyFilter

	mu        sync.Mutex
	compiled  map[string]Filter
	factories map[string]FilterFactory // by expression type; starts as Options.Filters
	epoch     uint64                   // bumped by setFactory: a compile that straddles it is not cached

	errors atomic.Int64 // filter failures during pulls
}

// newFilterCache returns a cache of at most max filters compiled through
// factories (copied); with disableSQL it refuses SQL92 expressions.
func newFilterCache(log *slog.Logger, factories map[string]FilterFactory, disableSQL bool, max int) *filterCache {
	return &filterCache{log: log, max: max, disableSQL: disableSQL, compiled: map[string]Filter{}, factories: maps.Clone(factories)}
}

// SetFilterFactory makes f serve expression type typ from now on, or with f
// nil removes the type, and drops the filters compiled for typ from the
// cache, so the next subscription of that type compiles through f.
// Subscriptions already compiled keep the Filter they hold: a factory whose
// filters must follow later changes (a reloaded plugin) returns filters
// that do.
func (b *Broker) SetFilterFactory(typ string, f FilterFactory) {
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
	for k := range c.compiled {
		if strings.HasPrefix(k, prefix) {
			delete(c.compiled, k)
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
	key := typ + "\x00" + expr
	c.mu.Lock()
	f, ok := c.compiled[key]
	factory, known := c.factories[typ]
	epoch := c.epoch
	c.mu.Unlock()
	if ok {
		return f, nil
	}
	if typ == ExpressionSQL92 && c.disableSQL {
		return nil, fmt.Errorf("this broker does not filter by SQL92 (enablePropertyFilter is off)")
	}
	if !known {
		return nil, fmt.Errorf("unknown expression type %q (this broker knows %s)", typ, c.knownTypes())
	}
	f, err := factory.Compile(expr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.epoch == epoch {
		if len(c.compiled) >= c.max {
			clear(c.compiled) // rare: more distinct subscriptions than the cache holds
		}
		c.compiled[key] = f
	}
	c.mu.Unlock()
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
