package natsbridge

import (
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/outbox"
)

// BenchmarkEncode measures turning one event into a NATS message.
func BenchmarkEncode(b *testing.B) {
	o := Options{Cluster: "DefaultCluster", Broker: "broker-a", SubjectPrefix: "rmq", Mode: ModeJetStream, Stream: "RMQ_EVENTS",
		BodyCap: DefaultBodyCap, Properties: []string{"tenant"}}
	enc := newEncoder(&o, "epoch")
	ev := outbox.Event{Offset: 12345, Kind: outbox.KindRetry, Time: time.Now(), Group: "CID_ORDER_PROCESSOR", Topic: "OrderCreated",
		MsgID: "7F00000100002A9F0000000000000001", OriginMsgID: "7F00000100002A9F0000000000000001", Keys: "order-1", Tags: "TagA",
		QueueID: 3, QueueOffset: 999, ReconsumeTimes: 2, MaxReconsumeTimes: 16, DelayLevel: 5, NextAttemptAt: time.Now(),
		Reason: "consumer asked to retry later", Body: make([]byte, 256), Properties: message.Properties(nil).With("tenant", "acme")}
	b.ReportAllocs()
	for b.Loop() {
		enc.message(&ev, 1<<20)
	}
}
