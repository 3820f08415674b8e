package broker

import (
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// BenchmarkSendHeader measures what the broker does with a send's header
// before the append: decode it and build the stored properties, for the Go
// client's SEND_MESSAGE (long keys) and SEND_MESSAGE_V2 (one-letter keys).
func BenchmarkSendHeader(b *testing.B) {
	props := string(message.EncodeProperties(map[string]string{
		message.PropertyUniqKey: "7F0000010001000000000000000000A1", message.PropertyTags: "TagA", message.PropertyKeys: "order-1",
	}))
	born := strconv.FormatInt(time.Now().UnixMilli(), 10)
	long := map[string]string{"producerGroup": "ProducerGroup", "topic": "BenchTopic", "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4", "queueId": "3", "sysFlag": "0", "bornTimestamp": born, "flag": "0",
		"properties": props, "reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "16", "batch": "false", "bname": "broker-a"}
	short := map[string]string{"a": "ProducerGroup", "b": "BenchTopic", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": born,
		"h": "0", "i": props, "j": "0", "k": "false", "l": "16", "m": "false", "n": "broker-a"}
	br := &Broker{opts: Options{ClusterName: "DefaultCluster"}}
	for _, c := range []struct {
		name string
		req  *remoting.Command
	}{
		{"keys=long", &remoting.Command{Code: remoting.SendMessage, ExtFields: long}},
		{"keys=v2", &remoting.Command{Code: remoting.SendMessageV2, ExtFields: short}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h, err := remoting.DecodeSendHeader(c.req.Code, c.req.ExtFields)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := br.storedPropertiesString(h.Properties); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/msg")
		})
	}
}

// BenchmarkSendResponse measures answering a successful send: building the
// response (message id, queue, offset) and encoding its frame, in the
// serialization of the request.
func BenchmarkSendResponse(b *testing.B) {
	br := &Broker{opts: Options{ClusterName: "DefaultCluster"}}
	m := &message.Message{Topic: "BenchTopic", QueueID: 3, QueueOffset: 123456, CommitLogOffset: 987654321}
	m.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	for _, st := range []struct {
		name string
		typ  byte
	}{{"json", remoting.SerializeJSON}, {"rocketmq", remoting.SerializeRocketMQ}} {
		req := &remoting.Command{Code: remoting.SendMessage, Opaque: 42, SerializeType: st.typ}
		b.Run("codec="+st.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 512)
			for b.Loop() {
				resp := br.sendResponse(req, []*message.Message{m})
				var err error
				if buf, err = remoting.AppendFrame(buf[:0], resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
