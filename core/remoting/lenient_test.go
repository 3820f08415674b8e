package remoting

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestSubscriptionDataLenient decodes the field types official clients
// disagree on, and refuses what none of them sends.
func TestSubscriptionDataLenient(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want SubscriptionData
		err  string
	}{
		{in: `{"codeSet":[2598919,2598921],"subVersion":1764905000123,"tagsSet":["TagA","TagC"]}`,
			want: SubscriptionData{CodeSet: []string{"2598919", "2598921"}, SubVersion: 1764905000123, TagsSet: []string{"TagA", "TagC"}}},
		{in: `{"codeSet":["2598919"],"subVersion":"1764905000123"}`,
			want: SubscriptionData{CodeSet: []string{"2598919"}, SubVersion: 1764905000123}},
		{in: `{"codeSet":null,"tagsSet":null,"subVersion":null,"classFilterMode":null,"topic":null}`},
		{in: `{"codeSet":[null,0,true],"subVersion":""}`, want: SubscriptionData{CodeSet: []string{"0", "true"}}},
		{in: `{"classFilterMode":"true"}`, want: SubscriptionData{ClassFilterMode: true}},
		{in: `{"classFilterMode":1}`, want: SubscriptionData{ClassFilterMode: true}},
		{in: `{"heartbeatFingerprint":3,"rawSubString":"x","topic":"T"}`, want: SubscriptionData{Topic: "T"}},
		{in: `{"subVersion":"soon"}`, err: `"\"soon\"" is not an int64`},
		{in: `{"subVersion":1.5}`, err: "is not an int64"},
		{in: `{"classFilterMode":"maybe"}`, err: "is not a boolean"},
		{in: `{"codeSet":[{"a":1}]}`, err: "is not a string or number"},
		{in: `{"codeSet":"TagA"}`, err: "is not a list"},
		{in: `{"topic":7}`, err: "cannot unmarshal number"},
	} {
		var got SubscriptionData
		err := json.Unmarshal([]byte(tc.in), &got)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one saying %q", tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.err == "" && !reflect.DeepEqual(got, tc.want):
			t.Errorf("%s: got %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// TestConsumerDataLenient checks the message model's spelling and the
// booleans of a consumer group and a lock batch.
func TestConsumerDataLenient(t *testing.T) {
	for in, want := range map[string]ConsumerData{
		`{"messageModel":"Clustering","unitMode":"false"}`: {MessageModel: "CLUSTERING"},
		`{"messageModel":"BroadCasting","unitMode":true}`:  {MessageModel: "BROADCASTING", UnitMode: true},
		`{"messageModel":"SOMETHING"}`:                     {MessageModel: "SOMETHING"},
	} {
		var got ConsumerData
		if err := json.Unmarshal([]byte(in), &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, %v; want %+v", in, got, err, want)
		}
	}
	var lb LockBatchBody[struct {
		QueueID int32 `json:"queueId"`
	}]
	if err := json.Unmarshal([]byte(`{"consumerGroup":"g","clientId":"c","onlyThisBroker":"true","mqSet":[{"queueId":3}]}`), &lb); err != nil ||
		!lb.OnlyThisBroker || lb.ConsumerGroup != "g" || lb.ClientID != "c" || len(lb.MQSet) != 1 || lb.MQSet[0].QueueID != 3 {
		t.Errorf("lock batch: %+v, %v", lb, err)
	}
}
