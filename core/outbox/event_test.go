package outbox_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/outbox"
)

func TestRecordRoundTrip(t *testing.T) {
	r := outbox.Record{Kind: outbox.KindRetry, Group: "g", Topic: "t", MsgID: "A", OriginMsgID: "O",
		QueueID: 2, QueueOffset: 7, ReconsumeTimes: 1, MaxReconsumeTimes: 16, DelayLevel: 4,
		NextAttemptMS: 1_700_000_030_000, Reason: "why", MovedSize: 300}
	got, err := outbox.DecodeRecord(r.Encode())
	if err != nil || got != r {
		t.Fatalf("decoded %+v (%v), want %+v", got, err, r)
	}
	e := got.Event(5, 1_700_000_000_000, 1000)
	want := outbox.Event{Offset: 5, Kind: outbox.KindRetry, Time: time.UnixMilli(1_700_000_000_000), Group: "g", Topic: "t",
		MsgID: "A", OriginMsgID: "O", QueueID: 2, QueueOffset: 7, ReconsumeTimes: 1, MaxReconsumeTimes: 16,
		DelayLevel: 4, NextAttemptAt: time.UnixMilli(1_700_000_030_000), Reason: "why", TargetLogOffset: 700}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("event %+v, want %+v", e, want)
	}
	props := message.Properties(nil).With(message.PropertyKeys, "k1").With(message.PropertyTags, "TagA")
	e.SetMoved(&message.Message{Topic: "%RETRY%g", Body: []byte("b"), Properties: props})
	if e.TargetTopic != "%RETRY%g" || string(e.Body) != "b" || e.Keys != "k1" || e.Tags != "TagA" || string(e.Properties) != string(props) {
		t.Fatalf("after SetMoved: %+v", e)
	}
}

func TestRecordDLQOmitsRetryFields(t *testing.T) {
	r := outbox.Record{Kind: outbox.KindDLQ, Group: "g", Topic: "t", MsgID: "A", QueueID: -1, QueueOffset: -1}
	e := r.Event(0, 0, 10)
	if !e.NextAttemptAt.IsZero() || e.DelayLevel != 0 {
		t.Fatalf("a dead-letter event has retry fields: %+v", e)
	}
	for _, f := range []string{"delayLevel", "nextAttemptAt", "originMsgId"} {
		if strings.Contains(string(r.Encode()), `"`+f+`"`) {
			t.Errorf("%s written for a dead-letter event: %s", f, r.Encode())
		}
	}
}

func TestDecodeRecordMalformed(t *testing.T) {
	for _, body := range []string{"", "{", `{"queueId":"x"}`, "[]"} {
		if _, err := outbox.DecodeRecord([]byte(body)); err == nil {
			t.Errorf("%q decoded", body)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	r := outbox.Record{Kind: outbox.KindDLQ, Group: "g", Topic: "t", MsgID: "A", MovedSize: 120}
	f.Add(r.Encode())
	f.Add([]byte(`{"kind":"retry","nextAttemptAt":-1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := outbox.DecodeRecord(body)
		if err != nil {
			return
		}
		again, err := outbox.DecodeRecord(r.Encode())
		if err != nil || again != r {
			t.Fatalf("re-encoded record decodes to %+v (%v), want %+v", again, err, r)
		}
		_ = r.Event(0, 0, 0)
	})
}
