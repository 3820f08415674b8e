package client

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/cputime"
)

// The benchmarks compare this client with the official Go client as load
// generators against the same broker. The broker runs as a separate
// process (built from cmd/broker, --flush async), so the process CPU
// measured here is the client's alone:
//
//	go test -run '^$' -bench 'Client' -benchtime 20000x ./client
//
// Each reports msgs/s and cpu-µs/msg (user + system CPU of this process
// per message).

var (
	brokerBinOnce sync.Once
	brokerBin     string
	brokerBinErr  error
)

// brokerProcess starts cmd/broker with an embedded name server on free
// loopback ports and returns the name server's address.
func brokerProcess(b *testing.B) string {
	b.Helper()
	brokerBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "client-bench")
		if err != nil {
			brokerBinErr = err
			return
		}
		brokerBin = filepath.Join(dir, "broker")
		out, err := exec.Command("go", "build", "-o", brokerBin, "github.com/rmq-go/rmq/cmd/broker").CombinedOutput()
		if err != nil {
			brokerBinErr = fmt.Errorf("build broker: %v\n%s", err, out)
		}
	})
	if brokerBinErr != nil {
		b.Skip(brokerBinErr)
	}
	ns, br := freeAddr(b), freeAddr(b)
	cmd := exec.Command(brokerBin, "--listen", br, "--namesrv-listen", ns, "--data-dir", b.TempDir(), "--flush", "async", "--log-level", "error")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(20 * time.Second)
	for _, addr := range []string{ns, br} {
		for {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("broker process did not start: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Ready once the broker has registered: the name server routes TBW102.
	rc := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger()})
	defer rc.Close()
	for {
		resp, err := rc.Invoke(context.Background(), ns, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil))
		if err == nil && resp.Code == remoting.Success {
			return ns
		}
		if time.Now().After(deadline) {
			b.Fatalf("broker did not register: %v %v", resp, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// measure runs fn, which handles n messages, and reports its rate and CPU.
func measure(b *testing.B, n int, fn func()) {
	runtime.GC()
	cpu0, t0 := cputime.Process(), time.Now()
	b.ResetTimer()
	fn()
	b.StopTimer()
	elapsed, cpu := time.Since(t0), cputime.Process()-cpu0
	b.ReportMetric(float64(n)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/msg")
	b.ReportMetric(0, "ns/op")
}

const (
	benchSenders = 16
	benchBody    = 256
)

func BenchmarkClientProduce(b *testing.B) {
	body := make([]byte, benchBody)
	for _, impl := range []string{"ours", "official"} {
		b.Run("client="+impl, func(b *testing.B) {
			ns := brokerProcess(b)
			topic := brokertest.Name("BenchProduce")
			fill(b, ns, topic, 1) // creates the topic with 8 queues
			var send func(ctx context.Context) error
			switch impl {
			case "ours":
				p := benchProducer(b, ns)
				send = func(ctx context.Context) error {
					_, err := p.SendSync(ctx, NewMessage(topic, body))
					return err
				}
			case "official":
				p, err := rocketmq.NewProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})), producer.WithGroupName("bench"),
					producer.WithInstanceName(brokertest.Name("p")))
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Start(); err != nil {
					b.Fatal(err)
				}
				defer p.Shutdown()
				send = func(ctx context.Context) error {
					_, err := p.SendSync(ctx, primitive.NewMessage(topic, body))
					return err
				}
			}
			if err := send(context.Background()); err != nil { // connects
				b.Fatal(err)
			}
			var left atomic.Int64
			left.Store(int64(b.N))
			measure(b, b.N, func() {
				var wg sync.WaitGroup
				for range benchSenders {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for left.Add(-1) >= 0 {
							if err := send(context.Background()); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
			})
		})
	}
}

func BenchmarkClientConsume(b *testing.B) {
	rlog.SetLogLevel("fatal") // the official consumer logs a shutdown race at error level
	for _, impl := range []string{"ours", "official"} {
		b.Run("client="+impl, func(b *testing.B) {
			ns := brokerProcess(b)
			topic, group := brokertest.Name("BenchConsume"), brokertest.Name("g")
			fill(b, ns, topic, b.N)
			var got atomic.Int64
			done := make(chan struct{})
			count := func(n int) {
				if got.Add(int64(n)) == int64(b.N) {
					close(done)
				}
			}
			measure(b, b.N, func() {
				switch impl {
				case "ours":
					c, err := NewPushConsumer(ConsumerOptions{Client: ClientOptions{NameServers: []string{ns}, InstanceName: brokertest.Name("c"), Logger: brokertest.Logger()},
						Group: group, ConsumeFrom: ConsumeFromFirstOffset},
						ConcurrentFunc(func(_ context.Context, _ *ConcurrentContext, msgs []*MessageExt) ConsumeResult {
							count(len(msgs))
							return ConsumeSuccess
						}))
					if err != nil {
						b.Fatal(err)
					}
					_ = c.Subscribe(topic, Selector{})
					if err := c.Start(); err != nil {
						b.Fatal(err)
					}
					<-done
					b.StopTimer()
					_ = c.Shutdown(context.Background())
				case "official":
					c, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})), consumer.WithGroupName(group),
						consumer.WithInstance(brokertest.Name("c")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
					if err != nil {
						b.Fatal(err)
					}
					_ = c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
						count(len(msgs))
						return consumer.ConsumeSuccess, nil
					})
					if err := c.Start(); err != nil {
						b.Fatal(err)
					}
					<-done
					b.StopTimer()
					_ = c.Shutdown()
				}
			})
		})
	}
}

