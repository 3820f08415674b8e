package natsbridge_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/cputime"
	"github.com/rmq-go/rmq/internal/server"
	"github.com/rmq-go/rmq/plugins/natsbridge"
)

// natsProcess is a nats-server run as its own process (built from the
// module's source), so that its CPU is not counted as the broker's.
type natsProcess struct {
	cmd *exec.Cmd
	URL string
}

var (
	natsBinOnce sync.Once
	natsBin     string
	natsBinErr  error
)

// TestMain removes the nats-server binary the benchmarks built.
func TestMain(m *testing.M) {
	code := m.Run()
	if natsBin != "" {
		os.RemoveAll(filepath.Dir(natsBin))
	}
	os.Exit(code)
}

func runNATSProcess(b *testing.B) *natsProcess {
	b.Helper()
	natsBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "natsbridge-bench")
		if err != nil {
			natsBinErr = err
			return
		}
		natsBin = filepath.Join(dir, "nats-server")
		out, err := exec.Command("go", "build", "-o", natsBin, "github.com/nats-io/nats-server/v2").CombinedOutput()
		if err != nil {
			natsBinErr = fmt.Errorf("build nats-server: %v\n%s", err, out)
		}
	})
	if natsBinErr != nil {
		b.Skip(natsBinErr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(natsBin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", b.TempDir())
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &natsProcess{cmd: cmd, URL: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		nc, err := nats.Connect(p.URL)
		if err == nil {
			nc.Close()
			return p
		}
		if time.Now().After(deadline) {
			b.Fatalf("nats-server process did not start: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// benchEvent is an event of about the size the issue measures: a 256 B
// body and the full set of headers.
func benchEvent(i int) outbox.Event {
	e := event(outbox.KindDLQ, "CID_ORDER_PROCESSOR", "OrderCreated", i)
	e.Body = make([]byte, 256)
	return e
}

// BenchmarkBridge measures events bridged per second into a JetStream
// file-storage stream, against plain async publishing of messages of the
// same size and headers through the same server, with the same window.
func BenchmarkBridge(b *testing.B) {
	for _, srv := range []string{"embedded", "process"} {
		url := func(b *testing.B) string {
			if srv == "process" {
				return runNATSProcess(b).URL
			}
			return runNATS(b).URL
		}
		b.Run("server="+srv+"/publisher=plain", func(b *testing.B) {
			u := url(b)
			nc, err := nats.Connect(u)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(natsbridge.DefaultMaxInFlight))
			ctx := context.Background()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain.>"}, Duplicates: time.Minute}); err != nil {
				b.Fatal(err)
			}
			ev := benchEvent(0)
			hdr := nats.Header{}
			for _, k := range []string{"Rmq-Event", "Rmq-Event-Time", "Rmq-Group", "Rmq-Topic", "Rmq-Msg-Id", "Rmq-Origin-Msg-Id",
				"Rmq-Keys", "Rmq-Tags", "Rmq-Queue-Id", "Rmq-Queue-Offset", "Rmq-Reconsume-Times", "Rmq-Max-Reconsume-Times", "Rmq-Reason"} {
				hdr.Set(k, "value-of-typical-length")
			}
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				h := nats.Header{}
				for k, v := range hdr {
					h[k] = v
				}
				h.Set(jetstream.MsgIDHeader, "DefaultCluster-broker-a-epoch-"+strconv.Itoa(i))
				if _, err := js.PublishMsgAsync(&nats.Msg{Subject: "plain.DefaultCluster.dlq.g.t", Header: h, Data: ev.Body}); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				b.Fatal("acks did not arrive")
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		})
		b.Run("server="+srv+"/publisher=bridge/source=fake", func(b *testing.B) {
			u := url(b)
			src := newFakeSource()
			evs := make([]outbox.Event, b.N)
			for i := range evs {
				evs[i] = benchEvent(i)
			}
			src.add(evs...)
			benchBridge(b, src, u, int64(b.N))
		})
		b.Run("server="+srv+"/publisher=bridge/source=broker", func(b *testing.B) {
			u := url(b)
			env := brokertest.Start(b, func(c *server.Config) { c.Broker.Outbox = true })
			newSender(b, env).send(b, b.N, 8)
			benchBridge(b, &server.BridgeSource{Broker: env.Broker, Store: env.Store}, u, int64(b.N))
		})
	}
}

// benchBridge times a bridge publishing the n events src holds.
func benchBridge(b *testing.B, src natsbridge.Source, url string, n int64) {
	opts := natsbridge.Options{Source: src, URLs: []string{url}, Cluster: "DefaultCluster", Broker: "broker-a",
		Provision: true, Logger: brokertest.Logger()}
	b.ResetTimer()
	cpu0, start := cputime.Process(), time.Now()
	br := startBridge(b, opts)
	for br.Status().Cursor < n {
		time.Sleep(time.Millisecond)
	}
	elapsed, cpu := time.Since(start), cputime.Process()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/event")
}

// BenchmarkBrokerSide produces dead letters through the broker (sends past
// the retry limit, 8 senders) and reports the produce rate and the
// process's CPU per event:
//
//   - outbox=off: no events written;
//   - outbox=on: events written, nobody reads them;
//   - bridge=on: the bridge publishes every event (to a nats-server
//     process, so the server's CPU is not counted) before the clock stops;
//   - bridge=down: the bridge's NATS server is down for the whole run: the
//     produce rate during an outage.
func BenchmarkBrokerSide(b *testing.B) {
	for _, mode := range []string{"outbox=off", "outbox=on", "bridge=on", "bridge=down"} {
		b.Run(mode, func(b *testing.B) {
			env := brokertest.Start(b, func(c *server.Config) {
				c.Broker.Outbox = mode != "outbox=off"
			})
			var br *natsbridge.Bridge
			switch mode {
			case "bridge=on":
				opts := natsbridge.Options{Source: &server.BridgeSource{Broker: env.Broker, Store: env.Store}, URLs: []string{runNATSProcess(b).URL}, Cluster: "DefaultCluster",
					Broker: "broker-a", Provision: true, Logger: brokertest.Logger()}
				br = startBridge(b, opts)
			case "bridge=down":
				opts := natsbridge.Options{Source: &server.BridgeSource{Broker: env.Broker, Store: env.Store}, URLs: []string{"nats://127.0.0.1:1"}, Cluster: "DefaultCluster",
					Broker: "broker-a", Logger: brokertest.Logger()}
				br = startBridge(b, opts)
			}
			s := newSender(b, env)
			s.send(b, 200, 8) // warm up: topics, connections
			if br != nil && mode == "bridge=on" {
				for br.Status().Cursor < 200 {
					time.Sleep(time.Millisecond)
				}
			}
			b.ResetTimer()
			cpu0, t0 := cputime.Process(), time.Now()
			s.send(b, b.N, 8)
			produced := time.Since(t0)
			if mode == "bridge=on" {
				for br.Status().Cursor < int64(b.N)+200 {
					time.Sleep(time.Millisecond)
				}
			}
			cpu := cputime.Process() - cpu0
			b.StopTimer()
			b.ReportMetric(float64(b.N)/produced.Seconds(), "produced/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/event")
			if br != nil {
				st := br.Status()
				b.ReportMetric(float64(st.LagEvents), "lag-events")
			}
		})
	}
}
