package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/rmq-go/rmq/core/remoting"
)

type testOffsets struct {
	MinOffset int64 `json:"minOffset"`
	MaxOffset int64 `json:"maxOffset"`
}

// TestDecodeQueueKeyed reads the fastjson form of maps keyed by
// MessageQueue, as brokers write GET_TOPIC_STATS_INFO and
// GET_CONSUME_STATS, and refuses what is not that form.
func TestDecodeQueueKeyed(t *testing.T) {
	q0 := remoting.QueueKey{BrokerName: "b", QueueID: 0, Topic: "t"}
	q1 := remoting.QueueKey{BrokerName: "b", QueueID: 1, Topic: "t"}
	for _, tc := range []struct {
		body string
		want []queueEntry[testOffsets]
		err  bool
	}{
		{body: `{"offsetTable":{}}`, want: nil},
		{body: `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"maxOffset":9,"minOffset":1}}}`,
			want: []queueEntry[testOffsets]{{q0, testOffsets{1, 9}}}},
		// Java's fastjson pretty-printed, and a field before the table.
		{body: "{\"consumeTps\":0.0,\n \"offsetTable\" :{ {\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"t\"} : {\"maxOffset\":2} ,\n {\"topic\":\"t\",\"queueId\":1,\"brokerName\":\"b\"}:{\"minOffset\":3}\n}}",
			want: []queueEntry[testOffsets]{{q0, testOffsets{0, 2}}, {q1, testOffsets{3, 0}}}},
		{body: `{"other":{}}`, err: true},
		{body: `{"offsetTable":[]}`, err: true},
		{body: `{"offsetTable":{{"brokerName":"b"}}}`, err: true},
		{body: `{"offsetTable":{{"brokerName":"b"}:{"maxOffset":"x"}}}`, err: true},
		{body: `{"offsetTable":{{"brokerName":"b"}:{}`, err: true},
		{body: `{"offsetTable":{{"brokerName":"b"}:{};{}}}`, err: true},
	} {
		got, err := decodeQueueKeyed[testOffsets]([]byte(tc.body), "offsetTable")
		if (err != nil) != tc.err || !tc.err && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\ngot %+v, %v\nwant %+v (error %v)", tc.body, got, err, tc.want, tc.err)
		}
	}
	if v, ok := numberField([]byte(`{"consumeTps":12.5,"offsetTable":{}}`), "consumeTps"); !ok || v != 12.5 {
		t.Errorf("consumeTps %v %v", v, ok)
	}
}

// FuzzDecodeQueueKeyed holds the decoder to never panic, and to read back
// what it decoded once written again in the same form.
func FuzzDecodeQueueKeyed(f *testing.F) {
	f.Add([]byte(`{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"maxOffset":9,"minOffset":1}}}`))
	f.Add([]byte(`{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"brokerOffset":9,"consumerOffset":4,"lastTimestamp":1700000000000}}}`))
	f.Add([]byte(`{"offsetTable":{}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := decodeQueueKeyed[testOffsets](body, "offsetTable")
		if err != nil {
			return
		}
		var b bytes.Buffer
		b.WriteString(`{"offsetTable":{`)
		for i, e := range got {
			k, _ := json.Marshal(e.Queue)
			v, _ := json.Marshal(e.Value)
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s:%s", k, v)
		}
		b.WriteString(`}}`)
		again, err := decodeQueueKeyed[testOffsets](b.Bytes(), "offsetTable")
		if err != nil || len(again) != len(got) || len(got) > 0 && !reflect.DeepEqual(again, got) {
			t.Fatalf("%q decoded to %+v; written again, %q decoded to %+v, %v", body, got, b.Bytes(), again, err)
		}
	})
}
