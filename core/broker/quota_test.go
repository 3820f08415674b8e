package broker_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestWritesOnlyToReadableQueues checks that a topic configuration with
// more write queues than read queues is refused, and that on a topic an
// older version saved that way, sends and batches into a queue at or
// above the read count are refused while the broker's own queue choice
// stays below it.
func TestWritesOnlyToReadableQueues(t *testing.T) {
	env := brokertest.Start(t)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	r := invoke(t, cl, env, remoting.UpdateAndCreateTopic, map[string]string{"topic": "Wide", "readQueueNums": "2", "writeQueueNums": "4", "perm": "6"}, nil)
	if r.Code == remoting.Success || !strings.Contains(r.Remark, "writeQueueNums 4 exceeds readQueueNums 2") {
		t.Fatalf("write 4 > read 2: code %d %q", r.Code, r.Remark)
	}
	if _, ok := env.Broker.Topics()["Wide"]; ok {
		t.Fatal("the refused topic was created")
	}
	// Shrinking lowers the write count first: write < read is fine.
	r = invoke(t, cl, env, remoting.UpdateAndCreateTopic, map[string]string{"topic": "Shrinking", "readQueueNums": "4", "writeQueueNums": "2", "perm": "6"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("write 2 < read 4: %v", r)
	}

	if err := env.Broker.PutTopicUnchecked(broker.TopicConfig{TopicName: "Legacy", ReadQueueNums: 2, WriteQueueNums: 4, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	r = sendRaw(t, cl, env, map[string]string{"topic": "Legacy", "queueId": "3"}, []byte("x"))
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "queue 3 of topic Legacy is not readable: the topic has 2 read queues") {
		t.Fatalf("send to queue 3: code %d %q", r.Code, r.Remark)
	}
	batch, _ := message.AppendBatchEntry(nil, message.BatchEntry{Body: []byte("b")})
	r = invoke(t, cl, env, remoting.SendBatchMessage, map[string]string{"a": "p", "b": "Legacy", "e": "2", "f": "0",
		"g": "1", "h": "0", "i": "", "j": "0"}, batch)
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "not readable") {
		t.Fatalf("batch to queue 2: code %d %q", r.Code, r.Remark)
	}
	for i := range 40 {
		if r := sendRaw(t, cl, env, map[string]string{"topic": "Legacy", "queueId": "-1", "bornTimestamp": strconv.Itoa(i + 1)}, []byte("x")); r.Code != remoting.Success {
			t.Fatalf("send without a queue: %v", r)
		}
	}
	if r := sendRaw(t, cl, env, map[string]string{"topic": "Legacy", "queueId": "1"}, []byte("x")); r.Code != remoting.Success {
		t.Fatalf("send to readable queue 1: %v", r)
	}
	for q := int32(2); q < 4; q++ {
		if n := env.Store.MaxOffset("Legacy", q); n != 0 {
			t.Errorf("unreadable queue %d holds %d messages", q, n)
		}
	}
	if n := env.Store.MaxOffset("Legacy", 0) + env.Store.MaxOffset("Legacy", 1); n != 41 {
		t.Errorf("the readable queues hold %d messages, want 41", n)
	}
}
