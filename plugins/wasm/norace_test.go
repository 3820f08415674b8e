//go:build !race

package wasm_test

import (
	"testing"

	"github.com/rmq-go/rmq/plugins/wasm"
)

// TestMatchAllocatesNothing keeps the filter path free of allocations on
// the host, for trusted plugins and with projected properties.
func TestMatchAllocatesNothing(t *testing.T) {
	p := load(t, wasm.Options{PoolSize: 1})
	batch := records(t, 300, "A", "B")
	out := make([]bool, len(batch))
	for _, expr := range []string{"A", "prop:region=eu"} {
		f, err := p.Filter(expr)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Match(batch, out); err != nil { // warm the instance
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(20, func() { _ = f.Match(batch, out) }); n != 0 {
			t.Fatalf("%s: Match allocates %v times", expr, n)
		}
	}
}
