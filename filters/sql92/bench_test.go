package sql92

import (
	"testing"

	"github.com/rmq-go/rmq/core/message"
)

// benchProps is a typical message's properties: eight of them, user and
// system ones mixed.
var benchProps = message.EncodeProperties(map[string]string{
	"a":        "65",
	"color":    "red",
	"region":   "eu-west-1",
	"price":    "19.99",
	"TAGS":     "TagA",
	"KEYS":     "order-20240101-0001",
	"UNIQ_KEY": "7F0000010D2C18B4AAC2563B52E10000",
	"WAIT":     "true",
})

func BenchmarkEval(b *testing.B) {
	cases := []struct{ name, expr string }{
		{"clauses=3", "a > 50 AND a <= 80 AND color = 'red'"},
		{"clauses=1", "color = 'red'"},
		{"between+in", "a BETWEEN 50 AND 80 AND region IN ('eu-west-1', 'us-east-1')"},
		{"double", "price > 10.5"},
		{"miss", "missing = 'x' OR a > 100"},
	}
	for _, c := range cases {
		e, err := Compile(c.expr)
		if err != nil {
			b.Fatal(err)
		}
		want := e.Eval(benchProps)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if e.Eval(benchProps) != want {
					b.Fatal("result changed")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/eval")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "evals/s")
		})
	}
}

// BenchmarkMatch measures the broker's view: a batch of stored records,
// each one's properties located and evaluated.
func BenchmarkMatch(b *testing.B) {
	e, err := Compile("a > 50 AND a <= 80 AND color = 'red'")
	if err != nil {
		b.Fatal(err)
	}
	const n = 32
	batch := make([]message.Record, n)
	for i := range batch {
		batch[i] = record(b, benchProps)
	}
	out := make([]bool, n)
	b.Run("batch=32", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = e.Match(batch, out)
		}
		msgs := float64(b.N) * n
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/msgs, "ns/msg")
		b.ReportMetric(msgs/b.Elapsed().Seconds(), "msgs/s")
	})
}

func BenchmarkCompile(b *testing.B) {
	const expr = "a > 50 AND a <= 80 AND color = 'red' OR TAGS IN ('TagA', 'TagB')"
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Compile(expr); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/compile")
	})
	b.Run("cached", func(b *testing.B) {
		c := NewCache(0)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Compile(expr); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/compile")
	})
}
