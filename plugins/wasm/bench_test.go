package wasm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// BenchmarkFilter measures a tag filter through the whole host path, per
// batch size and trust level.
func BenchmarkFilter(b *testing.B) {
	batch := make([]message.Record, 256)
	tags := []string{"A", "B", "C", "D"}
	for i := range batch {
		batch[i] = record(b, tags[i%4], int64(i), []byte(`{"region":"eu","amount":12}`))
	}
	for _, untrusted := range []bool{false, true} {
		p, err := wasm.Load(context.Background(), wasm.Options{Name: "bench", Kind: wasm.KindFilter,
			Path: guest(b, "basic"), Untrusted: untrusted, CacheDir: cacheDir, PoolSize: 1})
		if err != nil {
			b.Fatal(err)
		}
		f, err := p.Filter("A||C")
		if err != nil {
			b.Fatal(err)
		}
		for _, size := range []int{1, 32, 256} {
			name := fmt.Sprintf("trusted=%v/batch=%d", !untrusted, size)
			b.Run(name, func(b *testing.B) {
				out := make([]bool, size)
				b.ReportAllocs()
				for b.Loop() {
					if err := f.Match(batch[:size], out); err != nil {
						b.Fatal(err)
					}
				}
				reportPerMessage(b, size)
			})
		}
		_ = p.Close(context.Background())
	}
}

// reportPerMessage reports ns/msg and msgs/s for b.N batches of size.
func reportPerMessage(b *testing.B, size int) {
	perMsg := float64(b.Elapsed().Nanoseconds()) / float64(b.N*size)
	b.ReportMetric(perMsg, "ns/msg")
	b.ReportMetric(1e9/perMsg, "msgs/s")
}

// BenchmarkCompile measures loading a module with an empty compilation
// cache (cold) and with one that holds it on disk (cached), each time in a
// fresh cache as after a restart.
func BenchmarkCompile(b *testing.B) {
	bin, err := os.ReadFile(guest(b, "basic"))
	if err != nil {
		b.Fatal(err)
	}
	load := func(b *testing.B, dir string) {
		start := time.Now()
		p, err := wasm.Load(context.Background(), wasm.Options{Name: "compile", Kind: wasm.KindFilter, Module: bin, CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/load")
		_ = p.Close(context.Background())
	}
	b.Run("cache=cold", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			load(b, filepath.Join(b.TempDir(), fmt.Sprint(i)))
		}
	})
	b.Run("cache=file", func(b *testing.B) {
		dir := b.TempDir()
		load(b, dir)
		b.ResetTimer()
		for b.Loop() {
			load(b, dir)
		}
	})
}
