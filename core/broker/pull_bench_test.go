package broker_test

import (
	"context"
	"net/netip"
	"strconv"
	"testing"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// BenchmarkPull reads a queue of 64k 1 KiB messages through PULL_MESSAGE,
// 32 per pull, over one loopback connection: the broker's read path and a
// client's, in one process, so allocations count both. An op is a message.
func BenchmarkPull(b *testing.B) {
	const total = 1 << 16
	env := brokertest.Start(b)
	topic := "PullBench"
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}); err != nil {
		b.Fatal(err)
	}
	host := netip.MustParseAddrPort("127.0.0.1:1")
	body := make([]byte, 1024)
	props := message.EncodeProperties(map[string]string{"TAGS": "t"})
	msgs := make([]*message.Message, 0, 1024)
	for i := 0; i < total; i++ {
		msgs = append(msgs, &message.Message{Topic: topic, BornHost: host, StoreHost: host, Body: body, Properties: props})
		if len(msgs) == cap(msgs) {
			if err := env.Store.Append(msgs); err != nil {
				b.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	ext := map[string]string{"consumerGroup": "bench", "topic": topic, "queueId": "0", "queueOffset": "0",
		"maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
		"subscription": "*", "expressionType": "TAG"}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	off := 0
	for i := 0; i < b.N; {
		ext["queueOffset"] = strconv.Itoa(off % total)
		resp, err := cl.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(remoting.PullMessage, ext, nil))
		if err != nil || resp.Code != remoting.Success {
			b.Fatalf("pull at %d: %v %v", off, resp, err)
		}
		n := 0
		for p := resp.Body; len(p) >= 4; n++ {
			size := int(p[0])<<24 | int(p[1])<<16 | int(p[2])<<8 | int(p[3])
			if size <= 0 || size > len(p) {
				b.Fatalf("pull at %d: a record of %d bytes in %d", off, size, len(p))
			}
			p = p[size:]
		}
		off += n
		i += n
	}
}
