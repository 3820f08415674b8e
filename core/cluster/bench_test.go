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
	// Consumers committing offsets meanwhile, as pulls carry them: 64
	// queues' offsets, each moved every millisecond.
	b.Run("replicas=3+offsets", func(b *testing.B) {
		s := newSet(b, 3, nil)
		st := s.leader(nil).node.Store()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for off := int64(1); ; off++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				for q := range int32(64) {
					st.CommitOffset("g", "Bench", q, off)
				}
			}
		}()
		before := st.Stats().ProgressEntries.Load()
		benchAppend(b, st)
		close(stop)
		wg.Wait()
		b.ReportMetric(float64(st.Stats().ProgressEntries.Load()-before)/b.Elapsed().Seconds(), "offset-entries/s")
	})
}

// BenchmarkCommitOffsetSync measures offset commits a client waits for
// on a set of three: each returns once the set committed it, many
// together in one entry. 64 committers.
//
//	go test -run '^$' -bench CommitOffsetSync -benchtime 20000x ./core/cluster
func BenchmarkCommitOffsetSync(b *testing.B) {
	s := newSet(b, 3, nil)
	st := s.leader(nil).node.Store()
	const committers = 64
	lat := make([][]time.Duration, committers)
	before := st.Stats().ProgressEntries.Load()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range committers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < b.N; i += committers {
				t0 := time.Now()
				if err := st.CommitOffsetSync(fmt.Sprint("g", w), "Bench", int32(i%8), int64(i)); err != nil {
					panic(fmt.Sprint("commit: ", err))
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	entries := st.Stats().ProgressEntries.Load() - before
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(b.N)/float64(max(entries, 1)), "commits/entry")
	b.ReportMetric(0, "ns/op")
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
