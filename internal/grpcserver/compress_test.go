package grpcserver_test

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
	"github.com/rmq-go/rmq/internal/server"
)

// TestCompressedBodies: a 5.x client's GZIP body is taken as gzip or, as
// the C++ client sends it, zlib, and refused when it decompresses to more
// than a message may be or not at all; a 4.x producer's compressed body
// (zlib, or the Java producer's zstd or LZ4) reaches 5.x consumers whole
// and plain, and one larger than a message may be comes as the stored
// bytes marked GZIP, never cut short.
func TestCompressedBodies(t *testing.T) {
	const max = 64 << 10
	e := start(t, func(c *server.Config) { c.Broker.MaxMessageSize = max })
	topic, group := brokertest.Name("Zip"), brokertest.Name("zip")
	e.createTopic(t, topic, 1)
	plain := func(n int) []byte { return bytes.Repeat([]byte("body "), n/5) }
	want := map[string][]byte{}

	grpcSend := func(id string, body []byte) pb.Code {
		m := msg(topic, id, "t", "")
		m.Body, m.SystemProperties.BodyEncoding = body, pb.Encoding_GZIP
		return e.sendCode(t, m)
	}
	if code := grpcSend("gzip", compress(t, "gzip", plain(8000))); code != pb.Code_OK {
		t.Fatalf("gzip body: %v", code)
	}
	want["gzip"] = plain(8000)
	if code := grpcSend("zlib-as-gzip", compress(t, "zlib", plain(9000))); code != pb.Code_OK {
		t.Fatalf("zlib body labelled GZIP (the C++ client's): %v", code)
	}
	want["zlib-as-gzip"] = plain(9000)
	if code := grpcSend("bomb", compress(t, "gzip", plain(4*max))); code != pb.Code_MESSAGE_BODY_TOO_LARGE {
		t.Fatalf("gzip body of %d bytes plain: %v, want MESSAGE_BODY_TOO_LARGE", 4*max, code)
	}
	if code := grpcSend("garbage", []byte("not compressed at all")); code != pb.Code_MESSAGE_CORRUPTED {
		t.Fatalf("a GZIP body that is not: %v, want MESSAGE_CORRUPTED", code)
	}

	cl := remoting.NewClient(remoting.ClientOptions{})
	t.Cleanup(func() { cl.Close() })
	send4x := func(id string, sysFlag int32, body []byte) {
		t.Helper()
		req := remoting.NewRequest(remoting.SendMessage, map[string]string{
			"producerGroup": "zip-producer", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
			"queueId": "0", "sysFlag": strconv.Itoa(int(sysFlag)), "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
			"flag": "0", "properties": "UNIQ_KEY\x01" + id + "\x02", "reconsumeTimes": "0", "unitMode": "false",
		}, body)
		resp, err := cl.Invoke(context.Background(), e.BrokerAddr, req)
		if err != nil || resp.Code != remoting.Success {
			t.Fatalf("4.x send of %s: %v %v", id, resp, err)
		}
	}
	for _, c := range []struct {
		kind string
		flag int32
	}{{"zlib", 0}, {"zstd", message.SysFlagCompressionZstd}, {"lz4", message.SysFlagCompressionLZ4}} {
		send4x("4x-"+c.kind, message.SysFlagCompressed|c.flag, compress(t, c.kind, plain(20000)))
		want["4x-"+c.kind] = plain(20000)
	}
	big := compress(t, "zlib", plain(16*max))
	send4x("4x-big", message.SysFlagCompressed, big)

	got := map[string]*pb.Message{}
	for len(got) < len(want)+1 {
		_, msgs := e.receive(t, group, topic, nil, 32, 30*time.Second, 5*time.Second)
		if len(msgs) == 0 {
			t.Fatalf("received %d of %d messages", len(got), len(want)+1)
		}
		for _, m := range msgs {
			got[m.GetSystemProperties().GetMessageId()] = m
		}
	}
	for id, body := range want {
		m := got[id]
		if m.GetSystemProperties().GetBodyEncoding() != pb.Encoding_IDENTITY || !bytes.Equal(m.GetBody(), body) {
			t.Errorf("%s: %v, %d bytes; want %d bytes plain", id, m.GetSystemProperties().GetBodyEncoding(), len(m.GetBody()), len(body))
		}
	}
	m := got["4x-big"]
	if m.GetSystemProperties().GetBodyEncoding() != pb.Encoding_GZIP || !bytes.Equal(m.GetBody(), big) {
		t.Fatalf("a body of %d bytes plain, over the %d a message may be: %v, %d bytes; want the %d stored bytes marked GZIP",
			16*max, max, m.GetSystemProperties().GetBodyEncoding(), len(m.GetBody()), len(big))
	}
}

// compress compresses body as kind: gzip, zlib, zstd or lz4 (a frame).
func compress(t *testing.T, kind string, body []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch kind {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "zlib":
		w = zlib.NewWriter(&buf)
	case "zstd":
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	case "lz4":
		w = lz4.NewWriter(&buf)
	}
	if _, err := w.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
