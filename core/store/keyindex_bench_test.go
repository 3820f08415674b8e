package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// keyedBatch returns n messages of 256-byte bodies, each with two KEYS and
// a UNIQ_KEY, numbered from first.
func keyedBatch(topic string, first, n int) []*message.Message {
	body := strings.Repeat("x", 256)
	msgs := make([]*message.Message, n)
	for i := range msgs {
		no := first + i
		msgs[i] = keyed(topic, body, fmt.Sprintf("order-%d user-%d", no%10_000, no%977), fmt.Sprintf("U%016x", no))
	}
	return msgs
}

// BenchmarkKeyIndexAppend measures what the key index adds to an append:
// batches of 32 keyed messages under FlushAsync, with the index on and
// off.
func BenchmarkKeyIndexAppend(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("index=%v", on), func(b *testing.B) {
			s := storetest.Open(b, store.Options{Dir: b.TempDir(), Flush: store.FlushAsync, DisableKeyIndex: !on, Logger: quietLogger()})
			const batch = 32
			batches := make([][]*message.Message, 64)
			for i := range batches {
				batches[i] = keyedBatch("bench", i*batch, batch)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				if err := s.Append(batches[(i/batch)%len(batches)]); err != nil {
					b.Fatal(err)
				}
			}
			// Close waits for the flusher, whose dispatch writes the index.
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/msg")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkQueryByKey measures queries over a store of 1M keyed messages
// (100k with -short) in 64 MiB segments: a key held by 100 messages
// (every 10,000th), a unique key, and a key nobody has, once the index
// is compacted.
func BenchmarkQueryByKey(b *testing.B) {
	total := 1_000_000
	if testing.Short() {
		total = 100_000
	}
	s := storetest.Open(b, store.Options{Dir: b.TempDir(), Flush: store.FlushAsync, SegmentSize: 64 << 20, Logger: quietLogger()})
	defer s.Close()
	const batch = 1000
	for i := 0; i < total; i += batch {
		if err := s.Append(keyedBatch("q", i, batch)); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	if err := s.CompactIndex(); err != nil {
		b.Fatal(err)
	}
	end := time.Now().Add(time.Minute).UnixMilli()
	for _, c := range []struct {
		name, key string
		unique    bool
		limit     int
		want      int
	}{
		{"key=100hits/limit=32", "order-42", false, 32, 32},
		{"key=100hits/limit=all", "order-42", false, 0, total / 10_000},
		{"unique", fmt.Sprintf("U%016x", total/2), true, 0, 1},
		{"miss", "nobody", false, 0, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				offs, err := s.QueryByKey("q", c.key, c.unique, 0, end, c.limit)
				if err != nil || len(offs) != c.want {
					b.Fatalf("%d results, want %d: %v", len(offs), c.want, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/query")
		})
	}
}
