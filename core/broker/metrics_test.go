package broker

import (
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
)

// TestMetersPulled checks that a pull body's records and body bytes are
// counted by walking the records' sizes.
func TestMetersPulled(t *testing.T) {
	m := newMeters()
	var body []byte
	for _, b := range []string{"a", "bb", "cccc"} {
		var err error
		if body, err = message.AppendRecord(body, &message.Message{Topic: "T", Body: []byte(b), Properties: message.Properties("k\x01v\x02")}); err != nil {
			t.Fatal(err)
		}
	}
	m.pulled("T", body)
	m.pulled("T", body[:len(body)-1]) // a truncated last record is not counted
	tm := m.topic("T")
	if tm.outMsgs.Load() != 5 || tm.outBytes.Load() != 7+3 {
		t.Fatalf("out: %d messages, %d bytes; want 5, 10", tm.outMsgs.Load(), tm.outBytes.Load())
	}
}

// BenchmarkMeters measures what a send and a pull pay for metrics.
func BenchmarkMeters(b *testing.B) {
	m := newMeters()
	msgs := []*message.Message{{Topic: "Orders", Body: make([]byte, 1024)}}
	rec, _ := message.AppendRecord(nil, msgs[0])
	b.Run("send", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.stored("Orders", msgs, time.Now())
		}
	})
	b.Run("pull=32", func(b *testing.B) {
		var body []byte
		for range 32 {
			body = append(body, rec...)
		}
		b.ReportAllocs()
		for b.Loop() {
			m.pulled("Orders", body)
		}
	})
}
