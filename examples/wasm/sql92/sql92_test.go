package main_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/examples/wasm/internal/guestbuild"
	"github.com/rmq-go/rmq/filters/sql92"
	"github.com/rmq-go/rmq/internal/cputime"
	"github.com/rmq-go/rmq/plugins/wasm"
	"github.com/rmq-go/rmq/sdk"
)

// props are a typical message's properties: user and system ones mixed.
func props(a int, region string) message.Properties {
	return message.EncodeProperties(map[string]string{
		"a":        fmt.Sprint(a),
		"color":    "red",
		"region":   region,
		"price":    "19.99",
		"TAGS":     "TagA",
		"KEYS":     "order-20240101-0001",
		"UNIQ_KEY": "7F0000010D2C18B4AAC2563B52E10000",
		"WAIT":     "true",
	})
}

func records(tb testing.TB, n int) []message.Record {
	tb.Helper()
	regions := []string{"eu-west-1", "us-east-1", "ap-south-1"}
	out := make([]message.Record, n)
	for i := range out {
		m := message.Message{Topic: "orders", QueueOffset: int64(i), Body: []byte("{}"), Properties: props(40+i%60, regions[i%3])}
		b, err := message.AppendRecord(nil, &m)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = b
	}
	return out
}

func load(tb testing.TB, untrusted bool) *wasm.Plugin { return loadConfig(tb, untrusted, "") }

// loadConfig loads the guest with config: "" (values resolved by the
// broker) or "properties" (the named properties sent as pieces).
func loadConfig(tb testing.TB, untrusted bool, config string) *wasm.Plugin {
	tb.Helper()
	p, err := wasm.Load(tb.Context(), wasm.Options{Name: "sql92", Kind: wasm.KindFilter, Config: []byte(config),
		Module: guestbuild.Module(tb, "."), CacheDir: tb.TempDir(), Untrusted: untrusted, PoolSize: 1, Deadline: deadline(untrusted)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close(tb.Context()) })
	return p
}

// deadline is a generous bound for untrusted calls: on a loaded machine a
// batch can be descheduled for longer than the default 100ms, which would
// fail a test that measures cost, not deadlines.
func deadline(untrusted bool) time.Duration {
	if untrusted {
		return 5 * time.Second
	}
	return 0
}

var expressions = []string{
	"a > 50 AND a <= 80 AND color = 'red'",
	"a BETWEEN 50 AND 80 AND region IN ('eu-west-1', 'us-east-1')",
	"TAGS = 'TagA' AND (a > 90 OR missing IS NOT NULL)",
	"region STARTSWITH 'ap' OR a = 99",
	"NOT (a > 60)",
}

// TestSameAsNative checks the guest against the native filter on every
// record and expression, trusted and untrusted (its code rewritten with
// interruption checks), taking the properties it names as values resolved
// by the broker and as pieces of the properties string.
func TestSameAsNative(t *testing.T) {
	for _, untrusted := range []bool{false, true} {
		for _, config := range []string{"", "properties"} {
			t.Run(fmt.Sprintf("untrusted=%v/config=%q", untrusted, config), func(t *testing.T) {
				p := loadConfig(t, untrusted, config)
				if got, want := p.Stats().ABIMinor, 4; got != want && config == "" {
					t.Fatalf("guest built for ABI minor %d, want %d", got, want)
				}
				sameAsNative(t, p)
				oddAsNative(t, p)
			})
		}
	}
}

// oddRecords hold properties no encoder writes but a stored message may
// carry: a key twice (the later value wins), empty values, malformed
// pieces, and more properties than the evaluator remembers.
var oddRecords = []string{
	"a\x0160\x02color\x01red\x02a\x0190\x02",
	"a\x0190\x02color\x01red\x02a\x0160\x02",
	"a\x0160\x02color\x01\x02",
	"a\x0160\x02color\x01red\x01x\x02",
	"a\x0160\x02color\x01blue\x02color\x01red\x02region\x01\x02",
	"p0\x011\x02p1\x011\x02p2\x011\x02p3\x011\x02p4\x011\x02p5\x011\x02p6\x011\x02p7\x011\x02p8\x012\x02p9\x01x\x02",
	"",
}

