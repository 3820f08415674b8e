package broker_test

import (
	"fmt"
	"io/fs"
	"net/netip"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// BenchmarkTimers parks 1M timed messages due over the next hour, 10k of
// them in the same second, and reports the memory the pending timers cost
// and how late those 10k are delivered (p99 of actual − due). It runs in
// real time (about a minute); run it with -benchtime=1x.
func BenchmarkTimers(b *testing.B) {
	const (
		total    = 1_000_000
		burst    = 10_000
		lead     = 45 * time.Second // time to park and index before the burst
		spread   = time.Hour
		batchLen = 1000
	)
	for i := 0; i < b.N; i++ {
		env := brokertest.Start(b)
		topic := "TimerBench"
		if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}); err != nil {
			b.Fatal(err)
		}
		heapBefore := heapInUse()
		start := time.Now()
		burstAt := start.Add(lead).Truncate(time.Second).Add(time.Second)
		host := netip.MustParseAddrPort("127.0.0.1:1")
		msgs := make([]*message.Message, 0, batchLen)
		for n := 0; n < total; n++ {
			due := start.Add(lead + time.Duration(n)*spread/total + 2*time.Second)
			if n < burst {
				due = burstAt.Add(time.Duration(n) * time.Second / burst)
			}
			msgs = append(msgs, &message.Message{
				Topic: broker.TimerTopic, BornHost: host, StoreHost: host, Body: []byte("timer"),
				Properties: message.EncodeProperties(map[string]string{
					message.PropertyTimerDeliverMS: strconv.FormatInt(due.UnixMilli(), 10),
					message.PropertyRealTopic:      topic,
					message.PropertyRealQueueID:    strconv.Itoa(n % 4),
					message.PropertyUniqKey:        strconv.Itoa(n),
				}),
			})
			if len(msgs) == batchLen {
				if err := env.Store.Append(msgs); err != nil {
					b.Fatal(err)
				}
				msgs = msgs[:0]
			}
		}
		parked := time.Since(start)
		brokertest.Eventually(b, lead, "every timer indexed", func() bool {
			v, _ := env.Store.Progress("sched/timer/indexed")
			return v == total
		})
		indexed := time.Since(start)
		heapAfter := heapInUse()
		if time.Now().After(burstAt) {
			b.Fatalf("parking and indexing took %v, past the burst", indexed)
		}
		// Wait for the burst and read back when each was stored in its topic.
		brokertest.Eventually(b, lead+30*time.Second, "the burst delivered", func() bool {
			var n int64
			for q := int32(0); q < 4; q++ {
				n += env.Store.MaxOffset(topic, q)
			}
			return n >= burst
		})
		var lags []time.Duration
		for q := int32(0); q < 4; q++ {
			it := env.Store.NewQueueIter(topic, q, store.IterOptions{MaxUnits: burst})
			for ok := it.SeekGE(0); ok; ok = it.Next() {
				r := it.Record()
				due, _ := strconv.ParseInt(r.Properties().Get(message.PropertyTimerDeliverMS), 10, 64)
				lags = append(lags, time.Duration(r.StoreTimestamp()-due)*time.Millisecond)
			}
			if err := it.Close(); err != nil {
				b.Fatal(err)
			}
		}
		slices.Sort(lags)
		b.ReportMetric(float64(heapAfter-heapBefore)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(dirSize(env.DataPath("index")))/(1<<20), "index-MiB")
		b.ReportMetric(float64(lags[len(lags)*99/100].Milliseconds()), "p99-lag-ms")
		b.ReportMetric(float64(lags[len(lags)-1].Milliseconds()), "max-lag-ms")
		b.ReportMetric(parked.Seconds(), "park-s")
		b.ReportMetric(indexed.Seconds(), "index-s")
		fmt.Printf("timers: %d parked in %v, indexed by %v; heap +%.1f MiB; %d delivered in the burst, p50 lag %v, p99 %v, max %v\n",
			total, parked.Round(time.Millisecond), indexed.Round(time.Millisecond), float64(heapAfter-heapBefore)/(1<<20),
			len(lags), lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1])
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
