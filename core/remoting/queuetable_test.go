package remoting

import (
	"slices"
	"testing"
)

func TestQueueOffsetsRoundTrip(t *testing.T) {
	table := []QueueOffset{
		{Queue: QueueKey{BrokerName: "broker-a", QueueID: 0, Topic: "Orders"}, Offset: 5},
		{Queue: QueueKey{BrokerName: "broker-a", QueueID: 1, Topic: "Orders"}, Offset: -1},
	}
	b := AppendQueueOffsets(nil, table)
	want := `{{"brokerName":"broker-a","queueId":0,"topic":"Orders"}:5,{"brokerName":"broker-a","queueId":1,"topic":"Orders"}:-1}`
	if string(b) != want {
		t.Fatalf("encoded\n%s\nwant\n%s", b, want)
	}
	got, err := ParseQueueOffsets(b)
	if err != nil || !slices.Equal(got, table) {
		t.Fatalf("parsed %v, %v; want %v", got, err, table)
	}
	if b := AppendQueueOffsets(nil, nil); string(b) != "{}" {
		t.Fatalf("empty table encoded as %s", b)
	}
}

func TestParseQueueOffsets(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []QueueOffset
		bad  bool
	}{
		{in: `{}`},
		{in: ` { } `},
		// The official Go client's GET_CONSUMER_STATUS_FROM_CLIENT answer:
		// its keys in json.Marshal's order of primitive.MessageQueue.
		{in: `{{"topic":"T","brokerName":"b","queueId":3}:12}`, want: []QueueOffset{{QueueKey{"b", 3, "T"}, 12}}},
		{in: `{ {"topic":"T,{x}:1","brokerName":"b","queueId":0} : 7 , {"topic":"T","brokerName":"b","queueId":1}:8 }`,
			want: []QueueOffset{{QueueKey{"b", 0, "T,{x}:1"}, 7}, {QueueKey{"b", 1, "T"}, 8}}},
		// A strict JSON encoder's form: the key object in a string.
		{in: `{"{\"topic\":\"T\",\"brokerName\":\"b\",\"queueId\":2}":4}`, want: []QueueOffset{{QueueKey{"b", 2, "T"}, 4}}},
		{in: ``, bad: true},
		{in: `[]`, bad: true},
		{in: `{{"topic":"T"}}`, bad: true},
		{in: `{{"topic":"T"}:}`, bad: true},
		{in: `{{"topic":"T"}:x}`, bad: true},
		{in: `{{"topic":"T"}:1,}`, bad: true},
		{in: `{{"topic":"T"}:1 2}`, bad: true},
		{in: `{{"topic":"T}:1}`, bad: true},
		{in: `{{"queueId":"x"}:1}`, bad: true},
	} {
		got, err := ParseQueueOffsets([]byte(tc.in))
		if tc.bad {
			if err == nil {
				t.Errorf("%q: parsed as %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestFastjsonField(t *testing.T) {
	body := []byte(`{"consumeTps":0.0,"nested":{"a":[1,{"b":"}"}]},"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5}}`)
	v, err := FastjsonField(body, "offsetTable")
	if err != nil || string(v) != `{{"brokerName":"b","queueId":0,"topic":"t"}:5}` {
		t.Fatalf("offsetTable = %s, %v", v, err)
	}
	if v, err := FastjsonField(body, "missing"); v != nil || err != nil {
		t.Fatalf("missing field = %s, %v", v, err)
	}
	if _, err := FastjsonField([]byte(`{"a":{`), "a"); err == nil {
		t.Fatal("unbalanced body read without an error")
	}
}

func FuzzParseQueueOffsets(f *testing.F) {
	f.Add([]byte(`{{"brokerName":"b","queueId":0,"topic":"t"}:5,{"brokerName":"b","queueId":1,"topic":"t"}:7}`))
	f.Add([]byte(`{"{\"topic\":\"T\"}":4}`))
	f.Add([]byte(`{"offsetTable":{{"topic":"T"}:1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		table, err := ParseQueueOffsets(b)
		if err == nil {
			again, err := ParseQueueOffsets(AppendQueueOffsets(nil, table))
			if err != nil || !slices.Equal(again, table) {
				t.Fatalf("re-encoded table reads as %v, %v; want %v", again, err, table)
			}
		}
		_, _ = FastjsonField(b, "offsetTable")
	})
}
