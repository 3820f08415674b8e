package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// BenchmarkFilteredPullScan pulls through a queue of 1M messages with an
// SQL92 subscription that 1% match, with and without pre-filtering, and
// reports the messages scanned per second.
func BenchmarkFilteredPullScan(b *testing.B) {
	const total = 1_000_000
	for _, pre := range []bool{true, false} {
		b.Run(fmt.Sprintf("prefilter=%v", pre), func(b *testing.B) {
			env := brokertest.Start(b, func(c *server.Config) { c.Broker.DisablePrefilter = !pre })
			topic, group := "Scan", "scanners"
			if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}); err != nil {
				b.Fatal(err)
			}
			cl := remoting.NewClient(remoting.ClientOptions{})
			defer cl.Close()
			hb, _ := json.Marshal(map[string]any{"clientID": "bench@1", "consumerDataSet": []any{map[string]any{
				"groupName": group, "consumeType": "CONSUME_ACTIVELY", "messageModel": "CLUSTERING",
				"subscriptionDataSet": []any{map[string]any{"topic": topic, "subString": "a = 'hit' AND b > 5", "expressionType": "SQL92", "subVersion": 1}},
			}}})
			if resp, err := cl.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(remoting.HeartBeat, nil, hb)); err != nil || resp.Code != 0 {
				b.Fatalf("heartbeat: %v %v", resp, err)
			}
			host := netip.MustParseAddrPort("127.0.0.1:1")
			body := make([]byte, 256)
			hit := message.EncodeProperties(map[string]string{"a": "hit", "b": "9", "c": "x", "TAGS": "t"})
			miss := message.EncodeProperties(map[string]string{"a": "miss", "b": "9", "c": "x", "TAGS": "t"})
			msgs := make([]*message.Message, 0, 1000)
			for i := 0; i < total; i++ {
				props := miss
				if i%100 == 0 {
					props = hit
				}
				msgs = append(msgs, &message.Message{Topic: topic, BornHost: host, StoreHost: host, Body: body, Properties: props})
				if len(msgs) == cap(msgs) {
					if err := env.Store.Append(msgs); err != nil {
						b.Fatal(err)
					}
					msgs = msgs[:0]
				}
			}
			if pre {
				brokertest.Eventually(b, 5*time.Minute, "the pre-filter indexer", func() bool {
					v, _ := env.Broker.PrefilterProgress(topic, 0)
					return v == total
				})
			}
			b.ResetTimer()
			start := time.Now()
			var scanned, matched int64
			for i := 0; i < b.N; i++ {
				for off := int64(0); off < total; {
					resp, err := cl.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(remoting.PullMessage, map[string]string{
						"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": strconv.FormatInt(off, 10),
						"maxMsgNums": "32", "sysFlag": "0",
					}, nil))
					if err != nil || (resp.Code != 0 && resp.Code != remoting.PullRetryImmediately) {
						b.Fatalf("pull at %d: %v %v", off, resp, err)
					}
					next, _ := strconv.ParseInt(resp.Get("nextBeginOffset"), 10, 64)
					if resp.Code == 0 {
						recs, _ := message.DecodeRecords(resp.Body)
						matched += int64(len(recs))
					}
					scanned += next - off
					off = next
				}
			}
			el := time.Since(start)
			if matched != int64(b.N)*total/100 {
				b.Fatalf("matched %d, want %d", matched, int64(b.N)*total/100)
			}
			b.ReportMetric(float64(scanned)/el.Seconds(), "msgs-scanned/s")
			b.ReportMetric(float64(el.Nanoseconds())/float64(scanned), "ns/msg")
		})
	}
}
