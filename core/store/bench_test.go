package store_test

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// BenchmarkAppend measures appends of 1 KiB messages from many goroutines,
// each waiting for its own acknowledgement, as producers do.
func BenchmarkAppend(b *testing.B) {
	body := string(bytes.Repeat([]byte("x"), 1024))
	for _, flush := range []store.FlushMode{store.FlushSync, store.FlushAsync} {
		for _, inflight := range []int{1, 64, 256} {
			for _, batch := range []int{1, 32} {
				for _, prealloc := range []int64{-1, 0} {
					b.Run(fmt.Sprintf("flush=%v/inflight=%d/batch=%d/prealloc=%v", flush, inflight, batch, prealloc >= 0), func(b *testing.B) {
						s := storetest.Open(b, store.Options{Dir: b.TempDir(), Flush: flush, Prealloc: prealloc, Logger: quietLogger()})
						defer s.Close()
						var next atomic.Int64
						var wg sync.WaitGroup
						lat := make([]time.Duration, 0, b.N)
						var latMu sync.Mutex
						b.SetBytes(int64(1024 * batch))
						b.ResetTimer()
						start := time.Now()
						for w := 0; w < inflight; w++ {
							wg.Add(1)
							go func() {
								defer wg.Done()
								msgs := make([]*message.Message, batch)
								var mine []time.Duration
								for next.Add(1) <= int64(b.N) {
									for i := range msgs {
										msgs[i] = storetest.Msg("bench", int32(w%8), body)
									}
									t0 := time.Now()
									if err := s.Append(msgs); err != nil {
										b.Error(err)
										return
									}
									mine = append(mine, time.Since(t0))
								}
								latMu.Lock()
								lat = append(lat, mine...)
								latMu.Unlock()
							}()
						}
						wg.Wait()
						el := time.Since(start)
						b.ReportMetric(float64(b.N*batch)/el.Seconds(), "msgs/s")
						b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
						b.ReportMetric(float64(s.Stats().Fsyncs.Load())/el.Seconds(), "fsyncs/s")
						b.ReportMetric(float64(s.Stats().Appends.Load())/float64(s.Stats().Rounds.Load()), "msgs/round")
					})
				}
			}
		}
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	slicesSort(s)
	return s[int(float64(len(s)-1)*p)]
}

// BenchmarkReadQueue measures catch-up reads: units and records of one
// queue in runs of 32, with the queue's index blocks in pebble's memtable
// or flushed to its files (where every lookup builds an iterator over them).
func BenchmarkReadQueue(b *testing.B) {
	for _, flushed := range []bool{false, true} {
		// One queue's records lie back to back in the log; of eight
		// queues written in turn, each record is seven others apart.
		for _, queues := range []int{1, 8} {
			b.Run(fmt.Sprintf("flushed=%v/queues=%d", flushed, queues), func(b *testing.B) {
				benchReadQueue(b, flushed, queues)
			})
		}
	}
}

func benchReadQueue(b *testing.B, flushed bool, queues int) {
	s := storetest.Open(b, store.Options{Dir: b.TempDir(), Flush: store.FlushAsync, Logger: quietLogger()})
	defer s.Close()
	body := string(bytes.Repeat([]byte("x"), 1024))
	const n = 100_000
	for i := 0; i < n; i += 100 {
		msgs := make([]*message.Message, 100)
		for j := range msgs {
			msgs[j] = storetest.Msg("read", int32((i+j)%queues), body)
		}
		if err := s.Append(msgs); err != nil {
			b.Fatal(err)
		}
	}
	if flushed {
		if err := s.Checkpoint(); err != nil {
			b.Fatal(err)
		}
		if err := s.CompactIndex(); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(1024)
	b.ReportAllocs()
	b.ResetTimer()
	it := s.NewQueueIter("read", 0, store.IterOptions{MaxUnits: 32})
	defer it.Close()
	off := int64(0)
	for i := 0; i < b.N; i += 32 {
		if off >= int64(n/queues) {
			off = 0
		}
		for ok := it.SeekGE(off); ok; ok = it.Next() {
		}
		if err := it.Error(); err != nil {
			b.Fatal(err)
		}
		off = it.NextOffset()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
