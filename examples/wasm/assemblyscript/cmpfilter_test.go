package assemblyscript_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/examples/wasm/internal/guestbuild"
	"github.com/rmq-go/rmq/filters/sql92"
	"github.com/rmq-go/rmq/internal/cputime"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// cmpRecords are n messages with typical properties, user and system ones
// mixed, as the SQL92 example's benchmark uses.
func cmpRecords(tb testing.TB, n int) []message.Record {
	tb.Helper()
	regions := []string{"eu-west-1", "us-east-1", "ap-south-1"}
	colors := []string{"red", "red", "blue"}
	out := make([]message.Record, n)
	for i := range out {
		m := message.Message{Topic: "orders", QueueOffset: int64(i), Body: []byte("{}"), Properties: message.EncodeProperties(map[string]string{
			"a":        fmt.Sprint(40 + i%60),
			"color":    colors[i%len(colors)],
			"region":   regions[i%len(regions)],
			"price":    fmt.Sprintf("%d.%02d", 10+i%20, i%100),
			"TAGS":     "TagA",
			"KEYS":     "order-20240101-0001",
			"UNIQ_KEY": "7F0000010D2C18B4AAC2563B52E10000",
			"WAIT":     "true",
		})}
		b, err := message.AppendRecord(nil, &m)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// loadCost loads a filter module for the cost comparison; an untrusted one
// gets a deadline long enough that a loaded machine cannot trip it.
func loadCost(tb testing.TB, module []byte, untrusted bool) *wasm.Plugin {
	tb.Helper()
	opts := wasm.Options{Name: "cost", Kind: wasm.KindFilter, Module: module, CacheDir: tb.TempDir(),
		Logger: quiet, PoolSize: 1, Untrusted: untrusted}
	if untrusted {
		opts.Deadline = 5 * time.Second
	}
	p, err := wasm.Load(tb.Context(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close(tb.Context()) })
	return p
}

// TestCmpFilterSameAsSQL92 holds cmpfilter to the native SQL92 filter's
// answers on expressions of its subset, trusted and untrusted.
func TestCmpFilterSameAsSQL92(t *testing.T) {
	module := guestbuild.AssemblyScript(t, sdkDir, "cmpfilter/index.ts")
	batch := cmpRecords(t, 300)
	for _, untrusted := range []bool{false, true} {
		p := loadCost(t, module, untrusted)
		for _, expr := range []string{
			"a > 50 AND a <= 80 AND color = 'red'",
			"a >= 60",
			"region = 'eu-west-1' AND a < 70",
			"price > 19.5 AND price <= 25.25",
			"color <> 'red'",
			"a = 41",
			"a <> 41 AND region <> 'ap-south-1'",
			"missing = 'x'",
		} {
			native, err := sql92.Compile(expr)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]bool, len(batch))
			_ = native.Match(batch, want)
			f, err := p.Filter(expr)
			if err != nil {
				t.Fatalf("%s: %v", expr, err)
			}
			got := make([]bool, len(batch))
			if err := f.Match(batch, got); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("untrusted=%v, %s, record %d: cmpfilter %v, SQL92 %v", untrusted, expr, i, got[i], want[i])
				}
			}
		}
		for _, bad := range []string{"a", "a >", "a > x", "color < 'red'"} {
			if _, err := p.Filter(bad); err == nil {
				t.Fatalf("%q accepted", bad)
			}
		}
	}
}

// BenchmarkFilterCost puts one expression through the native SQL92
// filter, the SQL92 filter compiled as a Go plugin (../sql92) and
// cmpfilter, trusted and untrusted, in batches of 256: elapsed time and
// process CPU per message.
func BenchmarkFilterCost(b *testing.B) {
	const expr = "a > 50 AND a <= 80 AND color = 'red'"
	batch := cmpRecords(b, 256)
	type filter interface {
		Match([]message.Record, []bool) error
	}
	native, err := sql92.Compile(expr)
	if err != nil {
		b.Fatal(err)
	}
	plugin := func(module func(testing.TB) []byte, untrusted bool) func(*testing.B) filter {
		return func(b *testing.B) filter {
			f, err := loadCost(b, module(b), untrusted).Filter(expr)
			if err != nil {
				b.Fatal(err)
			}
			return f
		}
	}
	goGuest := func(tb testing.TB) []byte { return guestbuild.Module(tb, "../sql92") }
	asGuest := func(tb testing.TB) []byte { return guestbuild.AssemblyScript(tb, sdkDir, "cmpfilter/index.ts") }
	for _, impl := range []struct {
		name string
		f    func(*testing.B) filter
	}{
		{"native", func(*testing.B) filter { return native }},
		{"go-trusted", plugin(goGuest, false)},
		{"go-untrusted", plugin(goGuest, true)},
		{"as-trusted", plugin(asGuest, false)},
		{"as-untrusted", plugin(asGuest, true)},
	} {
		b.Run(impl.name, func(b *testing.B) {
			f := impl.f(b)
			out := make([]bool, len(batch))
			b.ReportAllocs()
			cpu := cputime.Process()
			for b.Loop() {
				if err := f.Match(batch, out); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(b.N * len(batch))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/msg")
			b.ReportMetric(float64((cputime.Process()-cpu).Nanoseconds())/n, "cpu-ns/msg")
		})
	}
}
