package grpcserver_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rmq-go/rmq/internal/brokertest"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
	"github.com/rmq-go/rmq/internal/server"
)

// BenchmarkWaitingReceiveMemory opens b.N receives that wait on an empty
// topic, 100 per connection, and reports the heap and stacks they hold
// (bytes/receive) and the goroutines each adds: what grpc.maxWaiting
// bounds. Client and server run in this one process, so the figure holds
// both sides. Run it with -benchtime 4000x.
func BenchmarkWaitingReceiveMemory(b *testing.B) {
	const perConn = 100
	e := start(b, func(c *server.Config) { c.GRPC.MaxWaiting = b.N + 1 })
	topic, group := brokertest.Name("Wait"), brokertest.Name("wait")
	e.createTopic(b, topic, 1)
	var cls []pb.MessagingServiceClient
	for i := 0; i < b.N; i += perConn {
		cls = append(cls, connect(b, e.Env).cl)
	}
	c, cancel := context.WithCancel(metadata.NewOutgoingContext(context.Background(), metadata.Pairs("x-mq-client-id", "waiting", "x-mq-protocol", "v2")))
	defer cancel()
	measure := func() (uint64, int) {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc + ms.StackInuse, runtime.NumGoroutine()
	}
	before, g0 := measure()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := cls[i/perConn].ReceiveMessage(c, &pb.ReceiveMessageRequest{Group: res(group), MessageQueue: &pb.MessageQueue{Topic: res(topic)},
			BatchSize: 32, InvisibleDuration: durationpb.New(30 * time.Second), LongPollingTimeout: durationpb.New(20 * time.Second)}); err != nil {
			b.Fatal(err)
		}
	}
	// Every receive is waiting once its handler's goroutine is parked:
	// wait for the goroutine count to stop growing.
	brokertest.Eventually(b, 10*time.Second, "the receives waiting", func() bool {
		return runtime.NumGoroutine()-g0 >= 2*b.N
	})
	b.StopTimer()
	after, g1 := measure()
	b.ReportMetric(float64(after-before)/float64(b.N), "bytes/receive")
	b.ReportMetric(float64(g1-g0)/float64(b.N), "goroutines/receive")
}
