package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestAdminMessages sends keyed messages with the official client and
// finds them by offsetMsgId, by client msgId, by key and by unique key.
func TestAdminMessages(t *testing.T) {
	env := brokertest.Start(t)
	admin := adminRunner(env)
	topic := brokertest.Name("T")
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	p := env.Producer(t)
	var sent []*primitive.SendResult
	for i, key := range []string{"order-1", "order-1", "order-2"} {
		m := primitive.NewMessage(topic, []byte(`{"n":`+string(rune('0'+i))+`}`)).WithTag("created").WithKeys([]string{key, "all"})
		res, err := p.SendSync(context.Background(), m)
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send: %v %v", res, err)
		}
		sent = append(sent, res)
	}

	var msgs []messageView
	adminJSON(t, admin, &msgs, "messages", "by-id", "--id", sent[2].OffsetMsgID)
	if len(msgs) != 1 || msgs[0].MsgID != sent[2].MsgID || msgs[0].OffsetMsgID != sent[2].OffsetMsgID || msgs[0].Topic != topic ||
		msgs[0].Tags != "created" || msgs[0].Keys != "order-2 all" || msgs[0].Body != `{"n":2}` || msgs[0].Properties["UNIQ_KEY"] != sent[2].MsgID {
		t.Fatalf("by offsetMsgId: %+v", msgs)
	}
	code, out, errs := admin("messages", "by-id", "--id", sent[2].OffsetMsgID)
	if code != 0 || !strings.Contains(out, `7 bytes: "{\"n\":2}"`) || !strings.Contains(out, "property KEYS") || !strings.Contains(out, "1 found") {
		t.Fatalf("by offsetMsgId, table: %d\n%s%s", code, out, errs)
	}
	// Without --broker, the broker the offsetMsgId names.
	if code, out, errs := runCmd("admin", "messages", "by-id", "--id", sent[1].OffsetMsgID); code != 0 || !strings.Contains(out, sent[1].MsgID) {
		t.Fatalf("by offsetMsgId, no --broker: %d\n%s%s", code, out, errs)
	}
	adminJSON(t, admin, &msgs, "messages", "by-id", "--id", sent[0].MsgID, "--topic", topic, "--body-bytes", "3")
	if len(msgs) != 1 || msgs[0].OffsetMsgID != sent[0].OffsetMsgID || msgs[0].Body != `{"n` || !msgs[0].BodyTruncated {
		t.Fatalf("by client msgId: %+v", msgs)
	}
	if code, _, errs := admin("messages", "by-id", "--id", "nonsense"); code != 1 || !strings.Contains(errs, "--topic") {
		t.Fatalf("a bad id without a topic: %d %s", code, errs)
	}

	adminJSON(t, admin, &msgs, "messages", "by-key", "--topic", topic, "--key", "order-1")
	if len(msgs) != 2 || msgs[0].Keys != "order-1 all" || msgs[1].Keys != "order-1 all" || msgs[0].MsgID == msgs[1].MsgID {
		t.Fatalf("by key order-1: %+v", msgs)
	}
	adminJSON(t, admin, &msgs, "messages", "by-key", "--topic", topic, "--key", "all", "--begin", "1h")
	if len(msgs) != 3 {
		t.Fatalf("by key all: %d messages", len(msgs))
	}
	adminJSON(t, admin, &msgs, "messages", "by-key", "--topic", topic, "--key", "all", "--max", "1")
	if len(msgs) != 1 {
		t.Fatalf("by key all, --max 1: %d messages", len(msgs))
	}
	past := time.Now().Add(-time.Hour).Format(time.RFC3339)
	if code, _, errs := admin("messages", "by-key", "--topic", topic, "--key", "all", "--end", past); code != 1 || !strings.Contains(errs, "QUERY_NOT_FOUND (22)") {
		t.Fatalf("by key, stored before an hour ago: %d %s", code, errs)
	}
	adminJSON(t, admin, &msgs, "messages", "by-unique-key", "--topic", topic, "--id", sent[1].MsgID)
	if len(msgs) != 1 || msgs[0].OffsetMsgID != sent[1].OffsetMsgID || msgs[0].Body != `{"n":1}` {
		t.Fatalf("by unique key: %+v", msgs)
	}
	// The official client compresses a body over 4 KiB; the preview is of
	// the plain text.
	big := strings.Repeat("abcdefgh", 1024)
	res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(big)))
	if err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send: %v %v", res, err)
	}
	adminJSON(t, admin, &msgs, "messages", "by-id", "--id", res.OffsetMsgID, "--body-bytes", "10")
	if len(msgs) != 1 || msgs[0].SysFlag&1 == 0 || msgs[0].BodySize >= len(big) || msgs[0].Body != big[:10] || !msgs[0].BodyTruncated {
		t.Fatalf("a compressed body: %+v", msgs)
	}
	adminJSON(t, admin, &msgs, "messages", "by-id", "--id", res.OffsetMsgID, "--body-bytes", "-1")
	if len(msgs) != 1 || msgs[0].Body != big || msgs[0].BodyTruncated {
		t.Fatalf("a compressed body, whole: %d bytes, truncated %v", len(msgs[0].Body), msgs[0].BodyTruncated)
	}
	if code, _, errs := admin("messages", "by-key", "--key", "x"); code != 2 || !strings.Contains(errs, "--topic required") {
		t.Fatalf("no topic: %d %s", code, errs)
	}
}
