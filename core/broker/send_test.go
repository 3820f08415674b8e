package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store/storetest"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestSendErrors checks the answers to sends the broker refuses, and that
// a refused send stores nothing.
func TestSendErrors(t *testing.T) {
	env := brokertest.Start(t)
	createTopic(t, env, "Good", 2)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	send := func(code int16, ext map[string]string, body []byte) *remoting.Command {
		t.Helper()
		base := map[string]string{"producerGroup": "p", "topic": "Good", "queueId": "0", "sysFlag": "0",
			"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0", "properties": "", "reconsumeTimes": "0"}
		if code != remoting.SendMessage {
			base = map[string]string{"a": "p", "b": "Good", "e": "0", "f": "0", "g": "1", "h": "0", "i": "", "j": "0"}
		}
		for k, v := range ext {
			base[k] = v
		}
		resp, err := cl.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(code, base, body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	cases := []struct {
		name   string
		code   int16
		ext    map[string]string
		body   []byte
		want   int16
		remark string
	}{
		{"bad topic name", remoting.SendMessage, map[string]string{"topic": "bad topic"}, []byte("x"), remoting.SystemError, "allowed are"},
		{"empty topic", remoting.SendMessage, map[string]string{"topic": ""}, []byte("x"), remoting.SystemError, "empty"},
		{"system topic", remoting.SendMessage, map[string]string{"topic": "SCHEDULE_TOPIC_XXXX"}, []byte("x"), remoting.NoPermission, "reserved"},
		{"oversize body", remoting.SendMessage, nil, bytes.Repeat([]byte("x"), 4<<20+1), remoting.MessageIllegal, "limit"},
		{"queue out of range", remoting.SendMessage, map[string]string{"queueId": "9"}, []byte("x"), remoting.SystemError, "queue 9"},
		{"bad number", remoting.SendMessage, map[string]string{"queueId": "zero"}, []byte("x"), remoting.MessageIllegal, "queueId"},
		{"malformed batch", remoting.SendBatchMessage, nil, []byte{0, 0, 0, 9, 1, 2}, remoting.MessageIllegal, "batch"},
		{"empty batch", remoting.SendBatchMessage, nil, nil, remoting.MessageIllegal, "empty"},
	}
	for _, c := range cases {
		resp := send(c.code, c.ext, c.body)
		if resp.Code != c.want || !strings.Contains(resp.Remark, c.remark) {
			t.Errorf("%s: code %d %q, want %d mentioning %q", c.name, resp.Code, resp.Remark, c.want, c.remark)
		}
	}
	if n := env.Store.MaxOffset("Good", 0) + env.Store.MaxOffset("Good", 1); n != 0 {
		t.Fatalf("%d messages stored by refused sends", n)
	}
	// SEND_MESSAGE_V2 (single-letter header keys), as Java clients send.
	resp := send(remoting.SendMessageV2, map[string]string{"i": string(message.EncodeProperties(map[string]string{"UNIQ_KEY": "V2"}))}, []byte("v2"))
	if resp.Code != remoting.Success || len(resp.Get("msgId")) != 32 {
		t.Fatalf("V2 send: %v", resp)
	}
	// A batch stores every message in one queue, offsets consecutive.
	var batch []byte
	for i := 0; i < 3; i++ {
		batch, _ = message.AppendBatchEntry(batch, message.BatchEntry{Body: []byte("b" + strconv.Itoa(i))})
	}
	resp = send(remoting.SendBatchMessage, map[string]string{"e": "1"}, batch)
	if resp.Code != remoting.Success || resp.Get("queueOffset") != "0" || strings.Count(resp.Get("msgId"), ",") != 2 {
		t.Fatalf("batch send: %v", resp)
	}
	if n := env.Store.MaxOffset("Good", 1); n != 3 {
		t.Fatalf("batch stored %d messages, want 3", n)
	}
}

// TestPipelinedSendsKeepTheirBodies sends single messages and batches of
// many sizes from goroutines sharing one connection, so many requests are
// read into the connection's buffer while earlier ones wait for their
// group commit: every body is stored as sent, and every batch's answer
// names its queue.
func TestPipelinedSendsKeepTheirBodies(t *testing.T) {
	env := brokertest.Start(t)
	const topic = "Pipelined"
	createTopic(t, env, topic, 1)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	body := func(w, i int) []byte {
		b := []byte(fmt.Sprintf("w%d-%d:", w, i))
		for len(b) < (w*131+i*17)%5000 {
			b = append(b, byte('a'+(i+len(b))%26))
		}
		return b
	}
	const workers, each = 8, 60
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ext := func() map[string]string { // a request's map is its own: the client may reuse it
				return map[string]string{"producerGroup": "p", "topic": topic, "queueId": "0", "sysFlag": "0",
					"bornTimestamp": "1", "flag": "0", "properties": "", "reconsumeTimes": "0"}
			}
			batchExt := func() map[string]string { // SEND_BATCH_MESSAGE's header has one-letter keys
				return map[string]string{"a": "p", "b": topic, "e": "0", "f": "0", "g": "1", "h": "0", "i": "", "j": "0"}
			}
			for i := 0; i < each; i += 2 {
				resp, err := cl.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(remoting.SendMessage, ext(), body(w, i)))
				if err == nil && resp.Code != remoting.Success {
					err = fmt.Errorf("send: %v", resp)
				}
				if err != nil {
					errs <- err
					return
				}
				batch, _ := message.AppendBatchEntry(nil, message.BatchEntry{Body: body(w, i+1)})
				resp, err = cl.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(remoting.SendBatchMessage, batchExt(), batch))
				if err == nil && (resp.Code != remoting.Success || resp.Get("queueId") != "0") {
					err = fmt.Errorf("batch: %v %v", resp, resp.Fields())
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for w := range workers {
		for i := range each {
			want[string(body(w, i))] = true
		}
	}
	got := storetest.ReadQueue(t, env.Store, topic, 0, 0)
	if len(got) != len(want) {
		t.Fatalf("stored %d messages, want %d", len(got), len(want))
	}
	for _, b := range got {
		if !want[b] {
			t.Fatalf("stored a body nobody sent: %.40q…", b)
		}
		delete(want, b)
	}
}
