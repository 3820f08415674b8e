package broker

import (
	"fmt"
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
	b   *Broker
	max int

	mu       sync.Mutex
	compiled map[string]Filter

	errors atomic.Int64 // filter failures during pulls
}

func newFilterCache(b *Broker, max int) *filterCache {
	return &filterCache{b: b, max: max, compiled: map[string]Filter{}}
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
	c.mu.Unlock()
	if ok {
		return f, nil
	}
	if typ == ExpressionSQL92 && c.b.opts.DisablePropertyFilter {
		return nil, fmt.Errorf("this broker does not filter by SQL92 (enablePropertyFilter is off)")
	}
	factory, ok := c.b.opts.Filters[typ]
	if !ok {
		return nil, fmt.Errorf("unknown expression type %q (this broker knows %s)", typ, c.knownTypes())
	}
	f, err := factory.Compile(expr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.compiled) >= c.max {
		clear(c.compiled) // rare: more distinct subscriptions than the cache holds
	}
	c.compiled[key] = f
	c.mu.Unlock()
	return f, nil
}

func (c *filterCache) knownTypes() string {
	var names []string
	for n := range c.b.opts.Filters {
		names = append(names, n)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// failed counts and logs a filter failure.
func (c *filterCache) failed(name string, err error) {
	c.errors.Add(1)
	c.b.log.Error("filter failed; the subscription holds at the failed message", "filter", name, "err", err)
}
