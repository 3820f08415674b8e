package remoting

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rmq-go/rmq/internal/cputime"
)

// BenchmarkHeader measures one SEND_MESSAGE header (the Go client's keys and
// values) through each codec; codec=encoding-json is the baseline the
// purpose-built JSON scanner and writer replace.
func BenchmarkHeader(b *testing.B) {
	for _, st := range []struct {
		name string
		typ  byte
	}{{"json", SerializeJSON}, {"rocketmq", SerializeRocketMQ}} {
		c := sendRequest(st.typ)
		c.Body = nil
		frame, err := AppendFrame(nil, c)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("codec="+st.name+"/op=encode", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			buf := make([]byte, 0, 4096)
			for b.Loop() {
				buf, _ = AppendFrame(buf[:0], c)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/header")
		})
		b.Run("codec="+st.name+"/op=decode", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				var d Command
				if err := DecodeFrame(frame[4:], &d); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/header")
		})
	}

	h := stdHeader{Code: SendMessage, Language: "GO", Version: 317, Opaque: 12345, ExtFields: sendHeaderExt()}
	enc, _ := json.Marshal(&h)
	b.Run("codec=encoding-json/op=encode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(enc)))
		for b.Loop() {
			_, _ = json.Marshal(&h)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/header")
	})
	b.Run("codec=encoding-json/op=decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(enc)))
		for b.Loop() {
			var d stdHeader
			if err := json.Unmarshal(enc, &d); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/header")
	})
}

// BenchmarkEcho sends SEND_MESSAGE-shaped requests (the Go client's header,
// a 128-byte body) over 64 loopback connections, each with several requests
// in flight, to a server whose handler echoes them.
// BenchmarkEcho measures a request/response round trip through a Server,
// its answer built on a worker goroutine (path=handler) or on the reader
// (path=fast, a FastHandler answering at once), and called with Invoke from
// a goroutine per request in flight (call=sync) or with InvokeAsync from one
// goroutine per connection (call=async).
func BenchmarkEcho(b *testing.B) {
	const conns = 64
	answer := func(req *Command) *Command {
		resp := NewResponse(req, Success, "")
		resp.ExtFields = map[string]string{"msgId": "7F00000100002A9F0000000000000000", "queueId": req.Get("queueId"), "queueOffset": "1"}
		return resp
	}
	for _, c := range []struct {
		path  string
		depth int
		async bool
	}{{"handler", 1, false}, {"fast", 1, false}, {"handler", 8, false}, {"fast", 8, false}, {"fast", 8, true}} {
		depth := c.depth
		call := "sync"
		if c.async {
			call = "async"
		}
		b.Run(fmt.Sprintf("path=%s/conns=%d/inflight=%d/call=%s", c.path, conns, depth, call), func(b *testing.B) {
			s := NewServer(ServerOptions{})
			s.Handle(SendMessage, func(c *Conn, req *Command) *Command { return answer(req) })
			if c.path == "fast" {
				s.HandleFast(SendMessage, func(c *Conn, req *Command, reply func(*Command)) bool {
					reply(answer(req))
					return true
				})
			}
			addr := startServer(b, s)
			clients := make([]*Client, conns)
			for i := range clients {
				clients[i] = newTestClient(b, ClientOptions{})
			}
			req := sendRequest(SerializeJSON)
			req.Body = bytes.Repeat([]byte("x"), 128)
			ctx := context.Background()
			for _, cl := range clients { // connect before timing
				if _, err := cl.Invoke(ctx, addr, req); err != nil {
					b.Fatal(err)
				}
			}
			var left atomic.Int64
			left.Store(int64(b.N))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cputime.Process()
			var wg sync.WaitGroup
			for _, cl := range clients {
				if c.async {
					wg.Go(func() {
						tokens := make(chan struct{}, depth)
						for range depth {
							tokens <- struct{}{}
						}
						done := func(resp *Command, err error) {
							if err != nil || resp.Code != Success {
								b.Error(resp, err)
							}
							tokens <- struct{}{}
						}
						for {
							<-tokens
							if left.Add(-1) < 0 {
								break
							}
							if err := cl.InvokeAsync(ctx, addr, req, time.Minute, done); err != nil {
								b.Error(err)
								break
							}
						}
						for range depth - 1 { // the one taken last was not used
							<-tokens
						}
					})
					continue
				}
				for range depth {
					wg.Go(func() {
						for left.Add(-1) >= 0 {
							resp, err := cl.Invoke(ctx, addr, req)
							if err != nil || resp.Code != Success {
								b.Error(resp, err)
								return
							}
						}
					})
				}
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reqs/s")
			// CPU per request counts both ends (client and server run in
			// this process) and, unlike reqs/s, barely moves with other load
			// on the machine.
			if cpu := cputime.Process() - cpu0; cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/req")
			}
		})
	}
}
