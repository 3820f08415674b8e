package client

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// rawPull returns the records of q from offset 0 as the broker stores
// them, before any inflating.
func rawPull(t testing.TB, in *instance, q MessageQueue) []message.Record {
	t.Helper()
	addr, err := in.brokerAddrFor(context.Background(), q.BrokerName, q.Topic)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := in.invoke(context.Background(), addr, remoting.NewRequest(remoting.PullMessage, map[string]string{
		"consumerGroup": "test_raw", "topic": q.Topic, "queueId": strconv.Itoa(int(q.QueueID)),
		"queueOffset": "0", "maxMsgNums": "32", "sysFlag": strconv.Itoa(pullFlagSubscription),
		"commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG",
	}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != remoting.Success {
		t.Fatalf("raw pull of %s: %v", q, brokerError(resp))
	}
	recs, err := message.DecodeRecords(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// compressible is a body of n bytes that zlib shrinks well.
func compressible(n int) []byte {
	return bytes.Repeat([]byte("rocketmq compressible body "), n/27+1)[:n]
}

func TestCompressThreshold(t *testing.T) {
	p, err := NewProducer(ProducerOptions{Client: ClientOptions{NameServers: []string{"127.0.0.1:1"}}, Group: "g", CompressThreshold: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		body       []byte
		compressed bool
	}{
		{compressible(100), false},
		{compressible(101), true},
		{[]byte(string(rune(0)) + "x"), false},
	} {
		m := NewMessage("T", tc.body)
		o, err := p.prepare([]*Message{m}, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.sysFlag&message.SysFlagCompressed != 0; got != tc.compressed {
			t.Fatalf("body of %d bytes: compressed %v, want %v", len(tc.body), got, tc.compressed)
		}
		if tc.compressed {
			if len(o.body) >= len(tc.body) {
				t.Fatalf("compressed body of %d bytes from %d", len(o.body), len(tc.body))
			}
			if back, err := inflate(o.sysFlag, o.body); err != nil || !bytes.Equal(back, tc.body) {
				t.Fatalf("inflate: %v", err)
			}
			if !bytes.Equal(m.Body, tc.body) {
				t.Fatal("compression changed the caller's body")
			}
		}
	}
	// Batches are never compressed.
	o, err := p.prepare([]*Message{NewMessage("T", compressible(500)), NewMessage("T", compressible(500))}, false)
	if err != nil || o.sysFlag != 0 {
		t.Fatalf("batch: sysFlag %d, %v", o.sysFlag, err)
	}
	off, _ := NewProducer(ProducerOptions{Client: ClientOptions{NameServers: []string{"127.0.0.1:1"}}, Group: "g", CompressThreshold: -1})
	if o, _ := off.prepare([]*Message{NewMessage("T", compressible(10000))}, false); o.sysFlag != 0 {
		t.Fatal("compression turned off, yet compressed")
	}
}

// TestCompressOurProducerBothConsumers sends a large body with our
// producer and reads it back with our pull and with the official Go
// consumer: stored compressed and flagged, delivered inflated by both.
func TestCompressOurProducerBothConsumers(t *testing.T) {
	e := startBroker(t)
	topic := brokertest.Name("Z")
	e.createTopic(t, topic, 1)
	p := startProducer(t, e)
	in := testInstance(t, p)
	body := compressible(10 << 10)
	res, err := p.SendSync(context.Background(), NewMessage(topic, body).WithTag("big"))
	if err != nil {
		t.Fatal(err)
	}
	recs := rawPull(t, in, res.Queue)
	if len(recs) != 1 || recs[0].SysFlag()&message.SysFlagCompressed == 0 || len(recs[0].Body()) >= len(body) {
		t.Fatalf("stored: %d records, sysFlag %#x, %d body bytes of %d", len(recs), recs[0].SysFlag(), len(recs[0].Body()), len(body))
	}
	got := pullQueue(t, in, res.Queue, 0)
	if len(got) != 1 || !bytes.Equal(got[0].Body, body) || got[0].MsgID != res.MsgID {
		t.Fatalf("pulled %v", got)
	}

	group := brokertest.Name("cg")
	c := e.PushConsumer(t, group)
	ch := make(chan *primitive.MessageExt, 4)
	if err := c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			ch <- m
		}
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	e.StartConsumer(t, c, group, true, topic)
	m := brokertest.Wait(t, ch, 30*time.Second, "the official consumer to receive the message")
	if !bytes.Equal(m.Body, body) || m.MsgId != res.MsgID || m.SysFlag&primitive.FlagCompressed == 0 {
		t.Fatalf("official consumer got %d bytes, id %s, sysFlag %#x", len(m.Body), m.MsgId, m.SysFlag)
	}
}

// TestCompressOfficialProducerOurPull sends a large body with the
// official Go producer, which compresses bodies of 4 KiB and more, and
// reads it with our pull.
func TestCompressOfficialProducerOurPull(t *testing.T) {
	e := startBroker(t)
	topic := brokertest.Name("Z")
	e.createTopic(t, topic, 1)
	official := e.Producer(t)
	body := compressible(10 << 10)
	res, err := official.SendSync(context.Background(), primitive.NewMessage(topic, body))
	if err != nil {
		t.Fatal(err)
	}
	p := startProducer(t, e)
	in := testInstance(t, p)
	q := MessageQueue{Topic: topic, BrokerName: res.MessageQueue.BrokerName, QueueID: int32(res.MessageQueue.QueueId)}
	recs := rawPull(t, in, q)
	if len(recs) != 1 || recs[0].SysFlag()&message.SysFlagCompressed == 0 {
		t.Fatalf("the official producer's message is not stored compressed: %d records", len(recs))
	}
	got := pullQueue(t, in, q, 0)
	if len(got) != 1 || !bytes.Equal(got[0].Body, body) || got[0].MsgID != res.MsgID {
		t.Fatalf("pulled %d messages; body equal: %v", len(got), len(got) == 1 && bytes.Equal(got[0].Body, body))
	}
	if got[0].SysFlag&message.SysFlagCompressed != 0 {
		t.Fatal("inflated body still flagged compressed")
	}
}
