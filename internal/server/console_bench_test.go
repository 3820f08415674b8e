package server_test

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// BenchmarkConsolePages renders the console's pages on a broker with
// 1,000 topics of 4 queues, each holding messages, and 1,000 consumer
// groups with offsets: the broker's side (topic and group tables, queue
// offsets) and the console's (sort, rates, template). The console's
// budget is 100 ms a page.
func BenchmarkConsolePages(b *testing.B) {
	env := brokertest.Start(b, func(cfg *server.Config) { cfg.NamesrvListen = "" })
	var msgs []*message.Message
	for i := range 1000 {
		name := fmt.Sprintf("bench-topic-%04d", i)
		if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: name, ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}); err != nil {
			b.Fatal(err)
		}
		for q := range int32(4) {
			msgs = append(msgs, &message.Message{Topic: name, QueueID: q, Body: []byte("x"), BornTimestamp: 1})
		}
	}
	if err := env.Store.Append(msgs); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		group := fmt.Sprintf("bench-group-%04d", i)
		if err := env.Broker.PutGroupConfig(broker.SubscriptionGroupConfig{GroupName: group, ConsumeEnable: true, RetryQueueNums: 1, RetryMaxTimes: 16}); err != nil {
			b.Fatal(err)
		}
		if err := env.Store.CommitOffset(group, fmt.Sprintf("bench-topic-%04d", i), 0, 1); err != nil {
			b.Fatal(err)
		}
	}
	h := env.ConsoleHandler("127.0.0.1:0")
	for _, page := range []struct{ name, target string }{
		{"topics", "/topics"}, {"topics-filtered", "/topics?q=topic-09&page=2"}, {"overview", "/"},
		{"groups", "/groups"}, {"topic", "/topic?name=bench-topic-0500"}, {"dlq", "/dlq"},
	} {
		target := page.target
		b.Run("page="+page.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
				if rec.Code != 200 {
					b.Fatalf("%s: %d", target, rec.Code)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}
