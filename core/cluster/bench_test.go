package cluster_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
)

// BenchmarkAppend compares acknowledged appends on a single store
// (FlushSync: acknowledged after the fsync covering it) with a set of
// three members on this machine (acknowledged once a majority stored the
// round's raft entry with fsync). 64 appenders, one 1 KiB message each.
//
//	go test -run '^$' -bench Append -benchtime 20000x -count 3 ./core/cluster
func BenchmarkAppend(b *testing.B) {
	b.Run("single", func(b *testing.B) {
		st, err := store.Open(store.Options{Dir: b.TempDir(), Logger: quiet()})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		benchAppend(b, st)
	})
	b.Run("replicas=3", func(b *testing.B) {
		s := newSet(b, 3, nil)
		benchAppend(b, s.leader(nil).node.Store())
	})
}

func benchAppend(b *testing.B, st *store.Store) {
	const writers = 64
	body := make([]byte, 1024)
	lat := make([][]time.Duration, writers)
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < b.N; i += writers {
				m := &message.Message{Topic: "Bench", QueueID: int32(i % 8), Body: body, BornTimestamp: 1}
				t0 := time.Now()
				if err := st.Append([]*message.Message{m}); err != nil {
					panic(fmt.Sprint("append: ", err))
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}
