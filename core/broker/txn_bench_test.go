package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
)

func benchStore(b *testing.B, dir string) *store.Store {
	b.Helper()
	st, err := store.Open(store.Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// quietLogger drops everything below errors: a benchmark without
// producers would otherwise log a warning per check.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))
}

// BenchmarkTxnSendCommit measures transactional throughput over the wire:
// each message is a half-message send and an END_TRANSACTION commit, each
// waiting for its answer, from concurrent producers on one connection,
// with the default sync flush.
func BenchmarkTxnSendCommit(b *testing.B) {
	for _, workers := range []int{1, 64} {
		b.Run(fmt.Sprintf("producers=%d", workers), func(b *testing.B) {
			st := benchStore(b, b.TempDir())
			defer st.Close()
			br, err := New(Options{Store: st, Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go br.Serve(ln)
			defer br.Shutdown(context.Background())
			addr := br.Addr()
			if err := br.CreateTopic(TopicConfig{TopicName: "TxnBench", ReadQueueNums: 4, WriteQueueNums: 4, Perm: permRW}); err != nil {
				b.Fatal(err)
			}
			cl := remoting.NewClient(remoting.ClientOptions{Logger: quietLogger()})
			defer cl.Close()
			body := make([]byte, 256)
			var next atomic.Int64
			var failed atomic.Value
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if err := sendCommit(cl, addr, body); err != nil {
							failed.Store(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
			if n := br.PendingTransactions(); n != 0 {
				b.Fatalf("%d transactions left pending", n)
			}
		})
	}
}

func sendCommit(cl *remoting.Client, addr string, body []byte) error {
	ctx := context.Background()
	props := message.EncodeProperties(map[string]string{
		message.PropertyTransactionPrepared: "true", message.PropertyProducerGroup: "bench", message.PropertyUniqKey: message.NewUniqID(),
	})
	resp, err := cl.Invoke(ctx, addr, remoting.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "bench", "topic": "TxnBench", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "1", "sysFlag": "4", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
		"properties": string(props), "reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "0", "batch": "false",
	}, body))
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success {
		return fmt.Errorf("send: %d %s", resp.Code, resp.Remark)
	}
	_, off, err := message.ParseOffsetMsgID(resp.Get("msgId"))
	if err != nil {
		return err
	}
	resp, err = cl.Invoke(ctx, addr, remoting.NewRequest(remoting.EndTransaction, map[string]string{
		"producerGroup": "bench", "tranStateTableOffset": resp.Get("queueOffset"), "commitLogOffset": strconv.FormatInt(off, 10),
		"commitOrRollback": "8", "fromTransactionCheck": "false",
	}, nil))
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success || resp.Remark != "" {
		return fmt.Errorf("end: %d %s", resp.Code, resp.Remark)
	}
	return nil
}

// fillHalf stores n half messages as the send path would.
func fillHalf(b *testing.B, br *Broker, n int) {
	b.Helper()
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	body := make([]byte, 256)
	for done := 0; done < n; {
		batch := make([]*message.Message, 0, 1000)
		for ; len(batch) < cap(batch) && done < n; done++ {
			m := &message.Message{Topic: "TxnBench", QueueID: 1, SysFlag: message.SysFlagTxPrepared, BornTimestamp: time.Now().UnixMilli(),
				BornHost: host, StoreHost: host, Body: body,
				Properties: message.EncodeProperties(map[string]string{
					message.PropertyTransactionPrepared: "true", message.PropertyProducerGroup: "bench",
					message.PropertyUniqKey: message.NewUniqID(), message.PropertyCluster: "DefaultCluster",
				})}
			if err := br.toHalf(m); err != nil {
				b.Fatal(err)
			}
			batch = append(batch, m)
		}
		if err := br.store.Append(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTxnCheckScan measures the checker over 100k unresolved half
// messages: indexing them, a round that checks every one of them (a copy
// written per message; no producer is connected, so no check leaves), a
// round with nothing due, and rebuilding the index at startup.
func BenchmarkTxnCheckScan(b *testing.B) {
	const pending = 100_000
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	open := func(b *testing.B, dir string) (*Broker, *store.Store) {
		st := benchStore(b, dir)
		br, err := New(Options{Store: st, Logger: quietLogger(), Now: now,
			TxnPolicy: DefaultTxnPolicy{Timeout: time.Millisecond, Interval: time.Millisecond, Max: 1 << 30}})
		if err != nil {
			b.Fatal(err)
		}
		return br, st
	}

	b.Run("index", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			br, st := open(b, b.TempDir())
			fillHalf(b, br, pending)
			b.StartTimer()
			br.txn.catchUp()
			b.StopTimer()
			if n := br.PendingTransactions(); n != pending {
				b.Fatalf("%d pending", n)
			}
			st.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pending), "ns/msg")
	})

	dir := b.TempDir()
	br, st := open(b, dir)
	fillHalf(b, br, pending)
	br.txn.catchUp()

	rounds := 0
	b.Run("check-all", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			skew.Add(int64(time.Hour)) // every message is due
			br.txn.round()
		}
		rounds += b.N
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pending), "ns/msg")
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/scan")
		br.txn.mu.Lock()
		defer br.txn.mu.Unlock()
		if got := br.txn.mu.pending[br.txn.mu.sched[0].origin].checks; got != int32(rounds) {
			b.Fatalf("%d checks counted after %d rounds", got, rounds)
		}
	})

	b.Run("idle", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			br.txn.round()
		}
	})

	st.Close()
	b.Run("load", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			br, st := open(b, dir)
			if n := br.PendingTransactions(); n != pending {
				b.Fatalf("%d pending after the load", n)
			}
			st.Close()
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/load")
	})
}