// fill stores n messages in topic with batched sends.
func fill(b *testing.B, ns, topic string, n int) {
	p, err := NewProducer(ProducerOptions{Client: ClientOptions{NameServers: []string{ns}, InstanceName: brokertest.Name("fill"), Logger: brokertest.Logger()}, Group: "fill", DefaultTopicQueueNums: 8})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(); err != nil {
		b.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	body := make([]byte, benchBody)
	for sent := 0; sent < n; {
		k := min(64, n-sent)
		batch := make([]*Message, k)
		for i := range batch {
			batch[i] = NewMessage(topic, body).SetProperty("seq", strconv.Itoa(sent+i))
		}
		if _, err := p.SendSync(context.Background(), batch...); err != nil {
			b.Fatal(err)
		}
		sent += k
	}
}

// BenchmarkClientProduceAsync keeps benchWindow SendAsync calls of our
// client outstanding at once.
func BenchmarkClientProduceAsync(b *testing.B) {
	const benchWindow = 256
	body := make([]byte, benchBody)
	ns := brokerProcess(b)
	topic := brokertest.Name("BenchProduceAsync")
	fill(b, ns, topic, 1) // creates the topic with 8 queues
	p := benchProducer(b, ns)
	if _, err := p.SendSync(context.Background(), NewMessage(topic, body)); err != nil { // connects
		b.Fatal(err)
	}
	window := make(chan struct{}, benchWindow)
	done := func(_ *SendResult, err error) {
		if err != nil {
			b.Error(err)
		}
		<-window
	}
	measure(b, b.N, func() {
		for range b.N {
			window <- struct{}{}
			if err := p.SendAsync(context.Background(), done, NewMessage(topic, body)); err != nil {
				b.Fatal(err)
			}
		}
		for range benchWindow {
			window <- struct{}{}
		}
	})
}

// benchProducer starts one of our producers on name server ns, shut down
// when the benchmark ends.
func benchProducer(b *testing.B, ns string) *Producer {
	p, err := NewProducer(ProducerOptions{Client: ClientOptions{NameServers: []string{ns}, InstanceName: brokertest.Name("p"), Logger: brokertest.Logger()}, Group: "bench", DefaultTopicQueueNums: 8})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p
}
