package broker

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/message"
)

// labelFilter is a Filter that remembers which factory made it.
type labelFilter struct{ label, expr string }

func (labelFilter) MatchTagHash(int64) bool                    { return true }
func (labelFilter) NeedsRecord() bool                          { return false }
func (labelFilter) Match(_ []message.Record, out []bool) error { return nil }

func labelFactory(label string) FilterFactory {
	return FilterFactoryFunc(func(expr string) (Filter, error) { return &labelFilter{label, expr}, nil })
}

// TestSetFilterFactory replaces and removes an expression type's factory at
// run time: the type's cached filters are dropped, other types' are kept.
func TestSetFilterFactory(t *testing.T) {
	b := &Broker{opts: Options{Filters: map[string]FilterFactory{"CLASS": labelFactory("v1"), "OTHER": labelFactory("other")}}}
	b.filters = newFilterCache(slog.Default(), b.opts.Filters, filterCacheLimits{count: 16, bytes: 1 << 20})
	compile := func(typ, expr string) *labelFilter {
		t.Helper()
		f, err := b.filters.compile(typ, expr)
		if err != nil {
			t.Fatalf("compile %s %q: %v", typ, expr, err)
		}
		return f.(*labelFilter)
	}
	first, other := compile("class", "a=1"), compile("OTHER", "x")
	if first.label != "v1" || compile("CLASS", "a=1") != first {
		t.Fatalf("the first compile is not cached: %+v", first)
	}

	b.Hooks().SetFilterFactory("class", labelFactory("v2"))
	if f := compile("CLASS", "a=1"); f == first || f.label != "v2" {
		t.Fatalf("after SetFilterFactory: %+v", f)
	}
	if compile("OTHER", "x") != other {
		t.Fatal("another type's cached filter was dropped")
	}

	b.Hooks().SetFilterFactory("CLASS", nil)
	_, err := b.filters.compile("CLASS", "a=1")
	if err == nil || !strings.Contains(err.Error(), `unknown expression type "CLASS"`) || !strings.Contains(err.Error(), "OTHER") {
		t.Fatalf("removed type: %v", err)
	}

	b.Hooks().SetFilterFactory("GEO", labelFactory("geo"))
	if f := compile("geo", "near"); f.label != "geo" {
		t.Fatalf("added type: %+v", f)
	}
}
