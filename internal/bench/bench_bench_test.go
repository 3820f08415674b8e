package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
)

// BenchmarkProduce measures the whole loop against the fake broker on
// loopback; one op is one message. Client and fake share the machine, so
// the numbers bound the generator from below rather than rate a broker.
func BenchmarkProduce(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("conns=64/batch=%d/size=1KiB", batch), func(b *testing.B) {
			fb := startFake(b, false)
			opts := Options{Broker: fb.addr, Batch: batch, Count: int64(b.N)}
			b.SetBytes(int64(DefaultSize))
			b.ReportAllocs()
			b.ResetTimer()
			sum, err := Produce(context.Background(), opts, nil)
			if err != nil {
				b.Fatal(err)
			}
			if sum.Errors != 0 {
				b.Fatalf("%d errors: %q", sum.Errors, sum.ErrorSamples)
			}
			b.ReportMetric(sum.MsgsPerSec, "msgs/s")
			b.ReportMetric(float64(sum.P99)/float64(time.Microsecond), "p99-µs")
		})
	}
}

// BenchmarkBuild measures building and encoding one request, as a
// connection writes it; one op is one request, and ns/msg divides its time
// among the messages.
func BenchmarkBuild(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d/size=1KiB", batch), func(b *testing.B) {
			opts := Options{Batch: batch}.withDefaults(false)
			s := &session{opts: opts}
			p := newProducer(s)
			st := p.newSendState()
			st.req = remoting.Command{Code: p.code, Language: remoting.LanguageGo, Version: remoting.DefaultVersion}
			var frame []byte
			b.ReportAllocs()
			for i := 0; b.Loop(); i += batch {
				p.build(st, batch, i%opts.Queues)
				var err error
				if frame, err = remoting.AppendFrame(frame[:0], &st.req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/msg")
		})
	}
}
