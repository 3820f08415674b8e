//go:build unix

package grpcserver_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/cputime"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// BenchmarkGRPC measures sends (one message a request, and 32) and POP
// receive+ack over gRPC, one client in-process: messages per second, and
// the process's CPU per message (broker and client together, as the
// remoting benchmarks count it).
func BenchmarkGRPC(b *testing.B) {
	for _, size := range []int{128, 1024} {
		b.Run("send/size="+strconv.Itoa(size)+"B", func(b *testing.B) {
			e := startB(b)
			topic := brokertest.Name("BenchSend")
			e.createTopicB(b, topic, 4)
			body := string(make([]byte, size))
			c := ctxB(b)
			b.SetBytes(int64(size))
			cpu0, t0 := cputime.Process(), time.Now()
			b.ResetTimer()
			for i := range b.N {
				r, err := e.cl.SendMessage(c, &pb.SendMessageRequest{Messages: []*pb.Message{msg(topic, "b"+strconv.Itoa(i), "t", body)}})
				if err != nil || r.Status.GetCode() != pb.Code_OK {
					b.Fatal(r, err)
				}
			}
			report(b, b.N, time.Since(t0), cputime.Process()-cpu0)
		})
		b.Run("send-16-clients/size="+strconv.Itoa(size)+"B", func(b *testing.B) {
			e := startB(b)
			topic := brokertest.Name("BenchSendPar")
			e.createTopicB(b, topic, 4)
			body := string(make([]byte, size))
			c := ctxB(b)
			var id atomic.Int64
			b.SetBytes(int64(size))
			b.SetParallelism(8) // 16 senders on 2 cores
			cpu0, t0 := cputime.Process(), time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb_ *testing.PB) {
				for pb_.Next() {
					r, err := e.cl.SendMessage(c, &pb.SendMessageRequest{Messages: []*pb.Message{msg(topic, "p"+strconv.FormatInt(id.Add(1), 10), "t", body)}})
					if err != nil || r.Status.GetCode() != pb.Code_OK {
						b.Error(r, err)
						return
					}
				}
			})
			report(b, b.N, time.Since(t0), cputime.Process()-cpu0)
		})
		b.Run("send-batch-32/size="+strconv.Itoa(size)+"B", func(b *testing.B) {
			e := startB(b)
			topic := brokertest.Name("BenchSendBatch")
			e.createTopicB(b, topic, 4)
			body := string(make([]byte, size))
			c := ctxB(b)
			b.SetBytes(int64(size))
			cpu0, t0 := cputime.Process(), time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i += 32 {
				ms := make([]*pb.Message, min(32, b.N-i))
				for j := range ms {
					ms[j] = msg(topic, "b"+strconv.Itoa(i+j), "t", body)
				}
				r, err := e.cl.SendMessage(c, &pb.SendMessageRequest{Messages: ms})
				if err != nil || r.Status.GetCode() != pb.Code_OK {
					b.Fatal(r, err)
				}
			}
			report(b, b.N, time.Since(t0), cputime.Process()-cpu0)
		})
		b.Run("receive-ack/size="+strconv.Itoa(size)+"B", func(b *testing.B) {
			e := startB(b)
			topic, group := brokertest.Name("BenchPop"), brokertest.Name("g")
			e.createTopicB(b, topic, 4)
			body := string(make([]byte, size))
			c := ctxB(b)
			// The backlog goes in requests of 32, which share a round.
			for i := 0; i < b.N; i += 32 {
				ms := make([]*pb.Message, min(32, b.N-i))
				for j := range ms {
					ms[j] = msg(topic, "b"+strconv.Itoa(i+j), "t", body)
				}
				if r, err := e.cl.SendMessage(c, &pb.SendMessageRequest{Messages: ms}); err != nil || r.Status.GetCode() != pb.Code_OK {
					b.Fatal(r, err)
				}
			}
			b.SetBytes(int64(size))
			cpu0, t0 := cputime.Process(), time.Now()
			b.ResetTimer()
			for got := 0; got < b.N; {
				msgs := receiveB(b, e, c, group, topic)
				entries := make([]*pb.AckMessageEntry, len(msgs))
				for i, m := range msgs {
					entries[i] = &pb.AckMessageEntry{MessageId: m.SystemProperties.GetMessageId(), ReceiptHandle: m.SystemProperties.GetReceiptHandle()}
				}
				r, err := e.cl.AckMessage(c, &pb.AckMessageRequest{Group: res(group), Topic: res(topic), Entries: entries})
				if err != nil || r.Status.GetCode() != pb.Code_OK {
					b.Fatal(r, err)
				}
				got += len(msgs)
			}
			report(b, b.N, time.Since(t0), cputime.Process()-cpu0)
		})
	}
}

func report(b *testing.B, n int, el, cpu time.Duration) {
	b.ReportMetric(float64(n)/el.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/msg")
}