// oddAsNative checks the guest against the native filter on oddRecords.
func oddAsNative(t *testing.T, p *wasm.Plugin) {
	batch := make([]message.Record, len(oddRecords))
	for i, props := range oddRecords {
		m := message.Message{Topic: "orders", QueueOffset: int64(i), Properties: message.Properties(props)}
		b, err := message.AppendRecord(nil, &m)
		if err != nil {
			t.Fatal(err)
		}
		batch[i] = b
	}
	for _, expr := range append(expressions,
		"color = '' OR region IS NOT NULL",
		"p0 = 1 AND p1 = 1 AND p2 = 1 AND p3 = 1 AND p4 = 1 AND p5 = 1 AND p6 = 1 AND p7 = 1 AND p8 = 2 AND p9 = 'x'",
		"p9 IS NULL") {
		native, err := sql92.Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]bool, len(batch))
		native.Match(batch, want)
		f, err := p.Filter(expr)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]bool, len(batch))
		if err := f.Match(batch, got); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s over %q: wasm %v, native %v", expr, oddRecords[i], got[i], want[i])
			}
		}
	}
}

func sameAsNative(t *testing.T, p *wasm.Plugin) {
	batch := records(t, 300)
	for _, expr := range expressions {
		native, err := sql92.Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]bool, len(batch))
		native.Match(batch, want)
		f, err := p.Filter(expr)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]bool, len(batch))
		if err := f.Match(batch, got); err != nil {
			t.Fatal(err)
		}
		matched := 0
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s, record %d: wasm %v, native %v", expr, i, got[i], want[i])
			}
			if got[i] {
				matched++
			}
		}
		if matched == 0 || matched == len(batch) {
			t.Fatalf("%s matched %d of %d: not a useful case", expr, matched, len(batch))
		}
	}
	// A syntax error comes back from the guest as the native one reads.
	_, err := p.Filter("a > ")
	_, nativeErr := sql92.Compile("a > ")
	if !errors.Is(err, wasm.ErrExpression) || nativeErr == nil || !strings.Contains(err.Error(), nativeErr.Error()) {
		t.Fatalf("syntax error: %v, native: %v", err, nativeErr)
	}
}

func TestSelfTestsNative(t *testing.T) {
	if err := sdk.CheckSelfTests(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkSQL92 compares the native filter with the same expression in
// the guest, trusted and untrusted, at batch sizes 1, 32 and 256, in
// elapsed time and process CPU per message.
func BenchmarkSQL92(b *testing.B) {
	const expr = "a > 50 AND a <= 80 AND color = 'red'"
	batch := records(b, 256)
	native, err := sql92.Compile(expr)
	if err != nil {
		b.Fatal(err)
	}
	type filter interface {
		Match([]message.Record, []bool) error
	}
	impls := []struct {
		name string
		f    func(b *testing.B) filter
	}{
		{"native", func(*testing.B) filter { return native }},
		{"wasm-trusted", func(b *testing.B) filter {
			f, err := load(b, false).Filter(expr)
			if err != nil {
				b.Fatal(err)
			}
			return f
		}},
		{"wasm-untrusted", func(b *testing.B) filter {
			f, err := load(b, true).Filter(expr)
			if err != nil {
				b.Fatal(err)
			}
			return f
		}},
	}
	for _, impl := range impls {
		b.Run(impl.name, func(b *testing.B) {
			f := impl.f(b)
			for _, size := range []int{1, 32, 256} {
				b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
					out := make([]bool, size)
					b.ReportAllocs()
					cpu := cputime.Process()
					for b.Loop() {
						if err := f.Match(batch[:size], out); err != nil {
							b.Fatal(err)
						}
					}
					perMsg := float64(b.Elapsed().Nanoseconds()) / float64(b.N*size)
					b.ReportMetric(perMsg, "ns/msg")
					// The process's CPU per message moves less than the
					// elapsed time on a shared machine.
					b.ReportMetric(float64((cputime.Process()-cpu).Nanoseconds())/float64(b.N*size), "cpu-ns/msg")
					b.ReportMetric(1e9/perMsg, "msgs/s")
				})
			}
		})
	}
}
