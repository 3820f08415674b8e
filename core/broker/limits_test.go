package broker

import (
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/filters/sql92"
)

// TestFilterCacheBoundedByBytes compiles 5,000 distinct large SQL92
// expressions, as a client pulling with its own subscription each time
// can: the cache's accounted bytes stay within its bound, and an
// expression over the length limit is refused before it is compiled.
func TestFilterCacheBoundedByBytes(t *testing.T) {
	const budget = 4 << 20
	sqlFactory := FilterFactoryFunc(func(expr string) (Filter, error) { return sql92.Compile(expr) })
	c := newFilterCache(slog.Default(), map[string]FilterFactory{ExpressionSQL92: sqlFactory},
		filterCacheLimits{count: DefaultFilterCacheSize, bytes: budget, exprLen: DefaultMaxFilterExpr})
	var base strings.Builder
	for base.Len() < 2<<10 {
		base.WriteString("a=1 OR ")
	}
	var kept int64
	for i := range 5000 {
		expr := base.String() + "a=" + strconv.Itoa(i)
		if _, err := c.compile(ExpressionSQL92, expr); err != nil {
			t.Fatal(err)
		}
		if n := c.cachedBytes(); n > budget {
			t.Fatalf("after %d expressions the cache holds %d bytes, over its bound %d", i+1, n, budget)
		}
		kept = max(kept, c.cachedBytes())
	}
	if kept < budget/2 {
		t.Fatalf("the cache never held more than %d bytes of %d: costs are not accounted", kept, budget)
	}
	_, err := c.compile(ExpressionSQL92, strings.Repeat("a=1 OR ", DefaultMaxFilterExpr/7+1)+"a=2")
	if !errors.Is(err, ErrFilterTooLong) {
		t.Fatalf("an over-long expression: %v", err)
	}
}
